"""What was lost where: the bytes of a journal file that the broker's scan skips, read back as records where
their framing can still be decoded.

``JournalImpl.readJournalFile`` accepts a record only when its type byte is 10..19, its tag equals the file's
(``JournalFileImpl.getRecordID``), every size field stays inside the file and the trailing checkSize equals the
record's size; anything else is skipped one byte at a time until the next record that passes every check
(artemis-journal-format.md §1.5). The load therefore already resynchronises past damage in the same file, and
each file is scanned on its own, so the files after a damaged one are read whole. What the broker does not do
is say what it skipped: this module does, from the regions :class:`~amqtool.engines.artemis.load.FileGaps`
reports (non-filler bytes between accepted records, and after the last one).

A skipped region is decoded leniently, record by record from its first byte:

* type byte 10..19 and the file's tag: the header fields are trusted (type, compactCount, transaction id,
  record id, body size, user record type); the damage is further on (size fields or checkSize);
* a damaged type byte followed by the file's tag: the type is the one (among 11..19) whose computed size
  meets a matching checkSize (when ADD and UPDATE, which share one layout, both fit, the fields are known and
  the type is reported as unknown);
* a damaged tag with a valid type: trusted only when the computed size meets a matching checkSize;
* anything else (a zeroed header, the middle of a body): an undecodable region, reported by offset and length.

When a size field is damaged, the record's end is the first trailer that agrees with its own distance from
the record's start (the checkSize still holds the true size). A decoded record whose size fits in the region
is stepped over and decoding goes on after it (several
records damaged in a row); filler between them is skipped. Journal bodies carry no checksum (Artemis has none
beyond tag and checkSize), so damage confined to a body is invisible to the broker and to this module alike.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from amqtool.formats.artemis.records import (
    DELETE_TX,
    PREPARE,
    RECORD_TYPE_NAMES,
    TRANSACTIONAL,
    WITH_BODY,
    WITHOUT_ID,
    fixed_size,
)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NOT_FILLER = re.compile(rb"[^\x00J]")
MAX_REGION_READ = 4 << 20  # bytes of one skipped region read at once; the rest is reported as one block

# JournalRecordIds whose record id is a message id, and those whose body starts with the queue id
MESSAGE_TYPES = frozenset({30, 31, 45})  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
QUEUE_REF_TYPES = frozenset({32, 33, 34, 36})  # ADD_REF, ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT, SET_SCHEDULED_DELIVERY_TIME


@dataclass
class LostRecord:
    """One record (or undecodable region) the broker's scan skips."""

    journal: str
    file: str
    offset: int
    length: int
    decoded: bool = False
    record_type: int | None = None
    record_id: int | None = None
    tx_id: int | None = None
    user_record_type: int | None = None
    message_id: int | None = None
    queue_id: int | None = None
    queue: str | None = None
    where: str = "middle"  # middle | tail (after the file's last record) | event (an accepted EVENT record)
    lost: bool = True  # False: listed as doubtful (an EVENT record, which the load ignores by design)
    queue_ids: list[int] | None = None  # a message record: the queues of its surviving ADD_REF records
    queues: list[str | None] | None = None  # their names (None: no binding of that id)
    damaged_field: str | None = None  # read back by reconstruction: the one field found wrong

    def to_json(self) -> dict:
        return {
            "kind": "record", "journal": self.journal, "file": self.file, "offset": self.offset,
            "length": self.length, "decoded": self.decoded,
            "recordType": RECORD_TYPE_NAMES.get(self.record_type) if self.record_type is not None else None,
            "recordId": self.record_id, "txId": self.tx_id, "userRecordType": self.user_record_type,
            "messageId": self.message_id, "queueId": self.queue_id, "queue": self.queue,
            "queueIds": self.queue_ids, "queues": self.queues, "damagedField": self.damaged_field,
            "where": self.where, "lost": self.lost,
        }


def _fields(buf: bytes, t: int, version: int):
    """(cc, tx_id, rid, body_len, utype, extra_len, header_len) of a record of type ``t`` at ``buf[0]``, or
    None when ``buf`` is too short for its fixed fields."""
    p = 5
    cc = 0
    if version >= 2:
        if len(buf) < p + 1:
            return None
        p += 1
    tx_id = rid = None
    if t in TRANSACTIONAL:
        if len(buf) < p + 8:
            return None
        tx_id = _I64.unpack_from(buf, p)[0]
        p += 8
    if t not in WITHOUT_ID:
        if len(buf) < p + 8:
            return None
        rid = _I64.unpack_from(buf, p)[0]
        p += 8
    body_len = 0
    utype = None
    if t in WITH_BODY:
        if len(buf) < p + 4:
            return None
        body_len = _I32.unpack_from(buf, p)[0]
        p += 4
        if t != DELETE_TX:
            if len(buf) < p + 1:
                return None
            utype = buf[p]
            p += 1
    extra_len = 0
    if t == PREPARE:
        if len(buf) < p + 8:
            return None
        extra_len = _I32.unpack_from(buf, p + 4)[0]
    return cc, tx_id, rid, body_len, utype, extra_len, p


def _total(t: int, version: int, body_len: int, extra_len: int) -> int | None:
    if body_len < 0 or extra_len < 0:
        return None
    return fixed_size(t, version) + body_len + extra_len


def _check_matches(buf: bytes, total: int | None) -> bool:
    return total is not None and total >= 4 and len(buf) >= total and _I32.unpack_from(buf, total - 4)[0] == total


def decode_one(buf: bytes, tag: int, version: int):
    """Leniently decode the record starting at ``buf[0]`` (``buf``: the rest of the skipped region). Returns
    ``(type, fields, total, tag_ok)`` or None when nothing can be said."""
    if len(buf) < 5:
        return None
    t = buf[0]
    tag_ok = _I32.unpack_from(buf, 1)[0] == tag
    if 10 <= t <= 19:
        f = _fields(buf, t, version)
        if f is None:
            return (t, None, None, tag_ok) if tag_ok else None
        total = _total(t, version, f[3], f[5])
        if tag_ok or _check_matches(buf, total):
            return t, f, total, tag_ok
        return None
    if not tag_ok:
        return None
    found = []
    for cand in range(11, 20):  # EVENT (10) is never a live record: not worth guessing
        f = _fields(buf, cand, version)
        if f is None:
            continue
        total = _total(cand, version, f[3], f[5])
        if _check_matches(buf, total):
            found.append((cand, f, total, True))
    if not found:
        return None
    if len(found) > 1:
        # ADD/UPDATE (and ADD_TX/UPDATE_TX) share one layout: the fields are known, the type is not
        if len({(f[1], f[2], f[3], f[4], total) for _c, f, total, _t in found}) != 1:
            return None
        return None, found[0][1], found[0][2], True
    return found[0]


def _foreign_follows(buf: bytes, pos: int, tag: int, version: int) -> bool:
    """Whether a complete record of another tag (an earlier use of a reused file) lies in ``buf[pos:]``."""
    from amqtool.formats.artemis.records import scan_records_py

    recs, _ = scan_records_py(buf[pos:pos + 65536], tag, version, check_tag=False, start=0)
    return any(_I32.unpack_from(buf, pos + r[1] + 1)[0] != tag for r in recs)


def _own_end(buf: bytes, pos: int, limit: int) -> int | None:
    """The size of the record at ``pos`` according to the first trailer after it that agrees with its own
    position (checkSize == bytes from ``pos``), when a size field is damaged; None when none does."""
    unpack = _I32.unpack_from
    for q in range(pos + 18, limit + 1):  # 18: the smallest record (DELETE, ROLLBACK)
        if unpack(buf, q - 4)[0] == q - pos:
            return q - pos
    return None


def decode_region(read, journal: str, file: str, start: int, end: int, tag: int, version: int,
                  where: str = "middle") -> list[LostRecord]:
    """The records in the skipped region ``[start, end)`` of one file. ``read(offset, length)`` returns the
    file's bytes."""
    out: list[LostRecord] = []
    length = min(end - start, MAX_REGION_READ)
    buf = read(start, length)
    pos = 0
    limit = len(buf)
    if where == "middle" and _NOT_FILLER.search(buf) is None:
        # zeros between two records: records the damage wiped whole (the broker writes a file's records back to
        # back; load.file_gaps reports such zeros only where AIO padding cannot explain them)
        return [LostRecord(journal, file, start, end - start, where=where)]
    while pos < limit:
        m = _NOT_FILLER.search(buf, pos)
        if m is None:
            break
        pos = m.start()
        got = decode_one(buf[pos:], tag, version)
        if got is None:
            if where == "tail" and out and _foreign_follows(buf, pos, tag, version):
                return out  # the rest is an earlier use of this reused file, not lost data
            out.append(LostRecord(journal, file, start + pos, (end - start) - pos, where=where))
            return out
        t, f, total, tag_ok = got
        if where == "tail" and out and not tag_ok:
            break  # a record of an earlier use of this reused file: the stale part starts here, nothing lost
        rec = LostRecord(journal, file, start + pos, 0, decoded=True, record_type=t, where=where)
        if not 10 <= buf[pos] <= 19:
            rec.damaged_field = "type"
        elif not tag_ok:
            rec.damaged_field = "tag"
        if f is not None:
            _cc, rec.tx_id, rec.record_id, body_len, rec.user_record_type, _extra, hdr = f
            if rec.user_record_type in MESSAGE_TYPES or rec.user_record_type in QUEUE_REF_TYPES:
                rec.message_id = rec.record_id
            if rec.user_record_type in QUEUE_REF_TYPES and body_len >= 8 and len(buf) >= pos + hdr + 8:
                rec.queue_id = _I64.unpack_from(buf, pos + hdr)[0]
        if not _check_matches(buf[pos:], total):
            # either the size field or the trailer is damaged: a trailer that agrees with its own distance
            # from here gives the true size; else the size field is believed
            own = _own_end(buf, pos, limit)
            if rec.damaged_field is None and total is not None:
                rec.damaged_field = ("size" if own is not None and own != total else
                                     "checksize" if 0 < total <= (end - start) - pos else None)  # else torn
            total = own or total
        if total is not None and 0 < total <= (end - start) - pos:
            rec.length = total
            out.append(rec)
            pos += total
            continue
        rec.length = (end - start) - pos
        out.append(rec)
        return out
    if end - start > limit and (not out or out[-1].offset + out[-1].length < end):
        covered = out[-1].offset + out[-1].length if out else start
        out.append(LostRecord(journal, file, max(covered, start + limit), end - max(covered, start + limit),
                              where=where))
    return out


def reconstruct_undecoded(rec: LostRecord, read, end: int, tag: int, version: int, max_id: int) -> bool:
    """Name an undecodable region ``[rec.offset, end)`` (``rec``, as :func:`decode_region` left it) when its
    bytes read as one record with one wrong field: verify's reconstruction
    (:func:`amqtool.engines.artemis.evidence.reconstruct`), which also finds a record whose type byte was
    damaged into filler (0 or ``'J'``), so that the lenient decoding above started after it. The fields every
    reading agrees on are filled in (an ADD/UPDATE ambiguity leaves the type unknown, as above); returns
    whether the record was identified (by its record id, or its transaction)."""
    from amqtool.engines.artemis.evidence import MAX_RECONSTRUCT, reconstruct

    if rec.decoded or end - rec.offset > MAX_RECONSTRUCT:
        return False
    base = max(rec.offset - 24, 16)  # a damaged type byte may read as filler just before the region
    buf = read(base, end - base)
    found = reconstruct(buf, base, rec.offset, end, tag, version, max_id)
    if not found:
        return False
    first = found[0]
    if any((r.id, r.tx_id, r.user_type, r.offset, r.total) != (first.id, first.tx_id, first.user_type,
                                                                 first.offset, first.total) for r in found):
        return False  # readings that disagree on what the record was identify nothing
    t = first.type if all(r.type == first.type for r in found) else None
    rec.decoded = True
    rec.record_type = t
    rec.offset, rec.length = first.offset, first.total
    rec.record_id = first.id if first.type not in WITHOUT_ID else None
    rec.tx_id = first.tx_id if first.type in TRANSACTIONAL else None
    rec.user_record_type = first.user_type if first.type in WITH_BODY and first.type != DELETE_TX else None
    rec.damaged_field = first.wrong if all(r.wrong == first.wrong for r in found) else None
    if rec.user_record_type in MESSAGE_TYPES or rec.user_record_type in QUEUE_REF_TYPES:
        rec.message_id = rec.record_id
    if rec.user_record_type in QUEUE_REF_TYPES and len(first.body) >= 8:
        rec.queue_id = _I64.unpack_from(first.body, 0)[0]
    return True
