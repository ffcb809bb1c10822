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
    for ps in page_stores:
        for pid in sorted(ps.pages):
            try:
                pf = ps.open_page(pid)
            except OSError:
                continue
            with pf:
                for number, _, _, tx_id, _, _, qids, _ in PageSummaries(pf.buf, pf.size):
                    if tx_id < 0 or view.tx_state(tx_id) == PAGE_TX_COMMITTED:
                        continue
                    if any(view.queue_state(q, pid, number) == Q_PENDING for q in qids):
                        out[tx_id] += 1
    return out
