"""What a LevelDB store becomes in Artemis (``create DEST --from LEVELDB``, ``export LEVELDB --format xml``):
the same plan as a KahaDB store's (:class:`amqtool.engines.migrate.plan.MigrationPlan`: its bindings rules,
its ids, :func:`amqtool.engines.migrate.convert.convert` for every message, or its C twin on batches when
``create --from`` asks for records: :mod:`amqtool.engines.migrate.records`), over the store as the LevelDB
broker recovers it (:func:`amqtool.engines.leveldb.load.load`).

* a queue's recovered messages on its queue, in sequence order (a message a prepared transaction acked is
  left out, as the broker's cursor leaves it out);
* a topic message on every durable subscription whose ack position is below its sequence (one core message,
  one reference per subscription queue);
* the redelivery count is the entry's (``queueCursor`` sets it from the entry's meta);
* sends of prepared XA transactions are left out and reported unless ``include_prepared`` (then written in
  a prepared Artemis transaction with the same Xid, on every queue of their destination).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from amqtool.engines.migrate.convert import ANYCAST, MULTICAST, NotConvertible, convert
from amqtool.engines.migrate.plan import MigrationPlan, PlanBase, PlannedMessage, subscription_queue_name
from amqtool.engines.migrate.records import convert_batches, records_wanted
from amqtool.engines.leveldb.load import OPENWIRE_VERSION
from amqtool.formats.leveldb.recordlog import HEADER_SIZE
from amqtool.engines.leveldb.verify import judged
from amqtool.errors import FormatError, Severity, overall_verdict


class LevelDBPlan(MigrationPlan):
    """:class:`MigrationPlan` built from a LevelDB store (it reuses its binding helpers, not its loading)."""

    def __init__(self, store, *, include_prepared: bool = False, progress=None):
        from amqtool.engines.leveldb.load import load

        PlanBase.__init__(self)
        self.store = store
        self.kind = "leveldb"
        self.include_prepared = include_prepared
        self.st = load(store)
        self.bytes_scanned = sum(f.size for f in self.st.logs)
        if progress is not None:
            progress(self.bytes_scanned)
        # verify's judgement of the load the migration reads (amqtool.engines.verdicts): a CRITICAL source is
        # refused unless --salvage
        self.findings = judged(self.st)
        self.source_verdict = overall_verdict(self.findings).name
        self.source_findings = [f.to_json() for f in self.findings
                                if f.severity in (Severity.WARNING, Severity.CRITICAL)][:100]
        if self.st.replay.stopped:
            self.problems.append({"destination": None, "store": str(self.st.directory), "location": None,
                                  "messageId": None,
                                  "reason": f"the broker's replay of the log stops at {self.st.replay.stopped[0]:#x} "
                                  f"({self.st.replay.stopped[1]}); run 'amqtool verify'"})
        self._dq: dict[str, dict] = {}  # qualified destination -> {sub key | None: queue id}
        for d in self.st.queue_and_topics():
            why = self._refuse(d.kind, d.name)
            if why is not None:
                self.skipped_destinations.append({"destination": d.name, "type": d.kind,
                                                  "store": str(self.st.directory), "reason": why})
                self._dq[d.qualified] = {}
                continue
            topic = d.kind == "topic"
            a = self._address(d.name, topic)
            if not topic:
                self._dq[d.qualified] = {None: self._queue(a, d.name, ANYCAST, None, None)}
                continue
            self._dq[d.qualified] = {
                s.key: self._queue(a, subscription_queue_name(s.client_id or None, s.name or ""), MULTICAST,
                                   s.selector, (s.client_id, s.name))
                for s in sorted(d.subscriptions, key=lambda s: (s.client_id or "", s.name or ""))}
        for t in self.st.transactions:
            self.prepared_transactions.append({"id": t.xid, "store": str(self.st.directory),
                                               "messages": len(t.sends), "acks": len(t.acks),
                                               "migrated": include_prepared})
        self._iterated = False

    def messages(self, records: tuple[int, int | None] | None = None) -> Iterator[PlannedMessage]:
        if self._iterated:
            raise RuntimeError("LevelDBPlan.messages() iterates once")
        self._iterated = True
        fast = records_wanted(records, OPENWIRE_VERSION)
        prepared: dict[str, list] = {}
        if self.include_prepared:
            for t in self.st.transactions:
                for m, dest in t.sends:
                    if dest is not None:
                        prepared.setdefault(dest, []).append((m, t.parts))
        for d in self.st.queue_and_topics():
            qmap = self._dq.get(d.qualified) or {}
            if not qmap:
                continue
            topic = d.kind == "topic"
            rt = MULTICAST if topic else ANYCAST
            subs = {s.key: s for s in d.subscriptions}
            for m in d.skipped:  # entries the broker's cursor passes over: not migrated, said so
                if not topic or any(m.seq > s.ack_position for s in d.subscriptions):
                    self._problem_at(d, m, self.st.skip_reason(m))
            groups = [("committed", [(m, None) for m in d.messages])]
            if d.qualified in prepared:
                groups.append(("prepared", prepared[d.qualified]))
            for state, pairs in groups:
                if topic:
                    items = [(m, xid, [q for sk, q in qmap.items()
                                       if state == "prepared" or m.seq > subs[sk].ack_position])
                             for m, xid in pairs]
                else:
                    only = [qmap[None]]
                    items = [(m, xid, only) for m, xid in pairs]
                if not fast:
                    for m, xid, qids in items:
                        pm = self._one(d, m, xid, qids, state, rt)
                        if pm is not None:
                            yield pm
                    continue

                def make(it, record, body_length, _redelivery, mid, d=d, state=state):
                    m = it[0]
                    pm = PlannedMessage(None, it[2], m.redelivery, state, it[1], f"{self.st.directory}:{m.location:#x}",
                                        None, record, mid, body_length)
                    self._count(pm)
                    return pm

                yield from convert_batches(
                    self, items, raw=lambda it: self._raw(it[0]) if it[2] else None,
                    python=lambda it, d=d, state=state, rt=rt: self._one(d, it[0], it[1], it[2], state, rt),
                    make=make, address=d.name, routing_type=rt, records=records)

    def _raw(self, m):
        """The stored bytes of a message's DATA record (a view into the log), or None where the broker cannot
        read it (:meth:`LevelDBState.decode` then says why)."""
        if self.st.past_end(m.location, m.length):
            return None
        return self.st.reader.read(m.location + HEADER_SIZE, m.length)

    def _one(self, d, m, xid, qids, state: str, rt: int) -> PlannedMessage | None:
        """One message by the reference path: decoded, converted, counted; None (a problem recorded, or no
        queue waiting for it) when it is not migrated."""
        msg, err = self.st.decode(m)
        if msg is None:
            self._problem_at(d, m, err)
            return None
        if not qids:
            return None
        try:
            core = convert(msg, message_id=self.next_id, address=d.name, routing_type=rt, store_version=11)
        except (NotConvertible, FormatError) as e:
            self._problem_at(d, m, e.message if isinstance(e, FormatError) else str(e))
            return None
        self._id()
        pm = PlannedMessage(core, qids, m.redelivery, state, xid, f"{self.st.directory}:{m.location:#x}",
                            msg.message_id)
        self._count(pm)
        return pm

    def _problem_at(self, d, m, reason: str) -> None:
        self.problems.append({"destination": d.name, "store": str(self.st.directory),
                              "location": f"{m.location:#x}", "messageId": None, "reason": reason})

    def source_text(self) -> str:
        return str(getattr(self.store, "root", ""))

    def store_dirs(self) -> list[str]:
        return [str(self.st.directory)]

    def scheduler_dirs(self) -> list[Path]:
        return []


def plan_for(store, *, include_prepared: bool = False, progress=None):
    """The migration plan of a detected Classic store: KahaDB/mKahaDB or LevelDB."""
    if store.kind == "leveldb":
        return LevelDBPlan(store, include_prepared=include_prepared, progress=progress)
    return MigrationPlan(store, include_prepared=include_prepared, progress=progress)
