"""A reference whose message id was damaged onto a message of another address (strayed_refs.py): the broker
delivers that message on a queue it was never routed to, and drops the owner's acknowledgement there to no
effect. Found by the hold-out campaign seed 7788 on demo d45 (create --demo 12MiB --seed 7785 --live-ratio 0.8
--file-size 1MiB, compacted twice; seed 7788027364012135: message 1776's reference on queue 21 read as 1712's,
a message of queue 11's address: loss/OK); reproduced here on the campaign's demo."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.records import body_offset, scan_records_py
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord, JournalRecordIds as R, QueueBindingRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES
from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s1", campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)) as c:
        yield c


def _record_at(campaign, rel: str, offset: int):
    (jf,) = [f for f in campaign.sites.journals["messages"] if f.rel == rel]
    (r,) = [r for r in jf.records if r[1] == offset]
    return r


def test_an_acknowledged_reference_moved_onto_a_message_of_another_address_delivers_it_there(demo_s1):
    # message 74's reference on queue 19 (acknowledged there later), its id's lowest byte ^0x02: 74 -> 72, a live
    # message whose other references name queues of an address no message shares with queue 19's. The broker
    # drops 74's acknowledgement (no reference to remove) and hands 72 out on queue 19.
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    rel = "data/journal/activemq-data-1.amq"
    r = _record_at(demo_s1, rel, 34487)
    assert (r[0], r[5], r[6]) == (12, 74, R.ADD_REF)
    outcome, found = demo_s1.judge_findings(Fault("flip", rel, 34487 + 13, 0x02, label="ref-id"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert outcome.diff["back"] == 1
    (f,) = [f for f in found if f.code == "ref-moved"]
    assert f.details["messageIds"] == [74]
    assert "message 74 on queue 19 (its reference now names message 72)" in f.message


# -- built with the journal writer -------------------------------------------------------------------------

QUEUES = {11: "prices", 19: "orders", 23: "orders"}


def build(root, abroad: int = 874) -> int:
    """Returns the offset of the low byte of 1002's reference id on queue 19."""
    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        for q, address in QUEUES.items():
            bw.append_add(q, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
                record_id=q, name=f"{address}.{q}", address=address, routing_type=0).encode())
    with JournalWriter.create(root / "journal", MESSAGES, file_size=256 * 1024) as w:
        def send(mid: int, address: str) -> None:
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address=address, body=b"x" * 100).encode())
            for q, a in QUEUES.items():
                if a == address:
                    w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())

        for mid in range(860, 1010):
            send(mid, "prices" if (mid % 3 == 0 and mid != 1002) or mid == abroad else "orders")
        w.append_update(1002, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=19).encode())
    data = (root / "journal" / "activemq-data-1.amq").read_bytes()
    recs, _ = scan_records_py(data, int.from_bytes(data[8:16], "big"), 2)
    (ref,) = [r for r in recs if r[0] == 12 and r[5] == 1002 and r[6] == R.ADD_REF
              and int.from_bytes(data[body_offset(r, 2):body_offset(r, 2) + 8], "big") == 19]
    return ref[1] + 13


def test_a_reference_moved_onto_a_message_stored_after_it_changes_nothing(tmp_path):
    # demo hold-out d23 (field sweep seed 9628): a reference in a transaction committed before the message it now
    # names was stored; the broker's load drops a reference read before its message
    from tests.faults.model import SAME, Fault
    from tests.faults.runner import Campaign

    at = build(tmp_path / "s", abroad=1006)
    with Campaign("s", tmp_path / "s") as c:
        o, found = c.judge_findings(Fault("flip", "journal/activemq-data-1.amq", at, 1002 ^ 1006))
    assert o.truth == SAME and o.verdict != "CRITICAL", o.codes
    assert not [f for f in found if f.code == "ref-moved"]
