"""Export rows of a LevelDB store (``amqtool export LEVELDB``): the store as the broker recovers it
(:func:`amqtool.engines.leveldb.load.load`), in the columns KahaDB stores give (:mod:`.kahadb`, whose OpenWire
column decoding this reuses). Both engines take their rows from :class:`LevelDBExport` (the recovery replays
the log in order, as KahaDB's does).

Row rules, as for KahaDB:

* a queue's recovered messages: one row each, ``queue`` and ``address`` the destination's name, ``ANYCAST``;
* a topic message: one row per durable subscription still waiting for it (its sequence above the
  subscription's ack position), ``queue`` = ``clientId:subscriptionName``, ``MULTICAST``;
* sends of prepared XA transactions give ``prepared`` rows (on the queue; on every subscription of a topic);
* ``message_id`` is the log position of the message's DATA record (unique in the store, increasing in the
  order the broker stored the messages); ``store_message_id`` the OpenWire message id; ``delivery_count``
  the entry's stored redelivery count (the broker's ``decodeQueueEntryMeta``);
* order: destinations by qualified name, subscriptions by client id and name, messages by sequence.

The subscriptions table: one row per durable subscription, with its selector (``SubscriptionRecord``);
``no_local``, ``retroactive``, ``subscribed_at`` and ``subscription_record`` are not kept by this store
(null); ``last_ack_message_id`` the message id (DATA position) of the entry at its ack position, when the
index still holds it; ``pending`` the rows written for it.
"""
from __future__ import annotations

from typing import Callable, Iterator

from amqtool.engines.export.kahadb import decode_openwire
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.parse import message_row
from amqtool.errors import FormatError


class LevelDBExport:
    def __init__(self, store, options: ExportOptions, progress: Callable[[int], None] | None = None,
                 engine: str = "local"):
        from amqtool.engines.leveldb.load import load
        from amqtool.engines.leveldb.verify import judged
        from amqtool.engines.verdicts import refuse_unless_salvage

        if store.replicated:
            from amqtool.errors import UsageError

            raise UsageError("a replicated LevelDB store: export one node's directory (verify says which node "
                             "holds the latest log position)", path=str(store.root))
        self.options = options
        self.summary = ExportSummary(engine, "leveldb")
        self.st = load(store)
        # verify judges the load this export reads (amqtool.engines.verdicts); messages that do not decode
        # are the export's own problems
        self.summary.findings = judged(self.st)
        try:
            refuse_unless_salvage(self.summary.findings, options.salvage, command="export", path=str(store.root))
        except BaseException:
            self.st.close()
            raise
        self.summary.bytes_scanned = sum(f.size for f in self.st.logs)
        if progress is not None:
            progress(self.summary.bytes_scanned)
        self.pending: dict[int, int] = {}  # subscription key -> rows
        if self.st.replay.stopped:
            self.summary.problem(None, f"the broker's replay of the log stops at {self.st.replay.stopped[0]:#x} "
                                 f"({self.st.replay.stopped[1]}); run 'amqtool verify' for what follows")

    def close(self) -> None:
        self.st.close()

    def _subs(self, d):
        return sorted(d.subscriptions, key=lambda s: (s.client_id or "", s.name or ""))

    @staticmethod
    def qname(s) -> str:
        return f"{s.client_id}:{s.name}"

    def binding_rows(self) -> list[tuple]:
        rows = []
        for d in self.st.queue_and_topics():
            topic = d.kind == "topic"
            rows.append(("address", None, d.name, d.name, "MULTICAST" if topic else "ANYCAST", None, None, None))
            if not topic:
                rows.append(("queue", None, d.name, d.name, "ANYCAST", None, None, None))
                continue
            for s in self._subs(d):
                rows.append(("queue", None, self.qname(s), d.name, "MULTICAST", s.selector, None, None))
        self.summary.set_bindings(rows)
        return rows

    def subscription_rows(self) -> list[tuple]:
        rows = []
        for d in self.st.queue_and_topics():
            if d.kind != "topic":
                continue
            by_seq = {m.seq: m for m in d.messages}
            for s in self._subs(d):
                q = self.qname(s)
                if not self.options.wants(q):
                    continue
                last = by_seq.get(s.ack_position)
                last_id = None
                if last is not None:
                    msg, _err = self.st.decode(last)
                    last_id = msg.message_id if msg is not None else None
                rows.append((d.name, q, s.client_id, s.name, s.selector, None, None, ".", None, None,
                             None if last is None else last.location, last_id, self.pending.get(s.key, 0)))
        return rows

    def rows(self) -> Iterator[tuple]:
        opts = self.options
        sm = self.summary
        prepared: dict[str, list] = {}
        for t in self.st.transactions:
            for m, dest in t.sends:
                if dest is not None:
                    prepared.setdefault(dest, []).append(m)
        for d in self.st.queue_and_topics():
            topic = d.kind == "topic"
            subs = [s for s in self._subs(d) if opts.wants(self.qname(s))] if topic else []
            if (topic and not subs) or (not topic and not opts.wants(d.name)):
                continue
            for m in d.skipped:  # entries the broker's cursor passes over: no row (print lists them apart)
                if not topic or any(m.seq > s.ack_position for s in subs):
                    sm.problem(m.location, f"{d.qualified} seq {m.seq}: {self.st.skip_reason(m)}")
            groups = [("committed", d.messages)]
            if d.qualified in prepared:
                groups.append(("prepared", prepared[d.qualified]))
            for state, messages in groups:
                for m in messages:
                    msg, err = self.st.decode(m)
                    if msg is not None:
                        try:
                            cols = decode_openwire(m, msg, address=d.name, safe=opts.safe, message_id=m.location)
                        except FormatError as e:
                            err = e.message
                    if err is not None:
                        sm.problem(m.location, f"{d.qualified} seq {m.seq}: {err}")
                        continue
                    if topic:
                        hits = [s for s in subs if state == "prepared" or m.seq > s.ack_position]
                        for s in hits:
                            self.pending[s.key] = self.pending.get(s.key, 0) + 1
                        queues = [self.qname(s) for s in hits]
                    else:
                        queues = [d.name]
                    if not queues:
                        continue
                    sm.messages += 1
                    count = m.redelivery or cols["delivery_count"]
                    for q in queues:
                        sm.count_row(q, state)
                        yield message_row(cols, queue=q, queue_id=None,
                                          routing_type="MULTICAST" if topic else "ANYCAST",
                                          delivery_count=count, transaction_state=state,
                                          store_message_id=msg.message_id)
