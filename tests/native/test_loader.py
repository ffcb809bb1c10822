"""The C load (amqtool._native.Loader, native/journal_load.c) against the Python load in amqtool.engines.artemis.load.

The Python loop is the reference (tests/engines/test_load.py holds it to Artemis' own load on every fixture).
Here both implementations run over the same journals and must agree on everything a caller can see: the live
list (order and every field), prepared and failed transactions (records, deletes, extra data, prepare
location), maxID, numberOfRecords, each file's statistics, the anomalies (codes, first examples, counts) and
the gaps verify judges. Journals: every fixture journal, then journals Hypothesis writes (adds, updates,
deletes and transactions over a small id pool across several small files, healthy and unhealthy commits and
prepares, rollbacks, unknown ids and transactions, stale records of an earlier use of a file, extreme ids,
both format versions, mutated bytes).
"""
from __future__ import annotations

import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.artemis import load as load_module
from amqtool.engines.artemis.load import (
    FileGaps,
    LiveList,
    LiveRecord,
    live_ids_of_type,
    load_journal,
)
from amqtool.formats.artemis import records as R
from amqtool.store.journal_files import WINDOW, BodyWindows, open_journal
from amqtool.store.layout import detect
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(not native.HAVE_NATIVE_LOADER,
                                reason=f"C extension not built: {native.NATIVE_REASON}")

FIXTURE_DIRS = [ORACLE / s / "journal" for s in ORACLE_SCENARIOS] + list(PUBLIC_JOURNALS)
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _tx(t):
    return (t.tx_id, list(t.records), list(t.records_to_delete), t.prepared, t.invalid, t.extra,
            t.prepare_location)


def _snapshot(result, gaps):
    """Everything observable about a load, as plain values (dict orders included)."""
    return {
        "live": list(result.live),
        "prepared": [_tx(t) for t in result.prepared],
        "failed": [_tx(t) for t in result.failed],
        "max_id": result.max_id,
        "number_of_records": result.number_of_records,
        "scans": [(s.index, s.file.name, s.records, s.marked, s.has_data, s.last_data_pos,
                   list(s.type_counts.items())) for s in result.scans],
        "anomalies": [(a.code, a.file_index, a.offset, list(a.ids.items())) for a in result.anomalies],
        "anomaly_counts": list(result.anomaly_counts.items()),
        "data_files": [f.name for f in result.data_files],
        "current": result.current_file.name if result.current_file else None,
        "gaps": gaps,
    }


# The C load reads each file through a window (journal_window.h): its default, and windows so small that
# nearly every record straddles one or is larger than one (64 is the least the loader takes).
WINDOWS = (None, 64, 101)


def _load_both(journal, check_tag=True, windows=(None,)):
    """The Python load, then the C load with each window size: [(result, snapshot)...]."""
    out = []
    for use_native, window in [(False, None)] + [(True, w) for w in windows]:
        gaps = []

        def on_file(scan, g):
            assert isinstance(g, FileGaps)
            gaps.append((scan.index, g.damaged, g.damaged_count, g.end, g.tail_first, g.tail_end))

        with open_journal(journal) as opened, mock.patch.object(load_module, "WINDOW", window or WINDOW):
            result = load_journal(opened, check_tag=check_tag, on_file=on_file, use_native=use_native)
            out.append((result, _snapshot(result, gaps)))
    return out


def _assert_same(journal, check_tag=True):
    (py, a), *natives = _load_both(journal, check_tag, WINDOWS)
    assert isinstance(py.live, list)
    for (c, b), window in zip(natives, WINDOWS):
        assert isinstance(c.live, LiveList)
        for key in a:
            assert a[key] == b[key], (key, window)
    return py, natives[0][0]


# --- fixtures ----------------------------------------------------------------------------------------------


def test_there_are_fixture_journals():
    assert len(FIXTURE_DIRS) >= 20


@pytest.mark.parametrize("journal_dir", FIXTURE_DIRS, ids=lambda p: "/".join(p.parts[-4:]))
@pytest.mark.parametrize("check_tag", [True, False], ids=["tagged", "reclaimed"])
def test_native_load_equals_python_on_fixture(journal_dir, check_tag):
    for journal in detect(journal_dir).journals():
        py, c = _assert_same(journal, check_tag)
        if journal_dir.name == "journal" and check_tag:
            assert len(c.live) > 0


def test_fixture_anomalies_are_exercised():
    # The fixtures must reach the interesting branches, or the equality above proves little.
    codes = set()
    kinds = set()
    for d in FIXTURE_DIRS:
        for journal in detect(d).journals():
            (_, a), _ = _load_both(journal)
            codes.update(c for c, _ in a["anomaly_counts"])
            kinds.update(("prepared",) * bool(a["prepared"]) + ("failed",) * bool(a["failed"]))
            kinds.update(("torn",) * any(g[4] >= 0 for g in a["gaps"]))
    assert {"prepared", "failed", "torn"} <= kinds


def test_damaged_fixture_copy_gives_same_gaps(tmp_path):
    # Bytes destroyed in the middle of a file: damaged regions between records, found alike.
    src = ORACLE / "03_transactions" / "journal"
    dst = tmp_path / "journal"
    dst.mkdir()
    rng = random.Random(7)
    for p in sorted(src.iterdir()):
        data = bytearray(p.read_bytes())
        if p.suffix == ".amq" and len(data) > 4096:
            for _ in range(30):
                at = rng.randrange(16, min(len(data), 60000))
                data[at:at + 3] = b"\x7f\x7f\x7f"
        (dst / p.name).write_bytes(bytes(data))
    journal = detect(dst).journals()[0]
    py, c = _assert_same(journal)
    (_, a), _ = _load_both(journal)
    assert any(g[2] > 0 for g in a["gaps"])


def test_zeroed_whole_records_are_a_damaged_gap_in_both_loads(tmp_path):
    # Zeros laid exactly over whole records leave only filler between two records. JournalImpl writes a file's
    # records back to back, and AIO pads a write with zeros only up to an aligned block: zeros before a record
    # that does not start a 512-byte block are damage (a gap from the end of the record before), found alike;
    # zeros ending at a record that starts a block, shorter than the block, may be padding and are not.
    src = ORACLE / "03_transactions" / "journal"
    dst = tmp_path / "journal"
    shutil.copytree(src, dst)
    journal = detect(dst).journals()[0]
    with open_journal(journal) as opened:
        index = max(range(len(opened.files)), key=lambda i: opened.files[i].size)
        jf = opened.files[index]
        records, _ = native.scan_records(opened.read_file(index), jf.tag, jf.version, True, 16)
    pick = next(k for k in range(1, len(records) - 1) if records[k + 1][1] % 512
                and records[k][1] == records[k - 1][1] + records[k - 1][2])
    off, size, nxt = records[pick][1], records[pick][2], records[pick + 1][1]
    with open(jf.path, "r+b") as f:
        f.seek(off)
        f.write(bytes(size))
    _assert_same(journal)
    (_, a), _ = _load_both(journal)
    gaps = {g[0]: g for g in a["gaps"]}
    assert gaps[index][1] == [(off, nxt)] and gaps[index][2] == 1
    assert load_module.aio_padding(nxt - 100, nxt) is False
    assert load_module.aio_padding(1024 - 100, 1024) and load_module.aio_padding(8192 - 4096, 8192)
    assert not load_module.aio_padding(3 * 4096 - 4096, 3 * 4096) and not load_module.aio_padding(1536 - 600, 1536)


# --- generated journals ------------------------------------------------------------------------------------


def _write_journal(root: Path, files: list[list[R.Record]], version: int, file_size: int,
                   stale: dict[int, list[R.Record]], mutations: list[tuple[int, int, int]],
                   ids_shift: int = 0) -> Path:
    """Write each list of records as one journal file (fileID = position + 1 + ids_shift), zero-filled to
    ``file_size`` (larger when the records need it). ``stale[i]`` records are written first with another
    tag and overwritten by the current ones (a reused file). Mutations (file, offset, byte) are applied last."""
    d = root / "journal"
    d.mkdir(parents=True)
    for i, recs in enumerate(files):
        fid = i + 1 + ids_shift
        tag = R.file_tag(fid)
        body = b"".join(R.Record(**{**{k: getattr(r, k) for k in r.__slots__}, "tag": tag}).encode(version)
                        for r in recs)
        old = b""
        if i in stale:
            old_tag = R.file_tag(fid + 1000)
            old = b"".join(R.Record(**{**{k: getattr(r, k) for k in r.__slots__}, "tag": old_tag}).encode(version)
                           for r in stale[i])
        size = max(file_size, 16 + len(body) + 8, 16 + len(old) + 8)
        buf = bytearray(size)
        buf[0:16] = R.FileHeader(version, 0, fid).encode()
        buf[16:16 + len(old)] = old
        buf[16:16 + len(body)] = body
        for fi, off, val in mutations:
            if fi == i:
                buf[16 + off % (size - 16)] = val
        (d / f"activemq-data-{fid}.amq").write_bytes(bytes(buf))
    return d


IDS = st.one_of(st.integers(1, 40), st.sampled_from([0, -1, I64_MIN, I64_MAX, I64_MIN + 1, 2**40]))
TX_IDS = st.one_of(st.integers(500, 506), st.sampled_from([I64_MIN, -5, I64_MAX]))


@st.composite
def op(draw):
    kind = draw(st.sampled_from(["add", "update", "delete", "add_tx", "update_tx", "delete_tx", "prepare",
                                 "commit", "rollback", "event"]))
    body = draw(st.binary(max_size=24))
    utype = draw(st.integers(0, 255))
    cc = draw(st.integers(-128, 127))
    rid = draw(IDS)
    tx = draw(TX_IDS)
    if kind == "add":
        return R.Record(R.ADD, 0, cc, record_id=rid, user_record_type=utype, body=body)
    if kind == "update":
        return R.Record(R.UPDATE, 0, cc, record_id=rid, user_record_type=utype, body=body)
    if kind == "delete":
        return R.Record(R.DELETE, 0, cc, record_id=rid)
    if kind == "add_tx":
        return R.Record(R.ADD_TX, 0, cc, tx_id=tx, record_id=rid, user_record_type=utype, body=body)
    if kind == "update_tx":
        return R.Record(R.UPDATE_TX, 0, cc, tx_id=tx, record_id=rid, user_record_type=utype, body=body)
    if kind == "delete_tx":
        return R.Record(R.DELETE_TX, 0, cc, tx_id=tx, record_id=rid, body=body)
    if kind == "event":
        return R.Record(R.EVENT, 0, cc, record_id=rid, user_record_type=utype, body=body)
    if kind == "rollback":
        return R.Record(R.ROLLBACK, 0, cc, tx_id=tx)
    # PREPARE / COMMIT: numberOfRecords is a marker resolved when the file is laid out, so that commits
    # are healthy most of the time (count of this tx's records in the file) and sometimes not.
    nrec = draw(st.one_of(st.none(), st.integers(-1, 4)))
    t = R.PREPARE if kind == "prepare" else R.COMMIT
    extra = draw(st.binary(max_size=8)) if t == R.PREPARE else None
    return R.Record(t, 0, cc, tx_id=tx, number_of_records=nrec, extra=extra)


def _resolve_counts(files: list[list[R.Record]]) -> list[list[R.Record]]:
    """Give PREPARE/COMMIT without a count the count the transaction has in that file so far (healthy)."""
    out = []
    for recs in files:
        seen: dict[int, int] = {}
        fixed = []
        for r in recs:
            if r.type in (R.ADD_TX, R.UPDATE_TX, R.DELETE_TX):
                seen[r.tx_id] = seen.get(r.tx_id, 0) + 1
            if r.type in (R.PREPARE, R.COMMIT) and r.number_of_records is None:
                r = R.Record(r.type, 0, r.compact_count, tx_id=r.tx_id, number_of_records=seen.get(r.tx_id, 0),
                             extra=r.extra)
            fixed.append(r)
        out.append(fixed)
    return out


@st.composite
def journal_spec(draw):
    n_files = draw(st.integers(1, 5))
    files = [draw(st.lists(op(), max_size=30)) for _ in range(n_files)]
    files = _resolve_counts(files)
    version = draw(st.sampled_from([2, 2, 1]))
    stale = {}
    if draw(st.booleans()):
        stale[draw(st.integers(0, n_files - 1))] = _resolve_counts([draw(st.lists(op(), min_size=1, max_size=20))])[0]
    mutations = draw(st.lists(st.tuples(st.integers(0, n_files - 1), st.integers(0, 4000), st.integers(0, 255)),
                              max_size=draw(st.sampled_from([0, 0, 3, 10]))))
    file_size = draw(st.sampled_from([512, 1024, 4096]))
    return files, version, file_size, stale, mutations


PROFILE = settings(max_examples=int(os.environ.get("AMQTOOL_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROFILE
@given(spec=journal_spec(), check_tag=st.sampled_from([True, True, False]))
def test_native_load_equals_python_on_generated_journal(spec, check_tag):
    files, version, file_size, stale, mutations = spec
    with tempfile.TemporaryDirectory() as tmp:
        d = _write_journal(Path(tmp), files, version, file_size, stale, mutations)
        _assert_same(detect(d).journals()[0], check_tag)


def test_every_anomaly_and_transaction_outcome(tmp_path):
    A, T = R.Record, R
    f1 = [A(T.ADD, 0, 0, record_id=1, user_record_type=45, body=b"a"),
          A(T.UPDATE, 0, 0, record_id=99, user_record_type=45, body=b"u"),          # update-unknown-id
          A(T.DELETE, 0, 0, record_id=98),                                          # delete-unknown-id
          A(T.ADD, 0, 0, record_id=98, user_record_type=45, body=b"r"),             # add-of-deleted-id
          A(T.ADD_TX, 0, 0, tx_id=7, record_id=2, user_record_type=45, body=b"t"),
          A(T.ADD_TX, 0, 0, tx_id=8, record_id=3, user_record_type=45, body=b"t"),
          A(T.ADD_TX, 0, 0, tx_id=9, record_id=4, user_record_type=45, body=b"t"),
          A(T.ADD_TX, 0, 0, tx_id=10, record_id=5, user_record_type=45, body=b"t"),
          A(T.PREPARE, 0, 0, tx_id=9, number_of_records=1, extra=b"xid"),            # healthy prepare
          A(T.PREPARE, 0, 0, tx_id=10, number_of_records=3, extra=b"bad"),           # prepare-count-mismatch
          A(T.COMMIT, 0, 0, tx_id=7, number_of_records=2),                           # commit-count-mismatch
          A(T.COMMIT, 0, 0, tx_id=77, number_of_records=0),                          # commit-unknown-tx
          A(T.ROLLBACK, 0, 0, tx_id=78)]                                             # rollback-unknown-tx
    f2 = [A(T.ADD_TX, 0, 0, tx_id=8, record_id=6, user_record_type=45, body=b"t"),
          A(T.COMMIT, 0, 0, tx_id=8, number_of_records=1)]  # counts only this file's record: healthy
    d = _write_journal(tmp_path, [f1, f2], 2, 1024, {}, [])
    py, c = _assert_same(detect(d).journals()[0])
    assert set(c.anomaly_counts) == {"update-unknown-id", "delete-unknown-id", "prepare-count-mismatch",
                                     "commit-count-mismatch", "commit-unknown-tx", "rollback-unknown-tx",
                                     "add-of-deleted-id"}
    (dropped,) = [a for a in c.anomalies if a.code == "add-of-deleted-id"]
    assert dropped.ids == {"id": 98} and dropped.file_index == 0
    assert [t.tx_id for t in c.prepared] == [9] and c.prepared[0].extra == b"xid"
    assert [t.tx_id for t in c.failed] == [10]
    # 98, added after its DELETE, is dropped from the list but counted in JournalImpl's records map
    assert [r.id for r in c.live] == [1, 99, 3, 6] and c.max_id == 99 and c.number_of_records == 4


def test_many_ids_grow_and_shrink_the_tables(tmp_path):
    # Enough ids to grow every C hash table several times, in the patterns that stress open addressing:
    # dense sequences, power-of-two strides, negative and random 64-bit ids; deletes (plain and
    # transactional) of most of them in another order, re-adds of deleted ids, updates of unknown ids.
    rng = random.Random(20261122)
    ids = (list(range(1, 6000)) + [k << 20 for k in range(1, 3000)] + [-k for k in range(1, 1500)]
           + [rng.randrange(I64_MIN, I64_MAX) for _ in range(3000)] + [I64_MIN, I64_MAX, 0])
    recs: list[R.Record] = []
    for i in ids:
        recs.append(R.Record(R.ADD, 0, 0, record_id=i, user_record_type=i & 0xFF, body=b"x" * (i & 7)))
    order = ids[:]
    rng.shuffle(order)
    tx = 1
    for n, i in enumerate(order):
        r = n % 7
        if r < 3:
            recs.append(R.Record(R.DELETE, 0, 0, record_id=i))
        elif r == 3:
            recs += [R.Record(R.DELETE_TX, 0, 0, tx_id=tx, record_id=i),
                     R.Record(R.ADD_TX, 0, 0, tx_id=tx, record_id=i ^ 1, user_record_type=45, body=b"t"),
                     R.Record(R.COMMIT, 0, 0, tx_id=tx, number_of_records=2)]
            tx += 1
        elif r == 4:
            recs.append(R.Record(R.UPDATE, 0, 1, record_id=i + 10**9, user_record_type=3, body=b"u"))
        elif r == 5:
            recs.append(R.Record(R.ADD, 0, 0, record_id=i, user_record_type=1, body=b""))
    per_file = 4000
    files = [recs[k:k + per_file] for k in range(0, len(recs), per_file)]
    d = _write_journal(tmp_path, files, 2, 1 << 18, {}, [])
    py, c = _assert_same(detect(d).journals()[0])
    assert 1000 < len(c.live) < len(ids)
    assert c.anomaly_counts["update-unknown-id"] > 100
    assert len(c.anomalies) == sum(min(n, 100) for n in c.anomaly_counts.values())


# --- LiveList and the Loader object ----------------------------------------------------------------------


def _big_fixture_load(use_native):
    journal = detect(ORACLE / "02_add_update_delete" / "journal").journals()[0]
    opened = open_journal(journal)
    return opened, load_journal(opened, use_native=use_native)


def test_live_list_acts_as_the_list():
    op1, py = _big_fixture_load(False)
    op2, c = _big_fixture_load(True)
    with op1, op2:
        live, ref = c.live, py.live
        assert len(live) == len(ref) > 10
        assert live == ref and ref == list(live) and not (live != ref)
        assert live[0] == ref[0] and live[-1] == ref[-1] and live[len(ref) // 2] == ref[len(ref) // 2]
        assert isinstance(live[3], LiveRecord) and live[3].is_update in (True, False)
        assert type(live[3].is_update) is bool
        assert live[2:9] == ref[2:9] and live[::-3] == ref[::-3]
        assert list(reversed(live)) == list(reversed(ref))
        assert live.index(ref[5]) == ref.index(ref[5]) and ref[5] in live
        with pytest.raises(IndexError):
            live[len(ref)]
        with pytest.raises(IndexError):
            live[-len(ref) - 1]
        assert pickle.loads(pickle.dumps(live)) == ref
        assert [tuple(r) for r in live.tuples()] == [tuple(r) for r in ref]
        for t in {r.user_record_type for r in ref}:
            for upd in (None, True, False):
                assert live_ids_of_type(live, t, upd) == live_ids_of_type(ref, t, upd)
            assert live.indexes_of_types({t, 999}) == [i for i, r in enumerate(ref) if r.user_record_type == t]
        assert c.body(live[0]) == py.body(ref[0])


def test_loader_refuses_misuse():
    ld = native.Loader()
    with pytest.raises(BufferError):
        memoryview(ld)
    path = ORACLE / "01_simple_adds" / "journal" / "activemq-data-1.amq"
    h = R.decode_header(path.read_bytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ValueError):
            ld.feed(fd, 0, h.tag, 3)
        n, marked, has_data, last, counts, gaps, size = ld.feed(fd, 0, h.tag, h.version, True, True)
        assert n > 0 and has_data and gaps[0] == [] and gaps[2] == last
        assert size == path.stat().st_size
        res = ld.finish()
        assert res[0] == len(memoryview(ld)) // 27
        with pytest.raises(RuntimeError):
            ld.feed(fd, 1, h.tag, h.version)
    finally:
        os.close(fd)
    with pytest.raises(RuntimeError):
        ld.finish()


def test_record_filter_and_switch_select_the_python_load():
    journal = detect(ORACLE / "01_simple_adds" / "journal").journals()[0]
    with open_journal(journal) as opened:
        assert isinstance(load_journal(opened).live, LiveList)
        assert isinstance(load_journal(opened, record_filter=lambda r: True).live, list)
        assert isinstance(load_journal(opened, use_native=False).live, list)
        with pytest.raises(ValueError):
            load_journal(opened, record_filter=lambda r: True, use_native=True)


def test_no_native_switch_falls_back_to_python():
    code = ("from amqtool import native; from amqtool.engines.artemis.load import load_journal\n"
            "from amqtool.store.layout import detect; from amqtool.store.journal_files import WINDOW, BodyWindows, open_journal\n"
            f"j = detect({str(ORACLE / '01_simple_adds' / 'journal')!r}).journals()[0]\n"
            "o = open_journal(j); r = load_journal(o)\n"
            "print(native.HAVE_NATIVE_LOADER, type(r.live).__name__, len(r.live))")
    env = dict(os.environ, AMQTOOL_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    fields = out.stdout.split()
    assert fields[:2] == ["False", "list"] and int(fields[2]) > 0


@pytest.mark.parametrize("journal_dir", FIXTURE_DIRS, ids=lambda p: "/".join(p.parts[-4:]))
@pytest.mark.parametrize("window", [64, 101, 4096])
def test_scan_windows_equal_the_whole_file_scan(journal_dir, window):
    # Window by window, the C scanner finds what the reference finds over the whole file: same records at
    # the same file offsets, each wholly in its window, and the same data-file mark.
    for journal in detect(journal_dir).journals():
        with open_journal(journal) as opened:
            for i, f in enumerate(opened.files):
                data = Path(f.path).read_bytes()
                for check_tag in (True, False):
                    want, want_marked = R.scan_records_py(data, f.tag, f.version, check_tag, 16)
                    got, marked = [], False
                    for base, win, records, marked in opened.scan_windows(i, check_tag, window):
                        assert win == data[base:base + len(win)]
                        for rec in records:
                            assert rec[1] + rec[2] <= len(win)
                            got.append((rec[0], base + rec[1]) + tuple(rec[2:]))
                    assert got == want and marked == want_marked


def test_body_windows_hold_every_body():
    journal = detect(ORACLE / "03_transactions" / "journal").journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
        windows = BodyWindows(opened, window=64)
        for rec in result.live:
            base, data = windows.holding(rec.file_index, rec.body_offset, rec.body_len)
            assert base <= rec.body_offset and rec.body_offset + rec.body_len <= base + len(data)
            assert windows.body(rec.file_index, rec.body_offset, rec.body_len) == result.body(rec)


@settings(max_examples=200, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 2), st.integers(-5, 9000), st.integers(-3, 300)), max_size=40),
       window=st.sampled_from([16, 64, 4096]))
def test_body_windows_read_what_load_result_reads(spans, window):
    """Any span, in any order: inside the window used last (the fast path), across windows, past the end
    of the file, empty or negative -- the bytes LoadResult.body would read (clip, then the file's bytes)."""
    journal = detect(ORACLE / "03_transactions" / "journal").journals()[0]
    with open_journal(journal) as opened:
        windows = BodyWindows(opened, window=window)
        n = len(opened.files)
        for fi, off, length in spans:
            fi %= n
            size = opened.files[fi].size
            start, end = BodyWindows.clip(size, off, length)
            assert windows.body(fi, off, length) == opened.pread(fi, start, end - start)
