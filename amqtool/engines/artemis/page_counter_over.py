"""A queue's page counter above the messages its pages still hold (``page-counter-mismatch`` as a warning).

The page counter of a queue (PAGE_CURSOR_COUNTER_VALUE and _INC records) is written in the transaction that
pages a message (``PageSubscriptionCounterImpl.increment``, stored with the page transaction) and lowered in
the transaction that acknowledges one; a rolled-back send rolls its increment back with it. So a counter above
the paged messages the pages still hold for the queue, beside a page folder that holds pages, says paged
messages the broker had committed are gone from the pages: the end of the current page cut at a record
boundary (no torn record shows it: page files are appended to, not pre-sized), or records lost elsewhere. The
pages no longer hold them, so the broker does not deliver them (brokers since 2.27 rebuild the counters from
the pages at start; older ones report the stored value): a warning. A difference no larger than the queue's
paged messages of prepared (XA) transactions proves nothing (the counter may count them while the cursor holds
them back) and stays the info it was. Where the pages cannot be read for the
address (no folder: a store copied without its paging directory, or a journal written without page files),
the counters alone prove nothing and stay the info they were. An address whose pages already carry a page
finding of their own (a damaged, torn or missing page) is judged by that finding.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity


def raise_counter_over(findings: list[Finding], pager) -> None:
    """Turn, in place, each INFO ``page-counter-mismatch`` whose stored counter exceeds what the pages hold,
    on a queue whose address has a page folder with pages (``pager``: the paging verifier that read them), into
    a WARNING saying paged messages are missing from the pages."""
    if pager is None:
        return
    paged = {ps.address: ps for ps in getattr(pager, "_stores", ()) if ps.pages}
    address_of = pager.view.queue_address
    # the page folders whose damage another finding already weighs (a damaged or missing page leaves the
    # counters above what the pages hold too): judged by that finding
    judged = {str(ps.folder) for ps in paged.values()
              if any(g.code.startswith("page-") and g.code != "page-counter-mismatch"
                     and g.severity in (Severity.WARNING, Severity.CRITICAL)
                     and g.path and str(g.path).startswith(str(ps.folder)) for g in findings)}
    for i, f in enumerate(findings):
        d = f.details or {}
        if (f.code != "page-counter-mismatch" or f.severity != Severity.INFO
                or d.get("stored", 0) <= d.get("counted", 0) or address_of.get(d.get("queueId")) not in paged
                or str(paged[address_of[d["queueId"]]].folder) in judged):
            continue
        if d["stored"] - d["counted"] <= _prepared_for(pager.view, paged[address_of[d["queueId"]]], d["queueId"]):
            continue  # a prepared transaction's paged messages, which a counter may count: nothing proves a loss
        findings[i] = Finding(
            Severity.WARNING, f.code,
            f"queue {d['queueId']}: the page counter records say {d['stored']} paged message(s) still to consume, "
            f"the pages of its address hold {d['counted']}: the counter moves only with committed sends and "
            f"acknowledgements, so {d['stored'] - d['counted']} paged message(s) are gone from the pages (the end "
            f"of the current page cut, or records lost), and the broker does not deliver them",
            f.path, f.offset, d)


def _prepared_for(view, ps, queue: int) -> int:
    """Paged messages of the page store ``ps`` naming ``queue`` whose page transaction is prepared (XA, in
    doubt): the cursor holds them back, and the counter may already count them. Read only for a queue whose
    counter is above what its pages hold."""
    from amqtool.engines.artemis.paging.stores import PageFile
    from amqtool.engines.artemis.paging.view import PAGE_TX_PREPARED
    from amqtool.formats.artemis.paging import PageSummaries

    n = 0
    for pid in sorted(ps.pages):
        try:
            with PageFile(ps.page_path(pid)) as pf:
                for _, _, _, tx_id, _, _, qids, _ in PageSummaries(pf.buf, pf.size):
                    if queue in qids and view.tx_state(tx_id) == PAGE_TX_PREPARED:
                        n += 1
        except OSError:  # an unreadable page is reported as such
            continue
    return n
