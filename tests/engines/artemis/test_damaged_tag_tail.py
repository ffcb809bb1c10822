"""The last record of a file the broker moved on from, its tag damaged into an id no file of the journal ever had
(issue 25, stale_tail.own_record_start).

The broker stops reading a file at a record whose tag is not the file's (``JournalImpl.readJournalFile``), and
the records an earlier use of a reused file left after this use's carry that use's fileID, always a lower one
(``JournalFilesRepository`` numbers files counting up). A tag one damaged byte from the file's own and above every
fileID of the journal is no earlier use's: it is this use's record, its tag damaged. Campaign seed 4713 on the
hold-out h31 (real JournalImpl): a compactor output's last record, a message's ADD whose references follow in the
next file, with bit 2 of its tag's high byte flipped, read as an earlier use's record (INFO stale-records,
verdict OK) while the broker lost the message.
"""
from __future__ import annotations

from tests.faults.model import Fault


def _last_add_before_its_reference(root) -> tuple[str, int]:
    """A broker store whose first messages-journal file ends with a message's ADD, its reference the next file's
    first record (file name, the ADD's offset). Written with the journal writer."""
    from amqtool.formats.artemis.message import CoreMessage
    from amqtool.formats.artemis.userrecords import AddRefRecord, QueueBindingRecord
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import BINDINGS, MESSAGES

    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        bw.append_add(4, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
            record_id=4, name="orders", address="orders", routing_type=1).encode())
    with JournalWriter.create(root / "journal", MESSAGES, file_size=12288) as w:
        mid, body, found = 100, 300, None
        while found is None or mid < found[2] + 10:
            mid += 1
            name, start = w.position
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="orders", body=b"m" * body).encode())
            if w.position[0] != name:
                body += 1  # the ADD opened the next file: shift the sizes until a reference does
                continue
            w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=4).encode())
            if found is None and w.position[0] != name:
                found = (name, start, mid)
    return found[0], found[1]


def test_a_last_record_whose_tag_was_damaged_above_every_fileid_is_this_uses(tmp_path):
    from tests.faults.runner import Campaign

    root = tmp_path / "s"
    name, offset = _last_add_before_its_reference(root)
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("flip", f"journal/{name}", offset + 1, 0x04, label="record 11 tag"))
    assert (o.truth, o.diff["lost"]) == ("loss", 1)
    assert o.verdict == "CRITICAL", o.codes
    assert not [f for f in found if f.code == "stale-records"]
