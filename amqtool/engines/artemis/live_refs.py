"""The references of a messages journal as ``data exp`` resolves them: what an export's rows are made from.

:class:`JournalRefs` holds, for a loaded messages journal, every message record with the queues still
holding it, the delivery counts and scheduled times of those pairs and the prepared transactions -- the
part of :class:`~amqtool.engines.artemis.broker_state.BrokerState` (``decode=DELIVERY_TYPES``) an export
reads. Two builders give equal values (tests/engines/artemis/test_live_refs.py, on every fixture and on
generated journals):

* :func:`journal_refs`: refs and acks are read and paired in C (``native.tally_live`` over windows of the
  journal files, then ``native.tally_pairs``), with no Python object per record; only the few delivery-count
  and scheduled-time records and the prepared transactions are decoded in Python;
* :meth:`JournalRefs.from_state`: from a BrokerState, the reference (and the path without the extension).

The rules are BrokerState's (XmlDataExporter): a message stays on each queue it has an ADD_REF (32) for and
no ACKNOWLEDGE_REF (33), whatever their order; its queues come in the iteration order of the broker's
``HashMap<Long, …>`` (:func:`~amqtool.formats.artemis.primitives.long_key_order` of the first-put order);
a message record id seen twice keeps its last record; a ref or ack body shorter than 8 bytes is left out.
"""
from __future__ import annotations

import bisect
from typing import Callable, Iterator

from amqtool import native
from amqtool.engines.artemis.broker_state import (
    DELIVERY_TYPES,
    BrokerState,
    PreparedTransaction,
    build_broker_state,
    decode_delivery_record,
)
from amqtool.engines.artemis.load import LiveList, LiveRecord, LoadResult
from amqtool.formats.artemis.primitives import long_key_order
from amqtool.store.journal_files import BodyWindows


class JournalRefs:
    """A messages journal's committed references, delivery figures and prepared transactions.

    ``committed``: makes the iterator :meth:`committed` gives; ``message_ids``: the ids of the message records,
    ascending (what :meth:`has_message` searches)."""

    def __init__(self, committed: Callable[[], Iterator[tuple[int, LiveRecord, list[int]]]], message_ids: list[int],
                 delivery_counts: dict, scheduled: dict, prepared: list[PreparedTransaction]):
        self._committed = committed
        self._ids = message_ids
        self.delivery_counts: dict[tuple[int, int], int] = delivery_counts
        self.scheduled: dict[tuple[int, int], int] = scheduled
        self.prepared = prepared

    @classmethod
    def from_state(cls, state: BrokerState) -> "JournalRefs":
        """The reference: the values of a BrokerState built with ``decode`` at least DELIVERY_TYPES."""
        ids = sorted(state.message_records)

        def committed():
            for mid in ids:
                yield mid, state.message_records[mid], state.live_refs(mid) or []

        return cls(committed, ids, state.delivery_counts, state.scheduled, state.prepared)

    def has_message(self, message_id: int) -> bool:
        """Whether the journal holds a (live) message record of ``message_id``."""
        k = bisect.bisect_left(self._ids, message_id)
        return k < len(self._ids) and self._ids[k] == message_id

    def committed(self) -> Iterator[tuple[int, LiveRecord, list[int]]]:
        """``(message id, its record, queue ids still holding it in data exp order)`` of every message record,
        in message-id order; the queue list is empty when none does (every ref acked, or none at all)."""
        return self._committed()


def journal_refs(result: LoadResult, decode: frozenset = DELIVERY_TYPES) -> JournalRefs:
    """The :class:`JournalRefs` of a loaded messages journal: in C when the load is native, else from a
    BrokerState. ``decode``: as for build_broker_state (DELIVERY_TYPES: with delivery counts and scheduled
    times; REF_TYPES: refs and acks only)."""
    live = result.live
    if native.tally_pairs is None or not isinstance(live, LiveList):
        return JournalRefs.from_state(build_broker_state(None, result, decode=decode))
    acc = _tally(result)
    ids, entries, starts, qids, others = (memoryview(b).cast("q").tolist() for b in native.tally_pairs(acc))
    del acc
    delivery_counts: dict[tuple[int, int], int] = {}
    scheduled: dict[tuple[int, int], int] = {}
    for i in others:  # delivery-count and scheduled-time records, in live order (the last one counts)
        rec = live[i]
        if rec.user_record_type not in decode:
            continue
        obj = decode_delivery_record(rec, result.body(rec))
        if obj is None:
            continue
        target = delivery_counts if rec.user_record_type == 34 else scheduled
        target[(rec.id, obj.queue_id)] = obj.count if rec.user_record_type == 34 else obj.scheduled_time
    state = BrokerState(None, result, decode)
    prepared = [state.prepared_transaction(result, tx) for tx in result.prepared]

    def committed():
        for k, mid in enumerate(ids):
            a, b = starts[k], starts[k + 1]
            qs = qids[a:b]
            yield mid, live[entries[k]], (long_key_order(qs) if b - a > 1 else qs)

    return JournalRefs(committed, ids, delivery_counts, scheduled, prepared)


def _tally(result: LoadResult) -> bytearray:
    """``native.tally_live`` over every live entry, window by window (:class:`BodyWindows`): a run stops at
    another file's entry or at a ref whose body the window does not hold; the next starts with one that does."""
    live = result.live
    buf = live.buffer
    n = len(live)
    windows = BodyWindows(result.opened)
    acc = bytearray()
    i = 0
    while i < n:
        rec = live[i]
        fi = rec.file_index
        base, data = windows.holding(fi, rec.body_offset, rec.body_len)
        start = i
        i = native.tally_live(buf, i, n, data, fi, acc, base, result.files[fi].size, True)
        if i == start:  # the window holds entry i's body: C always takes it
            raise RuntimeError(f"tally_live made no progress at live entry {i}")
    return acc
