"""The lenient decoder of skipped journal bytes (amqtool.engines.artemis.recover.damage) on hand-built
records: what it names, and what it must not name."""
from __future__ import annotations

import struct

from amqtool.engines.artemis.recover.damage import decode_region


def add(tag: int, rid: int, body: bytes, utype: int = 45, check: int | None = None) -> bytes:
    size = 23 + len(body)
    return struct.pack(">BibqiB", 11, tag, 0, rid, len(body), utype) + body + struct.pack(">i", size if check is None else check)


def delete(tag: int, rid: int) -> bytes:
    return struct.pack(">Bibqi", 16, tag, 0, rid, 18)


def region(buf: bytes, where: str = "middle"):
    return decode_region(lambda off, n: buf[off:off + n], "messages", "f", 0, len(buf), 7, 2, where=where)


def test_consecutive_damaged_records_are_each_named():
    buf = add(7, 1, b"a" * 40, check=0) + add(7, 2, b"b" * 30, check=1) + delete(7, 3)[:-4] + b"\xff\xff\xff\xff"
    got = region(buf)
    assert [(r.record_id, r.offset, r.length, r.decoded) for r in got] == [(1, 0, 63, True), (2, 63, 53, True),
                                                                          (3, 116, 18, True)]


def test_damaged_size_field_is_resolved_by_the_trailer():
    rec = bytearray(add(7, 9, b"x" * 100))
    rec[16] ^= 0x01  # body size +/- 256
    got = region(bytes(rec) + add(7, 10, b"y" * 5, check=0))
    assert [(r.record_id, r.length) for r in got] == [(9, 123), (10, 28)]


def test_queue_of_a_damaged_ref():
    ref = struct.pack(">BibqiB", 12, 7, 0, 42, 8, 32) + struct.pack(">q", 11) + struct.pack(">i", 0)
    (r,) = region(ref)
    assert (r.record_type, r.message_id, r.queue_id) == (12, 42, 11)


def test_tail_stops_where_an_earlier_use_of_the_file_begins():
    torn = add(7, 5, b"t" * 20, check=0)
    stale = add(3, 100, b"s" * 50) + add(3, 101, b"s" * 60)
    got = region(torn + stale, where="tail")
    assert [(r.record_id, r.length) for r in got] == [(5, 43)]
    # the same bytes between two records of this file are damage (a reused file is written from its start)
    assert [r.record_id for r in region(torn + stale)] == [5, 100, 101]


def test_undecodable_bytes_are_one_region():
    (r,) = region(b"\x01\x02garbage" * 10)
    assert (r.decoded, r.offset, r.length, r.record_id) == (False, 0, 90, None)


def test_zeros_between_two_records_are_one_lost_region():
    # zeros the loaders report between two records (load.file_gaps: records wiped whole) were skipped as filler:
    # recover listed nothing lost and 0 bytes skipped for demo-s1's message 80 with its references zeroed
    (r,) = region(bytes(93))
    assert (r.decoded, r.offset, r.length, r.where) == (False, 0, 93, "middle")
    assert region(bytes(93), where="tail") == []  # after a file's last record, zeros are its unused end
