"""Paged messages by page transaction: what losing a page transaction's record costs.

A transactional send to a paging address writes its messages into the pages with the transaction's id and
one PAGE_TRANSACTION (35) record in the journal transaction (``PageTransactionInfoImpl``:
``transactionID``, ``numberOfMessages``). When that record does not load (its COMMIT was damaged, the
transaction's record count no longer matches, or its own bytes were damaged), each cursor skips the
messages of that transaction (``PageSubscriptionImpl``: "Could not locate page transaction ..., ignoring
message"). That loses something only for the messages some queue still had to consume: a page transaction
whose messages were all acknowledged (or whose pages are complete for every queue) changes nothing the broker
delivers when it goes. ``verify`` asks this only when it judges such damage (a Python read of the pages).
"""
from __future__ import annotations

from collections import Counter

from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, Q_PENDING, PagingJournalView
from amqtool.formats.artemis.paging import PageSummaries


def pending_by_page_tx(page_stores, view: PagingJournalView) -> Counter:
    """Page transaction id -> its paged messages that some queue still has to consume (``queue_state``
    pending on a queue the message names), for every transaction the journals do not commit (those are the
    messages its loss takes). Messages after a record that does not decode are not read (the broker stops
    reading the page there); an unreadable page is skipped (verify reports it UNKNOWN)."""
    out: Counter = Counter()
    every = ((ps, pid) for ps in page_stores for pid in sorted(ps.pages))
    for pid, (number, _, _, tx_id, _, _, qids, _) in records_of(every):
        if tx_id < 0 or view.tx_state(tx_id) == PAGE_TX_COMMITTED:
            continue
        if any(view.queue_state(q, pid, number) == Q_PENDING for q in qids):
            out[tx_id] += 1
    return out


def records_of(pages):
    """``(page id, PageSummaries tuple)`` of every record of ``pages`` (``(page store, page id)`` pairs), in
    order; a page that cannot be read is skipped."""
    for ps, pid in pages:
        try:
            pf = ps.open_page(pid)
        except OSError:
            continue
        with pf:
            for summary in PageSummaries(pf.buf, pf.size):
                yield pid, summary


def named_after_messages(pages, tx_ids) -> dict[int, int]:
    """For each id of ``tx_ids`` that every paged message naming it (in ``pages``: ``(page store, page id)``
    pairs, those that hold such messages) was issued before -- each message's own id lower than the
    transaction id it names --, the lowest of those message ids. A transaction takes its id when it is created
    (``TransactionImpl``: ``storageManager.generateID()``; a session creates the next one as it commits the
    last, an XA start creates one), and a message its id as it is sent in it (``ServerSessionImpl.send``, or
    ``createLargeMessage`` for a large one), from the same counting-up generator: a message carries an id above
    its own transaction's. A paged message naming a transaction numbered above itself names one it was not sent
    in, and the one it was sent in is numbered below it. Pages that cannot be read are skipped."""
    wanted = set(tx_ids)
    lowest: dict[int, int] = {}
    after: set[int] = set()
    for _pid, (_, _, _, tx_id, _, mid, _, _) in records_of(pages):
        if tx_id in wanted:
            lowest[tx_id] = min(lowest.get(tx_id, mid), mid)
            if mid >= tx_id:
                after.add(tx_id)
    return {t: m for t, m in lowest.items() if t not in after}


def whole_page_txs(page_stores, view: PagingJournalView, tx_ids) -> set[int]:
    """The ids of ``tx_ids`` whose PAGE_TRANSACTION record counts exactly the queue references the pages hold
    of messages naming them, with no update record: every message paged in that transaction is still there and
    names it, so no other paged message was one of its. The record's ``numberOfMessages`` is what the paging
    store added as it paged each message: the number of durable queues it was routed to
    (``PagingStoreImpl.page``: ``pageTransaction.increment(durableQueues, nonDurableQueues)``); an update record
    (``storeUpdatePageTransaction``) moves the count as cursors consume, so those transactions are never whole
    here. A Python read of every page, on damage only."""
    wanted = {t for t in tx_ids if t in view.page_tx_adds and t not in view.page_tx_updates}
    if not wanted:
        return set()
    refs: Counter = Counter()
    every = ((ps, pid) for ps in page_stores for pid in sorted(ps.pages))
    for _pid, (_, _, _, tx_id, _, _, qids, _) in records_of(every):
        if tx_id in wanted:
            refs[tx_id] += len(qids)
    return {t for t in wanted if refs[t] == view.page_tx_adds[t][1]}
