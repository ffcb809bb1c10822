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


def misnamed_paged_messages(pager, max_id: int) -> list[tuple[int, int, int]]:
    """(the transaction id the messages name, the committed page transaction it was, messages still to
    consume) for the page transactions of ``pager`` (a paging verifier that has read the pages) whose paged
    messages find no record, that the broker never issued (``max_id``: the highest id the journals carry)."""
    not_found = getattr(pager, "not_found", None) or {}
    committed = set(pager.view.page_tx) if not_found else set()  # the page transactions the load registers
    out = []
    for named in sorted(not_found):
        if not _never_issued(named, max_id):
            continue
        owners = [x for x in bit_flips(named) if x in committed]
        if not owners:
            near = [x for x in byte_variants(named) if x in committed]
            owners = near if len(near) == 1 else []
        if len(owners) != 1:
            continue
        pending = pager.pending_of_page_tx(named)
        if pending > 0:
            out.append((named, owners[0], pending))
    return out


def paged_tx_id_findings(pager, results: dict) -> list[Finding]:
    """CRITICAL ``paged-message-tx-damaged`` for :func:`misnamed_paged_messages` (none without a paging
    verifier that read the pages beside a loaded message journal)."""
    if pager is None or not getattr(pager, "not_found", None) or not pager.view.messages_loaded:
        return []
    max_id = max((r.max_id for r in results.values() if r is not None), default=-1)
    return [Finding(
        Severity.CRITICAL, "paged-message-tx-damaged",
        f"{pending} paged message(s) still to consume name transaction {named}, an id the broker never issued "
        f"(negative, or far above every id the journals carry), one damaged byte from committed page transaction "
        f"{owner}: their transaction id was damaged, and every cursor skips them as uncommitted: they are lost",
        None, None, {"pageTransaction": owner, "namedTransaction": named, "messagesLost": pending})
        for named, owner, pending in misnamed_paged_messages(pager, max_id)]
