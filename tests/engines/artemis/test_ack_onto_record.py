"""An acknowledgement whose id was damaged onto a live record that is no message (issue 25,
amqtool/engines/artemis/orphan_acks.py: ``ack-id-damaged``).

Demo hold-out d27 (field sweep seed 9628, ``flip data/journal/activemq-data-1.amq@1162147 ^0x59``): message
203's acknowledgement on queue 23 had its id's low byte damaged and named 146, a duplicate-detection record's
id. The broker acknowledges messages only, so the record it names stays as it was, and 203, left on queue 23,
is delivered again; verify said OK. Its neighbours one damaged byte away include records deleted since that are
no message (page transactions, duplicate-detection records): they were taken for messages the acknowledgement
might have been, which hid the loss. Modelled with the journal writer.
"""
from __future__ import annotations

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.records import scan_records_py
from amqtool.formats.artemis.userrecords import (
    AckRefRecord, AddRefRecord, DuplicateIdRecord, JournalRecordIds as R, QueueBindingRecord,
)
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES


def build(root) -> int:
    """Returns the offset of the low byte of 203's acknowledgement id."""
    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        bw.append_add(23, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
            record_id=23, name="orders", address="orders", routing_type=1).encode())
    with JournalWriter.create(root / "journal", MESSAGES, file_size=256 * 1024) as w:
        for mid in range(140, 260):
            if mid % 2 == 0:  # a duplicate-detection record, then its message
                w.append_add(mid, R.DUPLICATE_ID, DuplicateIdRecord(
                    address="orders", duplicate_id=f"d{mid}".encode("utf-16-le")).encode())
                continue
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="orders", body=b"o" * 100).encode())
            w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=23).encode())
        w.append_update(203, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=23).encode())
        for dup in range(150, 160, 2):  # duplicate-detection records deleted since (the cache moved on)
            w.append_delete(dup)
    data = (root / "journal" / "activemq-data-1.amq").read_bytes()
    recs, _ = scan_records_py(data, int.from_bytes(data[8:16], "big"), 2)
    (ack,) = [r for r in recs if r[0] == 12 and r[5] == 203 and r[6] == R.ACKNOWLEDGE_REF]
    return ack[1] + 13


def test_an_acknowledgement_moved_onto_a_record_that_is_no_message(tmp_path):
    from tests.faults.model import LOSS, Fault
    from tests.faults.runner import Campaign

    at = build(tmp_path / "s")
    assert 203 ^ 0x59 == 146
    with Campaign("s", tmp_path / "s") as c:
        o, found = c.judge_findings(Fault("flip", "journal/activemq-data-1.amq", at, 0x59))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and o.diff["back"] == 1
    (moved,) = [f for f in found if f.code == "ack-id-damaged"]
    assert moved.details["id"] == 146 and 203 in moved.details["messageIds"]

