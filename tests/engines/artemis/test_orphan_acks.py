"""Acknowledgements the load leaves without their message, read as damaged ids (issue 25, orphan_acks.py).

An acknowledgement whose id a damaged byte turned into a transaction's (``ack-id-damaged``): one counter issues
message and transaction ids, so an acknowledgement naming a transaction's id acknowledges nothing: its id was
damaged, and the message it acknowledged is on its queue again. verify took it for the routine update of a
reclaimed message (update-unknown-id) and said OK while the broker delivers an acknowledged message a second
time (field sweep ack-id over real JournalImpl hold-out stores, seed 9617, h11 9617000009).

On tests/data/artemis/reclaimed-pool2: the acknowledgement of message 2147485344 at activemq-data-45.amq@12856,
not its last (no DELETE follows); bit 2 of its id makes it 2147485348, a transaction's id.
"""
from __future__ import annotations

from tests.engines.artemis.pool2 import flipped

ACK = 12856


def test_an_acknowledgement_moved_onto_a_transaction_id_brings_its_message_back(tmp_path, run_json):
    def check(data):
        assert data[ACK] == 12 and data[ACK + 6:ACK + 14] == (2147485344).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-45.amq", ACK + 13, 0x04, check)
    assert diff["back"] > 0 and not diff["lost"]
    code, doc, _ = run_json("verify", str(root))
    (found,) = [f for f in doc["findings"] if f["code"] == "ack-id-damaged"]
    assert (found["severity"], found["details"]["id"], found["offset"]) == ("critical", 2147485348, ACK)
    assert 2147485344 in found["details"]["messageIds"] and code == 2


def test_a_delete_moved_onto_an_earlier_live_message_drops_it(tmp_path, run_json):
    # tests/data/artemis/reclaimed-room: message 2147484220 is acknowledged and deleted at activemq-data-39.amq
    # @11517 (its ADD reclaimed); bit 6 of the DELETE's id makes it 2147484284, a message stored before it and
    # live to the end. The load deletes that message, as the broker does, and leaves the acknowledgement without
    # its message: verify said OK (field sweep delete-id seed 9616, h13 9616000004: 2 rows lost, OK)
    from tests.support import REPO

    at = 11517

    def check(data):
        assert data[at] == 16 and data[at + 6:at + 14] == (2147484220).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-39.amq", at + 13, 0x40, check,
                         store=REPO / "tests" / "data" / "artemis" / "reclaimed-room")
    assert diff["lost"] > 0 and not diff["back"]
    code, doc, _ = run_json("verify", str(root))
    (found,) = [f for f in doc["findings"] if f["code"] == "delete-moved"]
    assert (found["severity"], found["details"]["id"], found["details"]["acknowledgedId"]) == (
        "critical", 2147484284, 2147484220)
    assert found["offset"] == at and code == 2


def _demo_delete_flipped(tmp_path, size: int, seed: int, live_ratio: float, rel: str, at: int, message: int,
                         mask: int):
    """(outcome, findings) of a demo store (``create --demo``) whose DELETE of ``message`` at ``rel``@``at`` has
    ``mask`` flipped in its id's low byte."""
    from amqtool.engines.artemis.demo import create_demo
    from tests.faults.model import Fault
    from tests.faults.runner import Campaign

    store = tmp_path / "demo"
    create_demo(store, size, seed=seed, live_ratio=live_ratio)
    data = (store / rel).read_bytes()
    assert data[at] == 16 and data[at + 6:at + 14] == message.to_bytes(8, "big")
    with Campaign("demo", store) as c:
        return c.judge_findings(Fault("flip", rel, at + 13, mask, label="delete-id"))


def test_a_delete_moved_onto_a_page_transaction_record_drops_its_paged_messages(tmp_path):
    # delete-id sweep seed 7798 on hold-out demo d25 (create --demo 24MiB --seed 25 --live-ratio 0.45; loss/OK,
    # 7798010014): a random byte (^0xb6) of the DELETE of message 11662, right after its last acknowledgement,
    # made it 11576, a page transaction's PAGE_TRANSACTION record (ADD_TX in transaction 11575). The broker
    # deletes that record and drops the paged message of that transaction still to be consumed; 11662 stays,
    # acknowledged everywhere and never deleted. Its ADD stands (not reclaimed): verify sought moved DELETEs only
    # after acknowledgements of ids without a message record, and only onto messages, and said OK.
    at = 10155720
    outcome, found = _demo_delete_flipped(tmp_path, 24 << 20, 25, 0.45, "data/journal/activemq-data-2.amq", at,
                                          11662, 0xB6)  # 11662 -> 11576
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    (f,) = [f for f in found if f.code == "delete-moved"]
    assert (f.offset, f.details["id"], f.details["acknowledgedId"], f.details["pagedMessages"]) == (at, 11576, 11662, 1)


def test_a_delete_moved_onto_a_prepared_page_transactions_record_changes_nothing(tmp_path):
    # the same sweep on hold-out demo d31 (create --demo 4MiB --seed 7746 --live-ratio 0.5; 7798000010): a
    # random byte (^0x55) of message 937's DELETE made it 1020, the PAGE_TRANSACTION record of page transaction
    # 1017, written in XA transaction 1017, prepared and never committed. The load finds no record to delete
    # (a prepared transaction's records are not in it yet): nothing is lost, and 937, still live and acknowledged
    # everywhere, delivers nothing.
    outcome, found = _demo_delete_flipped(tmp_path, 4 << 20, 7746, 0.5, "data/journal/activemq-data-1.amq", 1833179,
                                          937, 0x55)  # 937 -> 1020
    assert (outcome.truth, outcome.verdict) == ("same", "OK"), [f.code for f in found]
