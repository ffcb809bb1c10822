"""A page gone from the end of an address's page store (its current page, or pages after the last one left),
told from what the store still holds about it.

A page missing between the first and the current page is a gap (``PagingVerifier._gap_findings``), and one
that cursor acknowledgements point into is judged there too. A page gone from the end leaves neither: the
current page becomes the last one left. What remains of its messages is outside the page files:

* the queues' **page counters** (``PageSubscriptionCounterImpl``: incremented in the transaction that pages a
  message, decremented with its acknowledgement) say more messages are unconsumed than the pages hold;
* a committed or prepared **page transaction** whose messages in the pages left name fewer references than
  its record counts (``synced_refs.refs_missing``: the broker counts one reference per message and queue in
  the add, written after the page holding them was synced, ``PageTimedWriter.processMessages``, and deletes a
  page only once every queue is done with it, so no crash cut them, and a page cut anywhere, not only one gone
  whole, shows), or a committed one with no message left in any page;
* a **large-message body file** that no record claims, neither a journal record nor a paged message (the
  broker writes the body before it pages the message, and deletes it once the message is consumed).

The counters alone do not prove it: one damaged counter record raises one queue's counter, and changes no
message; and a message paged in a transaction that is prepared, or that the journal does not know, leaves
every queue it was routed to short by one in a store a broker wrote (tests/paging_stores.py's sample: two
queues short, nothing lost). So the loss is CRITICAL ``page-missing`` when the counters of the address's
queues are short and something independent of the counters agrees: a page transaction short of references,
or an unclaimed body file. A page transaction short of references with a message in the address's pages (or
none left anywhere) is not explained away by the prepared or unknown transactions' messages the counters may
count: then the counters' plain excess over the pages is the corroboration. An
address whose pages already carry a finding (a torn or damaged page, an undecodable record, a gap) is judged
there: a torn current page also leaves the counters short, and that is a crash's WARNING. Nor is a store
with a file that could not be read (it may hold the records that explain the counters).
"""
from __future__ import annotations

from collections import Counter

from amqtool.errors import Finding, Severity

MAX_LISTED = 20
# the paging findings that already judge an address's loss (or explain its counters: a torn current page)
_PAGE_JUDGED = ("page-torn-tail", "page-damaged", "page-record-undecodable", "page-missing", "page-gap",
                "page-messages-lost", "page-queue-id-damaged", "unreadable", "not-a-regular-file", "page-bad-name")


def lost_page_finding(verifier, findings: list[Finding], expected: dict[int, int], paged_large: dict) -> list[Finding]:
    """``page-missing`` findings for addresses whose end pages are gone (see the module's docstring).
    ``verifier``: the :class:`~amqtool.engines.artemis.paging.verify.PagingVerifier` once it has read every
    page; ``findings``: verify's findings so far; ``expected``: queue -> paged messages its pages still hold
    for it; ``paged_large``: the large messages found in pages."""
    from amqtool.engines.artemis.missing_journal import large_message_files

    view = verifier.view
    stores = getattr(verifier, "_stores", ())
    if not stores or not view.messages_loaded:
        return []
    if any(f.code == "unreadable" for f in findings):
        return []  # a file that could not be read may hold the counter and acknowledgement records that explain it
    stored = view.counters()
    judged = [ps for ps in stores
              if not any(f.code in _PAGE_JUDGED and f.path and f.path.startswith(str(ps.folder)) for f in findings)]
    if not judged or not any(stored.get(q, 0) > expected.get(q, 0) for q in view.queues):
        return []
    short_txs, uncounted, where = _read_pages(view, stores)
    out = []
    claimed = set(view.large) | set(paged_large)
    unclaimed = [m for m in large_message_files(verifier.store.large_messages_dir) if m not in claimed]
    for ps in judged:
        queues = sorted(q for q, a in view.queue_address.items() if a == ps.address and q in view.queues)
        # (a message of a prepared or unknown page transaction may be in a counter, and is not in expected: a
        # lower bound of what was lost)
        lost = {q: stored[q] - expected.get(q, 0) - uncounted[q] for q in queues
                if stored.get(q, 0) > expected.get(q, 0) + uncounted[q]}
        # the short page transactions with a message in this address's pages, or with none left in any page
        mine = sum(n for tx, n in short_txs if ps.address in where.get(tx, (ps.address,)))
        if not lost and mine:
            # a page transaction short in the pages is evidence apart from the counters: the messages of
            # prepared or unknown transactions the counters may count do not explain it away, and the counters'
            # excess over what the pages hold agrees with it
            lost = {q: stored[q] - expected.get(q, 0) for q in queues if stored.get(q, 0) > expected.get(q, 0)}
            if lost:
                lost = _at_least(lost, mine)
        if not lost:
            continue
        why = []
        if short_txs:
            shown = ", ".join(f"{tx} ({n} reference(s) missing)" for tx, n in short_txs[:MAX_LISTED])
            why.append(f"committed or prepared page transaction(s) {shown} name fewer references in the pages "
                       f"than their records count")
        if unclaimed:
            shown = ", ".join(map(str, unclaimed[:MAX_LISTED]))
            why.append(f"large-message body file(s) of message(s) {shown} are claimed by no record")
        if not why:
            continue
        n = sum(lost.values())
        out.append(Finding(
            Severity.CRITICAL, "page-missing",
            f"address {ps.address!r}: the page counters of its queues say at least {n} unconsumed message "
            f"reference(s) ("
            + ", ".join(f"queue {q}: {v}" for q, v in lost.items())
            + f") are not in its pages (the last one left is page {ps.current_page}), and "
            + "; ".join(why) + ": a page after it, or the current page, is gone with them",
            str(ps.folder), None,
            {"messagesLost": n, "lostByQueue": {str(q): v for q, v in lost.items()},
             "pageTransactions": [tx for tx, _ in short_txs[:100]], "largeMessageIds": unclaimed[:100]}))
    return out


def _at_least(excess: dict[int, int], refs: int) -> dict[int, int]:
    """The counters' ``excess`` (queue -> references) cut down to a total of ``refs`` (the references a short
    page transaction proves gone), queue by queue: a lower bound of what was lost."""
    out = {}
    for q, n in excess.items():
        if refs <= 0:
            break
        out[q] = min(n, refs)
        refs -= out[q]
    return out


def _read_pages(view, stores) -> tuple[list[tuple[int, int]], Counter, dict[int, set[str]]]:
    """(page transaction, references of it the pages lack) of every page transaction short of references
    (see the module's docstring); queue -> pending paged messages of page transactions that are prepared or
    unknown (not in the expected counts); and page transaction -> the addresses whose pages hold a message of
    it. A Python read of every page, only when counters are short."""
    from amqtool.engines.artemis.paging.stores import PageFile
    from amqtool.engines.artemis.paging.synced_refs import refs_missing
    from amqtool.formats.damage import one_byte_apart
    from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, Q_PENDING
    from amqtool.formats.artemis.paging import PageSummaries

    where: dict[int, set[str]] = {}  # page transaction -> addresses whose pages hold a message of it
    uncounted: Counter = Counter()
    for ps in stores:
        for pid in sorted(ps.pages):
            try:
                pf = PageFile(ps.page_path(pid))
            except OSError:
                return [], uncounted, where  # an unreadable page may hold them (reported where pages are read)
            with pf:
                for number, _, _, tx_id, _, _, qids, _ in PageSummaries(pf.buf, pf.size):
                    where.setdefault(tx_id, set()).add(ps.address)
                    if tx_id > 0 and view.tx_state(tx_id) != PAGE_TX_COMMITTED:
                        uncounted.update(q for q in qids if view.queue_state(q, pid, number) == Q_PENDING)
    # short: synced_refs' count (an add's references against those its messages name, no page deleted before
    # them); and a committed transaction with no message left in any page, whichever pages were deleted
    short = {tx: n for tx, (n, _) in refs_missing(view, stores).items()}
    short.update((tx, n) for tx, (_, n) in view.page_tx_adds.items() if n > 0 and tx not in where)
    # paged messages naming a transaction id the journal holds no page transaction for, one damaged high byte
    # from a short one (far from it: ids are issued counting up, so a real neighbour is near): its messages
    # under a damaged id, or it under a damaged id (its record's body). That damage is reported where it lies
    # (page-tx-damaged, paged-message-tx-damaged); no page is gone
    strays = [w for w in where if w > 0 and w not in view.page_tx_adds]
    short = {tx: n for tx, n in short.items()
             if not any(abs(tx - w) >> 16 and one_byte_apart(tx, w) for w in strays)}
    return sorted(short.items()), uncounted, where
