"""``amqtool create --demo SIZE PATH``: a realistic Artemis broker store, and a manifest of what it holds.

The store is written the way a broker writes it, record by record, through
:class:`~amqtool.store.journal_writer.JournalWriter` and the broker-record codecs
(:mod:`amqtool.formats.artemis.userrecords`, :mod:`~amqtool.formats.artemis.message`). It simulates two
broker runs:

1. **First start**: both journals are created; the ID generator (``BatchingIDGenerator``, batch
   ``Integer.MAX_VALUE``) stores its first checkpoint (ID_COUNTER_RECORD 24); addresses (44) and queues (21)
   are created, each in its own bindings transaction (ADD_TX + COMMIT); a few messages are sent; the broker
   stops and stores its current id (24).
2. **Restart**: the journals are reopened exactly as ``JournalImpl.load`` would (free files re-initialised
   with new fileIDs); the ID generator deletes all its counter records but the last and stores a new
   checkpoint; one queue is paused (QUEUE_STATUS_RECORD 22); then traffic runs until the message journal
   reaches the requested size: core messages (45, persister 1) with properties of every TypedProperties type,
   TEXT and BYTES bodies, routed to one or several queues (ADD_REF 32 updates, a filtered subscription),
   acknowledged (33) and deleted (16) once every reference is acked, some in committed transactions, some
   sent in transactions that roll back, delivery-count (34) and scheduled-delivery (36) updates, duplicate
   ids (37) for messages carrying ``_AMQ_DUPL_ID``, a few messages moved to the DLQ, core large messages (30
   plus ``large-messages/<id>.msg``), and at the end one prepared XA transaction (PREPARE with the Xid
   as extra data) that stays unresolved. The broker stops: ID counter (24).

Layout: ``PATH/data/{bindings,journal,paging,large-messages}`` (a broker instance's data directory, as
``artemis create`` names it) and ``PATH/manifest.json``. Everything is written under a temporary sibling
directory with large buffered writes, fsynced once at the end, then renamed into place, so PATH appears
complete or not at all.

Deterministic: the same ``seed``, size, ``live_ratio`` and file settings give byte-identical stores (no
clock, no os.urandom, no hash randomisation involved).

The manifest's ``expected`` section is computed from what was written, applying Artemis' load rules
independently of amqtool's loader (adds/updates in append order, committed transaction records at their
commit, deletes removing every entry of an id, rolled-back and prepared records left out). The schema is
documented in ``man/amqtool-create.1``.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import random
import shutil
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amqtool import __version__
from amqtool.engines.artemis.create import resolve_messages_settings
from amqtool.errors import UsageError
from amqtool.formats.artemis.message import (
    BYTES_TYPE,
    TEXT_TYPE,
    CoreMessage,
    LargeMessage,
    MessageHeaders,
)
from amqtool.formats.artemis.primitives import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    NULL,
    SHORT,
    STRING,
    Property,
    TypedProperties,
    Xid,
    hashmap_growing_order,
    simple_string_hash,
)
from amqtool.formats.artemis.paging import ADDRESS_FILE, PagedMessage, encode_page_record, page_file_name
from amqtool.formats.artemis.userrecords import (
    AckRefRecord,
    CursorAckRecord,
    PageCompleteRecord,
    PageCounterValueRecord,
    PageTransactionRecord,
    AddRefRecord,
    AddressBindingRecord,
    DeliveryCountRecord,
    DuplicateIdRecord,
    IdCounterRecord,
    JournalRecordIds as R,
    QueueBindingRecord,
    QueueStatusRecord,
    ScheduledDeliveryRecord,
)
from amqtool.store import atomic
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

MANIFEST_SCHEMA = "amqtool-demo-manifest/1"
MULTICAST, ANYCAST = 0, 1
ROUTING_NAMES = {MULTICAST: "MULTICAST", ANYCAST: "ANYCAST"}
ID_BATCH = 2**31 - 1  # AbstractJournalStorageManager.CHECKPOINT_BATCH_SIZE = Integer.MAX_VALUE
BASE_TIME = 1_717_200_000_000  # 2024-06-01T00:00:00Z, the demo's clock start (ms)
MIN_SIZE = 4 * 1024 * 1024
MAX_LISTED_RECORDS = 200_000  # expected.journals.*.live is null above this many live entries
_WORDS = ("order shipment invoice payment customer warehouse parcel route carrier status pending "
          "confirmed delivered returned priority express standard region north south east west "
          "quantity price amount total discount tax currency euro dollar item sku batch lot "
          "account ledger credit debit balance audit event trace span node broker queue topic").split()


# --- the expected load state, computed from what is written ------------------------------------------------

class _Expected:
    """Artemis' load rules (§3.2) applied to the records as they are appended."""

    def __init__(self):
        self.seq = 0
        self.entries: dict[int, tuple] = {}  # seq -> (id, utype, is_update, size, sha256)
        self.by_id: dict[int, list[int]] = {}
        self.deleted: set[int] = set()
        self.txs: dict[int, list] = {}  # tx -> [records, deletes, prepared, extra]
        self.max_id = -1

    def _entry(self, rid: int, utype: int, body: bytes, upd: bool) -> tuple:
        return (rid, utype, upd, len(body), hashlib.sha256(body).digest())

    def _append(self, e: tuple) -> None:
        if e[0] in self.deleted:
            return
        self.seq += 1
        self.entries[self.seq] = e
        self.by_id.setdefault(e[0], []).append(self.seq)

    def record(self, rid: int, utype: int, body: bytes, upd: bool) -> None:
        self.max_id = max(self.max_id, rid)
        self._append(self._entry(rid, utype, body, upd))

    def delete(self, rid: int) -> None:
        self.deleted.add(rid)
        for s in self.by_id.pop(rid, ()):
            del self.entries[s]

    def tx_record(self, tx: int, rid: int, utype: int, body: bytes, upd: bool) -> None:
        self.max_id = max(self.max_id, rid)
        self.txs.setdefault(tx, [[], [], False, None])[0].append(self._entry(rid, utype, body, upd))

    def tx_delete(self, tx: int, rid: int) -> None:
        self.txs.setdefault(tx, [[], [], False, None])[1].append(rid)

    def prepare(self, tx: int, extra: bytes) -> None:
        t = self.txs.setdefault(tx, [[], [], False, None])
        t[2], t[3] = True, extra

    def commit(self, tx: int) -> None:
        recs, dels, _, _ = self.txs.pop(tx)
        for e in recs:
            self._append(e)
        for rid in dels:
            self.delete(rid)

    def rollback(self, tx: int) -> None:
        self.txs.pop(tx)

    def live(self) -> list[dict]:
        return [{"id": e[0], "userRecordType": e[1], "isUpdate": e[2], "compactCount": 0, "bodySize": e[3],
                 "bodySha256": e[4].hex()} for e in self.entries.values()]

    def by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries.values():
            k = str(e[1])
            out[k] = out.get(k, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


class _Journal:
    """A JournalWriter and its expected load state, fed together."""

    def __init__(self, writer: JournalWriter):
        self.w = writer
        self.x = _Expected()

    def add(self, rid, utype, body):
        self.w.append_add(rid, utype, body)
        self.x.record(rid, utype, body, False)

    def update(self, rid, utype, body):
        self.w.append_update(rid, utype, body)
        self.x.record(rid, utype, body, True)

    def delete(self, rid):
        self.w.append_delete(rid)
        self.x.delete(rid)

    def add_tx(self, tx, rid, utype, body):
        self.w.append_add_tx(tx, rid, utype, body)
        self.x.tx_record(tx, rid, utype, body, False)

    def update_tx(self, tx, rid, utype, body):
        self.w.append_update_tx(tx, rid, utype, body)
        self.x.tx_record(tx, rid, utype, body, True)

    def prepare(self, tx, extra):
        self.w.append_prepare(tx, extra)
        self.x.prepare(tx, extra)

    def commit(self, tx):
        self.w.append_commit(tx)
        self.x.commit(tx)

    def rollback(self, tx):
        self.w.append_rollback(tx)
        self.x.rollback(tx)

    def used_bytes(self) -> int:
        """Bytes of journal files in use (full files before the current one, plus the current position)."""
        return len(self.w.data_files) * self.w.file_size + self.w.position[1]


# --- the broker model ----------------------------------------------------------------------------------------

@dataclass
class _Queue:
    id: int
    name: str
    address: str
    routing_type: int
    filter: str | None = None
    user: str | None = None
    auto_created: bool = False
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    status: str = "RUNNING"


@dataclass
class _Address:
    id: int
    name: str
    routing_types: tuple[int, ...]
    auto_created: bool = False
    queues: list[_Queue] = field(default_factory=list)


@dataclass
class _Message:
    id: int
    address: str
    type: str  # "text" | "bytes" | "large"
    body_size: int
    body_sha256: str
    record_size: int
    queues: list[int]  # queue ids routed (ADD_REF)
    acked: set[int] = field(default_factory=set)
    delivery_count: dict[int, int] = field(default_factory=dict)
    scheduled: dict[int, int] = field(default_factory=dict)
    duplicate_id: str | None = None
    large_file: str | None = None
    tx: int | None = None
    deleted: bool = False


@dataclass
class _Paged:
    """One message in a page file."""

    id: int
    store: "_PageStore"
    page: int
    number: int
    queues: list[int]
    tx: int | None  # page transaction id (None: not transactional)
    body_size: int
    body_sha256: str
    persistent_size: int
    large_file: str | None = None
    acked: set[int] = field(default_factory=set)
    ack_records: dict[int, int] = field(default_factory=dict)  # queue -> ACKNOWLEDGE_CURSOR record id


@dataclass
class _PageTx:
    tx: int
    record_id: int | None  # PAGE_TRANSACTION record id (None when never stored: rolled back)
    state: str  # "open" (being sent) | "committed" | "prepared" | "not-found" (rolled back)
    messages: list[_Paged] = field(default_factory=list)


class _PageStore:
    """``<paging>/<uuid>/``: address.txt and 9-digit page files, appended as PagingStoreImpl.page does
    (a new page when the next message would pass page-size-bytes and the page is not empty)."""

    def __init__(self, directory: Path, folder: str, address: str, page_size: int):
        self.dir = directory / folder
        self.folder = folder
        self.address = address
        self.page_size = page_size
        self.dir.mkdir(parents=True)
        (self.dir / ADDRESS_FILE).write_text(address + "\n", encoding="utf-8")
        self.current = 1
        self.buf = bytearray()
        self.pages: dict[int, list[_Paged]] = {1: []}  # pages that exist -> messages in order
        self.sizes: dict[int, int] = {}
        self.complete: dict[tuple[int, int], int] = {}  # (queue, page) -> PAGE_CURSOR_COMPLETE record id

    def _flush(self) -> None:
        with open(self.dir / page_file_name(self.current), "wb") as fh:
            fh.write(self.buf)
        self.sizes[self.current] = len(self.buf)

    def append(self, record: bytes) -> tuple[int, int, bool]:
        """Add one framed record; returns (page, message number, whether a page was closed)."""
        rolled = False
        if len(self.buf) + len(record) > self.page_size and self.pages[self.current]:
            self._flush()
            self.current += 1
            self.pages[self.current] = []
            self.buf = bytearray()
            rolled = True
        self.buf += record
        return self.current, len(self.pages[self.current]), rolled

    def close(self) -> None:
        self._flush()


class _IdGenerator:
    """BatchingIDGenerator with CHECKPOINT_BATCH_SIZE = Integer.MAX_VALUE, storing to the bindings journal."""

    def __init__(self, bindings: _Journal):
        self.b = bindings
        self.counter = 0
        self.next_id = 0
        self.records: list[int] = []  # record ids of counter records in the journal (cleanup list)

    def _store(self, record_id: int, value: int) -> None:
        self.b.add(record_id, R.ID_COUNTER_RECORD, IdCounterRecord(id=value).encode())
        self.records.append(record_id)

    def generate(self) -> int:
        rid = self.counter
        self.counter += 1
        if rid >= self.next_id:
            self.next_id += ID_BATCH
            cp = self.counter
            self.counter += 1
            self._store(cp, self.next_id)
        return rid

    def persist_current(self) -> None:
        """stop(): persistCurrentID."""
        self.counter += 1
        self._store(self.counter, self.counter)

    def restart(self) -> None:
        """loadState for every counter record (the last one wins), then cleanup(): delete all but the last."""
        last_value = self.counter  # the value of the last record (persist_current stores counter)
        self.next_id = last_value + 1
        self.counter = self.next_id
        for rid in self.records[:-1]:
            self.b.delete(rid)
        self.records = self.records[-1:]


class _Demo:
    def __init__(self, root: Path, size: int, seed: int, live_ratio: float, file_size: int, min_files: int,
                 progress: Callable[[int], None] | None, large_messages: bool, paging: bool = True):
        self.root = root
        self.data = root / "data"
        self.size = size
        self.rng = random.Random(seed)
        self.seed = seed
        self.live_ratio = live_ratio
        self.file_size = file_size
        self.min_files = min_files
        self.progress = progress
        self.large_enabled = large_messages
        self.paging_enabled = paging
        self.page_size = max(64 * 1024, min(10 * 1024 * 1024, size // 256))
        self.page_stores: dict[str, _PageStore] = {}
        self.page_txs: dict[int, _PageTx] = {}
        self.paged: dict[int, _Paged] = {}  # paged messages still in existing pages
        self.page_counter_records: dict[int, int] = {}  # queue -> PAGE_CURSOR_COUNTER_VALUE record id
        self._paged_pending: list = []  # heap of (due step, seq, message id, queue id)
        self._paged_since_snapshot = 0
        self._budget = 1
        self.clock = BASE_TIME
        self.addresses: dict[str, _Address] = {}
        self.queues: dict[int, _Queue] = {}
        self.messages: dict[int, _Message] = {}
        self.prepared: list[dict] = []
        self.counts = {"sent": 0, "committedTx": 0, "rolledBackTx": 0, "rolledBackMessages": 0,
                       "acks": 0, "deletes": 0, "largeMessages": 0, "dlqMoves": 0, "duplicateIds": 0,
                       "deliveryCountUpdates": 0, "scheduledUpdates": 0, "restarts": 1,
                       "pagedSent": 0, "pagedAcks": 0, "pageTransactions": 0, "pagesDeleted": 0,
                       "pageCompleteRecords": 0, "pageCounterSnapshots": 0, "pagedLargeMessages": 0}
        self._pending: list[tuple[int, int, int, int]] = []  # heap of (due step, seq, message id, queue id)
        self._seq = 0
        self._step = 0
        self._reported = 0
        pool_rng = random.Random(seed ^ 0x5EED)
        self.byte_pool = pool_rng.randbytes(1 << 20)
        words = [pool_rng.choice(_WORDS) for _ in range(40000)]
        self.text_pool = " ".join(words)
        self._prop_orders: dict[tuple, list[int]] = {}
        self._recent_orders: deque[int] = deque(maxlen=64)  # DLQ candidates

    # --- journals ----------------------------------------------------------------------------------

    def _open(self, first: bool) -> None:
        kw = dict(sync="none", buffer_size=4 << 20)
        bdir, jdir = self.data / "bindings", self.data / "journal"
        if first:
            self.bw = _Journal(JournalWriter.create(bdir, BINDINGS, **kw))
            self.mw = _Journal(JournalWriter.create(jdir, MESSAGES, file_size=self.file_size,
                                                    min_files=self.min_files, **kw))
        else:
            bx, mx = self.bw.x, self.mw.x
            self.bw = _Journal(JournalWriter.open(bdir, BINDINGS, **kw))
            self.mw = _Journal(JournalWriter.open(jdir, MESSAGES, file_size=self.file_size,
                                                  min_files=self.min_files, **kw))
            self.bw.x, self.mw.x = bx, mx

    def _close(self) -> None:
        self.bw.w.close()
        self.mw.w.close()

    def _tick(self) -> None:
        if self.progress is not None:
            used = self.mw.used_bytes()
            if used - self._reported >= 1 << 20:
                self.progress(used - self._reported)
                self._reported = used

    # --- bindings ----------------------------------------------------------------------------------

    def _address(self, name: str, types: tuple[int, ...], auto_created: bool = False) -> _Address:
        aid = self.ids.generate()
        tx = self.ids.generate()
        rec = AddressBindingRecord(name=name, routing_types=types, auto_created=auto_created, internal=False)
        self.bw.add_tx(tx, aid, R.ADDRESS_BINDING_RECORD, rec.encode())
        self.bw.commit(tx)
        a = _Address(aid, name, types, auto_created)
        self.addresses[name] = a
        return a

    def _queue(self, address: str, name: str, rt: int, filter: str | None = None, user: str | None = None,
               auto_created: bool = False, max_consumers: int = -1, purge: bool = False) -> _Queue:
        qid = self.ids.generate()
        tx = self.ids.generate()
        rec = QueueBindingRecord.build(record_id=qid, name=name, address=address, routing_type=rt, filter=filter,
                                       user=user, auto_created=auto_created, max_consumers=max_consumers,
                                       purge_on_no_consumers=purge)
        self.bw.add_tx(tx, qid, R.QUEUE_BINDING_RECORD, rec.encode())
        self.bw.commit(tx)
        q = _Queue(qid, name, address, rt, filter, user, auto_created, max_consumers, purge)
        self.queues[qid] = q
        self.addresses[address].queues.append(q)
        return q

    def _configure(self) -> None:
        # broker.xml defaults of `artemis create`, then the application's destinations
        self._address("DLQ", (ANYCAST,))
        self._queue("DLQ", "DLQ", ANYCAST)
        self._address("ExpiryQueue", (ANYCAST,))
        self._queue("ExpiryQueue", "ExpiryQueue", ANYCAST)
        self._address("orders", (ANYCAST,))
        self._queue("orders", "orders", ANYCAST, max_consumers=10)
        self._address("invoices", (ANYCAST,))
        self._queue("invoices", "invoices", ANYCAST)
        self._address("events", (MULTICAST,))
        self._queue("events", "events.audit", MULTICAST, user="auditor")
        self._queue("events", "events.billing", MULTICAST, filter="region = 'EU'", user="billing")
        self._queue("events", "events.archive", MULTICAST)
        self._address("prices", (MULTICAST, ANYCAST))
        self._queue("prices", "prices.feed", MULTICAST, purge=True)
        self._queue("prices", "prices.snapshot", ANYCAST)
        self._address("notifications", (MULTICAST,), auto_created=True)  # an address without queues
        if self.paging_enabled:
            # addresses that reached max-size-bytes in the second run: their messages go to page files
            self._address("telemetry", (MULTICAST,))
            self._queue("telemetry", "telemetry.ops", MULTICAST)
            self._queue("telemetry", "telemetry.lake", MULTICAST)
            self._address("backlog", (ANYCAST,))
            self._queue("backlog", "backlog", ANYCAST)

    # --- messages ----------------------------------------------------------------------------------

    def _props(self, items: list[tuple[str, int, object]]) -> TypedProperties:
        """TypedProperties in the writer's HashMap order; the order is computed once per key list."""
        keys = tuple(k for k, _, _ in items)
        order = self._prop_orders.get(keys)
        if order is None:
            order = self._prop_orders[keys] = hashmap_growing_order([simple_string_hash(k) for k in keys])
        return TypedProperties(tuple(Property(items[i][0], items[i][1], items[i][2]) for i in order))

    def _uuid(self) -> bytes:
        b = bytearray(self.rng.getrandbits(128).to_bytes(16, "big"))
        b[6] = (b[6] & 0x0F) | 0x10  # a time-based (version 1) UUID, as Artemis' UUIDGenerator makes
        b[8] = (b[8] & 0x3F) | 0x80
        return bytes(b)

    def _body_size(self, lo: int = 64, hi: int = 16384) -> int:
        # log-uniform: many small messages, some large ones
        return int(lo * (hi / lo) ** self.rng.random())

    def _bytes_body(self, n: int, mid: int) -> bytes:
        """``n`` bytes: the message id, then pool bytes from a random offset (wrapping around the pool)."""
        pool = self.byte_pool
        need = max(n - 8, 0)
        off = self.rng.randrange(0, len(pool))
        parts = []
        while need > 0:
            chunk = pool[off:off + need]
            parts.append(chunk)
            need -= len(chunk)
            off = 0
        return (mid.to_bytes(8, "big") + b"".join(parts))[:n]

    def _text(self, n: int, mid: int) -> str:
        off = self.rng.randrange(0, len(self.text_pool) - n) if n < len(self.text_pool) else 0
        return (f"#{mid} " + self.text_pool[off:off + n])[:max(n, 8)]

    def _route(self, address: str, region: str | None, anycast: bool = False) -> list[int]:
        a = self.addresses[address]
        out = []
        for q in a.queues:
            if address == "prices":
                if (q.routing_type == ANYCAST) != anycast:
                    continue
            if q.filter is not None and region != "EU":
                continue
            out.append(q.id)
        return out

    def _core_message(self, mid: int, address: str) -> tuple:
        """A message for ``address``: (message, kind, region, anycast, duplicate id)."""
        rng = self.rng
        self.clock += rng.randrange(1, 50)
        region = rng.choice(("EU", "US", "APAC"))
        anycast = False
        dup = None
        if address == "orders":
            props = [("orderId", LONG, 100000 + mid), ("region", STRING, region),
                     ("amount", DOUBLE, round(rng.uniform(1, 5000), 2)), ("express", BOOLEAN, rng.random() < 0.2),
                     ("items", INT, rng.randrange(1, 40)), ("__AMQ_CID", STRING, "client-%d" % rng.randrange(8))]
            kind = "text"
        elif address == "events":
            props = [("eventType", STRING, rng.choice(("created", "updated", "closed"))), ("region", STRING, region),
                     ("severity", BYTE, rng.randrange(-3, 8)), ("code", SHORT, rng.randrange(-300, 30000)),
                     ("ratio", FLOAT, rng.choice((0.5, 0.25, 1.5, -2.0, 3.0))), ("grade", CHAR, rng.choice("ABCDÉ")),
                     ("trace", BYTES, rng.randbytes(12)), ("note", NULL, None)]
            kind = "bytes" if rng.random() < 0.5 else "text"
        elif address == "invoices":
            dup = f"inv-{mid}"
            props = [("invoiceId", LONG, 9000000 + mid), ("currency", STRING, rng.choice(("EUR", "USD", "GBP"))),
                     ("_AMQ_DUPL_ID", STRING, dup)]
            kind = "bytes"
        else:  # prices
            anycast = rng.random() < 0.1
            props = [("symbol", STRING, rng.choice(("ACME", "GLOBX", "INITECH", "UMBRL"))),
                     ("bid", DOUBLE, round(rng.uniform(10, 500), 3)), ("ask", DOUBLE, round(rng.uniform(10, 500), 3))]
            kind = "text"
        if kind == "text":
            body = CoreMessage.text_body(self._text(self._body_size(32, 8192), mid))
            mtype = TEXT_TYPE
        else:
            body = self._bytes_body(self._body_size(), mid)
            mtype = BYTES_TYPE
        msg = CoreMessage.build(message_id=mid, address=address, body=body, type=mtype, durable=True,
                                expiration=0, timestamp=self.clock, priority=rng.choice((4, 4, 4, 1, 9)),
                                user_id=self._uuid(), properties=self._props(props))
        return msg, kind, region, anycast, dup

    def _register(self, mid, address, kind, body: bytes, record_body: bytes, queues, dup=None, tx=None,
                  large_file=None) -> _Message:
        m = _Message(mid, address, kind, len(body), hashlib.sha256(body).hexdigest(), len(record_body),
                     list(queues), duplicate_id=dup, large_file=large_file, tx=tx)
        self.messages[mid] = m
        self.counts["sent"] += 1
        return m

    def _plan_acks(self, m: _Message, force_live: bool | None = None) -> None:
        """Decide the message's fate: fully acked later (then deleted) or left live on some queues."""
        live = (self.rng.random() < self.live_ratio) if force_live is None else force_live
        if live:
            if len(m.queues) > 1 and self.rng.random() < 0.5:
                keep = self.rng.randrange(1, len(m.queues))  # ack some queues now or later, keep the rest
                targets = self.rng.sample(m.queues, len(m.queues) - keep)
            else:
                targets = []
        else:
            targets = list(m.queues)
        for q in targets:
            self._seq += 1
            heapq.heappush(self._pending, (self._step + self.rng.randrange(0, 400), self._seq, m.id, q))

    def send(self, address: str, tx: int | None = None) -> _Message | None:
        mid = self.ids.generate()
        msg, kind, region, anycast, dup = self._core_message(mid, address)
        queues = self._route(address, region, anycast)
        rec = msg.encode()
        j = self.mw
        if dup is not None:
            dup_rid = self.ids.generate()
            dbody = DuplicateIdRecord(address=address, duplicate_id=dup.encode("utf-16-le")).encode()
            if tx is None:
                j.add(dup_rid, R.DUPLICATE_ID, dbody)
            else:
                j.add_tx(tx, dup_rid, R.DUPLICATE_ID, dbody)
            self.counts["duplicateIds"] += 1
        if tx is None:
            j.add(mid, R.ADD_MESSAGE_PROTOCOL, rec)
        else:
            j.add_tx(tx, mid, R.ADD_MESSAGE_PROTOCOL, rec)
        sched = None
        if self.rng.random() < 0.02:
            sched = self.clock + self.rng.randrange(60_000, 86_400_000)
        for q in queues:
            ref = AddRefRecord(queue_id=q).encode()
            if tx is None:
                j.update(mid, R.ADD_REF, ref)
            else:
                j.update_tx(tx, mid, R.ADD_REF, ref)
            if sched is not None:
                sb = ScheduledDeliveryRecord(queue_id=q, scheduled_time=sched).encode()
                if tx is None:
                    j.update(mid, R.SET_SCHEDULED_DELIVERY_TIME, sb)
                else:
                    j.update_tx(tx, mid, R.SET_SCHEDULED_DELIVERY_TIME, sb)
                self.counts["scheduledUpdates"] += 1
        m = self._register(mid, address, kind, msg.body, rec, queues, dup, tx)
        if address == "orders" and tx is None:
            self._recent_orders.append(mid)
        if sched is not None:
            m.scheduled = {q: sched for q in queues}
        return m

    def send_large(self) -> _Message:
        mid = self.ids.generate()
        self.clock += 5
        size = self.rng.randrange(100 * 1024, 1536 * 1024)
        body = self._bytes_body(size, mid)
        region = self.rng.choice(("EU", "US"))
        props = self._props([("orderId", LONG, 100000 + mid), ("region", STRING, region),
                             ("attachment", STRING, f"scan-{mid}.pdf"), ("_AMQ_LARGE_SIZE", LONG, size)])
        headers = MessageHeaders(mid, "orders", self._uuid(), BYTES_TYPE, True, 0, self.clock, 4, props)
        rec = LargeMessage(headers).encode()
        name = f"{mid}.msg"
        (self.data / "large-messages" / name).write_bytes(body)
        queues = self._route("orders", region)
        self.mw.add(mid, R.ADD_LARGE_MESSAGE, rec)
        for q in queues:
            self.mw.update(mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())
        self.counts["largeMessages"] += 1
        return self._register(mid, "orders", "large", body, rec, queues, large_file=name)

    def _delete_message(self, m: _Message) -> None:
        self.mw.delete(m.id)
        m.deleted = True
        del self.messages[m.id]  # only live and in-flight messages are kept in memory
        self.counts["deletes"] += 1
        if m.large_file:
            os.unlink(self.data / "large-messages" / m.large_file)  # the broker deletes the body file

    def _ack(self, mid: int, q: int, tx: int | None = None) -> None:
        m = self.messages.get(mid)
        if m is None or q in m.acked:
            return
        if self.rng.random() < 0.05:  # redelivered before the ack: the delivery count is persisted
            n = self.rng.randrange(1, 4)
            self.mw.update(mid, R.UPDATE_DELIVERY_COUNT, DeliveryCountRecord(queue_id=q, count=n).encode())
            m.delivery_count[q] = n
            self.counts["deliveryCountUpdates"] += 1
        body = AckRefRecord(queue_id=q).encode()
        if tx is None:
            self.mw.update(mid, R.ACKNOWLEDGE_REF, body)
        else:
            self.mw.update_tx(tx, mid, R.ACKNOWLEDGE_REF, body)
        m.acked.add(q)
        self.counts["acks"] += 1

    def _drain(self, until: int | None) -> None:
        """Acknowledge the acks due by step ``until`` (all with None); some in one transaction."""
        due = []
        while self._pending and (until is None or self._pending[0][0] <= until):
            due.append(heapq.heappop(self._pending))
        i = 0
        while i < len(due):
            if self.rng.random() < 0.15 and len(due) - i >= 2:
                batch = due[i:i + self.rng.randrange(2, 6)]
                tx = self.ids.generate()
                touched = []
                for _, _, mid, q in batch:
                    m = self.messages.get(mid)
                    if m is not None and q not in m.acked:
                        self._ack(mid, q, tx)
                        touched.append(mid)
                self.mw.commit(tx)
                self.counts["committedTx"] += 1
                for mid in touched:
                    self._maybe_delete(mid)
                i += len(batch)
            else:
                _, _, mid, q = due[i]
                self._ack(mid, q)
                self._maybe_delete(mid)
                i += 1

    def _maybe_delete(self, mid: int) -> None:
        m = self.messages.get(mid)
        if m is not None and set(m.queues) <= m.acked:
            self._delete_message(m)

    def _move_to_dlq(self) -> None:
        """A message that failed delivery too often: copied to DLQ (new id), original acked and deleted."""
        cands = [m for m in (self.messages.get(i) for i in self._recent_orders) if m is not None and not m.acked]
        if not cands:
            return
        orig = self.rng.choice(cands)
        oq = orig.queues[0]
        mid = self.ids.generate()
        self.clock += 1
        text = f"dead letter of message {orig.id}"
        props = self._props([("_AMQ_ORIG_ADDRESS", STRING, "orders"), ("_AMQ_ORIG_QUEUE", STRING, "orders"),
                             ("_AMQ_ORIG_MESSAGE_ID", LONG, orig.id), ("orderId", LONG, 100000 + orig.id)])
        msg = CoreMessage.build(message_id=mid, address="DLQ", body=CoreMessage.text_body(text), type=TEXT_TYPE,
                                durable=True, timestamp=self.clock, user_id=self._uuid(), properties=props)
        rec = msg.encode()
        dlq = self.addresses["DLQ"].queues[0].id
        self.mw.add(mid, R.ADD_MESSAGE_PROTOCOL, rec)
        self.mw.update(mid, R.ADD_REF, AddRefRecord(queue_id=dlq).encode())
        m = self._register(mid, "DLQ", "text", msg.body, rec, [dlq])
        self.mw.update(orig.id, R.UPDATE_DELIVERY_COUNT, DeliveryCountRecord(queue_id=oq, count=10).encode())
        orig.delivery_count[oq] = 10
        self.counts["deliveryCountUpdates"] += 1
        for q in orig.queues:
            self._ack(orig.id, q)
        self._maybe_delete(orig.id)
        self.counts["dlqMoves"] += 1
        self._plan_acks(m, force_live=True)

    # --- paging -----------------------------------------------------------------------------------

    def _page_store(self, address: str) -> _PageStore:
        ps = self.page_stores.get(address)
        if ps is None:
            folder = self._uuid().hex()
            folder = f"{folder[:8]}-{folder[8:12]}-{folder[12:16]}-{folder[16:20]}-{folder[20:]}"
            ps = self.page_stores[address] = _PageStore(self.data / "paging", folder, address, self.page_size)
        return ps

    def send_paged(self, address: str, ptx: _PageTx | None = None, large: bool = False) -> _Paged:
        """A message for a paging address: into the current page file (PagedMessage), no journal record."""
        rng = self.rng
        mid = self.ids.generate()
        self.clock += rng.randrange(1, 20)
        props = self._props([("sensor", STRING, "s-%03d" % rng.randrange(200)), ("seq", LONG, mid),
                             ("value", DOUBLE, round(rng.uniform(-50, 150), 3)), ("ok", BOOLEAN, rng.random() < 0.9)])
        large_file = None
        if large:
            size = rng.randrange(64 * 1024, 512 * 1024)
            body = self._bytes_body(size, mid)
            props = self._props([("sensor", STRING, "camera-1"), ("seq", LONG, mid), ("_AMQ_LARGE_SIZE", LONG, size)])
            msg = LargeMessage(MessageHeaders(mid, address, self._uuid(), BYTES_TYPE, True, 0, self.clock, 4, props))
            large_file = f"{mid}.msg"
            (self.data / "large-messages" / large_file).write_bytes(body)
            psize = len(msg.encode())
            self.counts["pagedLargeMessages"] += 1
        else:
            body = self._bytes_body(self._body_size(64, 4096), mid)
            msg = CoreMessage.build(message_id=mid, address=address, body=body, type=BYTES_TYPE, durable=True,
                                    timestamp=self.clock, user_id=self._uuid(), properties=props)
            psize = msg.encode_size()
        queues = [q.id for q in self.addresses[address].queues]
        pm = PagedMessage.build(msg, queues, transaction_id=ptx.tx if ptx is not None else -1)
        ps = self._page_store(address)
        page, number, rolled = ps.append(encode_page_record(pm))
        p = _Paged(mid, ps, page, number, queues, ptx.tx if ptx is not None else None, len(body),
                   hashlib.sha256(body).hexdigest(), psize, large_file)
        ps.pages[page].append(p)
        self.paged[mid] = p
        if ptx is not None:
            ptx.messages.append(p)
        self.counts["pagedSent"] += 1
        self._paged_since_snapshot += 1
        if rolled:
            self._cleanup_pages(ps)
        return p

    def _plan_paged_acks(self, p: _Paged, force_live: bool | None = None) -> None:
        """Paged consumers are FIFO: a queue has consumed everything sent before a point, so old pages
        are consumed (and completed, then deleted) and the backlog sits in the newest pages. The second
        telemetry subscription lags further behind, so some pages are complete for one queue only."""
        frac = (self.mw.used_bytes() + self._paging_bytes()) / max(self._budget, 1)
        for i, q in enumerate(p.queues):
            lag = 1.6 if i == 1 else 1.0
            live = frac >= 1 - self.live_ratio * lag if force_live is None else force_live
            if not live:
                self._seq += 1
                heapq.heappush(self._paged_pending, (self._step + self.rng.randrange(0, 200), self._seq, p.id, q))

    def _paged_traffic(self) -> None:
        rng = self.rng
        address = "telemetry" if rng.random() < 0.7 else "backlog"
        r = rng.random()
        if r < 0.1:  # a transactional send: the PAGE_TRANSACTION record commits the paged messages
            tx = self.ids.generate()
            ptx = self.page_txs[tx] = _PageTx(tx, self.ids.generate(), "open")
            for _ in range(rng.randrange(1, 5)):
                self.send_paged(address, ptx)
            self.mw.add_tx(tx, ptx.record_id, R.PAGE_TRANSACTION,
                           PageTransactionRecord(transaction_id=tx, number_of_messages=len(ptx.messages)).encode())
            self.mw.commit(tx)
            ptx.state = "committed"
            self.counts["pageTransactions"] += 1
            self.counts["committedTx"] += 1
            for p in ptx.messages:
                self._plan_paged_acks(p)
        elif r < 0.12:  # rolled back before commit: the paged messages stay in the page, never delivered
            tx = self.ids.generate()
            ptx = self.page_txs[tx] = _PageTx(tx, None, "open")
            for _ in range(rng.randrange(1, 3)):
                self.send_paged(address, ptx)
            ptx.state = "not-found"
            self.counts["rolledBackTx"] += 1
        else:
            self._plan_paged_acks(self.send_paged(address))

    def _paged_ack(self, mid: int, q: int, tx: int | None) -> None:
        p = self.paged.get(mid)
        if p is None or q in p.acked:
            return
        rid = self.ids.generate()
        body = CursorAckRecord(queue_id=q, page_nr=p.page, message_nr=p.number).encode()
        if tx is None:
            self.mw.add(rid, R.ACKNOWLEDGE_CURSOR, body)
        else:
            self.mw.add_tx(tx, rid, R.ACKNOWLEDGE_CURSOR, body)
        p.acked.add(q)
        p.ack_records[q] = rid
        self.counts["pagedAcks"] += 1

    def _drain_paged(self, until: int | None) -> None:
        while self._paged_pending and (until is None or self._paged_pending[0][0] <= until):
            due = [heapq.heappop(self._paged_pending)]
            if self.rng.random() < 0.1:
                while self._paged_pending and len(due) < 4 and (until is None or self._paged_pending[0][0] <= until):
                    due.append(heapq.heappop(self._paged_pending))
                tx = self.ids.generate()
                for _, _, mid, q in due:
                    self._paged_ack(mid, q, tx)
                self.mw.commit(tx)
                self.counts["committedTx"] += 1
            else:
                self._paged_ack(due[0][2], due[0][3], None)

    def _paging_bytes(self) -> int:
        return sum(sum(ps.sizes.values()) + len(ps.buf) for ps in self.page_stores.values())

    def _consumed(self, p: _Paged, q: int) -> bool:
        """The queue needs nothing more of this message: acked, or its page transaction never committed."""
        if q in p.acked:
            return True
        return p.tx is not None and self.page_txs[p.tx].state == "not-found"

    def _cleanup_pages(self, ps: _PageStore) -> None:
        """PageSubscriptionImpl.cleanupEntries + PageCursorProviderImpl.cleanup on the closed pages: a queue
        that consumed a whole page gets PAGE_CURSOR_COMPLETE and its acks of that page deleted (one
        transaction); a page every queue completed is deleted with its records."""
        queues = [q.id for q in self.addresses[ps.address].queues]
        for page in [pg for pg in ps.pages if pg != ps.current]:
            msgs = ps.pages[page]
            if any(p.tx is not None and self.page_txs[p.tx].state in ("open", "prepared") for p in msgs):
                continue
            done = [q for q in queues if all(self._consumed(p, q) for p in msgs)]
            for q in done:
                if (q, page) in ps.complete:
                    continue
                tx = self.ids.generate()
                rid = self.ids.generate()
                self.mw.add_tx(tx, rid, R.PAGE_CURSOR_COMPLETE,
                               PageCompleteRecord(queue_id=q, page_nr=page, message_nr=len(msgs)).encode())
                for p in msgs:
                    ar = p.ack_records.pop(q, None)
                    if ar is not None:
                        self.mw.w.append_delete_tx(tx, ar)
                        self.mw.x.tx_delete(tx, ar)
                self.mw.commit(tx)
                ps.complete[(q, page)] = rid
                self.counts["pageCompleteRecords"] += 1
            if len(done) == len(queues):
                os.unlink(ps.dir / page_file_name(page))
                for q in queues:
                    self.mw.delete(ps.complete.pop((q, page)))
                for p in msgs:
                    del self.paged[p.id]
                    if p.large_file:
                        os.unlink(self.data / "large-messages" / p.large_file)
                    if p.tx is not None:
                        ptx = self.page_txs[p.tx]
                        ptx.messages.remove(p)
                        if not ptx.messages:
                            if ptx.record_id is not None and ptx.state == "committed":
                                self.mw.delete(ptx.record_id)
                            del self.page_txs[p.tx]
                del ps.pages[page]
                del ps.sizes[page]
                self.counts["pagesDeleted"] += 1

    def _pending_count(self, q: int) -> tuple[int, int]:
        n = size = 0
        for p in self.paged.values():
            if q in p.queues and q not in p.acked and (p.tx is None or self.page_txs[p.tx].state == "committed"):
                n += 1
                size += p.persistent_size
        return n, size

    def _snapshot_counters(self) -> None:
        """PageSubscriptionCounterImpl.snapshot for every paged queue: the old value record deleted and the
        current value stored, in one transaction."""
        for ps in self.page_stores.values():
            for q in self.addresses[ps.address].queues:
                value, size = self._pending_count(q.id)
                old = self.page_counter_records.pop(q.id, None)
                if old is None and value == 0:
                    continue
                tx = self.ids.generate()
                if old is not None:
                    self.mw.w.append_delete_tx(tx, old)
                    self.mw.x.tx_delete(tx, old)
                if value > 0:
                    rid = self.ids.generate()
                    self.mw.add_tx(tx, rid, R.PAGE_CURSOR_COUNTER_VALUE,
                                   PageCounterValueRecord(queue_id=q.id, value=value, persistent_size=size).encode())
                    self.page_counter_records[q.id] = rid
                self.mw.commit(tx)
                self.counts["pageCounterSnapshots"] += 1
        self._paged_since_snapshot = 0

    # --- the two broker runs -----------------------------------------------------------------------

    def _traffic_step(self) -> None:
        rng = self.rng
        self._step += 1
        r = rng.random()
        address = rng.choices(("orders", "events", "invoices", "prices"), (40, 30, 15, 15))[0]
        if r < 0.08:
            tx = self.ids.generate()
            sent = [self.send(address, tx) for _ in range(rng.randrange(1, 6))]
            self.mw.commit(tx)
            self.counts["committedTx"] += 1
            for m in sent:
                m.tx = None
                self._plan_acks(m)
        elif r < 0.09:
            tx = self.ids.generate()
            sent = [self.send(address, tx) for _ in range(rng.randrange(1, 4))]
            self.mw.rollback(tx)
            self.counts["rolledBackTx"] += 1
            self.counts["rolledBackMessages"] += len(sent)
            self.counts["sent"] -= len(sent)
            for m in sent:
                del self.messages[m.id]
        elif r < 0.092:
            self._move_to_dlq()
        elif self.paging_enabled and r < 0.35:
            self._paged_traffic()
        else:
            m = self.send(address)
            self._plan_acks(m)
        if self._step % 16 == 0:
            self._drain(self._step)
            if self.paging_enabled:
                self._drain_paged(self._step)
                if self._paged_since_snapshot >= 5000:
                    self._snapshot_counters()
        self._tick()

    def _prepared_xa(self) -> None:
        """One XA transaction prepared and never resolved: two sends and the ack of a live message."""
        tx = self.ids.generate()
        xid = Xid(format_id=131077, branch_qualifier=b"amqtool-demo-branch-1",
                  global_transaction_id=b"amqtool-demo-gtx-%d" % self.seed)
        sent = [self.send("orders", tx) for _ in range(2)]
        acked = None
        live = [m for m in self.messages.values() if not m.deleted and m.tx is None and m.type != "large"
                and set(m.queues) - m.acked]
        if live:
            acked = live[-1]
            q = sorted(set(acked.queues) - acked.acked)[0]
            self.mw.update_tx(tx, acked.id, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=q).encode())
        paged = []
        if self.paging_enabled:
            ptx = self.page_txs[tx] = _PageTx(tx, self.ids.generate(), "open")
            paged = [self.send_paged("backlog", ptx)]
            self.mw.add_tx(tx, ptx.record_id, R.PAGE_TRANSACTION,
                           PageTransactionRecord(transaction_id=tx, number_of_messages=1).encode())
            ptx.state = "prepared"
        extra = xid.encode()
        self.mw.prepare(tx, extra)
        for m in sent:
            m.tx = tx
        recs = self.mw.x.txs[tx][0]
        self.prepared.append({
            "txId": tx,
            "xid": {"formatId": xid.format_id, "globalTransactionId": xid.global_transaction_id.hex(),
                    "branchQualifier": xid.branch_qualifier.hex()},
            "extraDataHex": extra.hex(),
            "messageIds": [m.id for m in sent],
            "pagedMessageIds": [p.id for p in paged],
            "acks": [{"messageId": acked.id, "queue": self.queues[q].name, "queueId": q}] if acked else [],
            "records": [{"id": e[0], "userRecordType": e[1], "isUpdate": e[2], "bodySize": e[3],
                         "bodySha256": e[4].hex()} for e in recs],
            "recordsToDelete": [],
        })

    def run(self) -> None:
        for d in ("bindings", "journal", "paging", "large-messages"):
            (self.data / d).mkdir(parents=True, exist_ok=True)
        # run 1: first start
        self._open(first=True)
        self.ids = _IdGenerator(self.bw)
        self._configure()
        for address in ("orders", "events", "invoices", "prices"):
            m = self.send(address)
            self._plan_acks(m)
        self._drain(None)
        self.ids.persist_current()
        self._close()
        # run 2: restart, pause a queue, traffic until the size is reached
        self._open(first=False)
        self.ids.b = self.bw
        self.ids.restart()
        paused = next(q for q in self.queues.values() if q.name == "prices.snapshot")
        self.bw.add(self.ids.generate(), R.QUEUE_STATUS_RECORD,
                    QueueStatusRecord(queue_id=paused.id, status=0).encode())
        paused.status = "PAUSED"
        budget = self.size - 2 * BINDINGS.default_file_size
        self._budget = int(budget * 0.97)
        large_every = 48 * 1024 * 1024
        next_large = large_every // 2 if self.large_enabled else None
        large_bytes = 0
        # leave room for the final ack drain and the prepared transaction
        while self.mw.used_bytes() + large_bytes + self._paging_bytes() < budget * 0.97:
            self._traffic_step()
            if next_large is not None and self.mw.used_bytes() >= next_large:
                m = self.send_large()
                large_bytes += m.body_size
                self._plan_acks(m, force_live=True if self.counts["largeMessages"] == 1 else None)
                next_large += large_every
        if self.large_enabled and self.counts["largeMessages"] == 0:
            self._plan_acks(self.send_large(), force_live=True)
        if self.paging_enabled and self.large_enabled:
            self._plan_paged_acks(self.send_paged("telemetry", large=True), force_live=True)
        self._drain(None)
        if self.paging_enabled:
            self._drain_paged(None)
        self._prepared_xa()
        if self.paging_enabled:
            for ps in self.page_stores.values():
                self._cleanup_pages(ps)
                ps.close()
            self._snapshot_counters()
        self.ids.persist_current()
        self._close()
        if self.progress is not None:
            self.progress(max(self.size - self._reported, 0))

    # --- manifest ----------------------------------------------------------------------------------

    def _paging_manifest(self, qname: dict[int, str]) -> dict:
        stores = []
        messages = []
        pending: dict[str, list[int]] = {}
        for ps in self.page_stores.values():
            for q in self.addresses[ps.address].queues:
                pending[q.name] = []
            pages = sorted(ps.pages)
            stores.append({
                "address": ps.address, "folder": f"data/paging/{ps.folder}", "numberOfPages": len(pages),
                "firstPage": pages[0] if pages else None, "currentPage": ps.current,
                "pages": [{"pageId": pg, "file": page_file_name(pg), "size": ps.sizes[pg],
                           "records": len(ps.pages[pg])} for pg in pages],
            })
            for pg in pages:
                for p in ps.pages[pg]:
                    state = None if p.tx is None else self.page_txs[p.tx].state
                    qstates = {}
                    for q in p.queues:
                        if q in p.ack_records:  # its ACKNOWLEDGE_CURSOR still exists
                            qstates[str(q)] = "acked"
                        elif (q, pg) in ps.complete:
                            qstates[str(q)] = "page-complete"
                        else:
                            qstates[str(q)] = "pending"
                    pend = [q for q in p.queues if qstates[str(q)] == "pending"]
                    deliverable = state in (None, "committed")
                    e = {"address": ps.address, "page": pg, "messageNumber": p.number, "messageId": p.id,
                         "transactionId": -1 if p.tx is None else p.tx, "pageTransaction": state,
                         "queues": list(p.queues), "queueStates": qstates, "pendingQueues": pend,
                         "deliverable": deliverable, "large": p.large_file is not None,
                         "bodySize": p.body_size, "bodySha256": p.body_sha256}
                    messages.append(e)
                    if deliverable:
                        for q in pend:
                            pending[qname[q]].append(p.id)
        counters = {}
        for ps in self.page_stores.values():
            for q in self.addresses[ps.address].queues:
                if q.id in self.page_counter_records:
                    counters[q.name] = self._pending_count(q.id)[0]
        return {"pageSize": self.page_size, "stores": stores, "messages": messages,
                "pendingByQueue": {k: sorted(v) for k, v in pending.items()},
                "counters": counters}

    def manifest(self) -> dict:
        qname = {q.id: q.name for q in self.queues.values()}
        live_by_queue: dict[str, list] = {q.name: [] for q in self.queues.values()}
        live_msgs = []
        for m in sorted(self.messages.values(), key=lambda m: m.id):
            if m.deleted or m.tx is not None:
                continue
            remaining = [q for q in m.queues if q not in m.acked]
            if not remaining:
                continue
            live_msgs.append(m)
            for q in remaining:
                e = {"messageId": m.id, "type": m.type, "bodySize": m.body_size, "bodySha256": m.body_sha256,
                     "recordSize": m.record_size}
                if m.delivery_count.get(q):
                    e["deliveryCount"] = m.delivery_count[q]
                if m.scheduled.get(q):
                    e["scheduledDeliveryTime"] = m.scheduled[q]
                if m.duplicate_id:
                    e["duplicateId"] = m.duplicate_id
                if m.large_file:
                    e["largeMessageFile"] = f"data/large-messages/{m.large_file}"
                live_by_queue[qname[q]].append(e)
        written = self.counts["sent"]
        large = [{"messageId": m.id, "file": f"data/large-messages/{m.large_file}", "size": m.body_size,
                  "sha256": m.body_sha256, "paged": False} for m in live_msgs if m.large_file]
        large += [{"messageId": p.id, "file": f"data/large-messages/{p.large_file}", "size": p.body_size,
                   "sha256": p.body_sha256, "paged": True} for p in sorted(self.paged.values(), key=lambda p: p.id)
                  if p.large_file]

        def journal_doc(j: _Journal, rel: str) -> dict:
            w = j.w
            return {
                "directory": rel,
                "fileSize": w.file_size,
                "minFiles": w.min_files,
                "files": [{"name": f.name, "fileId": f.file_id, "size": w.file_size} for f in w.files()],
                "liveRecordCount": len(j.x.entries),
                "liveRecordsByUserRecordType": j.x.by_type(),
                "maxId": j.x.max_id,
                # the full list only while it stays reasonable (ids, types, sizes, sha256 per entry)
                "live": j.x.live() if len(j.x.entries) <= MAX_LISTED_RECORDS else None,
            }

        return {
            "schema": MANIFEST_SCHEMA,
            "generator": f"amqtool {__version__}",
            "seed": self.seed,
            "requestedSize": self.size,
            "liveRatio": self.live_ratio,
            "layout": {"data": "data", "bindings": "data/bindings", "journal": "data/journal",
                       "paging": "data/paging", "largeMessages": "data/large-messages"},
            "addresses": [{"id": a.id, "name": a.name, "routingTypes": [ROUTING_NAMES[t] for t in a.routing_types],
                           "autoCreated": a.auto_created, "queues": [q.name for q in a.queues]}
                          for a in self.addresses.values()],
            "queues": [{"id": q.id, "name": q.name, "address": q.address,
                        "routingType": ROUTING_NAMES[q.routing_type], "filter": q.filter, "user": q.user,
                        "autoCreated": q.auto_created, "maxConsumers": q.max_consumers,
                        "purgeOnNoConsumers": q.purge_on_no_consumers, "status": q.status}
                       for q in self.queues.values()],
            "idGenerator": {"batchSize": ID_BATCH, "counterRecordIds": list(self.ids.records),
                            "lastValue": self.ids.counter},
            "counts": dict(self.counts, messagesWritten=written, messagesLive=len(live_msgs),
                           refsLive=sum(len(v) for v in live_by_queue.values()),
                           actualLiveRatio=round(len(live_msgs) / written, 4) if written else 0.0),
            "expected": {
                "journals": {"bindings": journal_doc(self.bw, "data/bindings"),
                             "messages": journal_doc(self.mw, "data/journal")},
                "liveByQueue": live_by_queue,
                "messageCounts": {k: len(v) for k, v in live_by_queue.items()},
                "prepared": self.prepared,
                "failed": [],
                "largeMessages": large,
                "paging": self._paging_manifest(qname) if self.paging_enabled else None,
            },
        }


def _fsync_tree(root: Path) -> None:
    for dirpath, dirs, names in os.walk(root):
        for n in names:
            fd = os.open(os.path.join(dirpath, n), os.O_RDONLY | os.O_CLOEXEC)
            try:
                atomic.fsync(fd, os.path.join(dirpath, n))
            finally:
                os.close(fd)
        atomic.fsync_dir(dirpath)


def create_demo(path: str | os.PathLike, size: int, *, seed: int = 1, live_ratio: float = 0.3,
                file_size: int | None = None, min_files: int | None = None,
                progress: Callable[[int], None] | None = None, large_messages: bool = True,
                paging: bool = True) -> dict:
    """Write a demo broker store of about ``size`` bytes at ``path`` and return its manifest (also written to
    ``path/manifest.json``). ``path`` must not exist or be an empty directory. ``progress(n)`` receives
    bytes of progress (they add up to ``size``)."""
    if not 0.0 <= live_ratio <= 1.0:
        raise UsageError("--live-ratio must be between 0 and 1")
    if size < MIN_SIZE:
        raise UsageError(f"demo size must be at least {MIN_SIZE // (1024 * 1024)} MiB")
    fs, mf = resolve_messages_settings(file_size, min_files)
    if fs < 64 * 1024:
        raise UsageError("a demo needs journal files of at least 64 KiB (large message headers and "
                         "transactions must fit)")
    target = Path(path).absolute()
    if target.exists():
        if not target.is_dir():
            raise UsageError("exists and is not a directory", path=str(target))
        if any(target.iterdir()):
            raise UsageError("refusing to write a demo store into a non-empty directory", path=str(target))
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    atomic.ensure_free_space(parent, int(size * 1.1) + 4 * fs)
    tmp = parent / f".{target.name}.amqtool-tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        demo = _Demo(tmp, size, seed, live_ratio, fs, mf, progress, large_messages, paging)
        demo.run()
        manifest = demo.manifest()
        with open(tmp / "manifest.json", "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, ensure_ascii=False, separators=(",", ":"))  # the C encoder: fast
            fh.write("\n")
        _fsync_tree(tmp)
        if target.exists():
            target.rmdir()  # empty (checked above); rename() cannot replace it atomically otherwise
        atomic.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest
