"""The queues a live message's delivery-count and scheduled-delivery updates name.

The broker writes an UPDATE_DELIVERY_COUNT (34: ``i64 queueID, i32 count``, ``updateDeliveryCount``) or a
SET_SCHEDULED_DELIVERY_TIME (36: ``i64 queueID, i64 time``, ``updateScheduledDeliveryTime``, in the routing
transaction when there is one) only for a reference it holds: one of the queues it routed the message to and
stored an ADD_REF for. Such an update therefore names a queue the message was routed to even when that queue's
reference record was damaged -- the evidence that tells which queue a damaged reference was taken from.
"""
from __future__ import annotations

from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_NAMING = (R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME)


def updated_queues(ev, mid: int) -> set[int]:
    """The queue ids the live delivery-count and scheduled-delivery updates of message ``mid`` name, in the
    messages journal of the :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev`` (bodies read only for
    that message's updates: done on damage only)."""
    result = ev._messages
    out: set[int] = set()
    for r in result.live if result is not None else ():
        if r.id == mid and r.is_update and r.user_record_type in _NAMING and r.body_len >= 8:
            out.add(int.from_bytes(result.body(r)[:8], "big", signed=True))
    return out
