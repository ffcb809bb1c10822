"""The demo's manifest: what the store holds and what the broker loads back from it."""
from __future__ import annotations

from amqtool import __version__
from amqtool.formats.artemis.paging import page_file_name
from amqtool.engines.artemis.demo.constants import ID_BATCH, MANIFEST_SCHEMA, MAX_LISTED_RECORDS, ROUTING_NAMES
from amqtool.engines.artemis.demo.expected import _Journal


class _Manifest:
    """The manifest of a :class:`~amqtool.engines.artemis.demo.broker._Demo` (a mixin over its state)."""

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
