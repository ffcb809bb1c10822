"""Paged messages per page transaction: how many the pages hold, and how many of them some queue still has to
consume. What a lost page-transaction record costs (``verify``'s evidence) is told from them.

The broker delivers a paged message written in a transaction only while that transaction's
PAGE_TRANSACTION record is live (``PageSubscriptionImpl``: a message whose page transaction it does not
know is skipped). So losing the record (its COMMIT damaged, say: the journal rolls the transaction back)
loses the transaction's messages that a queue still had to consume, and nothing when every queue had
consumed them already (acknowledged, or their page completed). Read on demand, with the fast page summaries,
only when verify judges such a loss.
"""
from __future__ import annotations


class PagedByTransaction:
    """``counts(tx)``: (paged messages of page transaction ``tx`` in the pages, those still pending on some
    queue), or None when a page could not be read (it may hold more of them)."""

    def __init__(self, store, view):
        self.store = store
        self.view = view
        self._counts: dict[int, list[int]] | None = None
        self._complete = True

    def counts(self, tx: int) -> tuple[int, int] | None:
        if self._counts is None:
            self._read()
        if not self._complete:
            return None
        total, pending = self._counts.get(tx, (0, 0))
        return total, pending

    def _read(self) -> None:
        from amqtool.engines.artemis.paging.stores import PageFile, find_page_stores
        from amqtool.engines.artemis.paging.view import Q_PENDING
        from amqtool.formats.artemis.paging import PageSummaries

        counts: dict[int, list[int]] = {}
        view = self.view
        stores = find_page_stores(self.store.paging_dir)[0] if self.store.paging_dir is not None else []
        for ps in stores:
            for pid in sorted(ps.pages):
                try:
                    pf = PageFile(ps.page_path(pid))
                except OSError:
                    self._complete = False
                    continue
                with pf:
                    for number, _, _, tx_id, _, _, qids, _ in PageSummaries(pf.buf, pf.size):
                        if tx_id <= 0:
                            continue
                        c = counts.setdefault(tx_id, [0, 0])
                        c[0] += 1
                        if any(view.queue_state(q, pid, number) == Q_PENDING for q in qids):
                            c[1] += 1
        self._counts = counts
