"""A paged message whose transaction id was damaged (``verify``'s ``paged-message-tx-damaged``).

A paged message carries the id of the transaction that paged it (``PagedMessageImpl``: ``transactionID``,
the first long of its encoding), and every cursor delivers it only when that page transaction is committed
(``PageSubscriptionImpl``: a transaction id the paging manager does not hold is "Could not locate page
transaction" and the message is skipped, as for a rolled-back one). There is no checksum on a page record.

Transaction ids come from the broker's id generator (``StorageManager.generateID``), which counts up from 0
and moves on by at most a batch (2^31) at a restart (``BatchingIDGenerator``, as for record ids:
:mod:`~amqtool.engines.artemis.damaged_ids`). A paged message naming a transaction id that is negative, or
more than 2^44 above every id the journals carry, names one the broker never issued: its transaction id was
damaged. When exactly one committed page transaction lies one damaged bit (or the one damaged byte) away, the
message was that transaction's, and the queues that still had it to consume lose it.
"""
from __future__ import annotations

from amqtool.engines.artemis.damaged_ids import FAR_ABOVE
from amqtool.formats.damage import bit_flips, byte_variants
from amqtool.errors import Finding, Severity


def _never_issued(tx: int, max_id: int) -> bool:
    return tx < 0 or tx > max(max_id, 0) + FAR_ABOVE


def _counted(pager, named: int) -> bool:
    """Every queue that still has to consume a paged message naming transaction ``named`` is counted by its page
    counter for at least as many messages more than the pages hold for it as it has of those messages: the
    counters counted them, so their transaction committed (a rescan of the pages, on damage only)."""
    from amqtool.engines.artemis.paging import iter_paged_entries
    from amqtool.errors import AmqtoolError

    need: dict[int, int] = {}
    try:
        for e in iter_paged_entries(pager.store, pager.view):
            if e.message.transaction_id == named:
                for q in e.pending_queues:
                    need[q] = need.get(q, 0) + 1
    except (AmqtoolError, OSError):
        return False
    expected = getattr(pager, "expected", None) or {}
    stored = pager.view.counters()
    return bool(need) and all(q in stored and stored[q] - expected.get(q, 0) >= n for q, n in need.items())


def misnamed_paged_messages(pager, max_id: int) -> list[tuple[int, int, int, bool]]:
    """(the transaction id the messages name, the committed page transaction it was, messages still to
    consume, whether the broker never issued the named id) for the page transactions of ``pager`` (a paging
    verifier that has read the pages) whose paged messages find no record: an id the broker never issued
    (``max_id``: the highest id the journals carry), or an issued one one bit from a committed page transaction
    whose messages the page counters of their queues count (:func:`_counted`). A page transaction rolled back
    pages messages the counters never count (a counter moves only in the transaction that pages or
    acknowledges, ``PageSubscriptionCounterImpl``); a committed one's messages whose transaction id was damaged
    are counted, and skipped by every cursor."""
    not_found = getattr(pager, "not_found", None) or {}
    committed = set(pager.view.page_tx) if not_found else set()  # the page transactions the load registers
    out = []
    for named in sorted(not_found):
        if not _never_issued(named, max_id):
            owners = [x for x in bit_flips(named) if x in committed]
            if len(owners) != 1:
                continue
            pending = pager.pending_of_page_tx(named)
            if pending > 0 and _counted(pager, named):
                out.append((named, owners[0], pending, False))
            continue
        owners = [x for x in bit_flips(named) if x in committed]
        if not owners:
            near = [x for x in byte_variants(named) if x in committed]
            owners = near if len(near) == 1 else []
        if len(owners) != 1:
            continue
        pending = pager.pending_of_page_tx(named)
        if pending > 0:
            out.append((named, owners[0], pending, True))
    return out


def paged_tx_id_findings(pager, results: dict) -> list[Finding]:
    """CRITICAL ``paged-message-tx-damaged`` for :func:`misnamed_paged_messages` (none without a paging
    verifier that read the pages beside a loaded message journal)."""
    if pager is None or not getattr(pager, "not_found", None) or not pager.view.messages_loaded:
        return []
    max_id = max((r.max_id for r in results.values() if r is not None), default=-1)
    return [Finding(
        Severity.CRITICAL, "paged-message-tx-damaged",
        f"{pending} paged message(s) still to consume name transaction {named}, "
        + ("an id the broker never issued (negative, or far above every id the journals carry), one damaged byte"
           if never else "which has no page-transaction record, one damaged bit")
        + f" from committed page transaction {owner}"
        + ("" if never else ", while the page counters count more messages than the pages hold (a rolled-back "
           "page transaction's are never counted)")
        + ": their transaction id was damaged, and every cursor skips them as uncommitted: they are lost",
        None, None, {"pageTransaction": owner, "namedTransaction": named, "messagesLost": pending})
        for named, owner, pending, never in misnamed_paged_messages(pager, max_id)]
