"""Paged messages whose queue count was damaged down: the queue ids past the count left as trailing bytes.

A page record's length is the paged message's encode size (``PageReadWriter.writeMessage`` writes
``PagedMessageImpl.getEncodeSize()`` bytes, asserted equal to what ``encode`` wrote), and the encoding ends with
the i32 queue count and that many i64 queue ids. So a record the broker wrote has no byte after its last queue id.
``PageReadWriter.readFromSequentialFile`` bounds the decode by the record's length and checks only the ``}``
after it; ``PagedMessageImpl.decode`` reads as many queue ids as the count says and leaves the rest unread. A count
damaged down to n - k therefore reads cleanly, and the message names only its first n - k queues. The cursor
of each queue left out (``PageSubscriptionImpl``, which delivers a paged message only to the queues it names)
never delivers it.

Such a record is recognised by its trailing bytes: a whole number k of i64s, each the id of a queue a binding
holds, with the stored count one damaged byte away from n (:func:`~amqtool.formats.damage.one_byte_apart`). The
message is lost to each of those queues that still had to consume it (no cursor acknowledgement, no page
completion), unless its page transaction was rolled back.
"""
from __future__ import annotations

import struct

from amqtool.errors import Finding, Severity
from amqtool.formats.damage import one_byte_apart
from amqtool.formats.artemis.paging import PagedMessage
from amqtool.engines.artemis.paging.view import MAX_LISTED, PAGE_TX_NOT_FOUND, Q_PENDING, PagingJournalView


def dropped_queue_ids(message: PagedMessage, known) -> tuple[int, ...]:
    """The queue ids a damaged count left in ``message``'s trailing bytes (each a queue in ``known``, the
    stored count one byte from the true one), or () when its trailing bytes do not read so."""
    tail = message.trailing
    k = len(tail) // 8
    if not tail or len(tail) % 8 or not one_byte_apart(len(message.queue_ids), len(message.queue_ids) + k):
        return ()
    ids = struct.unpack(f">{k}q", tail)
    if len(set(ids)) != k or not all(q in known and q not in message.queue_ids for q in ids):
        return ()
    return ids


def dropped_queue_findings(view: PagingJournalView, records, is_crash_tail) -> list[Finding]:
    """One finding per page of ``records`` ((path, page, message number, offset, PagedMessage) of the records
    with trailing bytes) whose trailing bytes are queue ids a damaged count dropped: CRITICAL
    ``page-queue-count-damaged`` when a dropped queue still had to consume the message (WARNING when that record
    is the one a crash can tear: ``is_crash_tail(path, number)``), WARNING when none did (nothing lost)."""
    out: list[Finding] = []
    by_page: dict[tuple[str, int], list] = {}
    for path, pid, number, off, msg in records:
        dropped = dropped_queue_ids(msg, view.queues)
        if not dropped:
            continue
        rolled_back = view.tx_state(msg.transaction_id) == PAGE_TX_NOT_FOUND
        lost = [] if rolled_back else [q for q in dropped if view.queue_state(q, pid, number) == Q_PENDING]
        by_page.setdefault((path, pid), []).append((number, off, msg.message_id, dropped, lost))
    for (path, pid), hits in by_page.items():
        lost = [h for h in hits if h[4]]
        torn = len(hits) == 1 and is_crash_tail(path, hits[0][0])
        shown = ", ".join(f"message {mid} (page message {n}) lost queue(s) {', '.join(map(str, q))}"
                          for n, _, mid, _, q in lost[:MAX_LISTED])
        number, off = hits[0][0], hits[0][1]
        if lost:
            message = (f"page {pid}: {len(lost)} paged message(s) whose queue count was damaged down: the queue "
                       f"ids after it are left unread, so those queues never deliver them: {shown}"
                       + ("; it is the last record of the current page, what a crash mid-write leaves" if torn
                          else ""))
        else:
            message = (f"page {pid}: {len(hits)} paged message(s) whose queue count was damaged down, leaving "
                       f"queue ids unread; those queues had consumed them (or their page transaction was rolled "
                       f"back): nothing is lost")
        out.append(Finding(Severity.CRITICAL if lost and not torn else Severity.WARNING,
                           "page-queue-count-damaged", message, path, off,
                           {"page": pid, "message": number, "messagesLost": len(lost),
                            "messageIds": [h[2] for h in lost[:100]],
                            "droppedQueues": sorted({q for h in hits for q in h[3]})}))
    return out
