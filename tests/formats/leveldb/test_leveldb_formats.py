"""The LevelDB store's byte formats on the real fixture (written by LevelDBStore with iq80 LevelDB) and on
bytes built here: log records and their CRC-32, the UOW_END chain, hawtbuf payloads (including how the
broker's replay misreads REMOVE_COLLECTION), LevelDB tables (footer, blocks, restart points, masked CRC-32C,
snappy), the LevelDB log and write batches, the MANIFEST. Property tests: any bytes give records/Stops or a
FormatError, nothing else."""
from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import encode_varint
from amqtool.formats.leveldb import codecs, dblog, manifest, table
from amqtool.formats.leveldb import recordlog as L
from amqtool.formats.leveldb import records as R
from tests.engines.leveldb.stores import FIXTURE

STORE = FIXTURE / "store"
pytestmark = pytest.mark.skipif(not STORE.is_dir(), reason="LevelDB fixture missing")


def rec(kind: int, data: bytes, crc: int | None = None) -> bytes:
    c = zlib.crc32(data) if crc is None else crc
    return struct.pack(">bbII", 0x2A, kind, c, len(data)) + data


def test_fixture_log_records_and_units():
    buf = (STORE / "0000000000000000.log").read_bytes()
    items = list(L.iter_records(buf))
    recs = [r for r in items if isinstance(r, L.Record)]
    assert all(r.crc_ok for r in recs) and len(items) == len(recs)  # the file ends exactly at its last record
    assert recs[0].kind == L.ADD_COLLECTION and R.decode_collection(recs[0].data).meta == b"topic://T.1"
    assert recs[1].kind == L.UOW_END and recs[1].uow_start() == 0
    assert sum(1 for r in recs if r.kind == L.DATA) == 15  # of the store's 41 (verify: dataRecords)
    last = (STORE / "0000000000010823.log").read_bytes()
    end, scan_end, cut = L.complete_end(last, 0x10823)
    assert (end, cut) == (30754, 0) and scan_end == 30754  # then the zero-filled preallocated rest


def test_complete_end_drops_an_unfinished_unit_and_a_broken_chain():
    a = rec(L.TRACE, b"x") + rec(L.UOW_END, struct.pack(">q", 100))
    b = rec(L.ADD_ENTRY, b"\x08\x01")
    assert L.complete_end(a + b + b"\0" * 32, 100) == (len(a), len(a + b), 1)
    bad = a + rec(L.TRACE, b"y") + rec(L.UOW_END, struct.pack(">q", 7))  # names another start
    assert L.complete_end(bad, 100)[0] == len(a)
    flipped = bytearray(a)
    flipped[11] ^= 1  # the TRACE's data: its CRC no longer matches
    assert L.complete_end(bytes(flipped), 100)[0] == 0


def test_hawtbuf_records_and_the_remove_collection_misreading():
    e = R.decode_entry(b"\x08\x04\x12\x08" + struct.pack(">q", 6) + b"\x18\x90\x03\x20\x64")
    assert (e.collection_key, R.seq_of(e.entry_key), e.value_location, e.value_length) == (4, 6, 400, 100)
    assert R.decode_index_entry(b"\x18\x90\x03\x20\x64") == (400, 100, None)
    assert R.decode_index_entry(b"\x20\x64\x18\x90\x03\x32\x02\x01\x02") == (400, 100, b"\x01\x02")
    # REMOVE_COLLECTION's payload is a bare varint; the replay parses it as CollectionKey
    for key in (1, 2, 3, 5, 8, 9, 200):
        with pytest.raises(FormatError):
            R.collection_key_of_remove(encode_varint(key))
    assert R.collection_key_of_remove(b"\x04") == 0 and R.collection_key_of_remove(b"\x0c") == 0
    assert R.decode_vlong(b"\xc8\x01") == 200
    with pytest.raises(FormatError):
        R.decode_entry(b"\x12\x09abc")  # a length running past the record


def test_fixture_index_table_log_and_manifest():
    snap = STORE / "0000000000018045.index"
    v = manifest.read_manifest((snap / "MANIFEST-000002").read_bytes())
    assert (v.comparator, v.log_number, v.next_file, v.files, v.problems) == \
        ("leveldb.BytewiseComparator", 3, 4, {}, [])
    lr = dblog.read_log((snap / "000003.log").read_bytes())
    assert len(lr.records) == 69 and lr.problems == [] and lr.tail is None
    ops = [op for _off, r in lr.records for op in dblog.iter_batch(r)]
    assert ops[0].key == b":dirty" and ops[0].value == b"true" and ops[0].sequence == 1
    sst = (snap / "000005.sst").read_bytes()
    t = table.read_table(sst)
    assert len(t.entries) == 72 and t.problems == [] and [b.compression for b in t.blocks] == [table.SNAPPY]
    keys = [e.user_key for e in t.entries]
    assert keys == sorted(keys) and b"c" + struct.pack(">q", 4) in keys
    broken = bytearray(sst)
    broken[20] ^= 0x10
    t2 = table.read_table(bytes(broken))  # reported, and read anyway (the store reads without checksums)
    assert "checksum" in t2.problems[0][1] and len(t2.entries) == 72
    with pytest.raises(FormatError):
        table.read_footer(sst[:-1])


def _block(entries, restart_every=2):
    out, restarts, prev = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        shared = 0
        if i % restart_every:
            while shared < min(len(k), len(prev)) and k[shared] == prev[shared]:
                shared += 1
        else:
            restarts.append(len(out))
        out += bytes([shared, len(k) - shared, len(v)]) + k[shared:] + v
        prev = k
    for r in restarts:
        out += struct.pack("<I", r)
    return bytes(out + struct.pack("<I", len(restarts)))


def _table(entries, compress=False):
    data = _block([(k + struct.pack("<Q", (i + 1) << 8 | 1), v) for i, (k, v) in enumerate(entries)])
    body, ctype = (codecs.snappy_compress(data), 1) if compress else (data, 0)
    trailer = bytes([ctype]) + struct.pack("<I", codecs.mask(codecs.crc32c(body + bytes([ctype]))))
    handle = bytes([0, len(body)])
    index = _block([(b"\xff" * 9, handle)], 1)
    ioff = len(body) + 5
    itrailer = b"\0" + struct.pack("<I", codecs.mask(codecs.crc32c(index + b"\0")))
    footer = bytes([0, 0]) + bytes([ioff, len(index)])
    footer += b"\0" * (40 - len(footer)) + struct.pack("<Q", table.MAGIC)
    return body + trailer + index + itrailer + footer


@pytest.mark.parametrize("compress", [False, True])
def test_tables_without_and_with_snappy(compress):
    entries = [(b"apple", b"1"), (b"apricot", b"2"), (b"banana", b"3")]
    t = table.read_table(_table(entries, compress))
    assert [(e.user_key, e.value) for e in t.entries] == entries
    assert t.blocks[0].compression == (1 if compress else 0)


def test_masked_crc32c_round_trip():
    for v in (0, 1, 0xFFFFFFFF, 0x12345678):
        assert codecs.unmask(codecs.mask(v)) == v
    assert codecs.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_records_or_a_stop(data):
    for item in L.iter_records(data):
        assert isinstance(item, (L.Record, L.Stop))
    L.complete_end(data, 0)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_format_error(data):
    for fn in (R.decode_entry, R.decode_collection, R.decode_subscription, R.collection_key_of_remove,
               table.read_table, manifest.read_manifest, R.decode_index_entry):
        try:
            fn(data)
        except FormatError:
            pass
    lr = dblog.read_log(data)
    for _off, r in lr.records:
        try:
            list(dblog.iter_batch(r))
        except FormatError:
            pass
