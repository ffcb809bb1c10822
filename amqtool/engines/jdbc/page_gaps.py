"""Pages missing from an Artemis JDBC page store: ``page-missing`` (CRITICAL) or ``page-gap`` (WARNING).

``PagingStoreFactoryDatabase`` keeps each address's pages as rows of one table, a page file per row, and the
broker reads them as the file store reads its folder: pages from the first to the current (the highest) one.
``PageCursorProviderImpl`` deletes a page only once every queue has consumed it, and from the oldest on, so a
page missing between the first and the current one was removed by no broker unless nothing pointed into it.

The judgement is the file store's (paging/gaps.py): CRITICAL ``page-missing`` when cursor acknowledgements
point into a missing page, or when the page counters of the address's queues say more messages are unconsumed
than the pages left hold for them (those were in the missing pages), with their count; else WARNING
``page-gap``.
"""
from __future__ import annotations

from collections import Counter

from amqtool.errors import Finding


def page_gap_findings(page_stores: list, bindings, messages) -> list[Finding]:
    """The findings of the page stores (``MemoryPageStore`` per address, as ``ArtemisJdbcLoad.page_data``)
    with pages missing between their first and current page, judged by the journals' page counters and cursors
    (``bindings`` and ``messages``: the journal tables' load results)."""
    gapped = [(ps, ps.missing_pages()) for ps in page_stores]
    gapped = [(ps, missing) for ps, missing in gapped if missing]
    if not gapped:
        return []
    from amqtool.engines.artemis.paging.entries import iter_paged_entries
    from amqtool.engines.artemis.paging.gaps import gap_finding
    from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, Q_PENDING, PagingJournalView

    view = PagingJournalView()
    if bindings is not None:
        view.add_bindings(bindings)
    if messages is not None:
        view.add_messages(messages)
    # (without both journal tables there are no counters: a gap is then only a warning)
    stored = view.counters()
    out = []
    for ps, missing in gapped:
        # what the pages left still hold for each queue, counted as the counter rebuild counts
        # (PageCounterRebuildManager: a message of no page transaction, or of a committed one)
        held: Counter = Counter()
        pages = [(ps, pid) for pid in sorted(ps.pages)]
        for entry in iter_paged_entries(None, view, [], pages) if bindings is not None and messages is not None else ():
            tx = entry.message.transaction_id
            if tx <= 0 or entry.tx_state == PAGE_TX_COMMITTED:
                held.update(q for q, state in entry.queue_states if state == Q_PENDING)
        queues = sorted(q for q, a in view.queue_address.items() if a == ps.address and q in view.queues)
        lost = {q: stored[q] - held[q] for q in queues if q in stored and stored[q] > held[q]}
        acked_missing = sorted({p for acks in view.acks.values() for p, _ in acks if p in set(missing)})
        out.append(gap_finding(ps, missing, len(ps.pages), acked_missing, lost))
    return out
