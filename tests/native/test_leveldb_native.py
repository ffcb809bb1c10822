"""The C LevelDB log scanner (amqtool._native.leveldb_scan, native/leveldb_scan.c) against the Python reference
(amqtool.formats.leveldb.recordlog.scan_file), and verify's findings with and without it.

Every log file of every LevelDB test store (the fixture, tests/data/leveldb, the replica nodes), damaged
copies of them (bit flips in headers and data, truncations, zero runs, garbage) and Hypothesis-mutated logs:
the two scans must be equal (records, stop, DATA records, events at the same offsets, the complete end), and
verify must give the very same findings on damaged stores. CRC-32 is checked against zlib.
"""
from __future__ import annotations

import random
import shutil
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.leveldb.logfiles import scan
from amqtool.formats.leveldb import recordlog as L
from tests.engines.leveldb.stores import FIXTURE
from tests.support import REPO

needs_c = pytest.mark.skipif(native.leveldb_scan is None,
                             reason=f"C extension not built: {native.NATIVE_REASON or 'leveldb_scan missing'}")
pytestmark = needs_c

STORE_DIRS = sorted({p.parent for p in list((REPO / "tests" / "data" / "leveldb").glob("**/*.log")) +
                     list((FIXTURE / "store").glob("*.log")) if not p.parent.name.endswith(".index")})
LOGS = sorted(p for d in STORE_DIRS for p in d.glob("*.log"))


def _base(path: Path) -> int:
    return int(L.LOG_NAME.match(path.name).group(1), 16)


def both(buf: bytes, base: int = 0) -> L.FileScan:
    py = scan(buf, base, use_native=False)
    c = scan(buf, base, use_native=True)
    assert c == py
    return c


def test_the_stores_are_there():
    assert len(STORE_DIRS) >= 8 and len(LOGS) >= 10
    assert any(d.parent.name == "killed" for d in STORE_DIRS)


@pytest.mark.parametrize("path", LOGS, ids=[f"{p.parent.parent.name}/{p.name}" for p in LOGS])
def test_every_log_file_scans_the_same(path):
    buf = path.read_bytes()
    fs = both(buf, _base(path))
    # the reference agrees with the record iterator and the broker's end-of-log walk it is built from
    assert fs.complete == L.complete_end(buf, _base(path))
    assert fs.records == sum(1 for r in L.iter_records(buf) if isinstance(r, L.Record))
    assert len(fs.data_offsets) == sum(1 for r in L.iter_records(buf) if isinstance(r, L.Record) and r.kind == L.DATA)


def _records(buf: bytes) -> list[L.Record]:
    return [r for r in L.iter_records(buf) if isinstance(r, L.Record)]


@pytest.mark.parametrize("path", LOGS[:: max(1, len(LOGS) // 6)], ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_damaged_copies_scan_the_same(path):
    """Flips of every header byte and of data bytes of a sample of records, truncations inside headers and
    data, a zero run and garbage: the same records, stop and events at the same offsets."""
    buf = path.read_bytes()
    base = _base(path)
    recs = _records(buf)
    assert recs
    rng = random.Random(path.name)
    sample = recs[:3] + rng.sample(recs, min(12, len(recs))) + recs[-3:]
    seen_codes = set()
    for r in sample:
        for at in list(range(r.offset, r.offset + L.HEADER_SIZE)) + \
                [r.offset + L.HEADER_SIZE + rng.randrange(max(1, r.length))] * (r.length > 0):
            for bit in (0, 7):
                b = bytearray(buf)
                b[at] ^= 1 << bit
                fs = both(bytes(b), base)
                seen_codes |= {e[1] for e in fs.events}
                if fs.stop:
                    seen_codes.add(("stop", fs.stop[1]))
        for cut in (r.offset + 3, r.offset + L.HEADER_SIZE + r.length // 2, r.offset + L.HEADER_SIZE + r.length):
            fs = both(buf[:cut], base)
            if fs.stop:
                seen_codes.add(("stop", fs.stop[1]))
        b = bytearray(buf)
        b[r.offset:r.offset + 40] = bytes(min(40, len(buf) - r.offset))
        both(bytes(b), base)
        both(buf[:r.end] + b"\x00" * 20 + b"junk" + buf[r.end:], base)
    # the damage reached every branch: CRC mismatches, shape failures and each kind of stop
    assert {L.EV_CRC, L.EV_SHAPE} <= seen_codes
    assert {("stop", L.STOP_NOT_A_RECORD), ("stop", L.STOP_TRUNCATED_RECORD),
            ("stop", L.STOP_TRUNCATED_HEADER)} <= seen_codes


def _record(kind: int, data: bytes, cs: int | None = None) -> bytes:
    c = zlib.crc32(data) if cs is None else cs
    return L.HEADER.pack(0x2A, kind, c - (1 << 32) if c & 0x80000000 else c, len(data)) + data


def test_hand_built_log_reaches_every_event():
    """A log with a broken UOW chain, a bad CRC, a record of each kind with bad data, a snappy-like DATA record:
    the events the reference gives, and C gives the same."""
    uow = lambda start: _record(-1, start.to_bytes(8, "big", signed=True))  # noqa: E731
    msg = (5).to_bytes(4, "big") + b"hello"
    parts = [_record(L.DATA, msg), uow(0)]
    p1 = sum(map(len, parts))
    parts += [_record(L.ADD_ENTRY, b"\x08\x01\x12\x08" + bytes(8) + b"\x18\x05"), uow(p1)]
    p2 = sum(map(len, parts))
    parts += [_record(L.DATA, b"\x01\x02\x03"), _record(L.ADD_ENTRY, b"\x08\x01"), _record(L.ADD_COLLECTION, b"\x08\x01\x10\x09"),
              _record(L.REMOVE_COLLECTION, b"\x81"), _record(-1, b"abc"), _record(9, b"xyz"),
              _record(L.DATA, msg, cs=123), uow(7)]
    buf = b"".join(parts)
    fs = both(buf)
    codes = [(e[1], e[2]) for e in fs.events]
    assert codes == [(L.EV_SHAPE, L.DATA), (L.EV_SHAPE, L.ADD_ENTRY), (L.EV_SHAPE, L.ADD_COLLECTION),
                     (L.EV_SHAPE, L.REMOVE_COLLECTION), (L.EV_SHAPE, -1), (L.EV_SHAPE, 9), (L.EV_CRC, L.DATA),
                     (L.EV_UOW, -1)]
    assert fs.events[-1][4:] == (7, p2)
    assert fs.records == 12 and fs.stop is None and list(fs.data_ok) == [1, 1, 0]
    assert fs.complete == (p2, sum(map(len, parts[:10])), 6)  # the bad CRC ends the broker's walk


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_logs_scan_the_same(data):
    path = data.draw(st.sampled_from(LOGS))
    buf = bytearray(path.read_bytes()[:20000])
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if not buf:
            break
        at = data.draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set":
            buf[at] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del buf[at:]
        else:
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=12))
    both(bytes(buf), _base(path))


@pytest.mark.parametrize("n", list(range(0, 200)) + [1000, 4095, 65536 + 7])
def test_crc32_is_zlibs(n):
    rng = random.Random(n)
    data = rng.randbytes(n + 3)
    for off in (0, 1, 3):
        assert native.crc32_native(data[off:off + n]) == zlib.crc32(data[off:off + n])
    assert native.crc32_native(data[n // 2:], native.crc32_native(data[:n // 2])) == zlib.crc32(data)


def test_uow_end_count_is_the_reference(monkeypatch, tmp_path):
    """verify's count of good UOW_ENDs after the last complete unit: C over the file's data extents (a sparse
    preallocated tail skipped) and the Python byte-by-byte search agree, on a log with a hole in its tail."""
    from types import SimpleNamespace

    from amqtool.engines.leveldb import verify as V

    path = next(p for p in LOGS if p.parent.parent.name == "killed")
    data = path.read_bytes()
    want = sum(1 for r in _records(data) if r.kind == -1 and r.length == 8 and r.crc_ok)
    sparse = tmp_path / path.name
    with open(sparse, "wb") as fh:
        fh.write(data)
        fh.seek(len(data) + (4 << 20))
        fh.write(data[:4096])  # the records again after a hole: found there too
    buf = sparse.read_bytes()
    st = SimpleNamespace(reader=SimpleNamespace(buffer=lambda _f: buf), logs=[SimpleNamespace(path=sparse, position=0)],
                         last_file_end=0, last_file_scan_end=None)
    c = V._units_after(st)
    assert want and c >= want + sum(1 for r in _records(data[:4096]) if r.kind == -1 and r.length == 8 and r.crc_ok)
    monkeypatch.setattr(native, "leveldb_count_uow_ends", None)
    assert V._units_after(st) == c


def _verify_doc(store_dir: Path):
    from amqtool.engines.leveldb.verify import verify_store
    from amqtool.store.layout import detect

    findings, summary = verify_store(detect(store_dir))
    return [(f.code, f.severity.name, Path(f.path).name if f.path else None, f.offset, f.message)
            for f in findings], summary


DAMAGE_CASES = [d.parent for d in STORE_DIRS if (d / "store-version.txt").is_file()]


@pytest.mark.parametrize("case", DAMAGE_CASES, ids=lambda d: d.name)
def test_verify_same_findings_on_damaged_copies(case, tmp_path, monkeypatch):
    """verify on damaged copies of each store: with the C scanner and with the Python reference (the
    extension's LevelDB functions taken away), the same findings at the same offsets and the same summary."""
    rng = random.Random(case.name)
    logs = sorted((case / "store").glob("*.log"))
    for trial in range(4):
        d = tmp_path / f"t{trial}"
        shutil.copytree(case / "store", d, symlinks=True)
        victim = d / rng.choice(logs).name
        b = bytearray(victim.read_bytes())
        recs = _records(bytes(b))
        if not recs:
            continue
        r = rng.choice(recs)
        if trial == 0:
            b[r.offset + L.HEADER_SIZE + rng.randrange(max(1, r.length))] ^= 0x10
        elif trial == 1:
            b[r.offset + 1] ^= 0x04  # the kind byte, outside the checksum
        elif trial == 2:
            del b[r.offset + L.HEADER_SIZE + r.length // 2:]
        else:
            b[r.offset] = 0x41
        victim.write_bytes(bytes(b))
        got_c = _verify_doc(d)
        with monkeypatch.context() as m:
            for name in NATIVE_NAMES:
                m.setattr(native, name, None)
            got_py = _verify_doc(d)
        assert got_c == got_py, (trial, victim.name, r.offset)
        # a kind byte changed before the snapshot's position is never replayed: no finding there
        assert got_c[0] or trial == 1, ("the damage is found", trial, victim.name, r.offset, r.kind, r.length)


# --- the entries against the DATA records (verify) -----------------------------------------------------

def _match_both(locs, lens, runs, last, limit):
    from array import array

    from amqtool.engines.leveldb.logfiles import data_at, match_data

    locs, lens = array("q", locs), array("q", lens)
    py = match_data(locs, lens, runs, last, limit, use_native=False)
    c = match_data(locs, lens, runs, last, limit, use_native=True)
    assert c == py
    for i in py:  # what verify then reads of each flagged entry's record, by the same rule
        got = data_at(runs, locs[i])
        want = None
        for base, offs, ln, oks in runs:
            for o, n, k in zip(offs, ln, oks):
                if base + o == locs[i]:
                    want = (n, bool(k))
        assert got == want
    return py


@pytest.mark.parametrize("case", [d for d in STORE_DIRS if (d / "store-version.txt").is_file()],
                         ids=lambda d: f"{d.parent.name}/{d.name}")
def test_match_data_of_every_store(case):
    """Every store's entries against its logs' DATA records: C and the Python reference flag the same entries,
    and only those whose record is missing, of another length, failing its CRC-32 or past the log's end;
    entries moved by a byte, lengthened, pointed into the gaps and past the end are flagged by both."""
    from amqtool.engines.leveldb.load import load
    from amqtool.store.layout import detect

    with load(detect(case)) as s:
        runs = []
        for f in s.logs:
            fs = scan(s.reader.buffer(f), f.position, use_native=False)
            runs.append((f.position, fs.data_offsets, fs.data_lengths, fs.data_ok))
        msgs = [m for d in s.destinations.values() for m in d.messages]
        last = s.logs[-1].position if s.logs else None
        limit = s.replay.limit
        locs = [m.location for m in msgs]
        lens = [m.length for m in msgs]
        good = _match_both(locs, lens, runs, last, limit)
        data = {b + o: (n, k) for b, offs, ln, oks in runs for o, n, k in zip(offs, ln, oks)}
        for i in good:  # every flagged entry has a reason
            got = data.get(locs[i])
            assert got is None or got[0] != lens[i] or not got[1] or (locs[i] >= last and
                                                                     locs[i] + L.HEADER_SIZE + lens[i] > limit)
        rng = random.Random(case.name)
        n = len(locs)
        moved = [x + rng.choice((-1, 1, 10)) for x in locs] + [x for x in locs] + [limit, -5, 1 << 40]
        longer = list(lens) + [x + 1 for x in lens] + [0, 0, 0]
        flagged = _match_both(moved, longer, runs, last, limit)
        assert set(range(n, 2 * n)) <= set(flagged)  # the lengthened ones
        assert {2 * n, 2 * n + 1, 2 * n + 2} <= set(flagged)  # at the end, before the log, far past it
        assert set(range(n)) <= set(flagged)  # no DATA record starts a byte or ten bytes from another
        assert _match_both(locs, lens, runs, None, limit) == [i for i in good if data.get(locs[i]) is None or
                                                               data[locs[i]][0] != lens[i] or not data[locs[i]][1]]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_match_data_of_any_runs(data):
    """Runs of any shape (files overlapping, empty, offsets repeated across files, bad checksums) and entries
    anywhere: the same flags and the same record read (the last file holding one wins)."""
    from array import array

    runs = []
    base = data.draw(st.integers(0, 50))
    for _ in range(data.draw(st.integers(0, 4))):
        offs = sorted(set(data.draw(st.lists(st.integers(0, 60), max_size=12))))
        lens = [data.draw(st.integers(0, 5)) for _ in offs]
        oks = bytes(data.draw(st.integers(0, 1)) for _ in offs)
        runs.append((base, array("q", offs), array("I", lens), oks))
        base += data.draw(st.integers(0, 40))  # overlapping files, files with equal bases
    locs = data.draw(st.lists(st.integers(-3, 160), max_size=20))
    lens = [data.draw(st.integers(-1, 5)) for _ in locs]
    last = data.draw(st.one_of(st.none(), st.integers(0, 120)))
    _match_both(locs, lens, runs, last, data.draw(st.integers(0, 200)))


def test_match_data_flags_what_verify_must_look_at():
    """The outcomes, by hand: a good record passes; a missing one, a length that differs, a failed CRC-32 and
    a record of the last file past the end are flagged; the last file holding a position wins."""
    from array import array

    runs = [(0, array("q", [0, 100]), array("I", [50, 20]), bytes([1, 0])),
            (200, array("q", [0, 40]), array("I", [30, 30]), bytes([1, 1]))]
    locs = [0, 100, 0, 5, 200, 240, 300]
    lens = [50, 20, 49, 10, 30, 30, 1]
    assert _match_both(locs, lens, runs, 200, 275) == [1, 2, 3, 5, 6]  # 240 + 10 + 30 > 275
    assert _match_both(locs, lens, runs, None, 0) == [1, 2, 3, 6]
    # a later file whose base is below a position shadows an earlier file's record there (as a dict filled
    # file by file)
    shadow = [runs[0], (0, array("q", [0]), array("I", [7]), b"\x01"), runs[1]]
    assert _match_both([0, 100], [50, 20], shadow, None, 0) == [0, 1]
    assert _match_both([0, 100], [7, 10], shadow, None, 0) == [1]


# --- the index: entry values and write batches -------------------------------------------------------

INDEX_DIRS = sorted(p for d in STORE_DIRS for p in d.glob("*.index") if p.is_dir() and (p / "CURRENT").is_file())


def _index_items() -> list[list]:
    from amqtool.engines.leveldb.index import read_index

    groups: dict = {}
    for d in INDEX_DIRS:
        for k, v in sorted(read_index(d).data.items()):
            if k[:1] == b"e" and len(k) >= 9:
                groups.setdefault((d, k[1:9]), []).append((k[9:], v))
    return list(groups.values())


def _rows_c(items):
    seqs, locs, lens, status = native.leveldb_entry_rows(items)
    return [list(memoryview(seqs).cast("q")), list(memoryview(locs).cast("q")), list(memoryview(lens).cast("i")),
            list(status)]


def test_entry_rows_of_every_index():
    from amqtool.formats.leveldb import records as R

    groups = _index_items()
    assert len(INDEX_DIRS) >= 6 and sum(map(len, groups)) > 100
    statuses = set()
    for items in groups:
        py = R.entry_rows(items)
        assert _rows_c(items) == list(map(list, py))
        statuses |= set(py[3])
        for (k, v), s, loc, ln in zip(items, py[3], py[1], py[2]):
            if s == 0:  # what the general decoder reads
                assert R.decode_index_entry(v)[:2] == (loc, ln)
    assert {0, 1} <= statuses


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=7, max_size=9),
                          st.one_of(st.binary(max_size=24),
                                    st.builds(lambda a, b: b"\x18" + a + b"\x20" + b,
                                              st.binary(min_size=1, max_size=11), st.binary(min_size=1, max_size=3)))),
                max_size=8))
def test_entry_rows_of_any_bytes(items):
    from amqtool.formats.leveldb import records as R

    assert _rows_c(items) == list(map(list, R.entry_rows(items)))


def _groups_both(index: dict):
    from amqtool.engines.leveldb.load import index_groups

    py = index_groups(index, use_native=False)
    c = index_groups(index, use_native=True)
    assert c == py and list(c[0]) == list(py[0])  # the same groups, in the same (key) order
    return c


def test_index_groups_of_every_index():
    from amqtool.engines.leveldb.index import read_index

    seen = 0
    for d in INDEX_DIRS:
        index = read_index(d).data
        entries, colls = _groups_both(index)
        seen += sum(map(len, entries.values()))
        # every entry key of 9 bytes or more is in its collection's group, every 9-byte 'c' key listed
        assert sum(map(len, entries.values())) == sum(1 for k in index if k[:1] == b"e" and len(k) >= 9)
        assert colls == sorted(k for k in index if k[:1] == b"c" and len(k) == 9)
    assert seen > 100


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.binary(max_size=20),
                                 st.builds(lambda p, ck, rest: p + ck + rest, st.sampled_from([b"e", b"c", b"d", b"f"]),
                                           st.sampled_from([bytes(8), b"\x00" * 7 + b"\x01", b"\x80" + bytes(7),
                                                            b"\xff" * 8]), st.binary(max_size=10))),
                       st.binary(max_size=4), max_size=30))
def test_index_groups_of_any_keys(index):
    """Keys of any length and prefix (collection keys negative and positive, entry keys of any length, short
    'e' keys, keys that are prefixes of others): the same groups in the same order."""
    _groups_both(index)


def _batches() -> list[bytes]:
    from amqtool.formats.leveldb import dblog

    out = []
    for d in INDEX_DIRS + sorted(p / "dirty.index" for p in STORE_DIRS if (p / "dirty.index").is_dir()):
        for log in sorted(d.glob("*.log")):
            out += [bytes(rec) for _off, rec in dblog.read_log(log.read_bytes()).records]
    return out


def _apply_both(batches: list[bytes]):
    from amqtool.engines.leveldb.index import apply_batch, apply_log

    a: dict = {}
    b: dict = {}
    ra = [apply_batch(rec, a, use_native=False) for rec in batches]
    rb = [apply_batch(rec, b, use_native=True) for rec in batches]
    assert rb == ra
    assert b == a and list(b) == list(a)
    # the whole log in one call: the same operations, the same errors at the same offsets
    records = [(i * 7, rec) for i, rec in enumerate(batches)]
    c: dict = {}
    d: dict = {}
    rc = apply_log(records, c, use_native=False)
    rd = apply_log(records, d, use_native=True)
    assert rd == rc == (sum(n for n, _e in ra), [(i * 7, e) for i, (_n, e) in enumerate(ra) if e is not None])
    assert d == c == a and list(d) == list(a)
    return ra


def test_apply_log_hands_an_overflowing_batch_to_python():
    """A batch whose sequence numbers would pass 64 bits stops the C loop before it: the rest is applied one
    by one, as the reference does."""
    from amqtool.engines.leveldb.index import apply_log

    def batch(seq: int, key: bytes) -> bytes:
        return seq.to_bytes(8, "little") + (1).to_bytes(4, "little") + b"\x01" + bytes([len(key)]) + key + b"\x01v"

    records = [(0, batch(5, b"a")), (10, batch((1 << 64) - 1, b"b")), (20, batch(6, b"a")), (30, b"short")]
    assert native.leveldb_apply_log(records, {})[2] == 1
    a: dict = {}
    b: dict = {}
    assert apply_log(records, a, use_native=True) == apply_log(records, b, use_native=False)
    assert a == b and a[b"b"][0] == (1 << 64) - 1 and a[b"a"][0] == 6


def test_write_batches_of_every_index_apply_the_same():
    batches = _batches()
    assert len(batches) > 20
    done = _apply_both(batches)
    assert all(err is None for _n, err in done)


def _index_logs() -> list[Path]:
    return sorted(p for d in INDEX_DIRS + sorted(p / "dirty.index" for p in STORE_DIRS if (p / "dirty.index").is_dir())
                  for p in list(d.glob("*.log")) + list(d.glob("MANIFEST-*")))


def _read_log_both(buf: bytes):
    """C's read, when it gives one, equals the reference's, which then found no problem and no torn tail; C
    gives up (None) on anything else, and the reference reads that."""
    from amqtool.engines.leveldb.index import read_log
    from amqtool.formats.leveldb import dblog

    py = dblog.read_log(buf)
    c = native.leveldb_read_log(buf)
    assert read_log(buf, use_native=False) == py
    if c is not None:
        assert read_log(buf) == py and c == py.records and not py.problems and py.tail is None
    else:
        assert read_log(buf) == py
    return py, c


def test_read_log_of_every_index_log():
    logs = _index_logs()
    assert len(logs) >= 10
    read = 0
    for p in logs:
        py, c = _read_log_both(p.read_bytes())
        if not py.problems and py.tail is None:
            assert c is not None, p  # a clean log is read in C
            read += len(c)
    assert read > 100


def test_read_log_of_split_records():
    """Records over 32 KiB are split (FIRST, MIDDLE..., LAST) across blocks, and blocks end in zero padding:
    C joins them as the reference does; a torn split record is left to the reference."""
    from amqtool.formats.leveldb import dblog

    from amqtool.formats.leveldb.codecs import crc32c, mask

    def phys(t: int, data: bytes) -> bytes:
        return mask(crc32c(bytes([t]) + data)).to_bytes(4, "little") + len(data).to_bytes(2, "little") + \
            bytes([t]) + data

    big = bytes(range(256)) * 300  # 76,800 bytes: three fragments
    out = bytearray(phys(dblog.FULL, b"small"))
    rest, first = big, True
    while rest:
        left = dblog.BLOCK_SIZE - len(out) % dblog.BLOCK_SIZE
        if left < dblog.HEADER_SIZE:
            out += bytes(left)
            continue
        piece, rest = rest[:left - dblog.HEADER_SIZE], rest[left - dblog.HEADER_SIZE:]
        out += phys(dblog.FIRST if first else (dblog.LAST if not rest else dblog.MIDDLE), piece)
        first = False
    out += phys(dblog.FULL, b"after")
    py, c = _read_log_both(bytes(out))
    assert c is not None and [r for _o, r in c] == [b"small", big, b"after"]
    _py, c = _read_log_both(bytes(out[:dblog.BLOCK_SIZE + 100]))  # torn inside the split record
    assert c is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_read_log_of_damaged_logs(data):
    logs = [p for p in _index_logs() if p.stat().st_size]
    b = bytearray(logs[data.draw(st.integers(0, len(logs) - 1))].read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "cut", "zero"]))
        at = data.draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "cut":
            del b[at:]
        else:
            b[at:at + data.draw(st.integers(1, 40))] = bytes(min(40, len(b) - at))
        if not b:
            break
    _read_log_both(bytes(b))


def _live_both(newest: dict):
    from amqtool.engines.leveldb.index import live

    a: dict = {}
    b: dict = {}
    ra = live(newest, a, use_native=False)
    rb = live(newest, b, use_native=True)
    assert (rb, b, list(b)) == (ra, a, list(a))
    return ra, a


def test_live_values_of_every_index():
    """The index's live keys and last sequence from what the write batches left: C and the reference."""
    from amqtool.engines.leveldb.index import apply_batch

    newest: dict = {}
    for rec in _batches():
        apply_batch(rec, newest)
    seq, data = _live_both(newest)
    assert seq == max(v[0] for v in newest.values()) and seq > 20
    deleted = {k for k, v in newest.items() if v[1] == 0}
    assert deleted and not deleted & set(data) and len(data) == len(newest) - len(deleted)
    assert _live_both({}) == (0, {})


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.binary(max_size=6), st.tuples(st.integers(0, 1 << 70), st.integers(0, 1),
                                                          st.one_of(st.none(), st.binary(max_size=4))), max_size=12))
def test_live_values_of_any_entries(newest):
    newest = {k: (q, kind, v if kind == 1 and v is not None else (None if kind == 0 else b"")) for k, (q, kind, v)
              in newest.items()}
    _live_both(newest)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_write_batches_apply_the_same(data):
    batches = _batches()
    picked = [bytearray(batches[i]) for i in data.draw(st.lists(st.integers(0, len(batches) - 1), min_size=1,
                                                                max_size=4))]
    for b in picked:
        for _ in range(data.draw(st.integers(0, 3))):
            if not b:
                break
            op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
            at = data.draw(st.integers(0, len(b) - 1))
            if op == "flip":
                b[at] ^= 1 << data.draw(st.integers(0, 7))
            elif op == "cut":
                del b[at:]
            else:
                b[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    _apply_both([bytes(b) for b in picked])


NATIVE_NAMES = ("leveldb_scan", "leveldb_count_uow_ends", "leveldb_entry_rows", "leveldb_apply_batch",
                "leveldb_match_data", "leveldb_index_groups", "leveldb_live", "leveldb_read_log",
                "leveldb_apply_log")


def _loaded(store_dir: Path):
    from amqtool.engines.leveldb.load import load
    from amqtool.store.layout import detect

    with load(detect(store_dir)) as s:
        return ({k: (d.qualified, [(m.seq, m.location, m.length, m.redelivery) for m in d.messages], d.entries,
                     [(x.key, x.ack_position, x.pending_count) for x in d.subscriptions])
                 for k, d in s.destinations.items()},
                s.index, s.load_problems, (s.last_file_end, s.last_file_scan_end, s.cut_records),
                s.snapshot_db.problems if s.snapshot_db else None)


@pytest.mark.parametrize("case", DAMAGE_CASES, ids=lambda d: d.name)
def test_load_is_the_same_without_the_extension(case, monkeypatch):
    got_c = _loaded(case / "store")
    for name in NATIVE_NAMES:
        monkeypatch.setattr(native, name, None)
    assert _loaded(case / "store") == got_c


@pytest.mark.parametrize("case", [c for c in DAMAGE_CASES if c.name in ("basic", "killed", "snappy")],
                         ids=lambda d: d.name)
def test_verify_cli_is_the_same_with_amqtool_no_native(case):
    """``AMQTOOL_NO_NATIVE=1`` takes the extension away (every LevelDB function falls back to Python): the
    verify document and exit status of the CLI are the same."""
    import json
    import os
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "amqtool"
    runs = []
    for env in ({}, {"AMQTOOL_NO_NATIVE": "1"}):
        p = subprocess.run([str(exe), "verify", str(case / "store"), "--format", "json"], capture_output=True,
                           text=True, env={**os.environ, **env})
        doc = json.loads(p.stdout)
        doc.pop("elapsed", None)
        doc.pop("timing", None)
        runs.append((p.returncode, doc))
    assert runs[0] == runs[1]
    assert runs[0][0] in (0, 1) and runs[0][1]
