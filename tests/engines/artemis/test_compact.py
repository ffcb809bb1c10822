"""Compaction keeps exactly the loaded state: every fixture journal, Artemis' own compaction of 04a (04b),
repeated compaction with appends in between, replaceable updates, the split line, maxID, pool and attic
rules, copies, dry runs, reclaim-only, failures before the commit point, and file ownership."""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from amqtool.engines.artemis import compact as C
from amqtool.engines.artemis.load import load_journal
from amqtool.errors import AmqtoolError
from amqtool.formats.artemis.records import HEADER_SIZE, decode_header
from amqtool.store import atomic
from amqtool.store.journal_files import open_journal
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import MESSAGES, detect
from tests.engines.artemis.compact_helpers import (
    store_snapshot,
    CTR,
    build_store,
    compact,
    journal_of,
    pending_codes,
    state,
)
from tests.support import ARTEMIS, ORACLE, copy_tree, oracle_manifest, tree_hashes

FIXTURE_JOURNALS = sorted({p.parent for p in ARTEMIS.rglob("*.amq")} | {p.parent for p in ARTEMIS.rglob("*.bindings")})


def _names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("src", FIXTURE_JOURNALS, ids=lambda p: str(p.relative_to(ARTEMIS)))
def test_every_fixture_compacts_to_the_same_state(tmp_path, src):
    d = copy_tree(src, tmp_path / "j")
    expected = state(d, bump=True)
    with open_journal(journal_of(d)) as op:
        old_ids = [f.file_id for f in op.files]
        old_names = [f.name for f in op.files]
        old_numbers = [C.name_number(journal_of(d).spec.prefix, f.name) for f in op.files]
        data_ids = [s.file.file_id for s in load_journal(op).scans if s.has_data]
    report = C_report = compact(d)
    assert state(d) == expected
    # the control file and every .cmp are gone; nothing left for Artemis to recover
    assert CTR not in _names(d) and not [n for n in _names(d) if n.endswith(".cmp")]
    assert pending_codes(d) == []
    # output files reuse the lowest old data fileIDs; they go into the old free files first (fate "reused"),
    # and only past those get fresh names above every old number
    top = max(old_ids + old_numbers)
    assert [o.file_id for o in report.outputs] == list(range(min(data_ids), min(data_ids) + len(report.outputs)))
    reused = [f.name for f in report.old_files if f.fate == "reused"]
    assert [o.name for o in report.outputs[:len(reused)]] == reused
    assert not set(reused) & {n for n, sid in zip(old_names, old_ids) if sid in data_ids}
    assert all(C.name_number(journal_of(d).spec.prefix, o.name) > top for o in report.outputs[len(reused):])
    for f in C_report.old_files:
        if f.fate == "reinitialised":
            assert f.new_file_id > top
            hdr = decode_header((d / f.name).read_bytes()[:HEADER_SIZE])
            assert hdr.file_id == f.new_file_id
    # compacting a compacted journal gives the same state again (one more compactCount)
    again = state(d, bump=True)
    compact(d)
    assert state(d) == again


def test_04a_compacts_to_what_artemis_compaction_produced(tmp_path):
    """Scenario 04b is 04a after Artemis' own compact(): same live list (compactCount 1), prepared and
    failed transactions."""
    d = copy_tree(ORACLE / "04a_before_compact" / "journal", tmp_path / "j")
    compact(d)
    expected = oracle_manifest("04b_after_compact")["expectedAfterLoad"]
    with open_journal(journal_of(d)) as op:
        r = load_journal(op)

        def rec(x):
            return {"id": x.id, "type": x.user_record_type, "isUpdate": x.is_update,
                    "compactCount": x.compact_count, "len": x.body_len, "sha256": r.body_sha256(x)}
        assert [rec(x) for x in r.live] == expected["live"]
        assert [{"txId": t.tx_id, "extraDataHex": t.extra.hex(), "records": [rec(x) for x in t.records],
                 "recordsToDelete": [rec(x) for x in t.records_to_delete]} for t in r.prepared] == \
            [{k: p[k] for k in ("txId", "extraDataHex", "records", "recordsToDelete")} for p in expected["prepared"]]
        assert [{"txId": t.tx_id, "records": [rec(x) for x in t.records],
                 "recordsToDelete": [rec(x) for x in t.records_to_delete]} for t in r.failed] == \
            expected["failedTransactions"]
        assert r.max_id == expected["loadInfo"]["maxID"]
        assert r.number_of_records == expected["loadInfo"]["numberOfRecords"]
        # Artemis' output: one compacted file whose header fileID is 1 (the lowest old ID)
        assert [s.file.file_id for s in r.scans if s.has_data] == [1]


def test_compact_twice_append_compact_again(tmp_path):
    d = build_store(tmp_path / "j", n=1500)
    expected = state(d, bump=True)
    compact(d)
    assert state(d) == expected
    live, prepared, failed, max_id = state(d, bump=True)
    compact(d)
    assert state(d) == (live, prepared, failed, max_id)
    # the broker continues: commit the prepared transaction, add and delete, roll back nothing open
    with JournalWriter.open(d, MESSAGES, file_size=64 * 1024) as w:
        (tx_id,) = [t for t, prep in w.open_transactions.items() if prep]
        w.commit(tx_id)
        w.add(max_id + 1, 101, b"appended after two compactions")
        w.update(max_id + 1, 103, b"and updated")
        w.delete(live[0][0])
    after_append = state(d, bump=True)
    assert after_append[1] == []
    assert [(e[0], e[2]) for e in after_append[0] if e[0] == max_id + 1] == [(max_id + 1, False), (max_id + 1, True)]
    assert not any(e[0] == live[0][0] for e in after_append[0])
    compact(d)
    assert state(d) == after_append


def test_replaceable_updates_all_kept_in_load_order(tmp_path):
    # Issue 13 item 1b: JournalCompactor.onReadUpdateRecord writes every update of a live record where the
    # scan meets it. Keeping only the last delivery-count/scheduled-time update and moving it to the end lost
    # updates and put a delivery-count update after the ack of the same reference ("cannot find message").
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        w.add(1, 45, b"m1")
        w.add(2, 45, b"m2")
        w.update(1, 32, b"ref queue A")
        w.update(1, 32, b"ref queue B")
        for i in range(5):
            w.update(1, 34, bytes([i]))
            w.update(2, 36, bytes([i]) * 8)
        w.update(1, 33, b"ack queue A")
        w.update(1, 103, b"ordinary update stays in place")
    before = state(d, bump=True)
    compact(d)
    after = state(d)
    assert after == before
    kinds = [(e[0], e[1]) for e in after[0]]
    assert kinds.count((1, 34)) == 5 and kinds.count((2, 36)) == 5
    assert max(i for i, k in enumerate(kinds) if k == (1, 34)) < kinds.index((1, 33))
    assert after[0][-1][4] == state_sha(b"ordinary update stays in place")


def state_sha(b: bytes) -> str:
    import hashlib
    return hashlib.sha256(b).hexdigest()


def test_split_line_puts_long_lived_records_first(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        for i in range(1, 6):
            w.add(i, 101, b"old" * 10, compact_count=3)
        for i in range(6, 11):
            w.add(i, 101, b"new" * 10)
    report = compact(d)
    assert [o.records for o in report.outputs] == [5, 5]
    with open_journal(journal_of(d)) as op:
        r = load_journal(op)
        by_file = {}
        for x in r.live:
            by_file.setdefault(r.files[x.file_index].file_id, []).append((x.id, x.compact_count))
    assert by_file == {1: [(i, 4) for i in range(1, 6)], 2: [(i, 1) for i in range(6, 11)]}


def test_compact_count_saturates_at_127(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        w.add(1, 101, b"x", compact_count=127)
        w.add(2, 101, b"y", compact_count=126)
    compact(d)
    assert [(e[0], e[3]) for e in state(d)[0]] == [(1, 127), (2, 127)]


def test_max_id_of_a_dead_record_is_kept(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        w.add(1, 101, b"live")
        w.add(99, 101, b"dead")
        w.delete(99)
    before = state(d, bump=True)
    report = compact(d)
    assert report.max_id_marker
    assert state(d) == before and before[3] == 99


def test_failed_prepared_transaction_stays_failed(tmp_path):
    """A PREPARE whose numberOfRecords does not match is failed; compaction must not make it valid."""
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        w.add(1, 101, b"live")
        w.add_tx(5, 2, 101, b"in tx 5")
        w.add_tx(5, 3, 101, b"also in tx 5")
        w.prepare(5, b"xid")
    # damage: make the PREPARE claim 7 records (offset of nrec in the PREPARE record: 14)
    with open_journal(journal_of(d)) as op:
        r = load_journal(op)
        fi, off = r.prepared[0].prepare_location
        path = r.files[fi].path
    data = bytearray(path.read_bytes())
    data[off + 14:off + 18] = (7).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    before = state(d, bump=True)
    assert before[1] == [] and before[2][0][1:3] == (True, True)  # failed, prepared, invalid
    compact(d)
    assert state(d) == before


def test_pool_rules_and_attic(tmp_path):
    d = build_store(tmp_path / "j", n=1200)
    files_before = [n for n in _names(d) if n.endswith(".amq")]
    # a wrong-size (truncated) empty-looking journal file goes to the attic when freed
    odd = d / "activemq-data-999.amq"
    odd.write_bytes((2).to_bytes(4, "big") + (0).to_bytes(4, "big") + (500).to_bytes(8, "big") + bytes(100))
    expected = state(d, bump=True)
    report = compact(d, pool_files=4)
    assert state(d) == expected
    fates = {f.name: f.fate for f in report.old_files}
    assert fates["activemq-data-999.amq"] == "attic" and (d / "attic" / "activemq-data-999.amq").exists()
    kept = [f for f in report.old_files if f.fate == "reinitialised"]
    assert len(kept) + len(report.outputs) == max(4, len(report.outputs))
    assert len([n for n in _names(d) if n.endswith(".amq")]) == len(kept) + len(report.outputs)
    assert len(files_before) > 4


def test_copy_and_dry_run_leave_the_source_untouched(tmp_path):
    src = build_store(tmp_path / "j", n=1200)
    hashes = tree_hashes(src)
    expected = state(src, bump=True)
    store = detect(src)
    C.compact_store(store, C.CompactRequest(dry_run=True))
    assert tree_hashes(src) == hashes
    dest = tmp_path / "out"
    reports = C.compact_store(store, C.CompactRequest(output=dest))
    assert tree_hashes(src) == hashes
    assert state(dest) == expected
    assert reports[0].action == "copied"
    assert not [p for p in tmp_path.iterdir() if "amqtool-compact" in p.name]


def test_dry_run_figures_match_the_real_run(tmp_path):
    d = build_store(tmp_path / "j", n=1200)
    planned = C.compact_store(detect(d), C.CompactRequest(dry_run=True, pool_files=5))[0]
    done = C.compact_store(detect(d), C.CompactRequest(pool_files=5))[0]
    assert (planned.files_after, planned.bytes_after, len(planned.outputs)) == \
        (done.files_after, done.bytes_after, len(done.outputs))
    assert [o.records for o in planned.outputs] == [o.records for o in done.outputs]


def test_if_needed_thresholds(tmp_path):
    d = build_store(tmp_path / "j", n=1200)
    r = C.compact_store(detect(d), C.CompactRequest(if_needed=True, compact_min_files=100))[0]
    assert r.action == "skipped" and not r.needed
    r = C.compact_store(detect(d), C.CompactRequest(if_needed=True, compact_min_files=2, compact_percentage=90))[0]
    assert r.needed and r.action == "compacted"


def test_reclaim_only_frees_dead_files_and_keeps_state(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        for i in range(1, 200):
            w.add(i, 101, bytes(1000))
        for i in range(1, 200):
            w.delete(i)
        for i in range(200, 260):
            w.add(i, 101, bytes(1000))
    before = state(d)
    jd = journal_of(d)
    prep = C.plan_journal(jd, C.settings_for(jd, pool_files=3))
    report = C.reclaim_in_place(prep)
    prep.opened.close()
    assert state(d) == before
    assert {f.fate for f in report.old_files} >= {"deleted"}
    assert len(report.old_files) >= 2


class _FailAt:
    def __init__(self, point: str, n: int, err: int):
        self.point, self.n, self.err, self.seen = point, n, err, 0

    def __call__(self, point, where):
        if point == self.point:
            self.seen += 1
            if self.seen == self.n:
                raise OSError(self.err, os.strerror(self.err), where)


@pytest.mark.parametrize("point,n,err", [("write", 3, errno.ENOSPC), ("fsync", 2, errno.EIO),
                                         ("rename", 1, errno.EIO), ("write", 1, errno.ENOSPC)])
def test_enospc_and_eio_before_commit_leave_the_source_intact(tmp_path, point, n, err):
    d = build_store(tmp_path / "j", n=1500)
    before, loaded = store_snapshot(d), state(d)
    atomic.hook = _FailAt(point, n, err)
    try:
        with pytest.raises(AmqtoolError) as info:
            compact(d)
    finally:
        atomic.hook = None
    assert "store unchanged" in str(info.value) and os.strerror(err) in str(info.value)
    assert store_snapshot(d) == before and state(d) == loaded
    assert pending_codes(d) == []


def test_not_enough_space_is_refused_first(tmp_path, monkeypatch):
    d = build_store(tmp_path / "j", n=800)
    hashes = tree_hashes(d)

    class _St:
        f_bavail, f_frsize = 1, 4096
    monkeypatch.setattr(atomic.os, "statvfs", lambda p: _St())
    with pytest.raises(AmqtoolError, match="not enough free space"):
        compact(d)
    assert tree_hashes(d) == hashes


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_new_files_take_owner_group_and_mode_of_the_store(tmp_path):
    d = build_store(tmp_path / "j", n=1000)
    for p in d.iterdir():
        os.chown(p, 12345, 12345)
        os.chmod(p, 0o640)
    expected = state(d, bump=True)
    report = compact(d, pool_files=3)
    assert state(d) == expected
    for o in report.outputs:
        st = os.stat(d / o.name)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (12345, 12345, 0o640), o.name
    for p in d.iterdir():
        st = os.stat(p)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (12345, 12345, 0o640), p.name
    # a copy takes them too
    dest = tmp_path / "out"
    C.compact_store(detect(d), C.CompactRequest(output=dest))
    for p in dest.iterdir():
        st = os.stat(p)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (12345, 12345, 0o640), p.name


def test_interrupted_compaction_is_finished_first(tmp_path):
    """A store left with a committed control file is rolled forward before a new compaction."""
    d = build_store(tmp_path / "j", n=800)
    expected = state(d, bump=True)
    jd = journal_of(d)
    prep = C.plan_journal(jd, C.settings_for(jd))
    from amqtool.engines.artemis.compact.switch import _reusable_free_files

    taken = len(_reusable_free_files(prep))  # each taken free file is renamed to .cmp first
    prep.opened.close()
    # after the control file's rename, before the first .cmp is renamed to its final name
    with atomic.fault("rename", taken + 2):
        with pytest.raises(atomic.InjectedFault):
            compact(d)
    assert "control-file-rollforward" in pending_codes(d)
    assert state(d) == expected  # open_journal's view rolls forward in memory
    reports = C.compact_store(detect(d), C.CompactRequest())
    assert reports[0].recovered and pending_codes(d) == []
    live, prepared, failed, max_id = expected
    assert state(d) == ([(e[0], e[1], e[2], min(e[3] + 1, 127), e[4]) for e in live],
                        [(t[0], t[1], t[2], t[3], [(r[0], r[1], r[2], min(r[3] + 1, 127), r[4]) for r in t[4]], t[5])
                         for t in prepared], failed, max_id)


# --- file count: data files as a broker's load leaves them, and repeated compaction levelling off --------------

BROKER_02 = ARTEMIS / "messages" / "02_broker_mixed_compacted"


def _plant_rejected_candidate(path: Path, offset: int = 4096) -> None:
    """Write, into a file with no record, an ADD carrying the file's own tag whose checkSize is wrong: the
    candidate ``readJournalFile`` rejects with ``markAsDataFile``, as stale bytes of a reused file can be."""
    import struct

    with open(path, "r+b") as fh:
        file_id = decode_header(fh.read(HEADER_SIZE)).file_id
        body = b"\x01\x02\x03\x04"
        fh.seek(offset)
        fh.write(struct.pack(">BibqiB", 11, file_id & 0x7FFFFFFF, 0, 424242, len(body), 99) + body
                 + struct.pack(">i", 7))


def _marked_02(tmp_path: Path) -> Path:
    """A copy of the 02 broker store whose message journal (data-6 #1 and data-7 #2 hold data, data-5 #5 and
    data-8 #8 are free) has a rejected candidate planted in both free files; returns the journal."""
    d = copy_tree(BROKER_02, tmp_path / "s") / "journal"
    for name in ("activemq-data-5.amq", "activemq-data-8.amq"):
        _plant_rejected_candidate(d / name)
    return d


def test_a_file_holding_only_a_rejected_candidate_is_free_after_a_broker_load(tmp_path):
    """Real Artemis (the oracle harness, JournalImpl 6700541d4604, load with changeData) on this directory
    reports ``dataFiles: [activemq-data-6.amq#1, activemq-data-7.amq#2]``, ``current:
    activemq-data-8.amq#8`` and activemq-data-5.amq free: both marked files are data files for the scan, the
    last one becomes the current file (``setUpCurrentFile``), and ``checkReclaimStatus`` frees the other."""
    d = _marked_02(tmp_path)
    with open_journal(journal_of(d)) as op:
        r = load_journal(op)
        assert [f.name for f in r.data_files] == ["activemq-data-6.amq", "activemq-data-7.amq",
                                                  "activemq-data-5.amq"]  # data print's view (no Reclaimer)
        assert [f.name for f in r.freed_at_start] == ["activemq-data-5.amq"]
        assert [f.name for f in r.start_data_files] == ["activemq-data-6.amq", "activemq-data-7.amq",
                                                        "activemq-data-8.amq"]
        assert r.current_file.name == "activemq-data-8.amq"


def test_compaction_counts_and_reuses_a_file_holding_only_a_rejected_candidate(tmp_path):
    """The marked file Artemis frees at load is not a data file in compact's report and is taken for an
    output, as ``openFileCMP`` takes free files, instead of a new file being created beside it."""
    d = _marked_02(tmp_path)
    report = compact(d)
    assert report.data_files == 3  # data-6, data-7 and the current data-8; not data-5
    fates = {f.name: f.fate for f in report.old_files}
    assert fates["activemq-data-5.amq"] == "reused"
    assert not next(f for f in report.old_files if f.name == "activemq-data-5.amq").had_data
    assert report.files_after == 5  # 2 outputs (one of them data-5), data-6/7/8 freed, one new file


def _artemis_files_after(files: int, data_files: int, outputs: int) -> int:
    """The files ``artemis data compact`` (pool -1: ``addFreeFile`` never deletes) leaves, from its rules:
    the load leaves ``data_files`` (current included) and ``files - data_files`` free files;
    ``setUpCurrentFile`` pre-opens one free file, ``moveNextFile`` makes it current and pre-opens another,
    and each output takes the pre-opened file (``openFileCMP``) and pre-opens the next: ``outputs + 2``
    files taken from the free ones, created when none is left. Old files are only reinitialised."""
    return files + max(0, outputs + 2 - (files - data_files))


def _demo_messages(tmp_path: Path) -> Path:
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path / "demo"
    create_demo(root, 16 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return next(j.directory for j in detect(root).journals() if j.kind == "messages")


SIX_TIMES = {
    "02-messages": lambda t: copy_tree(BROKER_02, t / "s") / "journal",
    "02-bindings": lambda t: copy_tree(BROKER_02, t / "s") / "bindings",
    "02-marked": _marked_02,
    "04a": lambda t: copy_tree(ORACLE / "04a_before_compact" / "journal", t / "j"),
    "04b": lambda t: copy_tree(ORACLE / "04b_after_compact" / "journal", t / "j"),
    "public-jatin": lambda t: copy_tree(ARTEMIS / "public" / "JatinPandey26__artemis-activemq-training" / "broker"
                                        / "data" / "bindings", t / "j"),
    "demo": _demo_messages,
}


@pytest.mark.parametrize("case", sorted(SIX_TIMES))
def test_six_compactions_level_off_at_or_below_artemis(run_json, tmp_path, case):
    """Compacted six times (cron), the file count levels off at or below what Artemis' own compaction leaves
    (:func:`_artemis_files_after`, round by round from the same store; measured with real Artemis, the
    oracle harness, pool -1: 02's message journal levels off at 7 files, 02-marked at 7, 04a at 6, this
    demo's first compaction at 16MiB/10MiB files at 5), the loaded state never changes and verify stays OK.
    The data files of each round are the outputs of the one before: no freed file counts as data again."""
    if not (BROKER_02.is_dir() and ORACLE.is_dir()):
        pytest.skip("fixtures missing")
    d = SIX_TIMES[case](tmp_path)
    expected = state(d, with_cc=False)
    files = len([n for n in os.listdir(d) if n.endswith((".amq", ".bindings"))])
    counts, bounds = [], []
    outputs_before = None
    for _ in range(6):
        report = compact(d)
        assert report.settings.pool_files < 0
        assert report.files_before == files
        if outputs_before is not None:
            assert report.data_files == outputs_before
        bound = _artemis_files_after(files, report.data_files, len(report.outputs))
        files = report.files_after
        counts.append(files)
        bounds.append(bound)
        outputs_before = len(report.outputs)
        assert state(d, with_cc=False) == expected
    assert all(c <= b for c, b in zip(counts, bounds)), (counts, bounds)
    assert counts[-1] == counts[-2] == counts[-3], counts
    code, doc, _ = run_json("verify", d.parent if case.startswith("02") else d)
    assert (code, doc["verdict"]) == (0, "OK"), doc["findings"]
