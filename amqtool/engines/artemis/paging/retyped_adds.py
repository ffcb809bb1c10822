"""Paging records whose user record type was damaged into an update's (``verify``'s ``page-ack-retyped`` and
``page-tx-retyped``).

The broker writes two records of paging as ADDs (ADD_TX in a transaction) of a fixed-size body:

* a queue's acknowledgement of a paged message, ACKNOWLEDGE_CURSOR (39), whose body is
  ``CursorAckRecordEncoding``: the queue id (i64), the page number (i64) and the message's number in the page
  (i32), 20 bytes (``AbstractJournalStorageManager.storeCursorAcknowledge``);
* a page transaction, PAGE_TRANSACTION (35), whose body is ``PageTransactionInfoImpl``'s: the transaction id
  (i64) and the count of messages it paged (i32), 12 bytes (``storePageTransaction``).

A record carries no checksum, so one damaged byte of its user record type can make it ADD_REF (32),
ACKNOWLEDGE_REF (33), UPDATE_DELIVERY_COUNT (34) or SET_SCHEDULED_DELIVERY_TIME (36): types the broker writes
only as updates of a message (``storeReference``, ``storeAcknowledge``, ``updateDeliveryCount``,
``updateScheduledDeliveryTime``: ``appendUpdateRecord``), never as an ADD. ``loadMessageJournal`` dispatches on
the user record type alone: it looks up a message of the record's id, finds none ("Cannot find message"), and
drops the record (a 12-byte body read as a scheduled delivery's 16 throws instead: the broker does not start,
which verify reports as an undecodable record).

* A lost cursor acknowledgement: the queue's cursor no longer holds it, and the broker delivers that paged
  message again. The store proves it when the body names a message the address's pages hold, deliverable (its
  page transaction committed, or none), that the queue still has to consume (no other acknowledgement of it, its
  page not complete for the queue): CRITICAL ``page-ack-retyped``. A 20-byte body naming no such message is
  damage whose cost cannot be told (the page may since have been consumed and deleted): WARNING.
* A lost page transaction: the load never registers it, and every cursor skips its paged messages ("Could not
  locate page transaction"). The store proves it when the body names a transaction that paged messages carry
  with no page-transaction record left while queues still have some of them to consume (``pending_of``):
  CRITICAL ``page-tx-retyped``. A 12-byte body naming none is left alone: it is also the size of a delivery
  count, whose record type byte a damaged byte may have made an ADD (its loss changes no delivery).
"""
from __future__ import annotations

import struct

from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

MAX_LISTED = 20
_CURSOR = struct.Struct(">qqi")  # queue, page, message number
_PAGE_TX = struct.Struct(">qi")  # transaction id, number of messages


def retyped_add_findings(store, view, pending_of, where: str) -> list[Finding]:
    """The findings for ``view.retyped_adds`` (module docstring); ``pending_of(tx)``: the paged messages of page
    transaction ``tx`` some queue still has to consume when the journals do not commit it (0 when they do)."""
    acks = [(rid, t) + _CURSOR.unpack(body) for rid, t, body in view.retyped_adds if len(body) == _CURSOR.size]
    txs = [(rid, t) + _PAGE_TX.unpack(body) for rid, t, body in view.retyped_adds if len(body) == _PAGE_TX.size]
    return _ack_findings(store, view, acks, where) + _tx_findings(txs, pending_of, where)


def _ack_findings(store, view, acks, where: str) -> list[Finding]:
    if not acks:
        return []
    from amqtool.engines.artemis.paging.entries import iter_paged_entries

    named = {(q, page, number) for _, _, q, page, number in acks}
    pending = set()
    for e in iter_paged_entries(store, view):
        if e.deliverable:
            pending.update((q, e.page, e.number) for q in e.pending_queues if (q, e.page, e.number) in named)
    back = [a for a in acks if a[2:] in pending]
    unknown = [a for a in acks if a[2:] not in pending]
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


def _tx_findings(txs, pending_of, where: str) -> list[Finding]:
    # (read as SET_SCHEDULED_DELIVERY_TIME, the 12 bytes throw in the decode: reported as an undecodable record)
    lost = [(rid, t, tx, pending_of(tx)) for rid, t, tx, _ in txs if t != R.SET_SCHEDULED_DELIVERY_TIME]
    lost = [x for x in lost if x[3] > 0]
    if not lost:
        return []
    shown = ", ".join(f"record {rid} (type {t}): page transaction {tx}, {n} to consume"
                      for rid, t, tx, n in lost[:MAX_LISTED])
    return [Finding(
        Severity.CRITICAL, "page-tx-retyped",
        f"{len(lost)} live ADD record(s) carry a user record type the broker writes only as an update of a message, "
        f"with the body of a page transaction that paged messages carry with no page-transaction record left while "
        f"queues still have them to consume: the type byte of a PAGE_TRANSACTION was damaged, the broker drops the "
        f"record (no message of its id) and every cursor skips those messages: {shown}", where, None,
        {"count": len(lost), "pageTransactions": [{"recordId": rid, "recordType": t, "pageTransaction": tx,
                                                   "pending": n} for rid, t, tx, n in lost[:100]]})]
