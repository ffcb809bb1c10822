"""The broker's view of a loaded Artemis store: queues, addresses, messages and their references.

Built from the live records of the bindings and messages journals (``load_journal``) the way the broker's
own tools read them (artemis-journal-format.md §5, §6.1 item 9, §6.2):

* queues are the surviving QUEUE_BINDING_RECORDs (21), keyed by record id (a later update of the same id
  replaces the earlier record); addresses the ADDRESS_BINDING_RECORDs (44);
* messages are the surviving ADD_MESSAGE_PROTOCOL (45), legacy ADD_MESSAGE (31) and ADD_LARGE_MESSAGE (30)
  records, by message id; bodies are read and decoded only when asked for (:meth:`BrokerState.message`);
* references follow ``data exp`` (XmlDataExporter): each ADD_REF (32) puts (message, queue) in the message's
  queue map, every ACKNOWLEDGE_REF (33) removes that pair whatever the order, and a message whose map
  becomes empty is dropped. A message with no ADD_REF at all keeps an empty queue list;
* counts follow ``data print`` (DescribeJournal): per queue, 32 adds one and 33 subtracts one, but an ack
  for a queue not yet seen creates the count at 0 without subtracting; queues print in Java HashMap order;
  prepared transactions are counted separately and only their ADD_REFs count.

Small records (refs, acks, counters, page records, bindings) are read file by file, one journal file in
memory at a time; message bodies stay on disk until :meth:`BrokerState.message` reads one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from amqtool.engines.artemis.load import LiveList, LiveRecord, LoadResult, TxInfo, _new_live
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import LargeMessage, PersistedMessage, decode_persisted_message
from amqtool.formats.artemis.primitives import long_key_order
from amqtool.formats.artemis.userrecords import (
    AckRefRecord,
    AddRefRecord,
    AddressBindingRecord,
    CursorAckRecord,
    DeliveryCountRecord,
    DuplicateIdRecord,
    HeuristicCompletionRecord,
    JournalRecordIds as R,
    PageCompleteRecord,
    PageCounterIncRecord,
    PageCounterPendingRecord,
    PageCounterValueRecord,
    PageTransactionRecord,
    PageUpdateTxRecord,
    QueueBindingRecord,
    ScheduledDeliveryRecord,
    decode_user_record,
)
from amqtool.gcpause import gc_paused
from amqtool.store.journal_files import BodyWindows

MESSAGE_TYPES = frozenset({R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL, R.ADD_LARGE_MESSAGE})
# Message-journal types read eagerly (small bodies); messages themselves are read lazily. What a BrokerState
# decodes is one of these sets: REF_TYPES (messages per queue), DELIVERY_TYPES (and each reference's delivery
# count and scheduled time: what ``data exp`` writes), ALL_SMALL_TYPES (everything, for print and verify).
REF_TYPES = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF})
DELIVERY_TYPES = REF_TYPES | {R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME}
ALL_SMALL_TYPES = frozenset({
    R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.PAGE_TRANSACTION, R.SET_SCHEDULED_DELIVERY_TIME,
    R.DUPLICATE_ID, R.HEURISTIC_COMPLETION, R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COUNTER_VALUE,
    R.PAGE_CURSOR_COUNTER_INC, R.PAGE_CURSOR_COMPLETE, R.PAGE_CURSOR_PENDING_COUNTER,
})

UNDEFINED_PREFIX = "UndefinedQueue_"  # data exp's default ``undefined-prefix``


@dataclass(frozen=True)
class Queue:
    id: int
    name: str
    address: str
    routing_type: str | None
    filter: str | None
    binding: QueueBindingRecord


@dataclass(frozen=True)
class Address:
    id: int
    name: str
    routing_types: list[str]
    binding: AddressBindingRecord


@dataclass(frozen=True)
class DecodeProblem:
    """A live record whose body did not decode (reported, never raised)."""

    journal: str
    record_id: int
    user_record_type: int
    file_index: int
    body_offset: int
    message: str


@dataclass
class MessageCounts:
    """The ``### Message Counts ###`` section of ``data print``; ``refs`` in printing order."""

    messages: int = 0
    large_messages: int = 0
    refs: list[tuple[int, int]] = field(default_factory=list)
    prepared_messages: int = 0
    prepared_large_messages: int = 0
    prepared_refs: list[tuple[int, int]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"message count={self.messages}", f"large message count={self.large_messages}",
               "message reference count"]
        out += [f"queue id {q},count={c}" for q, c in self.refs]
        out += [f"prepared message count={self.prepared_messages}",
                f"prepared large message count={self.prepared_large_messages}", "prepared message reference count"]
        out += [f"queue id {q},count={c}" for q, c in self.prepared_refs]
        return out


@dataclass
class PreparedTransaction:
    """The messages and references of one prepared (XA) transaction."""

    tx_id: int
    messages: dict[int, LiveRecord] = field(default_factory=dict)
    refs: dict[int, list[int]] = field(default_factory=dict)  # message id -> queue ids (ADD_REF order)
    acks: dict[int, list[int]] = field(default_factory=dict)
    other: list[tuple[LiveRecord, object]] = field(default_factory=list)
    deletes: list[LiveRecord] = field(default_factory=list)
    ref_sequence: list[int] = field(default_factory=list)  # queue ids of the ADD_REFs in record order


def decode_delivery_record(rec: LiveRecord, body: bytes) -> DeliveryCountRecord | ScheduledDeliveryRecord | None:
    """The UPDATE_DELIVERY_COUNT (34) or SET_SCHEDULED_DELIVERY_TIME (36) record ``rec`` with ``body``
    decoded; None when it does not decode (BrokerState lists it among its problems and leaves it out)."""
    try:
        obj = decode_user_record(rec.user_record_type, body, is_update=rec.is_update, journal="messages",
                                 record_id=rec.id)
    except FormatError:
        return None
    return obj if isinstance(obj, (DeliveryCountRecord, ScheduledDeliveryRecord)) else None


def _entries(records):
    """The records as plain tuples in LiveRecord's field order: a native LiveList unpacks them without
    building a LiveRecord each (these loops see every live record of the journal)."""
    return records.tuples() if isinstance(records, LiveList) else records


def _read_small(result: LoadResult, records, wanted) -> dict[int, bytes]:
    """Bodies of ``records[i]`` whose type is in ``wanted`` (all when None), read file by file in offset
    order through bounded windows (:class:`BodyWindows`)."""
    spans = [(rec[4], rec[5], rec[6], i) for i, rec in enumerate(_entries(records))
             if wanted is None or rec[1] in wanted]
    spans.sort()
    windows = BodyWindows(result.opened)
    return {i: windows.body(fi, off, n) for fi, off, n, i in spans}


class BrokerState:
    """What a broker would see in a store: see the module docstring. Build with :func:`build_broker_state`."""

    def __init__(self, bindings: LoadResult | None, messages: LoadResult | None,
                 decode: frozenset = ALL_SMALL_TYPES):
        self.bindings_result = bindings
        self.messages_result = messages
        # decode: the message-journal record types to decode (messages are always listed); the lists of
        # records of other types (delivery counts, page records, ...) then stay empty.
        self._small_types = decode
        self.queues: dict[int, Queue] = {}
        self.addresses: dict[int, Address] = {}
        self.bindings_records: list[tuple[LiveRecord, object]] = []  # every decoded bindings record, load order
        self.message_records: dict[int, LiveRecord] = {}  # message id -> its 45/31/30 record (last one wins)
        self.large_messages: list[int] = []  # ids of type-30 records, load order
        self.refs: dict[int, dict[int, int]] = {}  # message id -> {queue id: ADD_REF count}, first-put order
        self.acked: set[tuple[int, int]] = set()  # (message id, queue id) pairs with an ACKNOWLEDGE_REF
        self.delivery_counts: dict[tuple[int, int], int] = {}
        self.scheduled: dict[tuple[int, int], int] = {}
        self.duplicate_ids: list[tuple[int, DuplicateIdRecord]] = []
        self.page_transactions: list[tuple[int, PageTransactionRecord]] = []
        self.page_tx_updates: list[tuple[int, PageUpdateTxRecord]] = []
        self.cursor_acks: list[tuple[int, CursorAckRecord]] = []
        self.page_completes: list[tuple[int, PageCompleteRecord]] = []
        self.page_counters: list[tuple[int, PageCounterValueRecord | PageCounterIncRecord]] = []
        self.page_counters_pending: list[tuple[int, PageCounterPendingRecord]] = []
        self.heuristic_completions: list[tuple[int, HeuristicCompletionRecord]] = []
        self.prepared: list[PreparedTransaction] = []
        self.problems: list[DecodeProblem] = []
        self._counts: MessageCounts | None = None

    # --- building -----------------------------------------------------------------------------------------

    def _decode(self, journal: str, rec: LiveRecord, body: bytes):
        try:
            return decode_user_record(rec.user_record_type, body, is_update=rec.is_update, journal=journal,
                                      record_id=rec.id)
        except FormatError as err:
            self.problems.append(DecodeProblem(journal, rec.id, rec.user_record_type, rec.file_index,
                                               rec.body_offset, err.message))
            return None

    def _load_bindings(self, result: LoadResult) -> None:
        live = result.live
        bodies = _read_small(result, live, None)
        for i, rec in enumerate(live):
            obj = self._decode("bindings", rec, bodies[i])
            if obj is None:
                continue
            self.bindings_records.append((rec, obj))
            if isinstance(obj, QueueBindingRecord):
                self.queues[rec.id] = Queue(rec.id, obj.name, obj.address, obj.routing_type_name or "MULTICAST",
                                            obj.filter_string, obj)
            elif isinstance(obj, AddressBindingRecord):
                self.addresses[rec.id] = Address(rec.id, obj.name, obj.routing_type_names, obj)

    def _load_messages(self, result: LoadResult) -> None:
        live = result.live
        bodies = _read_small(result, live, self._small_types)
        for i, entry in enumerate(_entries(live)):
            t = entry[1]
            if t in MESSAGE_TYPES:
                self.message_records[entry[0]] = _new_live(LiveRecord, entry)
                if t == R.ADD_LARGE_MESSAGE:
                    self.large_messages.append(entry[0])
                continue
            body = bodies.get(i)
            if body is None:
                continue
            if (t == R.ADD_REF or t == R.ACKNOWLEDGE_REF) and len(body) == 8:
                # RefEncoding is one i64 queueID; by far the most common record, so skip the generic decode.
                queue_id = int.from_bytes(body, "big", signed=True)
                if t == R.ADD_REF:
                    q = self.refs.setdefault(entry[0], {})
                    q[queue_id] = q.get(queue_id, 0) + 1
                else:
                    self.acked.add((entry[0], queue_id))
                continue
            rec = _new_live(LiveRecord, entry)
            obj = self._decode("messages", rec, body)
            if obj is None:
                continue
            if isinstance(obj, AddRefRecord):
                q = self.refs.setdefault(rec.id, {})
                q[obj.queue_id] = q.get(obj.queue_id, 0) + 1
            elif isinstance(obj, AckRefRecord):
                self.acked.add((rec.id, obj.queue_id))
            elif isinstance(obj, DeliveryCountRecord):
                self.delivery_counts[(rec.id, obj.queue_id)] = obj.count
            elif isinstance(obj, ScheduledDeliveryRecord):
                self.scheduled[(rec.id, obj.queue_id)] = obj.scheduled_time
            elif isinstance(obj, DuplicateIdRecord):
                self.duplicate_ids.append((rec.id, obj))
            elif isinstance(obj, PageTransactionRecord):
                self.page_transactions.append((rec.id, obj))
            elif isinstance(obj, PageUpdateTxRecord):
                self.page_tx_updates.append((rec.id, obj))
            elif isinstance(obj, CursorAckRecord):
                self.cursor_acks.append((rec.id, obj))
            elif isinstance(obj, PageCompleteRecord):
                self.page_completes.append((rec.id, obj))
            elif isinstance(obj, (PageCounterValueRecord, PageCounterIncRecord)):
                self.page_counters.append((rec.id, obj))
            elif isinstance(obj, PageCounterPendingRecord):
                self.page_counters_pending.append((rec.id, obj))
            elif isinstance(obj, HeuristicCompletionRecord):
                self.heuristic_completions.append((rec.id, obj))
        self._small_bodies = bodies  # kept for message_counts (same list, same indices)
        for tx in result.prepared:
            self.prepared.append(self.prepared_transaction(result, tx))

    def prepared_transaction(self, result: LoadResult, tx: TxInfo) -> PreparedTransaction:
        """The messages, refs and acks of one prepared transaction of ``result`` (its records of the types
        this state decodes)."""
        p = PreparedTransaction(tx.tx_id, deletes=list(tx.records_to_delete))
        bodies = _read_small(result, tx.records, self._small_types)
        for i, rec in enumerate(tx.records):
            if rec.user_record_type in MESSAGE_TYPES:
                p.messages[rec.id] = rec
                continue
            body = bodies.get(i)
            if body is None:
                continue
            obj = self._decode("messages", rec, body)
            if isinstance(obj, AddRefRecord):
                p.refs.setdefault(rec.id, []).append(obj.queue_id)
                p.ref_sequence.append(obj.queue_id)
            elif isinstance(obj, AckRefRecord):
                p.acks.setdefault(rec.id, []).append(obj.queue_id)
            elif obj is not None:
                p.other.append((rec, obj))
        return p

    # --- queries ------------------------------------------------------------------------------------------

    def queue_name(self, queue_id: int, undefined_prefix: str = UNDEFINED_PREFIX) -> str:
        """The queue's name, or ``<undefined-prefix><id>`` as ``data exp`` names a queue with no binding."""
        q = self.queues.get(queue_id)
        return q.name if q is not None else f"{undefined_prefix}{queue_id}"

    def queue_by_name(self) -> dict[str, Queue]:
        return {q.name: q for q in self.queues.values()}

    def live_refs(self, message_id: int) -> list[int] | None:
        """The queue ids still holding ``message_id`` (``data exp``: refs minus acks, in the HashMap order of
        the message's queue map). None when the message would be dropped (every ref acked); an empty list
        for a message that never had an ADD_REF."""
        q = self.refs.get(message_id)
        if q is None:
            return []
        left = [qid for qid in q if (message_id, qid) not in self.acked]
        if not left:
            return None
        return long_key_order(left) if len(left) > 1 else left

    def live_messages(self) -> Iterator[tuple[int, list[int]]]:
        """(message id, queue ids) of every message ``data exp`` would export from the journal, in
        message-id order."""
        for mid in sorted(self.message_records):
            queues = self.live_refs(mid)
            if queues is not None:
                yield mid, queues

    def live_by_queue(self, undefined_prefix: str = UNDEFINED_PREFIX) -> dict[str, list[int]]:
        """Queue name -> the ids of the messages it still holds, in message-id order."""
        out: dict[str, list[int]] = {}
        for mid, queues in self.live_messages():
            for qid in queues:
                out.setdefault(self.queue_name(qid, undefined_prefix), []).append(mid)
        return out

    def message(self, message_id: int) -> PersistedMessage | LargeMessage:
        """Decode the message record of ``message_id`` (read from its journal file now). Raises KeyError
        for an unknown id and FormatError for a body that does not decode (including legacy type 31)."""
        rec = self.message_records[message_id]
        body = self.messages_result.body(rec)
        if rec.user_record_type == R.ADD_LARGE_MESSAGE:
            return LargeMessage.decode(body)
        if rec.user_record_type == R.ADD_MESSAGE:
            raise FormatError("ADD-MESSAGE (31) records of Artemis 1.x are not decodable")
        return decode_persisted_message(body)

    def message_location(self, message_id: int) -> LiveRecord:
        return self.message_records[message_id]

    def prepared_message(self, tx: PreparedTransaction, message_id: int) -> PersistedMessage | LargeMessage:
        rec = tx.messages[message_id]
        body = self.messages_result.body(rec)
        if rec.user_record_type == R.ADD_LARGE_MESSAGE:
            return LargeMessage.decode(body)
        return decode_persisted_message(body)

    @property
    def page_tx_ids(self) -> set[int]:
        """Page-transaction ids with a surviving PAGE_TRANSACTION record (add: transactionID, update:
        pageTX), as ``data exp`` and the paging part of ``data print`` look them up."""
        return ({r.transaction_id for _, r in self.page_transactions}
                | {r.page_tx for _, r in self.page_tx_updates})

    def cursor_acked(self) -> dict[int, set[tuple[int, int]]]:
        """Queue id -> {(page, message number)} acknowledged by surviving ACKNOWLEDGE_CURSOR records."""
        out: dict[int, set[tuple[int, int]]] = {}
        for _, r in self.cursor_acks:
            out.setdefault(r.queue_id, set()).add((r.page_nr, r.message_nr))
        return out

    def message_counts(self) -> MessageCounts:
        """The numbers of ``data print``'s ``### Message Counts ###`` section (§6.1 item 9)."""
        if self._counts is not None:
            return self._counts
        c = MessageCounts()
        result = self.messages_result
        if result is not None:
            counts: dict[int, int] = {}
            bodies = self._small_bodies
            for i, entry in enumerate(_entries(result.live)):
                t = entry[1]
                if t in (R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL):
                    c.messages += 1
                elif t == R.ADD_LARGE_MESSAGE:
                    c.large_messages += 1
                elif t in (R.ADD_REF, R.ACKNOWLEDGE_REF):
                    body = bodies.get(i, b"")
                    if len(body) < 8:
                        continue  # undecodable: reported in problems
                    q = int.from_bytes(body[:8], "big", signed=True)
                    if t == R.ADD_REF:
                        counts[q] = counts.get(q, 0) + 1
                    elif q in counts:
                        counts[q] -= 1
                    else:
                        counts[q] = 0
            c.refs = [(q, counts[q]) for q in long_key_order(counts)]
            pcounts: dict[int, int] = {}
            for tx_info in result.prepared:
                for rec in tx_info.records:
                    if rec.user_record_type in (R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL):
                        c.prepared_messages += 1
                    elif rec.user_record_type == R.ADD_LARGE_MESSAGE:
                        c.prepared_large_messages += 1
            for tx in self.prepared:
                for q in tx.ref_sequence:
                    pcounts[q] = pcounts.get(q, 0) + 1
            c.prepared_refs = [(q, pcounts[q]) for q in long_key_order(pcounts)]
        self._counts = c
        return c


def build_broker_state(bindings: LoadResult | None, messages: LoadResult | None, *,
                       decode: frozenset = ALL_SMALL_TYPES) -> BrokerState:
    """Decode the live records of the two journals (either may be None) into a :class:`BrokerState`.

    ``decode``: the message-journal record types to decode besides the messages themselves; with
    :data:`REF_TYPES` only refs and acks (enough for messages per queue and the message counts), with
    :data:`DELIVERY_TYPES` their delivery counts and scheduled times too, each at a fraction of the cost on a
    large journal."""
    state = BrokerState(bindings, messages, decode)
    state._small_bodies = {}
    with gc_paused():  # a large state is acyclic and lives on: see amqtool.gcpause
        if bindings is not None:
            state._load_bindings(bindings)
        if messages is not None:
            state._load_messages(messages)
    return state
