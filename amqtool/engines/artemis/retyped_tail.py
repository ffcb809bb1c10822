"""The record after a file's last valid record that is whole but for its type byte.

``JournalImpl.readJournalFile`` reads a record only where its first byte is a record type (11..19); on any
other byte it moves on by one byte, so a record whose type byte was damaged is skipped whole, and the scan
goes on past it. When that record is the last one of a file the broker has moved on from, what follows it is
filler or an earlier use's records, and nothing else shows that a record stood there -- but its bytes do:
this use's tag, and a checkSize (the record's last four bytes) equal to its size. Read with the type byte
that makes it whole, it is the record the broker wrote; verify weighs its loss as that of any damaged record
(``evidence.effect``), where tails.py, seeing no new id, could only tell that records were lost.
"""
from __future__ import annotations

from amqtool.engines.artemis.evidence import MAX_RECONSTRUCT, Rebuilt, _parse, _plausible
from amqtool.formats.artemis.records import fixed_size
from amqtool.native import checksize_ends

_TYPES = range(11, 20)  # the record types a journal file holds (10, the file header's, is never a record)


def retyped_record(read, first: int, tag: int, version: int, max_id: int) -> Rebuilt | None:
    """The one record of this use (``tag``) at ``first`` that is whole and plausible when its type byte is
    another record type, or None (none, or several readings). ``read(offset, length)`` reads the file."""
    head = read(first, 1)
    if not head or head[0] in _TYPES:
        return None  # a valid type byte: the scanner read it, and judged it otherwise
    buf = read(first, MAX_RECONSTRUCT)
    smallest = min(fixed_size(t, version) for t in _TYPES)
    # a record ends where its checkSize, its last four bytes, equals its size
    ends = checksize_ends(buf, smallest)
    found = []
    for end in ends:
        for t in _TYPES:
            rec, _ = _parse(buf, 0, t, tag, version, end)
            if rec is not None and rec.wrong == "type" and _plausible(rec, max_id):
                found.append(Rebuilt(rec.type, first, rec.total, rec.tx_id, rec.id, rec.user_type, rec.body,
                                     rec.wrong))
    return found[0] if len(found) == 1 else None
