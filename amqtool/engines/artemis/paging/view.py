"""What the journals say about paging (page transactions, cursor acks, page-complete and counter records,
queue bindings, large-message headers): :class:`PagingJournalView`, fed by a load or loaded on demand."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import LargeMessage
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.store.journal_files import BodyWindows


_LIVE = struct.Struct(native.LIVE_FORMAT)  # a packed live entry of the C load (LiveRecord's field order)
_CURSOR = struct.Struct(">qqi")  # ACKNOWLEDGE_CURSOR / PAGE_CURSOR_COMPLETE: queue, page, message number

PAGE_TX_COMMITTED = "committed"
PAGE_TX_PREPARED = "prepared"
PAGE_TX_NOT_FOUND = "not-found"

Q_ACKED = "acked"
Q_COMPLETE = "page-complete"
Q_NO_QUEUE = "no-queue"
Q_PENDING = "pending"

HASH_LINE = "#" * 100
MAX_LISTED = 20  # per-message findings listed before one summary finding

_PAGING_TYPES = frozenset({R.PAGE_TRANSACTION, R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE,
                           R.PAGE_CURSOR_COUNTER_VALUE, R.PAGE_CURSOR_COUNTER_INC, R.ADD_LARGE_MESSAGE})
# the user record types the broker writes only as updates of a message (storeReference, storeAcknowledge,
# updateDeliveryCount, updateScheduledDeliveryTime): an ADD of one is a record whose type byte was damaged
# (paging/retyped_adds.py reads those whose body has a cursor acknowledgement's or a page transaction's size)
_UPDATE_ONLY = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME})
_RETYPED_SIZES = (_CURSOR.size, 12)  # CursorAckRecordEncoding; PageTransactionInfoImpl: i64 tx id, i32 count


# --- what the journals say about paging ----------------------------------------------------------------------


def _i64(body: bytes, at: int = 0) -> int:
    return int.from_bytes(body[at:at + 8], "big", signed=True)


def _i32(body: bytes, at: int) -> int:
    return int.from_bytes(body[at:at + 4], "big", signed=True)


@dataclass
class JournalLarge:
    """A large-message record (type 30) of the message journal."""

    message_id: int
    declared_size: int | None  # _AMQ_LARGE_SIZE
    state: str  # "live" | "prepared"
    decodable: bool = True


@dataclass
class PagingJournalView:
    """The facts of the two journals that paging needs (surviving records unless said otherwise)."""

    bindings_loaded: bool = False
    messages_loaded: bool = False
    queues: set[int] = field(default_factory=set)
    queue_address: dict[int, str] = field(default_factory=dict)  # queue id -> its address (binding record)
    page_tx: set[int] = field(default_factory=set)  # add.transactionID and update.pageTX of surviving 35s
    page_tx_adds: dict[int, tuple[int, int]] = field(default_factory=dict)  # txID -> (record id, numberOfMessages)
    page_tx_updates: dict[int, int] = field(default_factory=dict)  # pageTX -> sum of its surviving updates' records
    page_tx_prepared: dict[int, int] = field(default_factory=dict)  # page txID -> journal tx id (prepared)
    # page txID -> numberOfMessages its PAGE_TRANSACTION record (in a prepared transaction) says it paged
    page_tx_prepared_count: dict[int, int] = field(default_factory=dict)
    page_tx_failed: dict[int, int] = field(default_factory=dict)  # page txID -> journal tx id (failed)
    acks: dict[int, set[tuple[int, int]]] = field(default_factory=dict)  # queue -> {(page, message nr)}
    # (record id, user record type, body) of live ADDs of a type the broker writes only as an update whose body
    # has a cursor acknowledgement's or a page transaction's size (paging/retyped_adds.py)
    retyped_adds: list[tuple[int, int, bytes]] = field(default_factory=list)
    complete: dict[int, set[int]] = field(default_factory=dict)  # queue -> {page}
    counter_value: dict[int, int] = field(default_factory=dict)  # queue -> last PAGE_CURSOR_COUNTER_VALUE
    counter_inc: dict[int, int] = field(default_factory=dict)  # queue -> sum of PAGE_CURSOR_COUNTER_INC
    large: dict[int, JournalLarge] = field(default_factory=dict)
    undecodable: int = 0

    def add_bindings(self, result) -> None:
        """Queue ids: the record ids of surviving QUEUE_BINDING_RECORDs (``data print``'s existing queues)."""
        from amqtool.formats.artemis.userrecords import decode_user_record

        self.bindings_loaded = True
        records = [rec for rec in result.live if rec.user_record_type == R.QUEUE_BINDING_RECORD]
        for rec in records:
            self.queues.add(rec.id)
        if getattr(result, "opened", None) is None:
            return
        for rec, body in zip(records, _bodies(result, records)):
            try:
                self.queue_address[rec.id] = decode_user_record(rec.user_record_type, body).address
            except (FormatError, AttributeError):
                pass  # an undecodable binding: verify's journal part reports it

    def add_messages(self, result) -> None:
        """Page transactions, cursor acks, page-complete and counter records, and large-message headers.
        Call while the journal is open (bodies are read from its files, each file once: a store holds
        many cursor acks and can hold many prepared transactions)."""
        from amqtool.engines.artemis.load import LiveList

        self.messages_loaded = True
        live = result.live
        if isinstance(live, LiveList):  # C load: no LiveRecord for the entries paging does not want
            buf, unpack, size = live.buffer, _LIVE.unpack_from, _LIVE.size
            wanted = [unpack(buf, i * size) for i in live.indexes_of_types(_PAGING_TYPES)]
            added = live.indexes_of_types(_UPDATE_ONLY, adds_only=True)
            retyped = [e for e in (unpack(buf, i * size) for i in added) if e[6] in _RETYPED_SIZES]
        else:
            wanted = [rec for rec in live if rec.user_record_type in _PAGING_TYPES]
            retyped = [rec for rec in live if rec.user_record_type in _UPDATE_ONLY and not rec.is_update
                       and rec.body_len in _RETYPED_SIZES]
        for rec, body in zip(retyped, _bodies(result, retyped) if retyped else ()):
            self.retyped_adds.append((rec[0], rec[1], body))
        tx_types = (R.PAGE_TRANSACTION, R.ADD_LARGE_MESSAGE)
        in_txs = [[(tx, target, rec) for rec in tx.records if rec.user_record_type in tx_types]
                  for txs, target in ((result.prepared, self.page_tx_prepared), (result.failed, self.page_tx_failed))
                  for tx in txs]
        bodies = _bodies(result, wanted + [rec for group in in_txs for _, _, rec in group])
        # in file order, as each record's body is read (the last counter value of a queue wins)
        order = sorted(range(len(wanted)), key=lambda i: wanted[i][4])
        ack, ack_fields, acks = R.ACKNOWLEDGE_CURSOR, _CURSOR.unpack_from, self.acks
        for i in order:
            rec, body = wanted[i], bodies[i]
            if rec[1] == ack and len(body) >= 20:  # most paging records: inline
                q, page, msg = ack_fields(body)
                positions = acks.get(q)
                if positions is None:
                    positions = acks[q] = set()
                positions.add((page, msg))
            else:
                self._live(rec, body)
        k = len(wanted)
        for group in in_txs:
            for j in sorted(range(len(group)), key=lambda j: group[j][2][4]):
                tx, target, rec = group[j]
                body = bodies[k + j]
                if rec.user_record_type == R.PAGE_TRANSACTION and len(body) >= 8:
                    target.setdefault(_i64(body), tx.tx_id)
                    if target is self.page_tx_prepared and len(body) >= 12 and not rec.is_update:
                        self.page_tx_prepared_count[_i64(body)] = _i32(body, 8)
                elif rec.user_record_type == R.ADD_LARGE_MESSAGE and tx.prepared and not tx.invalid:
                    self._large(rec.id, body, "prepared")
            k += len(group)

    def add_journal(self, journal, result) -> None:
        """:meth:`add_bindings` or :meth:`add_messages` by ``journal.kind`` (a command's load hook)."""
        if journal.kind == "bindings":
            self.add_bindings(result)
        else:
            self.add_messages(result)

    def _large(self, rid: int, body: bytes, state: str) -> None:
        try:
            lm = LargeMessage.decode(body)
            self.large[lm.message_id] = JournalLarge(lm.message_id, lm.large_size, state)
        except FormatError:
            self.large.setdefault(rid, JournalLarge(rid, None, state, decodable=False))

    def _live(self, rec, body: bytes) -> None:
        """One surviving record: ``rec`` in LiveRecord's field order (a LiveRecord or a packed entry)."""
        rid, t, is_update = rec[0], rec[1], rec[2]
        n = len(body)
        if t == R.ADD_LARGE_MESSAGE:
            self._large(rid, body, "live")
            return
        if n < 8:
            self.undecodable += 1
            return
        if t == R.PAGE_TRANSACTION:
            tx = _i64(body)
            self.page_tx.add(tx)
            if not is_update and n >= 12:
                self.page_tx_adds[tx] = (rid, _i32(body, 8))
            elif is_update and n >= 12:
                self.page_tx_updates[tx] = self.page_tx_updates.get(tx, 0) + _i32(body, 8)
        elif t in (R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE):
            if n < 20:
                self.undecodable += 1
                return
            q, page, msg = _i64(body), _i64(body, 8), _i32(body, 16)
            if t == R.ACKNOWLEDGE_CURSOR:
                self.acks.setdefault(q, set()).add((page, msg))
            else:
                self.complete.setdefault(q, set()).add(page)
        elif t == R.PAGE_CURSOR_COUNTER_VALUE and n >= 16:
            self.counter_value[_i64(body)] = _i64(body, 8)
        elif t == R.PAGE_CURSOR_COUNTER_INC and n >= 12:
            q = _i64(body)
            self.counter_inc[q] = self.counter_inc.get(q, 0) + _i32(body, 8)

    # -- judging one paged message --

    def tx_state(self, tx_id: int) -> str | None:
        if tx_id < 0:
            return None
        if tx_id in self.page_tx:
            return PAGE_TX_COMMITTED
        if tx_id in self.page_tx_prepared:
            return PAGE_TX_PREPARED
        return PAGE_TX_NOT_FOUND

    def queue_flags(self, queue_id: int, page: int, number: int) -> tuple[bool, bool, bool]:
        """(acked, page complete, queue missing) as ``data print`` tests them."""
        acks = self.acks.get(queue_id)
        acked = acks is not None and (page, number) in acks
        comp = self.complete.get(queue_id)
        complete = comp is not None and page in comp
        return acked, complete, queue_id not in self.queues

    def queue_state(self, queue_id: int, page: int, number: int) -> str:
        acked, complete, missing = self.queue_flags(queue_id, page, number)
        if acked:
            return Q_ACKED
        if complete:
            return Q_COMPLETE
        if missing:
            return Q_NO_QUEUE
        return Q_PENDING

    def counters(self) -> dict[int, int]:
        """Queue -> stored page counter (last value record plus increments, as brokers before the counter
        rebuild read it)."""
        out = dict(self.counter_value)
        for q, inc in self.counter_inc.items():
            out[q] = out.get(q, 0) + inc
        return out


_PREAD_BELOW = 8192  # file bytes per wanted record below which records are read one by one


def _bodies(result, records) -> list[bytes]:
    """The bodies of ``records`` (LiveRecord field order: file index 4, body offset 5, length 6): one pread
    each where they are sparse in their file (paging records spread over a large journal), else read in
    offset order through bounded windows (:class:`BodyWindows`) that they share."""
    by_file: dict[int, list[int]] = {}
    for i, rec in enumerate(records):
        by_file.setdefault(rec[4], []).append(i)
    out: list[bytes] = [b""] * len(records)
    opened = result.opened
    windows = BodyWindows(opened)
    for fi in sorted(by_file):
        wanted = by_file[fi]
        sparse = len(wanted) * _PREAD_BELOW < result.files[fi].size
        wanted.sort(key=lambda i: records[i][5])
        for i in wanted:
            off, ln = records[i][5], records[i][6]
            if ln:
                out[i] = opened.pread(fi, off, ln) if sparse else windows.body(fi, off, ln)
    return out


def load_view(store, view: PagingJournalView | None = None) -> PagingJournalView:
    """Load the store's journals (read-only) and collect :class:`PagingJournalView`. Given a ``view`` that a
    command already fed with the results of its own load (``add_bindings``/``add_messages`` while each journal
    was open), only the journals it has not seen are loaded: each journal is read once per command."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal

    if view is None:
        view = PagingJournalView()
    if view.bindings_loaded and view.messages_loaded:
        return view
    for journal in store.journals():
        if view.bindings_loaded if journal.kind == "bindings" else view.messages_loaded:
            continue
        with open_journal(journal) as opened:
            if not opened.files:
                continue
            result = load_journal(opened)
            if journal.kind == "bindings":
                view.add_bindings(result)
            else:
                view.add_messages(result)
    return view
