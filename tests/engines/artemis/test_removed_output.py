"""A compaction's output removed from between two others (issue 25, amqtool/engines/artemis/removed_outputs.py).

tests/data/artemis/compactor-buffer holds three consecutive outputs of one Artemis compaction (fileIDs 19, 20,
21, written by the real JournalImpl; tests/data/artemis/README.md). A compactor copies a message's add and
references together, so removing an output leaves no live update without its add, and verify read the gap as
a compaction's (INFO file-id-gap) while the broker lost every message the file held (hold-out h21: 34 rows).
The broker itself frees an output only once every message in it is deleted, and those DELETEs stay in the
files after it: the second case appends them, as a broker that consumed the messages writes them, and then the
same gap is the broker's own reclaim.
"""
from __future__ import annotations

from amqtool.formats.artemis.records import scan_records_py
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import MESSAGES
from tests.support import REPO, journalimpl_store

STORE = REPO / "tests" / "data" / "artemis" / "compactor-buffer"
MIDDLE = "journal/activemq-data-247.amq"  # fileID 20, between 19 (246) and 21 (248)


def _store(tmp_path):
    return journalimpl_store(STORE, tmp_path / "s")


def _messages(path) -> list[int]:
    data = path.read_bytes()
    tag = int.from_bytes(data[8:16], "big") & 0x7FFFFFFF
    recs, _ = scan_records_py(data, tag, 2)
    return [r[5] for r in recs if r[0] in (11, 13) and r[6] == 45]


def test_a_removed_output_is_a_lost_file(tmp_path):
    from tests.faults.model import LOSS, UNPROVEN, Fault
    from tests.faults.runner import Campaign

    root = _store(tmp_path)
    held = _messages(root / MIDDLE)
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("delete", MIDDLE, 0, 0))
    # (the harness's own oracle calls it unproven on these three files: their every record is consistent)
    assert o.truth in (LOSS, UNPROVEN) and o.diff["lost"] >= len(held) and o.verdict == "CRITICAL"
    (gap,) = [f for f in found if f.code == "missing-journal-file"]
    (removed,) = gap.details["removedOutputs"]
    assert (removed["fileId"], removed["neighbourMessages"], removed["deletes"]) == (20, [28, 27], 0)
    assert removed["idsAfter"] < min(held) and max(held) < removed["idsBefore"]


def test_an_output_whose_messages_were_all_deleted_since_is_the_brokers_reclaim(tmp_path):
    from tests.faults.model import SAME, UNPROVEN, Fault
    from tests.faults.runner import Campaign

    root = _store(tmp_path)
    held = _messages(root / MIDDLE)
    with JournalWriter.open(root / "journal", MESSAGES, file_size=12288) as w:
        for mid in held:
            w.append_delete(mid)
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("delete", MIDDLE, 0, 0))
    # (the file held more than its messages' adds: one more row goes with it, which no record left shows)
    assert o.truth in (SAME, UNPROVEN) and o.diff["lost"] <= 1 and o.verdict != "CRITICAL", o.codes
    assert not [f for f in found if f.code == "missing-journal-file"]


def _outputs(root, filled: int = 2, delete_middle: bool = False, outputs: int = 3, bodies: tuple = (300,),
             steps: tuple = (1,)) -> list[list[int]]:
    """A messages journal of ``outputs`` compactor outputs (the first ``filled`` full of messages, the rest holding
    one message, then references only) and 20 messages the broker wrote since, in a file of its own; the
    outputs renamed as the compactor leaves them (a name number above the header's fileID). The messages of the
    k-th file have bodies of ``bodies[k]`` bytes and ids ``steps[k]`` apart (the last entry for the files past
    them: the ids between, of messages consumed before the compaction, it dropped); ``delete_middle``: the
    second output's messages deleted since. Returns the message ids of each file. Written with the journal
    writer."""
    import os

    from amqtool.formats.artemis.message import CoreMessage
    from amqtool.formats.artemis.userrecords import AddRefRecord, QueueBindingRecord
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R
    from amqtool.store.layout import BINDINGS

    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        bw.append_add(4, R.QUEUE_BINDING_RECORD, QueueBindingRecord.build(
            record_id=4, name="orders", address="orders", routing_type=1).encode())
    mid = 100
    held: dict[str, list[int]] = {}
    with JournalWriter.create(root / "journal", MESSAGES, file_size=12288) as w:
        def send(cc: int) -> None:
            nonlocal mid
            pos = w.position[0]
            k = list(held).index(pos) if pos in held else len(held)
            mid += steps[min(k, len(steps) - 1)]
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(
                message_id=mid, address="orders", body=b"m" * bodies[min(k, len(bodies) - 1)]).encode(),
                compact_count=cc)
            w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=4).encode(), compact_count=cc)
            held.setdefault(w.position[0], []).append(mid)
        while len(held) <= filled:
            send(1)
        last = w.position[0]
        while len(held) <= outputs:
            while w.position[0] == last:  # the rest of this output: records that add no message
                w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=4).encode(), compact_count=1)
            last = w.position[0]
            if len(held) < outputs:
                send(1)
            else:
                for _ in range(20):
                    send(0)  # what the broker wrote since, in a file of its own
        if delete_middle:
            for m in held[list(held)[1]]:
                w.append_delete(m)
    journal = root / "journal"
    for n in range(1, outputs + 1):
        os.rename(journal / f"activemq-data-{n}.amq", journal / f"activemq-data-{n + 200}.amq")
    return list(held.values())


def _removed(root) -> list[dict]:
    from amqtool.engines.artemis.load import load_journal
    from amqtool.engines.artemis.removed_outputs import removed_outputs
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    jd = next(j for j in detect(root).journals() if j.kind == "messages")
    with open_journal(jd) as opened:
        return removed_outputs(load_journal(opened))


def test_beside_the_compactions_last_output_one_full_neighbour_is_enough(tmp_path):
    # a compaction's last output may hold a record or two only (hold-out h15: fileID 20, 41 messages, removed
    # between outputs of 41 messages and of 1, and 53 rows lost read OK)
    root = tmp_path / "s"
    _outputs(root)
    (root / "journal" / "activemq-data-202.amq").unlink()
    (gone,) = _removed(root)
    assert (gone["fileId"], gone["deletes"]) == (2, 0)
    assert gone["neighbourMessages"][0] >= 10 and gone["neighbourMessages"][1] <= 2


def test_an_output_between_neighbours_ids_that_leave_room_for_one_message_held_that_one(tmp_path):
    # an output holding the rest of a transaction the one before it began held a message or two, whatever its
    # neighbours hold: the ids between theirs say so (untouched hold-outs h31 and h36, real JournalImpl: one id
    # between outputs of 18 and 7 messages, that message deleted since, read CRITICAL missing-journal-file)
    root = tmp_path / "s"
    first, middle, last, _ = _outputs(root, filled=1, delete_middle=True)
    assert len(middle) == 1 and len(first) >= 10 and max(first) + 2 == min(last)
    (root / "journal" / "activemq-data-202.amq").unlink()
    assert _removed(root) == []
    _outputs(lost := tmp_path / "lost", filled=1)  # that message never deleted: it went with the file
    (lost / "journal" / "activemq-data-202.amq").unlink()
    (gone,) = _removed(lost)
    assert (gone["fileId"], gone["deletes"]) == (2, 0)


def test_an_output_whose_header_fileid_high_bytes_were_damaged_is_not_missing(tmp_path):
    # the header's fileID read as one Artemis never issues (file-id-damaged): the records still carry its tag, and
    # the broker loads the file (campaign seed 9621 on h23 and h26: header flips read CRITICAL missing-journal-file)
    from tests.faults.model import SAME, Fault
    from tests.faults.runner import Campaign

    root = _store(tmp_path)
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("flip", MIDDLE, 8, 0x10))
    assert o.truth == SAME and o.verdict != "CRITICAL", o.codes
    assert not [f for f in found if f.code == "missing-journal-file"]
    assert [f.code for f in found if f.code == "file-id-damaged"] == ["file-id-damaged"]


def test_an_output_held_no_more_messages_than_its_smaller_full_neighbour(tmp_path):
    # message sizes vary: an output of 6 large messages, all deleted since, between outputs of 10 and 28 (hold-out
    # h44, real JournalImpl: 6 and 27 a file, the ids between sparse), freed by the broker, read as a removed output
    # of 18 (the neighbours' mean): a same/CRITICAL of campaign seed 4712
    root = tmp_path / "s"
    first, middle, last, *_ = _outputs(root, filled=3, outputs=4, bodies=(1000, 1800, 300), steps=(1, 6, 1),
                                       delete_middle=True)
    assert (len(first), len(middle)) == (10, 6) and len(last) > 20
    (root / "journal" / "activemq-data-202.amq").unlink()
    assert _removed(root) == []
    _outputs(lost := tmp_path / "lost", filled=3, outputs=4, bodies=(1000, 1800, 300), steps=(1, 6, 1))
    (lost / "journal" / "activemq-data-202.amq").unlink()
    (gone,) = _removed(lost)
    assert (gone["fileId"], gone["deletes"], gone["neighbourMessages"]) == (2, 0, [len(first), len(last)])


def test_an_output_with_room_for_a_few_messages_and_a_delete_among_them_says_too_little(tmp_path):
    # freed-output-small (real JournalImpl, SIGKILLed: its newest file torn): fileID 3 is missing between outputs of
    # 9 and 16 messages whose ids leave room for 3.6, and one of those ids has a DELETE. The broker freed it: the
    # other DELETEs lay in a later file it freed since (fileIDs after the compaction are missing too). Read as a
    # removed output, the untouched store was CRITICAL
    import shutil

    from tests.faults.runner import verify_verdict
    from tests.support import loaded_like_oracle, oracle_load

    small = REPO / "tests" / "data" / "artemis" / "freed-output-small"
    records, _ = oracle_load(small / "oracle-load.jsonl")
    _, live = loaded_like_oracle(small / "journal")
    assert live == records
    journal = shutil.copytree(small / "journal", tmp_path / "journal")
    assert verify_verdict(journal) == ("WARNING", ("damaged-tail",))
