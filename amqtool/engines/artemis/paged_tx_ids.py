"""A paged message whose transaction id was damaged (``verify``'s ``paged-message-tx-damaged``).

A paged message carries the id of the transaction that paged it (``PagedMessageImpl``: ``transactionID``,
the first long of its encoding), and every cursor delivers it only when that page transaction is committed
(``PageSubscriptionImpl``: a transaction id the paging manager does not hold is "Could not locate page
transaction" and the message is skipped, as for a rolled-back one). There is no checksum on a page record.

Transaction ids come from the broker's id generator (``StorageManager.generateID``), which counts up from 0 and
moves on by at most a batch (2^31) at a restart (``BatchingIDGenerator``, as for record ids:
:mod:`~amqtool.engines.artemis.damaged_ids`). A paged message naming a transaction id that is negative, or more than
2^44 above every id the journals carry, names one the broker never issued; one above the message's own id names one
it was not sent in (a transaction takes its id before any message sent in it:
:func:`~amqtool.engines.artemis.paging.page_tx.named_after_messages`): its transaction id was damaged. When exactly
one committed page transaction lies one damaged bit (or the one damaged byte) away, the message was that
transaction's, and the queues that still had it to consume lose it.
"""
from __future__ import annotations

from amqtool.engines.artemis.damaged_ids import FAR_ABOVE
from amqtool.formats.damage import bit_flips, byte_variants
from amqtool.errors import Finding, Severity

NO_TX = -1  # a paged message sent outside a transaction names -1 (``PageSubscriptionImpl`` looks up ids >= 0 only)


def _never_issued(tx: int, max_id: int) -> bool:
    return tx < 0 or tx > max(max_id, 0) + FAR_ABOVE


def _owner(named: int, committed: set, before: int | None) -> int | None:
    """The transaction a damaged ``named`` was: the one committed page transaction one damaged bit (or, for an id
    never issued, the one damaged byte) away, issued before ``before`` (the messages' own lowest id) when that is
    known; or NO_TX when that is -1 (what a message sent outside a transaction names: the broker looks no
    transaction up for it); else None."""
    def fits(x: int) -> bool:
        return x == NO_TX or x in committed and (before is None or x < before)

    owners = {x for x in bit_flips(named) if fits(x)}
    if not owners:
        # a byte's other values: any byte of an id never issued (its damaged byte is a high one); above the
        # messages' own ids, a byte above the lowest only: below those ids many committed transactions differ
        # from it in its low byte alone, while one damaged higher byte sets the id 256 or more apart from the
        # transaction it was, which has few committed neighbours there
        variants = {x for x in byte_variants(named) if fits(x) and (before is None or not (x ^ named) & 0xFF)}
        owners = variants if len(variants) == 1 else set()
    return owners.pop() if len(owners) == 1 else None


def misnamed_paged_messages(pager, max_id: int) -> list[tuple[int, int, int]]:
    """(the transaction id the messages name, the transaction it was -- a committed page transaction, or
    NO_TX --, messages still to consume) for the page transactions of ``pager`` (a paging verifier that has
    read the pages) whose paged messages find no record, that the broker never issued (``max_id``: the highest
    id the journals carry) or issued after those messages."""
    not_found = getattr(pager, "not_found", None) or {}
    committed = set(pager.view.page_tx) if not_found else set()  # the page transactions the load registers
    named_before: dict[int, int | None] = {n: None for n in not_found if _never_issued(n, max_id)}
    rest = [n for n in not_found if n not in named_before and _owner(n, committed, None) is not None]
    if rest:
        named_before.update(pager.named_after_messages(rest))
    # a committed page transaction whose record counts exactly what the pages still hold of it lost no message
    # to the damage: it is no owner (read only when there are owners to weigh)
    owners = {_owner(named, committed, before) for named, before in named_before.items()} - {None, NO_TX}
    if owners:
        committed = committed - pager.whole_page_txs(owners)
    out = []
    for named in sorted(named_before):
        owner = _owner(named, committed, named_before[named])
        if owner is None:
            continue
        pending = pager.pending_of_page_tx(named)
        if pending > 0:
            out.append((named, owner, pending))
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
        f"(far above every id the journals carry) or issued after them (above their own ids: a "
        f"transaction takes its id before the messages sent in it), one damaged byte from "
        f"{_was(owner)}: their transaction id was damaged, and every cursor skips them as uncommitted: they are lost",
        None, None, {"pageTransaction": owner, "namedTransaction": named, "messagesLost": pending})
        for named, owner, pending in misnamed_paged_messages(pager, max_id)]


def _was(owner: int) -> str:
    if owner == NO_TX:
        return f"{NO_TX}, no transaction (they were sent outside one, and the broker delivered them)"
    return f"committed page transaction {owner}"
