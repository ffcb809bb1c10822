"""The simulated broker runs that write a demo store (first start, restart, traffic, stop)."""
from __future__ import annotations

import hashlib
import heapq
import os
import random
from collections import deque
from pathlib import Path
from typing import Callable

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
from amqtool.formats.artemis.userrecords import (
    AckRefRecord,
    PageTransactionRecord,
    AddRefRecord,
    AddressBindingRecord,
    DeliveryCountRecord,
    DuplicateIdRecord,
    JournalRecordIds as R,
    QueueBindingRecord,
    QueueStatusRecord,
    ScheduledDeliveryRecord,
)
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES
from amqtool.engines.artemis.demo.constants import ANYCAST, BASE_TIME, MULTICAST, _WORDS
from amqtool.engines.artemis.demo.expected import _Journal
from amqtool.engines.artemis.demo.manifest import _Manifest
from amqtool.engines.artemis.demo.model import _Address, _IdGenerator, _Message, _PageStore, _PageTx, _Paged, _Queue
from amqtool.engines.artemis.demo.paging import _PagingTraffic


class _Demo(_PagingTraffic, _Manifest):
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
