"""The C record scanner (amqtool._native.scan_records) against the Python reference (scan_records_py).

Fixture journals written by real Artemis code, damaged copies of them, and random bytes: both
implementations must return the very same tuples and the same "marked as data file" flag. The twin tests
at the bottom run one set of expectations against each implementation (the C twin is skipped when the
extension is not built).
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.formats.artemis import records as R
from tests.support import ARTEMIS

FIXTURES = ARTEMIS
JOURNAL_FILES = sorted(FIXTURES.glob("oracle/*/journal/*")) + sorted(FIXTURES.glob("public/**/*.bindings"))

needs_c = pytest.mark.skipif(not native.HAVE_NATIVE, reason=f"C extension not built: {native.NATIVE_REASON}")


def _c_scan():
    from amqtool import _native

    return _native.scan_records


IMPLS = [
    pytest.param(lambda: R.scan_records_py, id="python"),
    pytest.param(_c_scan, id="c", marks=needs_c),
]


def _header(buf) -> R.FileHeader:
    return R.decode_header(buf)


def test_fixture_files_are_there():
    assert len(JOURNAL_FILES) >= 40


@needs_c
@pytest.mark.parametrize("path", JOURNAL_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_c_matches_python_on_fixture(path):
    data = path.read_bytes()
    h = _header(data)
    c = _c_scan()
    for check_tag in (True, False):
        expected = R.scan_records_py(data, h.tag, h.version, check_tag)
        assert c(data, h.tag, h.version, check_tag, 16) == expected
    # any buffer: an mmap of the file, as the load engine passes it
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert c(mm, h.tag, h.version, True, 16) == R.scan_records_py(data, h.tag, h.version, True)


@needs_c
def test_c_scanner_finds_the_manifest_records():
    """01_simple_adds: 260 adds, ids 1..260, body lengths as the manifest's operations say."""
    scen = FIXTURES / "oracle" / "01_simple_adds"
    manifest = json.loads((scen / "manifest.json").read_text())
    lengths = {op["id"]: op["len"] for op in manifest["operations"] if op.get("op") == "add"}
    found = {}
    for f in sorted((scen / "journal").iterdir()):
        data = f.read_bytes()
        h = _header(data)
        recs, _ = _c_scan()(data, h.tag, h.version, True, 16)
        for rec in recs:
            assert rec[0] == R.ADD
            found[rec[5]] = rec[7]
    assert found == lengths
    assert sorted(found) == list(range(1, 261))


def _mutations(data: bytes, seed: int) -> list[bytes]:
    import random

    rnd = random.Random(seed)
    out = [data[: rnd.randrange(16, len(data))]]  # torn tail
    flipped = bytearray(data)
    for _ in range(20):
        i = rnd.randrange(16, len(data))
        flipped[i] ^= 1 << rnd.randrange(8)
    out.append(bytes(flipped))
    zeroed = bytearray(data)
    i, k = rnd.randrange(16, len(data)), rnd.randrange(1, 4096)
    zeroed[i:i + k] = bytes(len(zeroed[i:i + k]))  # a zeroed stretch, as a torn AIO write leaves
    out.append(bytes(zeroed))
    return out


@needs_c
@pytest.mark.parametrize("path", JOURNAL_FILES[::3], ids=lambda p: p.name)
def test_c_matches_python_on_damaged_fixture(path):
    data = path.read_bytes()
    h = _header(data)
    for seed in range(3):
        for damaged in _mutations(data, seed):
            for check_tag in (True, False):
                assert _c_scan()(damaged, h.tag, h.version, check_tag, 16) == R.scan_records_py(
                    damaged, h.tag, h.version, check_tag), (path.name, seed)


# Bytes that look like records often: type bytes, the tag, and plausible sizes.
_TAG = 7
_chunks = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\x00" * 16, b"J" * 9]),
    st.builds(lambda t, body, uid: R.Record(type=t, tag=_TAG, tx_id=5, record_id=uid,
                                            body=body if t in R.WITH_BODY else b"",
                                            number_of_records=1 if t in (R.PREPARE, R.COMMIT) else None,
                                            extra=b"x" if t == R.PREPARE else None,
                                            user_record_type=3).encode(),
              st.sampled_from(sorted(R.RECORD_TYPE_NAMES)), st.binary(max_size=20), st.integers(0, 2**40)),
    st.integers(10, 19).map(lambda t: bytes([t]) + struct.pack(">i", _TAG)),
)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_chunks, max_size=30), version=st.sampled_from([1, 2]), check_tag=st.booleans(),
       start=st.integers(-2, 40))
def test_c_matches_python_on_random_bytes(parts, version, check_tag, start):
    data = struct.pack(">iiq", version, 0, _TAG) + b"".join(parts)
    assert _c_scan()(data, _TAG, version, check_tag, start) == R.scan_records_py(data, _TAG, version, check_tag,
                                                                                 start)


@needs_c
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600), version=st.integers(0, 3))
def test_c_matches_python_on_noise(data, version):
    for tag in (0, _TAG, 0x7FFFFFFF):
        assert _c_scan()(data, tag, version, True, 0) == R.scan_records_py(data, tag, version, True, 0)


# --- twin tests: the same expectations for both implementations ------------------------------------


def _file(records: list[R.Record], version: int = 2, tag: int = _TAG, gap: bytes = b"") -> bytes:
    return struct.pack(">iiq", version, 0, tag) + gap.join(r.encode(version) for r in records) + bytes(64)


@pytest.mark.parametrize("impl", IMPLS)
def test_twin_every_type_round_trips(impl):
    scan = impl()
    recs = [
        R.Record(R.ADD, _TAG, record_id=1, user_record_type=21, body=b"abc"),
        R.Record(R.UPDATE, _TAG, compact_count=-3, record_id=1, user_record_type=21, body=b"d"),
        R.Record(R.ADD_TX, _TAG, tx_id=9, record_id=2, user_record_type=45, body=b""),
        R.Record(R.UPDATE_TX, _TAG, tx_id=9, record_id=2, user_record_type=45, body=b"zz"),
        R.Record(R.DELETE_TX, _TAG, tx_id=9, record_id=2),
        R.Record(R.PREPARE, _TAG, tx_id=9, number_of_records=3, extra=b"xid"),
        R.Record(R.COMMIT, _TAG, tx_id=9, number_of_records=3),
        R.Record(R.ROLLBACK, _TAG, tx_id=10),
        R.Record(R.DELETE, _TAG, record_id=1),
        R.Record(R.EVENT, _TAG, record_id=77, user_record_type=1, body=b"e"),
    ]
    for version in (1, 2):
        data = _file(recs, version, gap=b"\x00\x00J")
        out, marked = scan(data, _TAG, version, True, 16)
        assert [t[0] for t in out] == [r.type for r in recs]
        assert not marked
        for t, r in zip(out, recs):
            assert t[2] == r.size(version)
            assert t[3] == (r.compact_count if version >= 2 else 0)
            assert t[4] == (r.tx_id if r.tx_id is not None else -1)
            assert t[5] == (r.record_id if r.record_id is not None else -1)
            assert t[6] == r.user_record_type
            assert t[7] == len(r.body)
            assert t[8] == (r.number_of_records if r.number_of_records is not None else -1)
            assert t[9] == len(r.extra or b"")
            assert R.record_from_tuple(data, t, version) == (r if version >= 2 else replace(r, compact_count=0))


@pytest.mark.parametrize("impl", IMPLS)
def test_twin_tag_mismatch_skipped_unless_reclaimed(impl):
    scan = impl()
    old = R.Record(R.ADD, 3, record_id=1, user_record_type=1, body=b"old").encode()
    new = R.Record(R.ADD, _TAG, record_id=2, user_record_type=1, body=b"new").encode()
    data = struct.pack(">iiq", 2, 0, _TAG) + old + new
    out, _ = scan(data, _TAG, 2, True, 16)
    assert [(t[1], t[5]) for t in out] == [(16 + len(old), 2)]
    out, _ = scan(data, _TAG, 2, False, 16)
    assert [t[5] for t in out] == [1, 2]


@pytest.mark.parametrize("impl", IMPLS)
def test_twin_torn_tail_marks_data_file(impl):
    scan = impl()
    good = R.Record(R.ADD, _TAG, record_id=1, user_record_type=1, body=b"x" * 10).encode()
    torn = R.Record(R.ADD, _TAG, record_id=2, user_record_type=1, body=b"y" * 10).encode()[:-3]
    data = struct.pack(">iiq", 2, 0, _TAG) + good + torn
    out, marked = scan(data, _TAG, 2, True, 16)
    assert [t[5] for t in out] == [1]
    assert marked
    # a bad checkSize: also marked, and a record after the damage is still found
    bad = bytearray(R.Record(R.DELETE, _TAG, record_id=5).encode())
    bad[-1] ^= 0xFF
    data = struct.pack(">iiq", 2, 0, _TAG) + bytes(bad) + good
    out, marked = scan(data, _TAG, 2, True, 16)
    assert [t[5] for t in out] == [1] and marked


@pytest.mark.parametrize("impl", IMPLS)
def test_twin_zero_file_and_short_buffers(impl):
    scan = impl()
    assert scan(bytes(16 + 100_000), _TAG, 2, True, 16) == ([], False)
    assert scan(b"", _TAG, 2, True, 16) == ([], False)
    assert scan(bytes(16) + b"\x0b\x00", _TAG, 2, True, 16) == ([], True)  # no room for the tag


def test_doorway_uses_fallback_when_native_disabled():
    """AMQTOOL_NO_NATIVE=1: amqtool.native reports the extension absent and scans in Python."""
    code = (
        "from amqtool import native; import struct;"
        "from amqtool.formats.artemis.records import Record;"
        "d = struct.pack('>iiq', 2, 0, 7) + Record(16, 7, record_id=4).encode();"
        "print(native.HAVE_NATIVE, native.HAVE_AIO, native.scan_records(d, 7, 2)[0][0][5])"
    )
    env = dict(os.environ, AMQTOOL_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "4"]


# --- checksize_ends: where a record could end (retyped_tail.py tries every end of a damaged tail) ----------

def _c_ends():
    from amqtool import _native

    return _native.checksize_ends


ENDS_IMPLS = [
    pytest.param(lambda: R.checksize_ends_py, id="python"),
    pytest.param(_c_ends, id="c", marks=needs_c),
]


@pytest.mark.parametrize("impl", ENDS_IMPLS)
def test_twin_checksize_ends_finds_each_record_end(impl):
    ends = impl()
    rec = R.Record(R.ADD, _TAG, record_id=9, user_record_type=1, body=b"z" * 40).encode()
    buf = rec + bytes(300)
    assert ends(buf, 10) == [len(rec)]
    # a checkSize past 64 KiB (three significant bytes) and one at the very end of the buffer
    big = bytearray(70_000)
    big[-4:] = (70_000).to_bytes(4, "big")
    big[66_000 - 4:66_000] = (66_000).to_bytes(4, "big")
    assert ends(bytes(big), 10) == [66_000, 70_000]
    assert ends(bytes(big), 66_001) == [70_000]
    assert ends(b"", 10) == [] and ends(bytes(9), 10) == []
    assert ends(memoryview(bytes(big)), 10) == [66_000, 70_000]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400), smallest=st.integers(0, 40), plant=st.lists(st.integers(4, 400), max_size=6))
def test_c_checksize_ends_matches_python(data, smallest, plant):
    """Random bytes with some ends planted (their checkSize written at end - 4): both give the same list."""
    if not native.HAVE_NATIVE:
        pytest.skip(native.NATIVE_REASON)
    buf = bytearray(data)
    for e in plant:
        if e <= len(buf):
            buf[e - 4:e] = e.to_bytes(4, "big")
    assert _c_ends()(bytes(buf), smallest) == R.checksize_ends_py(bytes(buf), smallest)
    assert native.checksize_ends(bytes(buf), smallest) == R.checksize_ends_py(bytes(buf), smallest)
