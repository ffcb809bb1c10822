"""A page that is not the current one, cut at a record boundary: cursor acknowledgements name messages past
its end (``verify``'s ``page-cut``).

A page that ends on a whole record reads clean, so only what refers into it can show it was longer. A queue
acknowledges a paged message with an ACKNOWLEDGE_CURSOR record naming its page and its number in that page
(``PageSubscriptionImpl.ackTx`` -> ``storeCursorAcknowledge``): a message the cursor read from the page, so one
the page held. And the broker never shortens a page it has left: ``PagingStoreImpl.openNewPage`` closes the
old page with a sync (``Page.close(sendReplicaClose, waitSync=true)``) before it writes the next one, and at
start ``reloadLivePage`` keeps appending to the last page when it reads to its end (it opens a new page only
after an incomplete one, leaving that one as it is). So a page before the current one whose queues acknowledged
a message number it no longer holds was cut after the broker wrote it, not by a crash.

What the cut cost is told by the page counters, as for any damaged page (``PagingVerifier._counter_findings``:
CRITICAL ``page-messages-lost`` when the queues' counters exceed what the pages still hold); the cut messages
may all have been acknowledged, which the cut alone cannot tell: a WARNING. The current page is not judged
here: the broker may deliver a message from the page it is writing before a crash cuts it.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity


def acked_past_end(acks_by_page: dict[tuple[int, int], set[int]], queues, pid: int, records: int) -> dict[int, int]:
    """queue -> the highest message number its cursor acknowledgements name on page ``pid`` at or past
    ``records`` (the messages the page now holds), for each of ``queues`` that has one."""
    out = {}
    for q in queues:
        past = [n for n in acks_by_page.get((q, pid), ()) if n >= records]
        if past:
            out[q] = max(past)
    return out


def page_cut_finding(path: str, pid: int, records: int, past: dict[int, int]) -> Finding:
    """The WARNING ``page-cut`` of page ``pid`` (holding ``records`` messages) whose queues acknowledged the
    message numbers ``past`` (:func:`acked_past_end`)."""
    highest = max(past.values())
    shown = ", ".join(f"queue {q}: message {n}" for q, n in sorted(past.items()))
    return Finding(
        Severity.WARNING, "page-cut",
        f"page {pid} (not the current page) holds {records} message(s), but cursor acknowledgements name messages "
        f"past its end ({shown}): it held at least {highest + 1}, and the broker never shortens a page it has left; "
        f"the messages cut are lost if the page counters count them (page-messages-lost)", path, None,
        {"page": pid, "messages": records, "heldAtLeast": highest + 1,
         "ackedPastEnd": {str(q): n for q, n in sorted(past.items())}})
