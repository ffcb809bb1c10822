"""Page files whose messages are older than those of the page before them: files swapped or renamed
(``page-out-of-order``, CRITICAL).

The broker writes an address's pages one after the other, each message appended to the current page
(``PageTimedWriter`` in the order ``PagingStoreImpl.page`` hands them over), and a new page opened only when the
current one is full (``PagingStoreImpl.openNewPage``). Message ids count up (``BatchingIDGenerator``), issued
as the broker receives a message, which it pages as it routes it. So every message of a page is newer than the
messages of the pages before it, but for a few a busy broker routes a little out of id order at a page's turn,
and for large messages (their id is issued at the first chunk, the message paged once the last one arrived).
A page whose newest message (large ones left out) is older than the oldest of a page before it was not written
there: page files were swapped or renamed. The broker reads each file as the page its name says, and applies
the cursor acknowledgements of that page number to the messages it finds there (``PagePosition``: page and
message number): acknowledged messages come back and pending ones are taken as acknowledged (or not delivered
in their order), so it is CRITICAL.
"""
from __future__ import annotations

from amqtool.errors import FormatError, Finding, Severity
from amqtool.formats.artemis.paging import AMQP_LARGE_PERSISTER, CORE_LARGE_TYPES, PageScanner, summarize_record

_PROBE = 8  # records read from each end of a page for its oldest and newest message id


def out_of_order_finding(ps, spans: list) -> Finding | None:
    """The ``page-out-of-order`` finding of page store ``ps`` whose pages hold older messages than a page before
    them, or None. ``spans``: ``(page id, oldest id, newest id)`` of its pages, in page order (:func:`page_span`
    of each, taken as verify walks the pages)."""
    latest = None  # (page id, oldest id) of the earlier page whose oldest message is the newest
    for pid, lo, hi in spans:
        if latest is not None and hi < latest[1]:
            page, first = latest
            return Finding(
                Severity.CRITICAL, "page-out-of-order",
                f"address {ps.address!r}: page {pid} holds messages older (ids up to {hi}) than page {page} before "
                f"it (ids from {first}): the broker writes pages in order, so page files were swapped or renamed; it "
                f"reads each as the page its name says and applies that page's cursor acknowledgements to the wrong "
                f"messages", str(ps.page_path(pid)), None,
                {"page": pid, "newestId": hi, "earlierPage": page, "earlierOldestId": first})
        if latest is None or lo > latest[1]:
            latest = (pid, lo)
    return None


def page_span(buf, size: int) -> tuple[int, int] | None:
    """(oldest, newest) message id among the first and last few records of a page that are not large messages
    (None when it holds none that read)."""
    records = [(off, n) for _, off, n in PageScanner(buf, size)]
    ids = []
    for off, n in records[:_PROBE] + records[max(_PROBE, len(records) - _PROBE):]:
        try:
            s = summarize_record(buf, off + 5, off + 5 + n)
        except FormatError:
            continue
        if s.large_message_type in CORE_LARGE_TYPES or buf[off + 5 + 9] == AMQP_LARGE_PERSISTER:
            continue
        ids.append(s.message_id)
    return (min(ids), max(ids)) if ids else None
