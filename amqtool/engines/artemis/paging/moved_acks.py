"""Cursor acknowledgements whose page number was damaged past the address's current page (``verify``'s
``page-ack-moved`` and ``page-ack-damaged``).

A queue acknowledges a paged message with an ACKNOWLEDGE_CURSOR record naming the page and the message's number
in it (``PageSubscriptionImpl.ackTx`` -> ``storeCursorAcknowledge``): a message the cursor read from a page file,
so never one past the page the address is writing (``PagingStoreImpl``'s current page, its highest page file).
A record carries no checksum, so one damaged byte of the page number moves the acknowledgement past the current
page, where the broker finds no message, and the acknowledged message is delivered again.

The store proves the loss when the address's pages hold a message of that number, one damaged byte away in the
page number, that the queue has not acknowledged otherwise, and the queue's page counter
(``PageSubscriptionCounterImpl``: one increment per paged message, one decrement per acknowledgement) says
fewer messages are unconsumed than the pages hold: CRITICAL ``page-ack-moved`` (its message comes back). Small
page numbers are all one byte apart, so more than one page may hold a message of that number: the ones one
flipped bit away are named first, and which of them it was does not change that one message comes back. An
acknowledgement past the current page without that agreement is damage whose cost cannot be told (it may have
named a page since consumed and deleted): WARNING ``page-ack-damaged``.

Acknowledgements of an address with no page file left are not judged: ``PageCursorProviderImpl`` deletes a
consumed page before the cursors' records of it, and an address that left paging starts its pages anew.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity
from amqtool.formats.damage import one_byte_apart

MAX_LISTED = 20


def past_current(view, stores) -> dict[int, list[tuple[int, int]]]:
    """queue -> its acknowledgements ``(page, number)`` past the current page of its address, when the
    address has page files."""
    by_address = {ps.address: ps for ps in stores if ps.pages}
    out: dict[int, list[tuple[int, int]]] = {}
    for q, acks in view.acks.items():
        ps = by_address.get(view.queue_address.get(q))
        if ps is None or ps.current_page is None:
            continue
        far = sorted((p, n) for p, n in acks if p > ps.current_page)
        if far:
            out[q] = far
    return out


def moved_ack_findings(store, view, stores, expected: dict[int, int], where: str) -> list[Finding]:
    """The findings for the acknowledgements of :func:`past_current` (see the module docstring).
    ``expected``: queue -> paged messages its pages still hold for it (the verifier's accounting)."""
    far = past_current(view, stores)
    if not far:
        return []
    from amqtool.engines.artemis.paging.entries import iter_paged_entries

    pending: dict[tuple[int, int, int], bool] = {}  # (queue, page, number) of a message still to consume
    wanted = {q for q in far}
    for e in iter_paged_entries(store, view):
        for q in e.pending_queues:
            if q in wanted:
                pending[(q, e.page, e.number)] = True
    stored = view.counters()
    moved, damaged = [], []
    for q, acks in far.items():
        short = expected.get(q, 0) - stored.get(q, expected.get(q, 0))  # pages hold more than the counter says
        found = []
        for page, number in acks:
            cands = sorted({p for (qq, p, n) in pending if qq == q and n == number and one_byte_apart(p, page)})
            # small page numbers are all one byte apart: the ones one flipped bit away come first, but which of
            # them it was does not change that one message comes back
            bits = [p for p in cands if bin(p ^ page).count("1") == 1]
            if cands:
                found.append((page, number, bits or cands))
            else:
                damaged.append((q, page, number))
        if found and short >= len(found):
            moved += [(q, page, number, orig) for page, number, orig in found]
        else:
            damaged += [(q, page, number) for page, number, _ in found]
    out = []
    if moved:
        shown = ", ".join(f"queue {q}: page {p} message {n} (page {' or '.join(map(str, o))} holds it, still to "
                          f"consume)" for q, p, n, o in moved[:MAX_LISTED])
        out.append(Finding(
            Severity.CRITICAL, "page-ack-moved",
            f"{len(moved)} cursor acknowledgement(s) name a page past their address's current page, one damaged "
            f"byte away from a page holding a message of that number the queue has not acknowledged otherwise, and "
            f"the queue's page counter says that many fewer messages are unconsumed than the pages hold: the "
            f"broker delivers those messages again: {shown}", where, None,
            {"count": len(moved), "acks": [{"queue": q, "page": p, "number": n, "page_held": o[0], "pages_held": o}
                                          for q, p, n, o in moved[:100]]}))
    if damaged:
        shown = ", ".join(f"queue {q}: page {p} message {n}" for q, p, n in damaged[:MAX_LISTED])
        out.append(Finding(
            Severity.WARNING, "page-ack-damaged",
            f"{len(damaged)} cursor acknowledgement(s) name a page past their address's current page, which the "
            f"broker never acknowledges: damaged, but what they acknowledged cannot be told: {shown}", where, None,
            {"count": len(damaged)}))
    return out
