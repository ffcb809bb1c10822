"""Behind the last record of a compaction's output lie the bytes of the previous output at the same offsets,
not a damaged tail (issue 25, amqtool/engines/artemis/stale_tail.py: compactor_leftover).

A store of 12 KiB files written and compacted by the real JournalImpl (tests/data/artemis/README.md,
compactor-buffer) read WARNING damaged-tail untouched: ``AbstractJournalUpdateTask`` writes every output of a
compaction from one buffer that it clears (indexes only) and flushes whole, so ``activemq-data-247.amq`` (fileID
20) ends with 221 bytes of ``activemq-data-246.amq`` (fileID 19) after its last record, whose last bytes are a
fragment of fileID 18's: no old size word counts back under this use's records.
"""
from __future__ import annotations

from tests.support import REPO, assert_loads_like_journalimpl, journalimpl_store

STORE = REPO / "tests" / "data" / "artemis" / "compactor-buffer"
LAST_END = 12052  # activemq-data-247.amq: its last record (an ADD_REF update at 12021, 31 bytes) ends here
FIRST = 12053  # the first byte after it that is not a zero (246's byte at 12052 is one)
TAIL_END = 12274  # the last non-zero byte of the file, plus one


def test_the_store_loads_like_journalimpl():
    assert_loads_like_journalimpl(STORE)


def _store(tmp_path):
    return journalimpl_store(STORE, tmp_path / "store")


def test_the_previous_outputs_bytes_are_no_damaged_tail(tmp_path, run_json):
    root = _store(tmp_path)
    journal = root / "journal"
    mine, previous = (journal / "activemq-data-247.amq").read_bytes(), (journal / "activemq-data-246.amq").read_bytes()
    assert mine[LAST_END:] == previous[LAST_END:] and mine[LAST_END:TAIL_END].strip(b"\0")
    code, doc, _ = run_json("verify", str(root))
    assert (code, doc["verdict"]) == (0, "OK"), doc["findings"]
    stale = [f["offset"] for f in doc["findings"]
             if f["code"] == "stale-records" and f["path"].endswith("activemq-data-247.amq")]
    assert stale == [FIRST]


def test_bytes_that_differ_from_the_previous_output_are_judged_as_before(tmp_path):
    from amqtool.engines.artemis.stale_tail import compactor_leftover
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    root = _store(tmp_path)
    path = root / "journal" / "activemq-data-246.amq"
    data = bytearray(path.read_bytes())
    data[TAIL_END - 1] ^= 0x01  # one byte of the previous output changed: the equality no longer proves it
    path.write_bytes(bytes(data))
    journal = next(j for j in detect(root).journals() if j.kind == "messages")
    with open_journal(journal) as opened:
        names = [f.path.name for f in opened.files]
        by_tag: dict[int, list[int]] = {}
        for i, f in enumerate(opened.files):
            by_tag.setdefault(f.tag, []).append(i)
        index = names.index("activemq-data-247.amq")
        assert compactor_leftover(opened, index, FIRST, TAIL_END, by_tag) is None
        assert compactor_leftover(opened, index, FIRST, TAIL_END - 1, by_tag) == 19
        # too short to tell from a chance equality
        assert compactor_leftover(opened, index, TAIL_END - 7, TAIL_END - 1, by_tag) is None
