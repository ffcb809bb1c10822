"""The C KahaDB loop (amqtool._native.kahadb_scan_file) against the Python reference (load.py's own loop).

Every KahaDB fixture store, damaged copies of them, a hand-built journal that exercises every replay rule
and every reason the fast path must hand a record back to Python, and Hypothesis-mutated journals: the two
implementations must leave the very same DirResult (scans, replayed state, transactions, errors), and
verify/print the very same documents. Adler-32 is checked against zlib.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.kahadb import load as L
from amqtool.engines.kahadb.replay import LiveMessage
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.protobuf import encode_field, encode_varint
from amqtool.store.layout import KahaDBStore, detect
from tests.support import KAHADB

FIXTURES = KAHADB
STORES = ["basic", "tx", "gc", "mkahadb"]
STORE_DIRS = sorted({p.parent for p in FIXTURES.glob("*/**/db-*.log")})

needs_c = pytest.mark.skipif(native.kahadb_scan_file is None,
                             reason=f"C extension not built: {native.NATIVE_REASON or 'kahadb_scan_file missing'}")
pytestmark = needs_c


# --- comparing two loads ----------------------------------------------------------------------------

def snapshot(d: L.DirResult) -> dict:
    """Everything a load leaves behind, as plain comparable values (dict order kept as lists)."""
    rp = d.replay
    dests = []
    for key, stt in rp.destinations.items():
        assert all(type(m) is LiveMessage for m in stt.messages.values()), "compact entries left behind"
        dests.append((key, stt.destination, list(stt.messages.items()), list(stt.subscriptions.items())))
    scans = {fid: (s.batches, s.records, s.data_bytes, s.corrupt, s.bad_records, s.end)
             for fid, s in d.scans.items()}
    return {
        "scans": scans, "records": d.records, "bytes": d.bytes_scanned,
        "after": (d.records_after_last_update, d.replay_start), "last": d.last_record,
        "decode_errors": d.decode_errors, "unknown_fields": d.unknown_fields,
        "dests": dests, "counts": rp.counts, "unknown_removes": rp.unknown_removes,
        "ack_map": (rp.last_ack_map, rp.last_ack_map_blob), "audit": rp.last_audit,
        "skip": (rp.skip_file, rp.skipped_records),
        "transactions": [(k, dataclasses.asdict(t)) for k, t in rp.transactions.items()],
        "finished": [t.to_json() for t in rp.finished], "finished_total": rp.finished_total,
        "open": [(t.to_json(), t.ops) for t in d.open_transactions],
        "committed_by_tx_store": d.committed_by_tx_store,
    }


def assert_twins(directory: Path, checksums: bool = True) -> L.DirResult:
    c = L.load_directory(directory, use_native=True, checksums=checksums)
    py = L.load_directory(directory, use_native=False, checksums=checksums)
    sc, sp = snapshot(c), snapshot(py)
    for k in sp:
        assert sc[k] == sp[k], k
    return c


def test_fixture_stores_are_there():
    assert len(STORE_DIRS) >= 8


@pytest.mark.parametrize("directory", STORE_DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
@pytest.mark.parametrize("checksums", [True, False])
def test_fixture_directories_identical(directory, checksums):
    d = assert_twins(directory, checksums)
    assert d.records > 0


@pytest.mark.parametrize("ds", STORES)
def test_fixture_stores_verify_and_print_identical(ds, monkeypatch):
    from amqtool.engines.kahadb import print_document, verify_store

    store = detect(FIXTURES / ds)
    fc, sc = verify_store(store)
    dc = print_document(store, safe=True, pins=True)
    monkeypatch.setattr(native, "kahadb_scan_file", None)
    fp, sp = verify_store(store)
    dp = print_document(store, safe=True, pins=True)
    assert fc == fp and sc == sp and dc == dp
    assert sum(len(d["live"]) for s in dc["stores"] for d in s["destinations"]) == sc["live"]


def copy_store(ds: str, tmp_path: Path) -> Path:
    dst = tmp_path / ds
    shutil.copytree(FIXTURES / ds, dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst / "kahadb"


def _batches(data: bytes) -> list:
    return [e for e in jr.scan_file(data) if isinstance(e, jr.Batch)]


@pytest.mark.parametrize("damage", ["flip-data", "flip-header", "zero-hole", "truncate", "garbage-tail",
                                    "bad-tiling", "preallocated-chunks"])
def test_damaged_copies_identical(damage, tmp_path):
    root = copy_store("basic", tmp_path)
    log = root / "db-4.log"
    data = bytearray(log.read_bytes())
    b = _batches(bytes(data))
    if damage == "flip-data":
        data[b[2].data_offset + 40] ^= 0x5A
    elif damage == "flip-header":
        data[b[3].offset + 7] ^= 0x01
    elif damage == "zero-hole":
        data[b[1].offset:b[4].end] = bytes(b[4].end - b[1].offset)
    elif damage == "truncate":
        data = data[:b[5].offset + 40]
    elif damage == "garbage-tail":
        end = [e for e in jr.scan_file(bytes(data)) if isinstance(e, jr.End)][0].offset
        data[end:end + 300] = os.urandom(300)
    elif damage == "bad-tiling":
        # checksum off so the scan accepts the batch; the second record's type byte is wrong
        victim = next(x for x in b if x.size > 0)
        pos = victim.data_offset
        data[victim.offset + 20:victim.offset + 28] = bytes(8)
        data[pos + 4] = 7
    elif damage == "preallocated-chunks":
        end = [e for e in jr.scan_file(bytes(data)) if isinstance(e, jr.End)][0].offset
        data[end:] = bytes(len(data) - end)
        for off in range(end, len(data) - 5, 4096):
            data[off:off + 5] = jr.EOF_RECORD
    log.write_bytes(bytes(data))
    assert_twins(root)


# --- a hand-built journal: every rule, every hand-back ----------------------------------------------

def cmd(t: int, body: bytes) -> bytes:
    return bytes([t]) + encode_varint(len(body)) + body


def dest(t: int, name) -> bytes:
    return encode_field(1, t) + encode_field(2, name)


def txinfo(n: int) -> bytes:
    return encode_field(1, encode_field(1, "ID:conn-1") + encode_field(1, n))


def add(d: bytes, mid, *, prio: int | None = 4, tx: int | None = None, extra: bytes = b"") -> bytes:
    body = (encode_field(1, txinfo(tx)) if tx is not None else b"") + encode_field(2, d) + encode_field(3, mid)
    body += encode_field(4, b"\x00\x00\x00\x01\x17")
    if prio is not None:
        body += encode_field(5, prio)
    return cmd(1, body + encode_field(6, 1) + extra)


def remove(d: bytes, mid, *, sub=None, tx: int | None = None, extra: bytes = b"", ack: bytes = b"ack") -> bytes:
    body = (encode_field(1, txinfo(tx)) if tx is not None else b"") + encode_field(2, d) + encode_field(3, mid)
    body += encode_field(4, ack)
    if sub is not None:
        body += encode_field(5, sub)
    return cmd(2, body + extra)


def subscription(d: bytes, key: str, *, info: bytes | None = b"\x00", retro: bool = False) -> bytes:
    body = encode_field(1, d) + encode_field(2, key) + encode_field(3, int(retro))
    if info is not None:
        body += encode_field(4, info)
    return cmd(7, body)


Q, Q2 = dest(0, "q.one"), dest(0, "q.two")
T = dest(1, "t.events")
TQ = dest(2, "tmp.q")


def story() -> list[list[bytes]]:
    """Batches of commands: one journal that walks through every replay rule."""
    out = [
        [cmd(0, encode_field(1, "LOADED start"))],
        [add(Q, f"ID:m-{i}") for i in range(6)],
        [remove(Q, "ID:m-1"), remove(Q, "ID:m-1"), remove(Q2, "ID:never")],  # second one: unknown
        [subscription(T, "c1:s1"), add(T, "ID:t-0")],
        [subscription(T, "c2:s2"), add(T, "ID:t-1"), add(T, "ID:t-2")],
        [remove(T, "ID:t-1", sub="c1:s1"), remove(T, "ID:t-1", sub="c2:s2"), remove(T, "ID:t-2", sub="c1:s1")],
        [subscription(T, "c3:s3", retro=True), subscription(T, "c2:s2", info=None)],
        [subscription(T, "c1:s1", info=b"\x01")],  # re-written (GC moves it): keeps its start
        [add(dest(1, "t.nobody"), "ID:lost")],  # no subscription: not kept, destination created
        [add(Q, "ID:m-2", prio=9)],  # same id again: overwritten in place
        [cmd(10, encode_field(1, add(Q, "ID:m-3", prio=1)[2:]))],  # UPDATE of a fast-path message
        [add(Q2, "ID:x-1", tx=1), add(Q2, "ID:x-2", tx=1), remove(Q, "ID:m-4", tx=1)],
        [cmd(4, encode_field(1, txinfo(1)))],  # COMMIT
        [remove(Q2, "ID:x-1")],  # fast REMOVE of a message a commit added (a LiveMessage)
        [add(Q2, "ID:y-1", tx=2), cmd(5, encode_field(1, txinfo(2)))],  # ROLLBACK
        [add(Q2, "ID:z-1", tx=3)],  # stays open
        [add(TQ, "ID:tq-1"), cmd(6, encode_field(1, TQ)), remove(TQ, "ID:tq-1")],  # REMOVE_DESTINATION
        [add(TQ, "ID:tq-2")],  # re-created after the removal
        # hand-backs: unknown field, repeated fields, odd varints, bad UTF-8, bad destination, framing
        [add(Q, "ID:u-1", extra=encode_field(9, 1))],
        [add(Q, "ID:u-2", extra=encode_field(3, "ID:u-2b"))],
        [add(Q, "ID:u-3", prio=-1)],  # 10-byte varint
        [add(Q, b"ID:bad-\xff")],
        [remove(Q, "ID:m-5", sub=b"\xc3")],
        [add(b"\x08\x00", "ID:nodest")],
        [add(Q, "ID:u-4", prio=None)],
        [cmd(1, b"\x12")],  # truncated body
        [b"\x01\x05" + encode_field(3, "ID:short")],  # length prefix too long
        [b"\x63\x00"],  # unknown entry type
        [cmd(0, encode_field(1, b"bad \xfe trace"))],
        [cmd(0, encode_field(1, "a") + encode_field(1, "b"))],
        [cmd(8, encode_field(1, b"audit-1")), cmd(9, encode_field(1, b"ackmap-1"))],
        [cmd(9, b""), cmd(8, encode_field(1, b"audit-2") + encode_field(2, 5))],  # empty map; unknown field
        [add(Q, "ID:m-9", extra=bytes([0x80 | 9 << 3, 0x01, 0x00]))],  # two-byte tag
    ]
    return out


def write_journal(directory: Path, batches: list[list[bytes]], *, file_size: int | None = None,
                  checksum: bool = True, first_id: int = 1) -> list[Path]:
    """Batches into db-N.log files (a new file every ``file_size`` bytes), each ending with -qMa4."""
    directory.mkdir(parents=True, exist_ok=True)
    files, cur, fid = [], b"", first_id
    for payloads in batches:
        enc = jr.encode_batch(payloads, checksum=checksum)[:-5]
        if file_size and cur and len(cur) + len(enc) > file_size:
            files.append((fid, cur))
            cur, fid = b"", fid + 1
        cur += enc
    files.append((fid, cur))
    out = []
    for fid, data in files:
        p = directory / f"db-{fid}.log"
        p.write_bytes(data + jr.EOF_RECORD + bytes(64))
        out.append(p)
    return out


def test_story_identical(tmp_path):
    write_journal(tmp_path / "s", story(), file_size=700)
    d = assert_twins(tmp_path / "s")
    live = {k: list(s.messages) for k, s in d.replay.destinations.items()}
    assert live["0:q.one"][:4] == ["ID:m-0", "ID:m-2", "ID:m-3", "ID:m-5"]
    assert d.replay.destinations["0:q.one"].messages["ID:m-2"].priority == 9
    assert live["0:q.two"] == ["ID:x-2"]
    assert live["1:t.events"] == ["ID:t-0", "ID:t-2"]
    assert d.replay.destinations["1:t.events"].messages["ID:t-2"].waiting == {"c3:s3"}
    assert live["1:t.nobody"] == [] and live["2:tmp.q"] == ["ID:tq-2"]
    c1 = d.replay.destinations["1:t.events"].subscriptions["c1:s1"]
    assert c1.info == b"\x01" and c1.start < (c1.file_id, c1.offset)
    assert d.replay.unknown_removes == 3  # m-1 twice, q.two before it exists, tmp.q after its removal
    assert len(d.decode_errors) == 7 and len(d.unknown_fields) == 3
    assert [t.state for t in d.open_transactions] == ["open"]
    assert d.replay.last_ack_map_blob == b"" and d.replay.last_audit is not None


def test_last_ack_identical(tmp_path):
    """A durable subscription's last ack (MessageDatabase's LastAck): moved by each ack of a stored message,
    plain (C) or committed in a transaction (Python), not by the UNMATCHED marker (a zero-length ack) nor by
    an ack of an unknown message; a re-written subscription record resets it."""
    batches = [
        [subscription(T, "c1:s1"), subscription(T, "c2:s2"), subscription(T, "c3:s3")],
        [add(T, f"ID:t-{i}") for i in range(5)],
        [remove(T, "ID:t-0", sub="c1:s1"), remove(T, "ID:t-2", sub="c1:s1"), remove(T, "ID:t-1", sub="c1:s1")],
        [remove(T, "ID:t-0", sub="c2:s2"), remove(T, "ID:t-3", sub="c2:s2", ack=b"")],  # t-3 UNMATCHED
        [remove(T, "ID:gone", sub="c2:s2")],  # unknown message: nothing changes
        [remove(T, "ID:t-4", sub="c3:s3", tx=1), cmd(4, encode_field(1, txinfo(1)))],
        [remove(T, "ID:t-2", sub="c3:s3"), subscription(T, "c3:s3", info=b"\x01")],  # re-written: reset
    ]
    write_journal(tmp_path / "s", batches)
    d = assert_twins(tmp_path / "s")
    st = d.replay.destinations["1:t.events"]
    where = {mid: (m.file_id, m.offset) for mid, m in st.messages.items()}
    assert st.subscriptions["c1:s1"].last_ack == (*where["ID:t-1"], "ID:t-1")  # the last, not the highest
    assert st.subscriptions["c2:s2"].last_ack == (*where["ID:t-0"], "ID:t-0")
    assert st.subscriptions["c3:s3"].last_ack is None
    py = L.load_directory(tmp_path / "s", use_native=False)
    tx_only = [[subscription(T, "c1:s1"), add(T, "ID:a")], [remove(T, "ID:a", sub="c1:s1", tx=2),
                                                             cmd(4, encode_field(1, txinfo(2)))]]
    write_journal(tmp_path / "t", tx_only)
    d2 = assert_twins(tmp_path / "t")
    assert py.replay.destinations["1:t.events"].subscriptions["c1:s1"].last_ack[2] == "ID:t-1"
    assert d2.replay.destinations["1:t.events"].subscriptions["c1:s1"].last_ack[2] == "ID:a"


def _handed_back(monkeypatch) -> list:
    """Entry-type bytes of the records the C loop hands to Python."""
    handed = []
    orig = L._apply_record
    monkeypatch.setattr(L, "_apply_record", lambda res, fid, off, n, payload: (handed.append(payload[0] if len(payload) else None),
                                                                               orig(res, fid, off, n, payload)))
    return handed


def test_fast_path_takes_the_plain_records(monkeypatch, tmp_path):
    """The broker-written basic store never leaves the C loop; the hand-built story hands back exactly
    the records the fast path must not decide."""
    handed = _handed_back(monkeypatch)
    d = L.load_directory(FIXTURES / "basic" / "kahadb", use_native=True)
    assert d.records == 729 and handed == []
    write_journal(tmp_path / "s", story())
    L.load_directory(tmp_path / "s", use_native=True)
    # subscription removal; tx ADD x3 + tx REMOVE, COMMIT, ROLLBACK; REMOVE_DESTINATION; UPDATE; then the
    # hand-backs of the story's tail (unknown field, repeated id, 10-byte varint, bad UTF-8 x2, bad
    # destination, truncated, bad length, unknown type, bad trace, repeated trace, audit with extra field,
    # two-byte tag)
    tx_records = [1, 1, 2, 4, 1, 5, 1]
    tail = [1, 1, 1, 1, 2, 1, 1, 1, 0x63, 0, 0, 8, 1]
    assert sorted(handed) == sorted([7] + tx_records + [6, 10] + tail)


def test_story_with_rewritten_file_skip(tmp_path):
    """REWRITTEN_DATA_FILE whose source exists: the rest of that file is counted, not applied."""
    batches = story()
    rewrite = cmd(16, encode_field(1, 1) + encode_field(2, 0) + encode_field(3, 1))
    batches.insert(3, [rewrite, add(Q, "ID:skipped")])
    write_journal(tmp_path / "s", batches, file_size=700)
    d = assert_twins(tmp_path / "s")
    assert d.replay.skipped_records > 0


def test_story_checkpoint_counts(tmp_path):
    """records after lastUpdate: the index names a location in the middle of the journal."""
    files = write_journal(tmp_path / "s", story(), file_size=700)
    shutil.copy(FIXTURES / "basic" / "kahadb" / "db.data", tmp_path / "s" / "db.data")
    d = assert_twins(tmp_path / "s")
    assert len(files) > 3 and d.index.view is not None


def test_mkahadb_store_identical(monkeypatch):
    store = detect(FIXTURES / "mkahadb")
    rc = L.load_store(store, use_native=True)
    rpy = L.load_store(store, use_native=False)
    assert [snapshot(x) for x in rc] == [snapshot(x) for x in rpy]
    assert sum(x.committed_by_tx_store for x in rc) == sum(x.committed_by_tx_store for x in rpy)


# --- Hypothesis: mutated journals -------------------------------------------------------------------

SEED_DIR_BATCHES = story()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
       st.booleans())
def test_mutated_story_identical(tmp_path_factory, muts, checksum):
    d = tmp_path_factory.mktemp("mut")
    files = write_journal(d, SEED_DIR_BATCHES, file_size=1500, checksum=checksum)
    for pos, val in muts:
        f = files[pos % len(files)]
        data = bytearray(f.read_bytes())
        data[(pos // len(files)) % len(data)] = val
        f.write_bytes(bytes(data))
    assert_twins(d)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_fixture_identical(tmp_path_factory, muts):
    d = tmp_path_factory.mktemp("fx")
    src = FIXTURES / "tx" / "kahadb"
    for p in src.glob("db-*.log"):
        shutil.copy(p, d / p.name)
    files = sorted(d.glob("db-*.log"))
    for pos, val in muts:
        f = files[pos % len(files)]
        data = bytearray(f.read_bytes())
        if data:
            data[(pos // len(files)) % len(data)] = val
            f.write_bytes(bytes(data))
    assert_twins(d)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_random_files_identical(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("rnd")
    (d / "db-1.log").write_bytes(data)
    (d / "db-2.log").write_bytes(jr.encode_batch([add(Q, "ID:r")])[:-5] + data[:100])
    assert_twins(d)


# --- the checksum pass that runs a file ahead ------------------------------------------------------

@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/**/db-*.log")), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_check_batches_ends_at_the_logical_end(path):
    data = path.read_bytes()
    end = [e for e in jr.scan_file(data) if isinstance(e, jr.End)][0]
    assert native.kahadb_check_batches(data) == end.offset


def test_check_batches_stops_at_the_first_bad_batch():
    good = [jr.encode_batch([add(Q, f"ID:{i}")])[:-5] for i in range(4)]
    unchecked = jr.encode_batch([add(Q, "ID:nock")], checksum=False)[:-5]
    data = bytearray(b"".join(good[:2]) + unchecked + b"".join(good[2:]) + jr.EOF_RECORD)
    assert native.kahadb_check_batches(bytes(data)) == len(data) - 5  # checksum 0 is not checked
    victim = len(good[0]) + len(good[1]) + len(unchecked)
    data[victim + 40] ^= 1
    assert native.kahadb_check_batches(bytes(data)) == victim
    assert native.kahadb_check_batches(b"") == 0 and native.kahadb_check_batches(bytes(100)) == 0


# --- Adler-32 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 7, 31, 32, 33, 63, 64, 5551, 5552, 5553, 5552 * 3 + 17, 1 << 20])
def test_adler32_edges(n):
    for data in (os.urandom(n), b"\xff" * n, bytes(n)):
        assert native.adler32(data) == zlib.adler32(data)
        assert native.adler32(data, 0xFFF0FFF0) == zlib.adler32(data, 0xFFF0FFF0)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=20000), st.integers(0, 2**32 - 1))
def test_adler32_any(data, start):
    assert native.adler32(data, start) == zlib.adler32(data, start)


def test_python_fallback_when_disabled(monkeypatch, tmp_path):
    """AMQTOOL_NO_NATIVE=1 leaves kahadb_scan_file unset and load_directory on its Python loop."""
    import subprocess
    import sys

    write_journal(tmp_path / "s", story()[:5])
    code = ("from amqtool import native; from amqtool.engines.kahadb.load import load_directory; "
            "from pathlib import Path; assert native.kahadb_scan_file is None; "
            f"print(load_directory(Path({str(tmp_path / 's')!r})).records)")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, AMQTOOL_NO_NATIVE="1"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(L.load_directory(tmp_path / "s").records)
