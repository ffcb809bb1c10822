"""Replaying a KahaDB journal to its live state (kahadb-format.md §6.4, the index-free algorithm).

Records are applied in (file id, offset) order, as MessageDatabase.recover does:

1. ADD without a transaction: the message becomes live on its destination; with one: buffered.
2. REMOVE without subscriptionKey: queue ack; with one: ack by that durable subscription only (and, unless
   its ack is the zero-length UNMATCHED marker, the subscription's last ack); inside a transaction: buffered
   (transactional acks take effect at COMMIT). A REMOVE for an unknown message is normal when GC deleted
   the file with its ADD: counted, otherwise ignored; but, as ``getStoredDestination`` in the broker's
   ``updateIndex``, it creates its destination when there is none (compaction's keep records rely on it).
3. Transactions keyed by their full id; PREPARE applies nothing; COMMIT applies the buffer in order;
   ROLLBACK drops it. Unresolved at the end: local/unprepared = "open" (the broker rolls them back at
   start), prepared XA = "prepared" (in doubt). Neither is live.
4. SUBSCRIPTION with info starts a durable subscription there (a non-retroactive one only wants topic
   messages added after it); without info it removes it. A topic message is stored while any
   subscription still waits for it.
5. REMOVE_DESTINATION drops a destination; UPDATE_MESSAGE moves a message to its new record;
   REWRITTEN_DATA_FILE skips the rest of an ack-compaction file whose source still exists.

Memory grows with the live state only: a live message is kept as its id and journal location.

The C fast path (native/kahadb_scan.c) applies rules 1 and 2 for records without a transaction straight to
these dicts and stores a live message as a compact read-only object with the same attributes (file_id,
offset, length, priority, transaction, waiting; its message id is the dict key); every method here reads it
like a LiveMessage, turns it into one before changing it, and :meth:`Replay.materialize` converts whatever
is left once the journal is read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.formats.kahadb.commands import (
    AddMessageCommand,
    BlobCommand,
    Command,
    Destination,
    EntryType,
    RemoveDestinationCommand,
    RemoveMessageCommand,
    RewrittenDataFileCommand,
    SubscriptionCommand,
    TransactionCommand,
    TransactionId,
    UpdateMessageCommand,
)


@dataclass
class LiveMessage:
    message_id: str
    file_id: int
    offset: int
    length: int  # record length incl. its 5-byte header (the index's Location size)
    priority: int
    transaction: str | None = None
    waiting: set | None = None  # topic messages: subscription keys that still want it


def _unmatched(cmd: RemoveMessageCommand) -> bool:
    """The ack is MessageDatabase's UNMATCHED marker (a zero-length ``ack``: a topic message the
    subscription's selector did not match), which does not move the subscription's LastAck."""
    return cmd.ack is not None and len(cmd.ack) == 0


def _to_live(mid: str, m) -> "LiveMessage":
    """A LiveMessage for the fast path's compact entry (``m`` itself when it is one already)."""
    if type(m) is not LiveMessage:
        return LiveMessage(mid, m.file_id, m.offset, m.length, m.priority, m.transaction, m.waiting)
    return m


@dataclass
class Subscription:
    key: str
    file_id: int  # where its KAHA_SUBSCRIPTION record is (subLocations)
    offset: int
    start: tuple  # (file id, offset) of the record that started it
    retroactive: bool
    info: bytes | None = None
    # The last message this subscription acknowledged, (file id, offset of its ADD, message id): what
    # MessageDatabase keeps as the subscription's LastAck (subscriptionAcks, a sequence of the topic's order
    # index, set by updateIndex(KahaRemoveMessageCommand) on every ack of a stored message unless the ack is
    # the UNMATCHED marker). None until it acknowledges one; a (re-written) subscription record resets it,
    # as updateIndex(KahaSubscriptionCommand) resets LastAck.
    last_ack: tuple | None = None


@dataclass
class DestinationState:
    destination: Destination
    messages: dict = field(default_factory=dict)  # message id -> LiveMessage, in add order
    subscriptions: dict = field(default_factory=dict)  # sub key -> Subscription


@dataclass
class Transaction:
    id: TransactionId
    first: tuple  # (file id, offset) of its first record
    last: tuple
    # ("add", dest, LiveMessage, loc) | ("remove", dest, msg id, sub key, unmatched)
    ops: list = field(default_factory=list)
    state: str = "open"  # open | prepared | committed | rolled-back
    sends: int = 0
    acks: int = 0
    files: set = field(default_factory=set)
    records: list = field(default_factory=list)  # (file id, offset, length) of its ADD/REMOVE/PREPARE records
    committed_at: tuple | None = None  # (file id, offset) of its own COMMIT record (not a txStore's)

    def to_json(self) -> dict:
        return {
            "id": str(self.id),
            "kind": "local" if self.id.local else "xa",
            "state": self.state,
            "sends": self.sends,
            "acks": self.acks,
            "first": f"{self.first[0]}:{self.first[1]}",
            "last": f"{self.last[0]}:{self.last[1]}",
            "files": sorted(self.files),
            # sends per destination key ("0:orders"): what a prepared transaction holds back where
            "sendsTo": self.sends_to(),
        }

    def sends_to(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for op in self.ops:
            if op[0] == "add":
                out[op[1].key] = out.get(op[1].key, 0) + 1
        return dict(sorted(out.items()))


class Replay:
    """Apply decoded commands in journal order; read the outcome from the attributes."""

    def __init__(self, existing_file_ids: set[int], drop_transactions: frozenset = frozenset()):
        self.existing = existing_file_ids
        # recover: transactions that lost a record to a damaged batch are never committed half; their
        # COMMIT (or a txStore's) acts as a ROLLBACK and they are kept here (key -> Transaction)
        self.drop_transactions = drop_transactions
        self.dropped: dict[tuple, Transaction] = {}
        self.destinations: dict[str, DestinationState] = {}
        self.transactions: dict[tuple, Transaction] = {}
        self.finished: list[Transaction] = []  # resolved transactions, the first MAX_FINISHED kept
        self.finished_total: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.unknown_removes = 0
        self.removed_destinations: set[str] = set()  # keys a REMOVE_DESTINATION dropped (and none re-created)
        self.last_ack_map: tuple | None = None  # (file, offset) of the newest ACK_MESSAGE_FILE_MAP record
        self.last_ack_map_blob: bytes | None = None
        self.last_audit: tuple | None = None
        self.skip_file: int | None = None
        self.skipped_records = 0
        # (destination key, message id, subscription key) the broker hands again from the subscription's LastAck
        # though its ack positions do not hold it (last_acks.hand_from_last_ack)
        self.handed_again: set = set()

    # -- helpers -------------------------------------------------------------------------------------
    def _dest(self, d: Destination) -> DestinationState:
        st = self.destinations.get(d.key)
        if st is None:
            st = self.destinations[d.key] = DestinationState(d)
            self.removed_destinations.discard(d.key)
        return st

    def _tx(self, tid: TransactionId, loc: tuple) -> Transaction:
        tx = self.transactions.get(tid.key)
        if tx is None:
            tx = self.transactions[tid.key] = Transaction(tid, loc, loc)
        tx.last = loc
        tx.files.add(loc[0])
        return tx

    def _add(self, d: Destination, m: LiveMessage, pos: tuple) -> None:
        st = self._dest(d)
        if d.type in (1, 3):
            waiting = {k for k, s in st.subscriptions.items() if s.retroactive or s.start < pos}
            if not waiting:
                return  # no durable subscription wants it: the broker does not keep it
            m.waiting = waiting
        st.messages[m.message_id] = m

    def _remove(self, d: Destination, msg_id: str, sub_key: str | None, unmatched: bool = False) -> None:
        # updateIndex(KahaRemoveMessageCommand) starts with getStoredDestination, which creates the
        # destination when the index has none: a REMOVE alone brings a destination into being.
        st = self._dest(d)
        m = st.messages.get(msg_id)
        if m is None:
            self.unknown_removes += 1
            return
        waiting = m.waiting
        if sub_key is None or waiting is None:
            del st.messages[msg_id]
            return
        sub = st.subscriptions.get(sub_key)
        if sub is not None and not unmatched:
            sub.last_ack = (m.file_id, m.offset, msg_id)
        waiting.discard(sub_key)
        if not waiting:
            del st.messages[msg_id]

    # -- the dispatcher ------------------------------------------------------------------------------
    def apply(self, file_id: int, offset: int, length: int, cmd: Command) -> None:
        name = cmd.type.name
        self.counts[name] = self.counts.get(name, 0) + 1
        if self.skip_file == file_id:
            self.skipped_records += 1
            return
        loc = (file_id, offset)
        t = cmd.type
        if t is EntryType.ADD_MESSAGE:
            assert isinstance(cmd, AddMessageCommand)
            m = LiveMessage(cmd.message_id, file_id, offset, length, cmd.priority,
                            str(cmd.transaction) if cmd.transaction else None)
            if cmd.transaction is not None:
                tx = self._tx(cmd.transaction, loc)
                tx.ops.append(("add", cmd.destination, m, loc))
                tx.records.append((file_id, offset, length))
                tx.sends += 1
            else:
                self._add(cmd.destination, m, loc)
        elif t is EntryType.REMOVE_MESSAGE:
            assert isinstance(cmd, RemoveMessageCommand)
            if cmd.transaction is not None:
                tx = self._tx(cmd.transaction, loc)
                tx.ops.append(("remove", cmd.destination, cmd.message_id, cmd.subscription_key, _unmatched(cmd)))
                tx.records.append((file_id, offset, length))
                tx.acks += 1
            else:
                self._remove(cmd.destination, cmd.message_id, cmd.subscription_key, _unmatched(cmd))
        elif t in (EntryType.PREPARE, EntryType.COMMIT, EntryType.ROLLBACK):
            assert isinstance(cmd, TransactionCommand)
            tx = self._tx(cmd.transaction, loc)
            if t is EntryType.PREPARE:
                tx.state = "prepared"
                tx.records.append((file_id, offset, length))
                return
            del self.transactions[cmd.transaction.key]
            if t is EntryType.COMMIT and tx.id.key in self.drop_transactions:
                tx.state = "rolled-back"
                self.dropped[tx.id.key] = tx
            elif t is EntryType.COMMIT:
                tx.committed_at = loc
                self._commit(tx)
            else:
                tx.state = "rolled-back"
            self._finished(tx)
        elif t is EntryType.SUBSCRIPTION:
            assert isinstance(cmd, SubscriptionCommand)
            st = self._dest(cmd.destination)
            key = cmd.subscription_key
            if cmd.subscription_info is None:
                st.subscriptions.pop(key, None)
                for mid in [mid for mid, m in st.messages.items() if m.waiting is not None]:
                    waiting = st.messages[mid].waiting
                    waiting.discard(key)
                    if not waiting:
                        del st.messages[mid]
            else:
                old = st.subscriptions.get(key)
                # A re-written subscription record (GC moves it to the tail) keeps the original start.
                start = old.start if old else loc
                st.subscriptions[key] = Subscription(key, file_id, offset, start, cmd.retroactive,
                                                     bytes(cmd.subscription_info))
                if cmd.retroactive and old is None:
                    for msg in st.messages.values():
                        waiting = msg.waiting
                        if waiting is not None:
                            waiting.add(key)
        elif t is EntryType.REMOVE_DESTINATION:
            assert isinstance(cmd, RemoveDestinationCommand)
            self.destinations.pop(cmd.destination.key, None)
            self.removed_destinations.add(cmd.destination.key)
        elif t is EntryType.UPDATE_MESSAGE:
            assert isinstance(cmd, UpdateMessageCommand)
            add = cmd.add
            st = self.destinations.get(add.destination.key)
            m = st.messages.get(add.message_id) if st else None
            if m is not None:
                m = st.messages[add.message_id] = _to_live(add.message_id, m)  # same place in the dict
                m.file_id, m.offset, m.length = file_id, offset, length
                m.priority = add.priority
        elif t is EntryType.ACK_MESSAGE_FILE_MAP:
            assert isinstance(cmd, BlobCommand)
            self.last_ack_map = loc
            self.last_ack_map_blob = bytes(cmd.blob)
        elif t is EntryType.PRODUCER_AUDIT:
            self.last_audit = loc
        elif t is EntryType.REWRITTEN_DATA_FILE:
            assert isinstance(cmd, RewrittenDataFileCommand)
            if cmd.skip_if_source_exists and cmd.source_data_file_id in self.existing:
                self.skip_file = file_id

    def _commit(self, tx: Transaction) -> None:
        tx.state = "committed"
        for op in tx.ops:
            if op[0] == "add":
                _, d, m, loc = op
                self._add(d, m, loc)
            else:
                _, d, mid, sub, unmatched = op
                self._remove(d, mid, sub, unmatched)

    def materialize(self) -> None:
        """Turn the fast path's compact entries into LiveMessage objects (dict order unchanged)."""
        for st in self.destinations.values():
            msgs = st.messages
            for mid, m in msgs.items():
                if type(m) is not LiveMessage:
                    msgs[mid] = _to_live(mid, m)

    def finish(self) -> list[Transaction]:
        """Unresolved transactions (open or prepared), in the order they started. Their operations are not
        live: the broker rolls back open local ones at start and keeps prepared XA ones in doubt."""
        return sorted(self.transactions.values(), key=lambda t: t.first)

    def commit_prepared(self, key: tuple) -> bool:
        """mKahaDB: a txStore COMMIT resolves a child store's prepared transaction."""
        tx = self.transactions.pop(key, None)
        if tx is None:
            return False
        if key in self.drop_transactions:
            tx.state = "rolled-back"
            self.dropped[key] = tx
            self._finished(tx)
            return True
        self._commit(tx)
        self._finished(tx)
        return True

    def _finished(self, tx: Transaction) -> None:
        self.finished_total[tx.state] = self.finished_total.get(tx.state, 0) + 1
        if len(self.finished) < MAX_FINISHED:
            self.finished.append(_strip(tx))


MAX_FINISHED = 10000


def _strip(tx: Transaction) -> Transaction:
    tx.ops = []
    tx.records = []
    return tx
