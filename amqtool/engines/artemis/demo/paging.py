"""The demo's paging traffic: page stores, paged sends (some in page transactions, some large), cursor
acks, page-complete records, counters, and the page files the broker would clean up."""
from __future__ import annotations

import hashlib
import heapq
import os

from amqtool.formats.artemis.message import (
    BYTES_TYPE,
    CoreMessage,
    LargeMessage,
    MessageHeaders,
)
from amqtool.formats.artemis.primitives import (
    BOOLEAN,
    DOUBLE,
    LONG,
    STRING,
)
from amqtool.formats.artemis.paging import PagedMessage, encode_page_record, page_file_name
from amqtool.formats.artemis.userrecords import (
    CursorAckRecord,
    PageCompleteRecord,
    PageCounterValueRecord,
    PageTransactionRecord,
    JournalRecordIds as R,
)
from amqtool.engines.artemis.demo.model import _PageStore, _PageTx, _Paged


class _PagingTraffic:
    """Paging for :class:`~amqtool.engines.artemis.demo.broker._Demo` (a mixin over its state)."""

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
                           # the references it paged, as the broker counts them: one per message and queue
                           # (PagingStoreImpl -> PageTransactionInfo.increment(durableQueues, nonDurableQueues))
                           PageTransactionRecord(transaction_id=tx,
                                                 number_of_messages=sum(len(p.queues) for p in ptx.messages)).encode())
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
