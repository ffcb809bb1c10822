"""Cursor acknowledgements whose user record type was damaged into an update's (``verify``'s
``page-ack-retyped``).

A queue acknowledges a paged message with an ADD (ADD_TX in a transaction) of user record type
ACKNOWLEDGE_CURSOR (39), whose body is ``CursorAckRecordEncoding``: the queue id (i64), the page number (i64) and
the message's number in the page (i32), 20 bytes (``AbstractJournalStorageManager.storeCursorAcknowledge``).
A record carries no checksum, so one damaged byte of its user record type can make it ADD_REF (32),
ACKNOWLEDGE_REF (33), UPDATE_DELIVERY_COUNT (34) or SET_SCHEDULED_DELIVERY_TIME (36): types the broker writes
only as updates of a message (``storeReference``, ``storeAcknowledge``, ``updateDeliveryCount``,
``updateScheduledDeliveryTime``: ``appendUpdateRecord``), never as an ADD, and never with a 20-byte body.
``loadMessageJournal`` dispatches on the user record type alone: it looks up a message of the record's id,
finds none ("Cannot find message"), and drops the record. The queue's cursor no longer holds the
acknowledgement, and the broker delivers that paged message again.

The store proves it when the body, read as a cursor acknowledgement, names a message the address's pages hold,
deliverable (its page transaction committed, or none), that the queue still has to consume (no other
acknowledgement of it, its page not complete for the queue): CRITICAL, that message comes back. An ADD of such a
type whose body names no such message is damage whose cost cannot be told (the page may since have been
consumed and deleted): WARNING.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

MAX_LISTED = 20


def retyped_ack_findings(store, view, where: str) -> list[Finding]:
    """The findings for ``view.retyped_acks`` (module docstring)."""
    if not view.retyped_acks:
        return []
    from amqtool.engines.artemis.paging.entries import iter_paged_entries

    named = {(q, page, number) for _, _, q, page, number in view.retyped_acks}
    pending = set()
    for e in iter_paged_entries(store, view):
        if e.deliverable:
            pending.update((q, e.page, e.number) for q in e.pending_queues if (q, e.page, e.number) in named)
    back = [a for a in view.retyped_acks if a[2:] in pending]
    unknown = [a for a in view.retyped_acks if a[2:] not in pending]
    out = []
    if back:
        shown = ", ".join(f"record {rid} (type {t}): queue {q}, page {p}, message {n}"
                          for rid, t, q, p, n in back[:MAX_LISTED])
        out.append(Finding(
            Severity.CRITICAL, "page-ack-retyped",
            f"{len(back)} live ADD record(s) carry a user record type the broker writes only as an update of a "
            f"message, with the body of a cursor acknowledgement naming a paged message its queue has not "
            f"acknowledged otherwise: the type byte of an ACKNOWLEDGE_CURSOR was damaged, the broker drops the record "
            f"(no message of its id) and delivers those messages again: {shown}", where, None,
            {"count": len(back), "acks": [{"recordId": rid, "recordType": t, "queue": q, "page": p, "number": n}
                                         for rid, t, q, p, n in back[:100]]}))
    if unknown:
        shown = ", ".join(f"record {rid} (type {t})" for rid, t, _, _, _ in unknown[:MAX_LISTED])
        out.append(Finding(
            Severity.WARNING, "page-ack-retyped",
            f"{len(unknown)} live ADD record(s) carry a user record type the broker writes only as an update of a "
            f"message, with a 20-byte body (a cursor acknowledgement's size): damaged, but the body names no paged "
            f"message still to consume, so what was lost cannot be told: {shown}", where, None,
            {"count": len(unknown)}))
    return out
