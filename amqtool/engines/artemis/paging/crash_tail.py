"""What a crash leaves at the end of an address's current page: damage confined to its last record, of the
kind the crash model allows (``amqtool/formats/artemis/torn_write.py``).

``PagingStoreImpl`` appends each paged message to the current page as one write of its framed record
(``{``, length, body, ``}``: ``Page.write``), and only that page is being written when the broker stops. A
crash mid-append leaves the last record of the current page cut, or with whole 4 KiB blocks of it unwritten
(zeros), while every record before it is whole and no record follows it. ``Page.read``
(``readFromSequentialFile``) stops at the first record whose framing or message does not read, so such damage
costs exactly that last message: a torn tail, which the rule of issue 25 calls a WARNING.

Nor can a crash tear a record of a transaction the message journal committed or prepared: the broker syncs the
page before it writes that COMMIT or PREPARE (``PageTimedWriter.addTask`` delays the transaction,
``processMessages`` writes the page and ``performSync`` -> ``PagingStoreImpl.ioSync`` -> ``Page.sync`` before
``tx.delayDone`` lets the record be written; Artemis 2.40 on): :func:`synced_tx`.

A crash never leaves a changed bit, nor a zeroed run ending inside a block before bytes that were written: a
``{`` or ``}`` that is wrong but not zero, or zero while its block holds written bytes, is damage done after
the write (proven loss), as is damage with a whole record after it, or on a page that is not the current one
(the broker never appends there again).
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.artemis.paging import (
    END_BAD_END, END_BAD_LENGTH, END_BAD_START, END_SHORT_TAIL, PagedMessage, PageScanEnd, PageScanner,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.formats.artemis.torn_write import holds_unwritten_block, unwritten

END, OVERHEAD = 0x7D, 6
# why damage to the current page's last record that the crash model does not explain is proven loss
NOT_A_CRASH = ("; it is the current page's last record, but no crash leaves it so: a crash cuts the last write or "
               "leaves whole 4 KiB blocks of it unwritten (zeros), never a changed byte or a zeroed run that ends "
               "inside a block before bytes that were written")


def whole_record_after(buf, start: int, size: int) -> bool:
    """Whether a whole page record (``{``, a length that fits, ``}`` where the length puts it) starts anywhere
    after ``start``: then the bytes at ``start`` have a written message after them."""
    pos = buf.find(b"{", start + 1, size)
    while 0 <= pos and pos + OVERHEAD <= size:
        n = int.from_bytes(buf[pos + 1:pos + 5], "big", signed=True)
        if 0 < n and pos + OVERHEAD + n <= size and buf[pos + 5 + n] == END:
            return True
        pos = buf.find(b"{", pos + 1, size)
    return False


def last_framing(buf, end: PageScanEnd) -> bool:
    """Whether the damaged framing where the scan of the current page stopped (``end``: a bad ``{`` or ``}``
    marker, a bad length, a short tail) can be its last record as a crash left it: no whole record follows it,
    and the field found wrong is past the file's end (cut) or in a block the crash left unwritten (zero)."""
    offset, size = end.offset, end.size
    if not 0 <= offset < size or whole_record_after(buf, offset, size):
        return False
    return crash_explains(buf, end)


def crash_explains(buf, end: PageScanEnd) -> bool:
    """Whether the crash model explains the framing error ``end`` of a record starting at ``end.offset`` and
    running to the end of the file: the bytes the reader found wrong are cut off or in an all-zero block."""
    s, size = end.offset, end.size
    if end.reason == END_SHORT_TAIL:
        return True  # fewer than 6 bytes: cut
    # a length whose bytes a zeroed block garbled points anywhere
    length_unwritten = any(unwritten(buf, s, size, s + i) for i in range(1, 5))
    if end.reason == END_BAD_START:
        return unwritten(buf, s, size, s)  # a written '{' is never zero
    if end.reason == END_BAD_LENGTH:
        if length_unwritten:
            return True
        if end.length is None or end.length < 0:
            return False  # no write gives a negative length, and zeroing cannot set its sign bit
        # past the end: a cut -- unless the bytes to the end frame the record whole under a length one flipped
        # bit away, its '}' the file's last byte, and hold a message that decodes to the byte: the length was
        # changed, not the file cut (a cut body does not decode: its message's own lengths run past it)
        whole = size - s - OVERHEAD
        flip = end.length ^ whole
        return not (whole >= 0 and buf[size - 1] == END and flip and flip & (flip - 1) == 0
                    and _decodes(buf, s + 5, s + 5 + whole))
    if end.reason == END_BAD_END:
        return length_unwritten or unwritten(buf, s, size, s + 5 + (end.length or 0))
    return False


def last_record(buf, size: int) -> int | None:
    """The number of the current page's last record when it is the last thing written to the page: the
    framing reads whole up to it and its ``}`` is followed by nothing but the zeros a filesystem leaves (or by
    nothing), and a 4 KiB block's part of it reads all zero (a crash tears a whole record's body only so). A
    message that does not decode there, or names a damaged queue or message id, is the crash's torn last
    write. None when the page holds no such record."""
    scan = PageScanner(buf, size)
    last = None
    start = length = 0
    for number, start, length in scan:
        last = number
    end = scan.end
    if last is None or end is None or not (end.clean or _zeros(buf, end.offset, size)):
        return None
    if not holds_unwritten_block(buf, start, start + 6 + length):
        return None
    return last


def _decodes(buf, start: int, end: int) -> bool:
    """Whether ``buf[start:end]`` is one paged message as ``Page.read`` decodes it (``PagedMessageImpl``)."""
    try:
        PagedMessage.read(Reader(buf, start, end))
    except FormatError:
        return False
    return True


def _zeros(buf, start: int, size: int) -> bool:
    rest = buf[start:size]
    return rest.count(0) == len(rest)


def synced_tx(buf, start: int, size: int, view) -> int | None:
    """The transaction of the page record at ``start`` when the message journal holds its page transaction
    committed or prepared (``view``: the paging view of the journals): the page was synced with the record before
    that COMMIT or PREPARE was written, so no crash tore it. None otherwise (not transactional, its id cut off,
    or no such transaction)."""
    from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, PAGE_TX_PREPARED

    if view is None or start + 13 > size:
        return None
    tx = int.from_bytes(buf[start + 5:start + 13], "big", signed=True)
    return tx if view.tx_state(tx) in (PAGE_TX_COMMITTED, PAGE_TX_PREPARED) else None


def record_start(buf, size: int, number: int) -> int:
    """The offset of page record ``number`` (one the framing reads whole)."""
    return next(off for n, off, _ in PageScanner(buf, size) if n == number)
