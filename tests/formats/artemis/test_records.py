"""The journal record codec and scanner against real journals written by Artemis."""
from __future__ import annotations

import struct

import pytest

from amqtool.errors import FormatError
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    FileHeader,
    Record,
    decode_header,
    decode_record,
    record_from_tuple,
    scan_records_py,
)
from tests.support import ORACLE, PUBLIC, oracle_manifest

JOURNAL_FILES = sorted(ORACLE.glob("*/journal/*.amq")) + sorted(ORACLE.glob("*/journal/*.bindings")) + \
    sorted(PUBLIC.glob("**/*.bindings"))


@pytest.mark.parametrize("path", JOURNAL_FILES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_record_round_trips(path):
    data = path.read_bytes()
    header = decode_header(data)
    assert header.encode() == data[:16]
    records, _ = scan_records_py(data, header.tag, header.version)
    for rec in records:
        decoded = record_from_tuple(data, rec, header.version)
        assert decoded.encode(header.version) == data[rec[1]:rec[1] + rec[2]]
        assert decode_record(data, rec[1], header.version) == decoded


def test_header_layout_is_version_user_version_file_id():
    h = decode_header(struct.pack(">iiq", 2, 0, 0x1_0000_0005))
    assert (h.version, h.user_version, h.file_id) == (2, 0, 0x1_0000_0005)
    assert h.tag == 5  # low 31 bits


@pytest.mark.parametrize("data", [b"", b"\x00" * 15, struct.pack(">iiq", 3, 0, 1), struct.pack(">iiq", 0, 0, 1)])
def test_bad_headers_raise_format_error(data):
    with pytest.raises(FormatError):
        decode_header(data)


def _file(version, records, size=4096, tag=7):
    body = b"".join(r.encode(version) for r in records)
    return FileHeader(version, 0, tag).encode() + body + bytes(size - 16 - len(body))


ALL_TYPES = [
    Record(ADD, 7, 0, record_id=1, user_record_type=101, body=b"abc"),
    Record(UPDATE, 7, 3, record_id=1, user_record_type=102, body=b""),
    Record(ADD_TX, 7, 0, tx_id=9, record_id=2, user_record_type=45, body=b"x" * 100),
    Record(DELETE_TX, 7, 0, tx_id=9, record_id=1, body=b"dd"),
    Record(PREPARE, 7, 0, tx_id=9, number_of_records=2, extra=b"xid"),
    Record(COMMIT, 7, 0, tx_id=9, number_of_records=2),
    Record(ROLLBACK, 7, 0, tx_id=10),
    Record(DELETE, 7, 0, record_id=2),
]


@pytest.mark.parametrize("version", [1, 2])
def test_both_format_versions_scan_back(version):
    data = _file(version, ALL_TYPES)
    records, marked = scan_records_py(data, 7, version)
    got = [record_from_tuple(data, r, version) for r in records]
    expected = [r if version == 2 else Record(**{**r.__dict__, "compact_count": 0}) if False else r for r in ALL_TYPES]
    if version == 1:
        expected = [Record(r.type, r.tag, 0, r.tx_id, r.record_id, r.user_record_type, r.body,
                           r.number_of_records, r.extra) for r in ALL_TYPES]
    assert got == expected
    assert not marked
    # version-1 records are one byte shorter (no compactCount)
    assert records[0][2] == (23 if version == 2 else 22) + 3


def test_scanner_skips_foreign_tags_and_resumes_after_damage():
    a = Record(ADD, 7, 0, record_id=1, user_record_type=1, body=b"a" * 10).encode()
    stale = Record(ADD, 6, 0, record_id=99, user_record_type=1, body=b"s" * 10).encode()
    torn = Record(ADD, 7, 0, record_id=2, user_record_type=1, body=b"t" * 40).encode()[:-5]
    b = Record(ADD, 7, 0, record_id=3, user_record_type=1, body=b"b" * 10).encode()
    data = FileHeader(2, 0, 7).encode() + a + stale + torn + b + bytes(64)
    records, marked = scan_records_py(data, 7, 2)
    assert [r[5] for r in records] == [1, 3]  # stale skipped by tag, torn record skipped byte by byte
    assert marked  # the torn candidate failed its checkSize: Artemis marks the file as a data file
    records, _ = scan_records_py(data, 7, 2, check_tag=False)
    assert [r[5] for r in records] == [1, 99, 3]


def test_filler_is_skipped_zero_and_J():
    a = Record(ADD, 7, 0, record_id=1, user_record_type=1, body=b"a").encode()
    data = FileHeader(2, 0, 7).encode() + b"J" * 100 + a + b"\x00" * 50 + a + b"J" * 30
    records, marked = scan_records_py(data, 7, 2)
    assert [r[1] for r in records] == [116, 116 + len(a) + 50]
    assert not marked


def test_prepare_always_writes_extra_length():
    rec = Record(PREPARE, 1, 0, tx_id=5, number_of_records=0, extra=None)
    data = rec.encode()
    assert len(data) == 26 and struct.unpack(">i", data[18:22])[0] == 0


def test_torn_tail_record_offset_matches_manifest():
    m = oracle_manifest("05a_torn_tail_zeroed")
    corrupt = next(o for o in m["operations"] if o["op"] == "corrupt")
    last_add = next(o for o in m["operations"] if o.get("op") == "add" and o["id"] == corrupt["lastRecordId"])
    data = (ORACLE / "05a_torn_tail_zeroed" / "journal" / corrupt["file"]).read_bytes()
    h = decode_header(data)
    records, _ = scan_records_py(data, h.tag, h.version)
    # The torn record (23 + payload bytes, ending at lastRecordEnd) is not accepted; the one before ends
    # exactly where it starts.
    torn_start = corrupt["lastRecordEnd"] - (23 + last_add["len"])
    assert records[-1][1] + records[-1][2] == torn_start
    assert all(r[5] != corrupt["lastRecordId"] for r in records)
