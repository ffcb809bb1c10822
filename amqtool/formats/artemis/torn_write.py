"""What a crash can leave of the writes a broker had not synced: the one crash model of verify and the fault harness.

Artemis only appends. A page record is one write at the end of the current page file (``Page.write`` ->
``PageReadWriter.writeMessage`` -> ``SequentialFile.writeDirect``), synced before the send or the transaction
that paged it completes (``Page.sync``, batched by ``PageSyncTimer``). A journal record is written into the
current journal file, which ``JournalFilesRepository`` created filled with zeros (``SequentialFile.fill``), in
``TimedBuffer`` flushes synced before the operation completes. Until the sync, what was written lives in the
page cache; the kernel writes it back in whole 4 KiB pages (the filesystem's blocks), independently and in any
order. After a power loss, each block of what was written since the last sync either holds what was written or
what it held before: zeros (the journal's fill, or a hole past the page file's old end), or the file ends
earlier when its new size was not recorded yet.

So a crash leaves, in the records written since the last sync (the last record, or the records from some point
on: every record before the sync point is whole):

* the file cut anywhere;
* zeroed runs that start at a 4 KiB block boundary or where the write starts (a record's start), and end at a
  block boundary or where the write (or the file) ends: within the write, a block's bytes are all zero or all
  written.

It never leaves a zeroed run that ends inside a block before written bytes that survived, nor a changed bit: a
record damaged so was damaged after the broker wrote it (proven damage, not a crash).

The harness (``tests/faults/artemis.py``, ``torn``) knows which bytes a fault changed and asks
:func:`crash_leaves`; verify knows only the damaged bytes and the field the reader found wrong, and asks
:func:`unwritten` of that field (a written ``{``, ``}`` or record type is never zero, so a wrong one is a crash's
only where its whole block reads zero) or :func:`holds_unwritten_block` of a record that frames but does not decode.
"""
from __future__ import annotations

from typing import Iterable

BLOCK = 4096  # the page cache's unit of write-back (x86-64 and arm64 page size; ext4/xfs default block size)


def _part(start: int, end: int, offset: int) -> tuple[int, int]:
    base = offset - offset % BLOCK
    return max(start, base), min(end, base + BLOCK)


def unwritten(buf, start: int, end: int, offset: int) -> bool:
    """Whether the byte at ``offset`` of a write covering ``[start, end)`` can be one a crash left unwritten:
    the part of its 4 KiB block inside the write reads all zero (a block is written back whole or not at all)."""
    if not start <= offset < end:
        return False
    a, b = _part(start, end, offset)
    part = buf[a:b]
    return part.count(0) == len(part)


def holds_unwritten_block(buf, start: int, end: int) -> bool:
    """Whether some 4 KiB block's part of ``[start, end)`` reads all zero: what a record a crash tore in its
    middle holds (the record's framing written, a block of its body not)."""
    pos = start
    while pos < end:
        if unwritten(buf, start, end, pos):
            return True
        pos = pos - pos % BLOCK + BLOCK
    return False


def crash_leaves(buf, start: int, end: int, changed: Iterable[int]) -> bool:
    """Whether a crash can leave ``buf`` (the damaged bytes) from a write covering ``[start, end)``, whose bytes
    at the offsets ``changed`` differ from what was written: each changed byte lies past the file's end (``end``
    is past ``len(buf)``: the file was cut) or in a block whose part of the write reads all zero."""
    size = len(buf)
    for off in changed:
        if off < start:
            return False
        if off >= size:
            continue
        if off >= end or not unwritten(buf, start, end, off):
            return False
    return True


def journal_tail_by_crash(read, start: int, first: int, size: int, tag: int, version: int) -> bool:
    """Whether the bytes after the last whole record of the current journal file are what a crash leaves of the
    record (or records) written there: ``read(offset, length)`` reads the file, ``start`` is where the last whole
    record ends (where the torn write starts), ``first`` the first byte after it that is not the fill, ``size``
    the file's size.

    A journal record is written whole into a zero-filled file (``JournalImpl.appendRecord`` through the
    ``TimedBuffer``), so the fields whose written value is known tell a crash from later damage: the record type
    (10..19, never zero), the file's tag, and the trailing size word (``JournalImpl.readJournalFile`` checks it
    against the record's length). Each of them that reads wrong must be zero in a block the crash left unwritten
    (all zero from ``start`` to the record's end); zeros from ``start`` followed by written bytes must end at a
    block boundary. A length that runs past the file's end is a cut; a length, or a field before it, that a
    zeroed block garbled explains whatever follows. Anything else is not a crash's (a flipped byte, or a zeroed
    run ending inside a block before written bytes)."""
    def zero(end: int, offset: int) -> bool:
        a, b = _part(start, end, offset)
        if a >= b:
            return False
        part = read(a, b - a)
        return len(part) == b - a and part.count(0) == len(part)

    if first > start:
        # the record's first bytes read zero up to written bytes at ``first``: whole unwritten blocks only
        return first % BLOCK == 0
    head = read(start, 64)
    if not head or not 10 <= head[0] <= 19:
        return False  # a written record type is one; an unwritten one is zero
    lengths, total = _head_lengths(head, version)
    if any(zero(size, start + i) for a, b in lengths for i in range(a, b)):
        return True  # a length field a zeroed block garbled: what follows cannot be told
    if total is None:
        return True  # the head runs past the end of the file (cut)
    if total < 0:
        return False  # no write gives a negative length, and zeroing cannot set its sign bit
    end = start + total
    if end > size:
        return True  # the file ends inside the record: cut
    wanted = {start + 1 + i: b for i, b in enumerate((tag & 0xFFFFFFFF).to_bytes(4, "big"))}
    wanted.update({end - 4 + i: b for i, b in enumerate(total.to_bytes(4, "big"))})
    for off, b in wanted.items():
        got = read(off, 1)
        if got and got[0] != b and not zero(end, off):
            return False
    return True


def record_length(head: bytes, version: int) -> int | None:
    """The length of the journal record whose first bytes are ``head`` (type, tag, ids, lengths), as its head
    gives it (``fixed_size`` + body + extra data, the trailing size word included); None when ``head`` is too
    short to tell. Negative when a length field is."""
    return _head_lengths(head, version)[1] if head and 10 <= head[0] <= 19 else None


def _head_lengths(head: bytes, version: int) -> tuple[list[tuple[int, int]], int | None]:
    """([(from, to)] of the length fields in the head of a record of type ``head[0]``, relative to its start),
    and the record's length they give (None: ``head`` too short)."""
    from amqtool.formats.artemis.records import (
        COMMIT, DELETE_TX, PREPARE, TRANSACTIONAL, WITH_BODY, WITHOUT_ID, fixed_size,
    )

    t = head[0]
    p = 5 + (1 if version >= 2 else 0)
    p += 8 if t in TRANSACTIONAL else 0
    p += 0 if t in WITHOUT_ID else 8
    fields, total = [], fixed_size(t, version)
    if t in WITH_BODY:
        fields.append((p, p + 4))
        p += 4 + (0 if t == DELETE_TX else 1)
    if t in (PREPARE, COMMIT):
        p += 4
        if t == PREPARE:
            fields.append((p, p + 4))
    for a, b in fields:
        if len(head) < b:
            return fields, None
        n = int.from_bytes(head[a:b], "big", signed=True)
        if n < 0:
            return fields, -1
        total += n
    return fields, total
