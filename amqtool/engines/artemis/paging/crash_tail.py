"""What a crash leaves at the end of an address's current page: damage confined to its last record.

``PagingStoreImpl`` appends each paged message to the current page as one write of its framed record
(``{``, length, body, ``}``: ``Page.write``), and only that page is being written when the broker stops. A
crash mid-append leaves the last record of the current page partly written: any of its bytes may be wrong
(its markers, its length, its body), while every record before it is whole and no record follows it.
``Page.read`` (``readFromSequentialFile``) stops at the first record whose framing or message does not read,
so such damage costs exactly that last message: a torn tail, which the rule of issue 25 calls a WARNING.

Damage with a whole record after it, or on a page that is not the current one (the broker never appends
there again), is not what a crash leaves and stays proven loss.
"""
from __future__ import annotations

from amqtool.formats.artemis.paging import PageScanner

END, OVERHEAD = 0x7D, 6


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


def last_framing(buf, offset: int, size: int) -> bool:
    """Whether the damaged framing found at ``offset`` (a bad ``{`` or ``}`` marker, a bad length) can be the
    current page's last record, partly written: no whole record follows it."""
    return 0 <= offset < size and not whole_record_after(buf, offset, size)


def last_record(buf, size: int) -> int | None:
    """The number of the current page's last record when it is the last thing written to the page: the
    framing reads whole up to it and its ``}`` is followed by nothing but the zeros a filesystem leaves (or by
    nothing). A message that does not decode there, or names a damaged queue or message id, is the crash's
    torn last write. None when the page holds no such record."""
    scan = PageScanner(buf, size)
    last = None
    for number, _, _ in scan:
        last = number
    end = scan.end
    if last is None or end is None or not (end.clean or _zeros(buf, end.offset, size)):
        return None
    return last


def _zeros(buf, start: int, size: int) -> bool:
    rest = buf[start:size]
    return rest.count(0) == len(rest)
