"""A torn-looking end of an address's current page that cut references a committed page transaction paged: the
broker had synced them, so no crash tore them (``page-torn-tail`` raised to CRITICAL).

A transactional send to a paging address counts, in its PAGE_TRANSACTION record's add, the references it paged:
one per message and queue (``PagingStoreImpl`` -> ``PageTransactionInfo.increment(durableQueues,
nonDurableQueues)``), written once, in the transaction, after the page that holds them was written and synced
(``PageTimedWriter``: ``performSync`` before ``tx.delayDone`` lets the COMMIT be written; Artemis 2.40 on). The
broker deletes a page only once every queue is done with it (``PageCursorProviderImpl``), oldest first, and never
the current one. So the messages of a committed page transaction in the pages of an address whose pages before
them are all still there name as many references as its add counts, acknowledged or not: fewer, on an address
whose current page ends in a torn record, means the cut took records the broker had synced (what a crash leaves
is only what was written after the last sync), and their messages are lost.

Counted only for transactions with a message in pages no earlier page of their address may have held (its first
page left is page 1, or the transaction has no message on it: an earlier, deleted page may have held the rest);
and for a transaction with no message left in any page when no address has lost a page from its start (every
first page is page 1): the broker deletes the record as the last of its references is acknowledged
(``PageTransactionInfoImpl.onUpdate`` -> ``deletePageTransactional``), before any page holding them goes.

A transaction newer than the first message of an address's first page left did not page to the pages deleted
before it either: the broker issues a transaction's id before the ids of the messages sent in it, and ids count
up (``BatchingIDGenerator``) in about the order the messages reach the page (``PageTimedWriter`` writes them
in the order ``PagingStoreImpl.page`` hands them over). So a transaction whose id is at least that first
message's id is counted on that first page, and one with no message left in any page is counted when its id is
at least the first message's id of every address that lost pages from its start. (Concurrent producers can page
messages a little out of id order, at a page's end; a transaction caught so would have to stay open across the
page's turn while a message that got its id before the transaction's waited to be paged: the rule bets against
that, and a first page left that holds no whole record bounds nothing.)
"""
from __future__ import annotations

from collections import Counter

from amqtool.errors import Finding, Severity

MAX_LISTED = 20


def refs_missing(view, stores) -> dict[int, tuple[int, int]]:
    """Committed (or prepared) page transaction -> (how many references its add counts beyond those its messages
    in the pages of ``stores`` name, how many it counts) (see the module's docstring for which transactions are
    counted; a Python read of every page, done only to judge a torn current page). Empty when a page cannot be
    read."""
    from amqtool.engines.artemis.paging.stores import PageFile
    from amqtool.formats.artemis.paging import PageSummaries

    counted = {tx: n for tx, (_, n) in view.page_tx_adds.items() if n > 0}
    # a prepared one too: its PREPARE, like a COMMIT, is written once the page is synced (DelayedPrepare)
    counted.update((tx, n) for tx, n in view.page_tx_prepared_count.items() if n > 0)
    if not counted:
        return {}
    named: Counter = Counter()
    unsure: set[int] = set()  # on a first page left after deleted ones: its earlier messages may have gone with them
    # per address that lost pages from its start: the id of the first message of its first page left (None: the
    # page holds none, so nothing bounds what the deleted pages held)
    floors: list[int | None] = []
    for ps in stores:
        first = min(ps.pages, default=1)
        floor = None
        for pid in sorted(ps.pages):
            try:
                pf = PageFile(ps.page_path(pid))
            except OSError:
                return {}
            with pf:
                for _, _, _, tx_id, _, message_id, qids, _ in PageSummaries(pf.buf, pf.size):
                    if pid == first and first > 1 and floor is None:
                        floor = message_id
                    if tx_id in counted:
                        named[tx_id] += len(qids)
                        if pid == first and first > 1 and tx_id < floor:
                            unsure.add(tx_id)
        if first > 1:
            floors.append(floor)
    return {tx: (n - named[tx], n) for tx, n in counted.items()
            if named[tx] < n and tx not in unsure
            and (named[tx] > 0 or all(f is not None and tx >= f for f in floors))}


def reweigh(findings: list[Finding], view, stores) -> None:
    """Raise the ``page-torn-tail`` warning of a current page to CRITICAL when a committed page transaction with
    messages on that address is short of references (:func:`refs_missing`)."""
    torn = [i for i, f in enumerate(findings) if f.code == "page-torn-tail" and f.severity is Severity.WARNING
            and f.path and (f.details or {}).get("current")]
    if not torn or not view.messages_loaded:
        return
    short = refs_missing(view, stores)
    if not short:
        return
    from amqtool.engines.artemis.paging.stores import PageFile
    from amqtool.formats.artemis.paging import PageSummaries

    for i in torn:
        f = findings[i]
        ps = next((s for s in stores if f.path.startswith(str(s.folder))), None)
        if ps is None:
            continue
        here: set[int] = {tx for tx, (n, total) in short.items() if n == total}  # none left in any page
        for pid in ps.pages:
            try:
                with PageFile(ps.page_path(pid)) as pf:
                    here.update(tx for _, _, _, tx, _, _, _, _ in PageSummaries(pf.buf, pf.size) if tx in short)
            except OSError:
                return
        if not here:
            continue
        shown = ", ".join(f"{tx} ({short[tx][0]} reference(s))" for tx in sorted(here)[:MAX_LISTED])
        findings[i] = Finding(
            Severity.CRITICAL, f.code,
            f.message + f"; but committed or prepared page transaction(s) {shown} of this address name fewer "
            f"references in its pages than their record counts: the broker synced the page before committing them, so the cut took "
            f"records no crash tears, and their messages are lost", f.path, f.offset,
            {**(f.details or {}), "pageTransactionsShort": {str(tx): short[tx][0] for tx in sorted(here)[:100]}})
