"""A reference whose message id was damaged onto a message already routed to that queue, read as a damaged
queue id (issue 25, amqtool/engines/artemis/evidence.py: ``requeued_refs``, ``_owned_by_run``).

Demo hold-out d21 (seed 9625, ``flip data/journal/activemq-data-1.amq@751800 ^0x40``): message 492's reference
on queue 23, written right after its ADD, had bit 6 of its message id flipped and named message 428, which
already has a reference there and none on queue 21, its address's other queue one bit from 23. verify took the
record for 428's reference to queue 21 with a damaged queue id (CRITICAL ref-moved), while 492 was acknowledged
on both its queues and deleted since, and a second reference of (428, 23) is one the broker's load keeps once:
nothing changed. The broker writes a message's references right after it (``PostOfficeImpl.processRoute``), so
a record in the run after 492's ADD, one damaged bit from 492, was 492's. Modelled with the journal writer.
"""
from __future__ import annotations

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.records import body_offset, scan_records_py
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord, JournalRecordIds as R, QueueBindingRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

QUEUES = (19, 21, 23)  # one address, three queues


def build(root, routed_428=(19, 23)) -> int:
    """Returns the offset of the id byte to flip: bit 6 of the low byte of 492's reference on queue 23."""
    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        for q in QUEUES:
            bw.append_add(q, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
                record_id=q, name=f"events.{q}", address="events", routing_type=0).encode())
    with JournalWriter.create(root / "journal", MESSAGES, file_size=64 * 1024) as w:
        def send(mid: int, queues) -> None:
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="events", body=b"e" * 200).encode())
            for q in queues:
                w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())

        for mid in range(420, 500):
            send(mid, routed_428 if mid == 428 else (19, 23) if mid == 492 else QUEUES)
        for q in (23, 19):
            w.append_update(492, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=q).encode())
        w.append_delete(492)
    data = (root / "journal" / "activemq-data-1.amq").read_bytes()
    tag = int.from_bytes(data[8:16], "big")
    recs, _ = scan_records_py(data, tag, 2)
    (ref,) = [r for r in recs if r[0] == 12 and r[5] == 492 and r[6] == R.ADD_REF
              and int.from_bytes(data[body_offset(r, 2):body_offset(r, 2) + 8], "big") == 23]
    return ref[1] + 13  # the id's low byte (type 1, tag 4, compactCount 1, id 8)


def test_a_reference_in_anothers_run_had_its_message_id_damaged(tmp_path):
    from tests.faults.model import SAME, Fault
    from tests.faults.runner import Campaign

    at = build(tmp_path / "s")
    with Campaign("s", tmp_path / "s") as c:
        o, found = c.judge_findings(Fault("flip", "journal/activemq-data-1.amq", at, 0x40))
    assert o.truth == SAME and o.verdict != "CRITICAL", o.codes
    assert not [f for f in found if f.code == "ref-moved"]


def test_a_damaged_queue_id_in_the_messages_own_run_is_still_read_as_one(tmp_path):
    # 428 routed to all three queues, and its own reference on queue 21 (in its own run) damaged to 23: the
    # broker never delivers it on 21
    from tests.faults.model import LOSS, Fault
    from tests.faults.runner import Campaign

    root = tmp_path / "s"
    build(root, routed_428=QUEUES)
    data = (root / "journal" / "activemq-data-1.amq").read_bytes()
    recs, _ = scan_records_py(data, int.from_bytes(data[8:16], "big"), 2)
    (ref,) = [r for r in recs if r[0] == 12 and r[5] == 428 and r[6] == R.ADD_REF
              and int.from_bytes(data[body_offset(r, 2):body_offset(r, 2) + 8], "big") == 21]
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("flip", "journal/activemq-data-1.amq", body_offset(ref, 2) + 7, 0x02))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL")
    (moved,) = [f for f in found if f.code == "ref-moved"]
    assert moved.details["messageIds"] == [428]
