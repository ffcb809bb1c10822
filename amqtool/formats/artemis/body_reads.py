"""How many body bytes the broker's message-journal load reads for each user record type it decodes with a
fixed layout: a live record whose body is shorter makes the decode read past it, which throws.

``AbstractJournalStorageManager.loadMessageJournal`` decodes each committed record by its user record type and
rethrows what a decode throws (``RuntimeException``: ``IndexOutOfBoundsException`` from the buffer): the load
fails and the broker does not start. The layouts, from the decoders:

* ADD_REF, ACKNOWLEDGE_REF (``RefEncoding``): the queue id, a long;
* UPDATE_DELIVERY_COUNT (``DeliveryCountUpdateEncoding``): queue id, count (long, int);
* SET_SCHEDULED_DELIVERY_TIME (``ScheduledDeliveryEncoding``): queue id, time (long, long);
* PAGE_TRANSACTION: as an add ``PageTransactionInfoImpl`` (transaction id, message count: long, int), as an
  update ``PageUpdateTXEncoding`` (page transaction id, records: long, int);
* ACKNOWLEDGE_CURSOR, PAGE_CURSOR_COMPLETE (``CursorAckRecordEncoding``): queue id, page, message number (long,
  long, int);
* PAGE_CURSOR_COUNTER_VALUE (``PageCountRecord``): queue id, value (long, long), then a persistent size (long)
  read whenever any byte is left;
* PAGE_CURSOR_COUNTER_INC (``PageCountRecordInc``): queue id, value (long, int), then the same optional long;
* PAGE_CURSOR_PENDING_COUNTER (``PageCountPendingImpl``): queue id, page id (long, long).

Messages, large messages and heuristic completions are variable-length and judged elsewhere; a DUPLICATE_ID
(``DuplicateIDEncoding``) is read here as the load reads it (:func:`duplicate_id_value`).
"""
from __future__ import annotations

from amqtool.formats.artemis.userrecords import JournalRecordIds as R

MIN_BODY = {
    R.ADD_REF: 8, R.ACKNOWLEDGE_REF: 8, R.UPDATE_DELIVERY_COUNT: 12, R.SET_SCHEDULED_DELIVERY_TIME: 16,
    R.PAGE_TRANSACTION: 12, R.ACKNOWLEDGE_CURSOR: 20, R.PAGE_CURSOR_COMPLETE: 20,
    R.PAGE_CURSOR_COUNTER_VALUE: 16, R.PAGE_CURSOR_COUNTER_INC: 12, R.PAGE_CURSOR_PENDING_COUNTER: 16,
}
# decoders that read one more long when any byte is left after the fixed fields
OPTIONAL_LONG = frozenset({R.PAGE_CURSOR_COUNTER_VALUE, R.PAGE_CURSOR_COUNTER_INC})


def reads_past_body(user_record_type: int, body_len: int) -> bool:
    """Whether the load's decode of a record of this type with a ``body_len``-byte body reads past it."""
    need = MIN_BODY.get(user_record_type)
    if need is None:
        return False
    if body_len < need:
        return True
    return user_record_type in OPTIONAL_LONG and need < body_len < need + 8


def duplicate_id_value(body: bytes) -> tuple[bytes, bytes] | None:
    """``(address, duplicate id)`` of a DUPLICATE_ID record's body as ``DuplicateIDEncoding.decode`` reads it, or
    None where that decode throws. The address is ``SimpleString.readSimpleString``: an i32 length then as many
    raw bytes (not checked as UTF-16: the load keys its map by the bytes), throwing on a negative length
    (NegativeArraySizeException) or one past the body (IndexOutOfBoundsException); then an i32 ``n`` and ``n``
    bytes (``new byte[n]``, ``readBytes``), with the same failures. Bytes after them are not read."""
    size = len(body)
    n = int.from_bytes(body[0:4], "big", signed=True) if size >= 4 else -1
    if n < 0 or 4 + n + 4 > size:
        return None
    m = int.from_bytes(body[4 + n:8 + n], "big", signed=True)
    if m < 0 or 8 + n + m > size:
        return None
    return bytes(body[4:4 + n]), bytes(body[8 + n:8 + n + m])
