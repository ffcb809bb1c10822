"""A reference whose message id was damaged onto a message acknowledged on that queue long before (issue 25,
amqtool/engines/artemis/acked_refs.py: ``readded_refs``).

Demo hold-out d35 (field sweep seed 9628, ``flip data/journal/activemq-data-1.amq@216476 ^0x10``): message 4847's
reference on queue 19, acknowledged there later, had its id damaged to 751, which was routed to queue 19 and
acknowledged there long before. The doubled pair (751, 19) and 4847's acknowledgement without its reference were
read together as harmless, as they are when the reference comes first; but ``loadMessageJournal`` applies the
records in order, so a reference after 751's acknowledgement puts 751 back on queue 19, and the broker delivers
it again: verify said OK. Modelled with the journal writer.
"""
from __future__ import annotations

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.records import scan_records_py
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord, JournalRecordIds as R, QueueBindingRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

QUEUES = (19, 23)


def build(root) -> int:
    """Returns the offset of the second-lowest byte of 4847's reference id on queue 19 (0x12 -> 0x02: 751)."""
    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        for q in QUEUES:
            bw.append_add(q, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
                record_id=q, name=f"events.{q}", address="events", routing_type=0).encode())
    with JournalWriter.create(root / "journal", MESSAGES, file_size=256 * 1024) as w:
        def send(mid: int) -> None:
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="events", body=b"e" * 100).encode())
            for q in QUEUES:
                w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())

        for mid in range(745, 756):
            send(mid)
        w.append_update(751, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=19).encode())
        for mid in range(4840, 4851):
            send(mid)
        w.append_update(4847, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=19).encode())
    data = (root / "journal" / "activemq-data-1.amq").read_bytes()
    recs, _ = scan_records_py(data, int.from_bytes(data[8:16], "big"), 2)
    ref = [r for r in recs if r[0] == 12 and r[5] == 4847 and r[6] == R.ADD_REF][0]  # its first: queue 19
    return ref[1] + 12


def test_a_reference_moved_onto_a_message_acknowledged_there_before_brings_it_back(tmp_path):
    from tests.faults.model import LOSS, Fault
    from tests.faults.runner import Campaign

    at = build(tmp_path / "s")
    assert 4847 ^ (0x10 << 8) == 751
    with Campaign("s", tmp_path / "s") as c:
        o, found = c.judge_findings(Fault("flip", "journal/activemq-data-1.amq", at, 0x10))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and o.diff["back"] == 1
    (moved,) = [f for f in found if f.code == "ref-moved"]
    assert "message 4847 on queue 19 (its reference now names message 751)" in moved.message
