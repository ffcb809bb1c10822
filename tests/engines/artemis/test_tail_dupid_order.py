"""A message's DUPLICATE_ID record takes its id after the message's (the message id is issued at send, the
cache entry's as the post office routes it) but is written before the message. So when a non-newest file is
cut right after such a record, the message written next is lost with an id *below* the highest id that
survives before the cut: the window of ids the lost records carried (tails.py) must look below its bound too.

Fault campaign miss (demos, seed 7474, fault 7474022424000129: demo-s1's activemq-data-2.amq truncated 5 bytes
into message 121's ADD, right after its duplicate-id record 122): the broker lost message 121 and verify said
WARNING, "every new id issued while they were written (ids 123..126) is accounted for"."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault
from tests.support import copy_tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


def _last_message_after_its_dupid(store):
    """(path, body offset, message id) of the ADD of a live message that is the last message of a data file that
    is not the newest, written right after a DUPLICATE_ID record with a higher id."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        newest = max(r.file_index for r in result.live)
        by_file: dict = {}
        for r in sorted(result.live, key=lambda r: (r.file_index, r.body_offset)):
            by_file.setdefault(r.file_index, []).append(r)
        for fi, recs in sorted(by_file.items()):
            adds = [i for i, r in enumerate(recs) if not r.is_update and r.user_record_type in (45, 31)]
            if fi == newest or not adds:
                continue
            i = adds[-1]
            prev = recs[i - 1] if i else None
            if prev is not None and prev.user_record_type == 37 and prev.id > recs[i].id \
                    and all(r.id == recs[i].id for r in recs[i + 1:]):
                return result.files[fi].path, recs[i].body_offset, recs[i].id
    return None


def test_cut_after_a_duplicate_id_record_loses_the_message_written_next(run_json, tmp_path, demo):
    from tests.faults import artemis

    store = copy_tree(demo, tmp_path / "s")
    found = _last_message_after_its_dupid(store)
    assert found is not None
    path, offset, mid = found
    with open(path, "r+b") as fh:
        fh.truncate(offset)  # inside the record: its header survives, its body does not
    # the truth: the broker-equal loader loses that message
    before = artemis.DeliveredReader(demo).pristine.held()
    after = artemis.DeliveredReader(store).pristine.held()
    assert {k[1] for k in before - after} == {mid} and not after - before
    code, doc, _ = run_json("verify", store)
    (tail,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, tail["severity"]) == (2, "critical")
    assert mid in tail["details"]["lostIds"]["unaccountedIds"]


def _journal_without_dupids(root, body: int) -> tuple[int, int] | None:
    """Messages 101.. (an add and one reference each) in files of 12 KiB, with no DUPLICATE_ID record, until the
    first file ends with a message's reference, 400 bytes of a body after it; the second file then holds the next
    messages but one (mid + 2, consumed before a compaction, dropped by it), and the first file's last message is
    deleted since. Returns (that message's id, its reference's offset), or None when the first file ends otherwise
    with this body size."""
    from amqtool.formats.artemis.message import CoreMessage
    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.artemis.userrecords import AddRefRecord, QueueBindingRecord
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import BINDINGS, MESSAGES

    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        bw.append_add(4, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
            record_id=4, name="orders", address="orders", routing_type=1).encode())
    first = None
    with JournalWriter.create(root / "journal", MESSAGES, file_size=12288) as w:
        mid = 100
        while True:
            mid += 1
            name = w.position[0]
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="orders", body=b"m" * body).encode())
            if first is None and w.position[0] != name:
                first = name
                break
            w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=4).encode())
            if w.position[0] != name:
                return None  # the reference opened the next file
        w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=4).encode())
        for skip in (mid + 1, mid + 3, mid + 4):  # mid + 2 never stored
            w.append_add(skip, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=skip, address="orders", body=b"m" * body).encode())
            w.append_update(skip, R.ADD_REF, AddRefRecord(queue_id=4).encode())
        w.append_delete(mid - 1)
    data = (root / "journal" / first).read_bytes()
    recs, _ = scan_records_py(data, int.from_bytes(data[8:16], "big"), 2)
    last = recs[-1]
    assert (last[0], last[5], last[6]) == (12, mid - 1, R.ADD_REF)
    with open(root / "journal" / first, "r+b") as fh:  # bytes no record starts in follow it (a body's, left over)
        fh.seek(last[1] + last[2])
        fh.write(b"m" * 400)
    return mid - 1, last[1]


def test_without_duplicate_detection_no_id_past_the_bound_is_counted(tmp_path):
    # campaign seed 4730 on the hold-out h31 (real JournalImpl, no duplicate detection; same/CRITICAL): the last
    # reference of a file the broker moved on from damaged, of a message deleted since. Only a DUPLICATE_ID record
    # takes its id out of order; with none in the store, an id past the bound that no record carries (one a
    # compaction dropped) is no record lost there
    from tests.faults.runner import Campaign

    for body in range(300, 400, 7):
        root = tmp_path / f"s{body}"
        made = _journal_without_dupids(root, body)
        if made is not None:
            break
    assert made is not None
    mid, offset = made
    path = f"journal/{sorted((root / 'journal').iterdir())[0].name}"
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("flip", path, offset + 14, 0x4b))  # its body size
    (tail,) = [f for f in found if f.code == "damaged-tail"]
    assert (o.truth, o.verdict, tail.severity.name) == ("same", "WARNING", "WARNING"), tail.message
    assert tail.details["lostIds"]["unaccountedIds"] == []
