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
