"""What a page loses where its framing is damaged: the messages after the damage, read past it.

``Page.read`` stops at the first record whose framing does not read (``{``, its length, ``}``): every message
from there to the end of the page is never delivered. That is a loss only for the messages some queue still
had to consume. When only one marker of that record was damaged (its ``{`` or its ``}``: a flipped byte), its
length still frames it and the records after it still read, so what each of them was is still known: its page
transaction and the queues it names. A message whose page transaction has no record (rolled back: the cursors
skip it, ``PageSubscriptionImpl`` "Could not locate page transaction"), or that every queue it names has
acknowledged (``ACKNOWLEDGE_CURSOR`` at its page and number), whose page every such queue completed
(``PAGE_CURSOR_COMPLETE``) or that names a queue the bindings do not hold, is one the broker would not deliver
anyway: losing it changes nothing. A message in a prepared transaction is still to be delivered. A marker that
reads zero beside zeros in the record is a zeroed run, not one marker: then the record's content is not trusted.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.artemis.paging import END_BAD_END, END_BAD_START, summarize_record
from amqtool.engines.artemis.paging.view import PAGE_TX_NOT_FOUND, Q_ACKED, Q_COMPLETE, Q_NO_QUEUE

_START, _END, _OVERHEAD = 0x7B, 0x7D, 6
_GONE = (Q_ACKED, Q_COMPLETE, Q_NO_QUEUE)


def undelivered_after(buf, size: int, end, pid: int, view) -> int | None:
    """The number of messages from the damaged record at ``end`` (a :class:`PageScanEnd` of page ``pid``) to
    the end of the page, when that record lost one marker only, every record after it reads, and the broker
    would deliver none of them anyway (see the module docstring); else None."""
    if end.reason not in (END_BAD_START, END_BAD_END) or not (view.messages_loaded and view.bindings_loaded):
        return None  # without both journals, no acknowledgement or queue can be told
    pos, number, count = end.offset, end.records, 0
    while pos < size:
        if size - pos < _OVERHEAD:
            return None
        length = int.from_bytes(buf[pos + 1:pos + 5], "big", signed=True)
        nxt = pos + _OVERHEAD + length
        if length < 0 or nxt > size:
            return None
        damaged = pos == end.offset
        if (buf[pos] != _START and not (damaged and end.reason == END_BAD_START)) or \
                (buf[nxt - 1] != _END and not (damaged and end.reason == END_BAD_END)):
            return None
        if damaged and _zeroed_into_body(buf, pos, nxt, end.reason):
            return None  # a zeroed run, not one marker: what the record held no longer reads
        try:
            sr = summarize_record(buf, pos + 5, nxt - 1)
        except FormatError:
            return None
        if not _undelivered(sr, pid, number, view):
            return None
        pos, number, count = nxt, number + 1, count + 1
    return count


def _zeroed_into_body(buf, pos: int, nxt: int, reason: str) -> bool:
    """Whether the damaged marker of the record at ``pos`` (ending at ``nxt``) reads zero and so does the body
    byte beside it: a zeroed run reaching into the message, whose queues and transaction then read wrong."""
    # (a zeroed '{' that still frames keeps its length: zeros before the body would have broken it)
    return reason == END_BAD_END and buf[nxt - 1] == 0 and buf[nxt - 2] == 0


def _undelivered(sr, pid: int, number: int, view) -> bool:
    tx = sr.transaction_id
    if tx is not None and tx >= 0 and view.tx_state(tx) == PAGE_TX_NOT_FOUND:
        return True
    return all(view.queue_state(q, pid, number) in _GONE for q in sr.queue_ids)
