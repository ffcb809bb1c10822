"""What a KahaDB (or mKahaDB) store becomes in Artemis: addresses, queues, and each message with the queues
that hold it. One plan feeds both outputs (``create --from``, ``export --format xml``), so they cannot differ.

Liveness is the KahaDB engine's replay (:func:`amqtool.engines.kahadb.load.load_store`, as
``MessageDatabase.recover`` applies the journal; mKahaDB's txStore resolving the children's prepared
transactions). Destinations become bindings as Artemis' OpenWire support creates them:

* a queue -> an ANYCAST address and an ANYCAST queue of the same name (``AMQSession.checkCachedExistingQueues``
  auto-creates both);
* a topic -> a MULTICAST address; each durable subscription -> a durable MULTICAST queue on it, named by
  ``ActiveMQDestination.createQueueNameForSubscription(true, clientID, subscriptionName)``: the client id and
  the subscription name, each with ``\\`` doubled and ``.`` escaped as ``\\.``, joined by ``.``; its selector
  as the queue filter (``AMQConsumer.init`` creates it so);
* temporary destinations (never persisted by a broker that works) and names Artemis would read as wildcards
  (``#``, ``*`` with the default wildcard syntax) or that are empty are left out and reported.

Messages, per store directory, destination by index key, in journal order: a queue's live messages on its
queue; a topic message on every durable subscription still waiting for it (one core message, one reference
per subscription queue). Messages sent in a prepared XA transaction are left out and reported unless
``include_prepared`` (then written in a prepared Artemis transaction with the same Xid); messages of
unresolved local transactions are never migrated (the Classic broker rolls them back at start).

Ids: one counter, as Artemis' one ``IDGenerator`` gives the ids of both journals: bindings first
(address, its transaction, queue, its transaction ...), then each message in plan order. The same store
gives the same ids on every run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Iterator

from amqtool.engines.migrate.convert import ANYCAST, MULTICAST, NotConvertible, convert
from amqtool.errors import FormatError
from amqtool.formats.kahadb.openwire import decode_message

TOPIC_TYPES = (1, 3)
TEMP_TYPES = (2, 3)
ARTEMIS_WILDCARDS = ("#", "*")  # WildcardConfiguration defaults: any words, one word


def escape(text: str) -> str:
    """``DestinationUtil.escape``: ``\\`` -> ``\\\\``, ``.`` -> ``\\.``."""
    return text.replace("\\", "\\\\").replace(".", "\\.")


def subscription_queue_name(client_id: str | None, subscription_name: str) -> str:
    """``createQueueNameForSubscription(true, clientID, subscriptionName)``."""
    if client_id is None:
        return escape(subscription_name)
    return escape(client_id) + "." + escape(subscription_name)


@dataclass
class PlannedQueue:
    id: int
    name: str
    address: str
    routing_type: int
    filter: str | None = None
    subscription: tuple | None = None  # (clientId, subscriptionName) for a durable subscription
    messages: int = 0
    prepared: int = 0


@dataclass
class PlannedAddress:
    id: int
    name: str
    routing_types: tuple
    kind: str  # "queue" | "topic"
    queues: list = field(default_factory=list)


@dataclass
class PlannedMessage:
    """One message to write: its core form, the queue ids that hold it, and where it came from.

    When a writer asked :meth:`PlanBase.messages` for ``records`` and the C path converted the message
    (:mod:`.records`), ``core`` is None and ``record`` holds its ADD_MESSAGE_PROTOCOL body (what
    ``message_record(core, ...)`` gives), with ``message_id`` and ``body_length`` (``len(core.body)``);
    ``openwire_id`` is then None (only the XML export shows it, and it asks for no records)."""

    core: object  # CoreMessage, or None with record
    queue_ids: list
    redelivery: int
    state: str  # "committed" | "prepared"
    xid: object | None  # kahadb TransactionId of a prepared XA transaction
    source: str  # "<store dir>:<file id>:<offset>"
    openwire_id: str | None
    record: bytes | None = None
    message_id: int = 0
    body_length: int = 0

    def __post_init__(self):
        if self.core is not None:
            self.message_id = self.core.message_id
            self.body_length = len(self.core.body)


class PlanBase:
    """What every migration source gives the writers: :attr:`addresses` (by name), :attr:`queues` (by id),
    :meth:`messages`, the id counter (:meth:`_id`), what was left out and why, and :meth:`summary`."""

    kind = "kahadb"

    def __init__(self):
        self.next_id = 1
        self.bytes_scanned = 0
        self.addresses: dict[str, PlannedAddress] = {}
        self.queues: dict[int, PlannedQueue] = {}
        self.problems: list[dict] = []
        self.skipped_destinations: list[dict] = []
        self.prepared_transactions: list[dict] = []
        self.open_local_transactions = 0
        self.open_local_messages = 0
        self.converted = 0
        self.references = 0
        self.body_bytes = 0
        self.source_verdict = "OK"  # verify's verdict of the source (KahaDB)
        self.source_findings: list[dict] = []  # its WARNING and CRITICAL findings
        self.acknowledged_not_restored = 0  # what the replay alone would bring back (the index knows acked)

    def _id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def _count(self, pm: "PlannedMessage") -> None:
        self.converted += 1
        self.references += len(pm.queue_ids)
        self.body_bytes += pm.body_length
        for q in pm.queue_ids:
            pq = self.queues[q]
            if pm.state == "committed":
                pq.messages += 1
            else:
                pq.prepared += 1

    def messages(self, records: tuple[int, int | None] | None = None) -> Iterator["PlannedMessage"]:
        """Every message to migrate, converted, in plan order (ids increasing). Iterate once. ``records``
        (``(large message threshold, journal file size or None)``, from the store writer): messages may come
        as their record bodies (:class:`PlannedMessage` ``record``) where the C path converts them."""
        raise NotImplementedError

    def drain(self) -> None:
        """Iterate every message without writing (a dry run): the counts and problems are then complete."""
        for _ in self.messages():
            pass

    def source_text(self) -> str:
        return ""

    def store_dirs(self) -> list[str]:
        return []

    def scheduler_dirs(self) -> list[Path]:
        return []

    def summary(self) -> dict:
        """The plan as a document (after iterating the messages; ``--dry-run`` and the created store's
        ``migration.json``)."""
        return {
            "source": self.source_text(),
            "kind": self.kind,
            "stores": self.store_dirs(),
            "bytesScanned": self.bytes_scanned,
            "addresses": [{"id": a.id, "name": a.name, "kind": a.kind,
                           "routingTypes": ["MULTICAST" if r == MULTICAST else "ANYCAST" for r in a.routing_types],
                           "queues": [self.queues[q].name for q in a.queues]} for a in self.addresses.values()],
            "queues": [{"id": q.id, "name": q.name, "address": q.address,
                        "routingType": "MULTICAST" if q.routing_type == MULTICAST else "ANYCAST",
                        "filter": q.filter,
                        "subscription": None if q.subscription is None else
                        {"clientId": q.subscription[0], "subscriptionName": q.subscription[1]},
                        "messages": q.messages, "preparedMessages": q.prepared} for q in self.queues.values()],
            "messages": self.converted,
            "references": self.references,
            "bodyBytes": self.body_bytes,
            "notConverted": self.problems,
            "skippedDestinations": self.skipped_destinations,
            "preparedTransactions": self.prepared_transactions,
            "openLocalTransactions": {"transactions": self.open_local_transactions,
                                      "messages": self.open_local_messages},
            "schedulerStores": [str(p) for p in self.scheduler_dirs()],
            "sourceVerdict": self.source_verdict,
            "sourceFindings": self.source_findings,
            "acknowledgedNotRestored": self.acknowledged_not_restored,
        }


class MigrationPlan(PlanBase):
    """Build from a detected KahaDB store (:func:`amqtool.store.layout.detect`). Then :attr:`addresses`,
    :attr:`queues`, :meth:`messages` (a generator: decode and convert one message at a time),
    :attr:`problems` (filled while iterating too) and :meth:`summary`."""

    def __init__(self, store, *, include_prepared: bool = False, progress=None):
        from amqtool.engines.kahadb.load import load_store

        super().__init__()
        self.store = store
        self.kind = "mkahadb" if getattr(store, "multi", False) else "kahadb"
        self.include_prepared = include_prepared
        from amqtool.engines.kahadb.verify import judge_results
        from amqtool.errors import Severity, overall_verdict

        loaded = load_store(store, progress=progress)
        self.bytes_scanned = sum(d.bytes_scanned for d in loaded)
        self.results = [d for d in loaded if not d.is_tx_store]
        # verify's judgement of the load the migration reads (amqtool.engines.verdicts): a CRITICAL source is
        # refused unless --salvage; messages that do not decode are the plan's own problems
        self.findings = judge_results(store, loaded, decode=False)
        self.source_verdict = overall_verdict(self.findings).name
        self.source_findings = [f.to_json() for f in self.findings
                                if f.severity in (Severity.WARNING, Severity.CRITICAL)][:100]
        for d in self.results:
            if d.damage():
                self.problems.append({"destination": None, "store": str(d.directory), "location": None,
                                      "messageId": None, "reason": d.damage_text()})
            # Never bring back acknowledged messages: load_store took out of the replay what the index knows
            # acknowledged; live messages of the index that the replay lost to damage are left out, listed.
            self.acknowledged_not_restored += len(d.rebuild_extra)
            for key, dest in (d.indexed or {}).items() if d.records_after_last_update == 0 else ():
                st = d.replay.destinations.get(key)
                live = st.messages if st else {}
                for m in dest.messages:
                    if m.message_id not in live:
                        self.problems.append({"destination": key.partition(":")[2], "store": str(d.directory),
                                              "location": f"{m.file_id}:{m.offset}", "messageId": m.message_id,
                                              "reason": "live in the index, but its journal record is damaged "
                                                        "or missing: left out"})
        self._dest_queues: dict[tuple, dict] = {}  # (store index, dest key) -> {sub key | None: queue id}
        self._build_bindings()
        self._scan_transactions()
        self._iterated = False

    # --- bindings -------------------------------------------------------------------------------------

    def _refuse(self, kind: str, name: str) -> str | None:
        if kind in ("temp-queue", "temp-topic"):
            return "a temporary destination (Artemis does not keep temporary queues across restarts)"
        if not name:
            return "an empty name"
        bad = [c for c in ARTEMIS_WILDCARDS if c in name]
        if bad:
            return f"the name holds {' '.join(repr(c) for c in bad)}, a wildcard in Artemis' default syntax"
        return None

    def _address(self, name: str, topic: bool) -> PlannedAddress:
        a = self.addresses.get(name)
        if a is None:
            aid = self._id()
            self._id()  # the bindings transaction of the address (JournalStorageManager.addAddressBinding)
            a = self.addresses[name] = PlannedAddress(aid, name, (MULTICAST,) if topic else (ANYCAST,),
                                                      "topic" if topic else "queue")
        elif (MULTICAST if topic else ANYCAST) not in a.routing_types:
            a.routing_types = tuple(sorted(set(a.routing_types) | {MULTICAST if topic else ANYCAST}))
        return a

    def _queue(self, a: PlannedAddress, name: str, rt: int, filt: str | None, sub) -> int:
        for qid in a.queues:
            if self.queues[qid].name == name:
                return qid
        qid = self._id()
        self._id()  # its bindings transaction
        self.queues[qid] = PlannedQueue(qid, name, a.name, rt, filt, sub)
        a.queues.append(qid)
        return qid

    def _build_bindings(self) -> None:
        from amqtool.engines.kahadb.document import _openwire_version, _split_sub
        from amqtool.formats.kahadb.openwire import decode_subscription_info

        names = {0: "queue", 1: "topic", 2: "temp-queue", 3: "temp-topic"}
        for si, d in enumerate(self.results):
            version = _openwire_version(d)
            keys = set(d.replay.destinations) | {op[1].key for tx in d.open_transactions for op in tx.ops
                                                 if op[0] == "add"}
            for key in sorted(keys):
                t, _, name = key.partition(":")
                t = int(t)
                why = self._refuse(names.get(t, "?"), name)
                if why is not None:
                    self.skipped_destinations.append({"destination": name, "type": names.get(t, t),
                                                      "store": str(d.directory), "reason": why})
                    self._dest_queues[(si, key)] = {}
                    continue
                topic = t in TOPIC_TYPES
                a = self._address(name, topic)
                st = d.replay.destinations.get(key)
                if not topic:
                    self._dest_queues[(si, key)] = {None: self._queue(a, name, ANYCAST, None, None)}
                    continue
                subs = {}
                for sk in sorted(st.subscriptions if st is not None else ()):
                    sub = st.subscriptions[sk]
                    client, sname = _split_sub(sk, sub.info, version)
                    selector = None
                    if sub.info:
                        try:
                            selector = decode_subscription_info(sub.info, version).selector
                        except FormatError:
                            pass
                    qname = subscription_queue_name(client or None, sname)
                    subs[sk] = self._queue(a, qname, MULTICAST, selector, (client, sname))
                self._dest_queues[(si, key)] = subs

    def _scan_transactions(self) -> None:
        for d in self.results:
            for tx in d.open_transactions:
                adds = [op for op in tx.ops if op[0] == "add"]
                if tx.state == "prepared":
                    self.prepared_transactions.append({
                        "id": str(tx.id), "store": str(d.directory), "messages": len(adds),
                        "acks": sum(1 for op in tx.ops if op[0] == "remove"),
                        "migrated": self.include_prepared and not tx.id.local})
                else:
                    self.open_local_transactions += 1
                    self.open_local_messages += len(adds)

    # --- messages -------------------------------------------------------------------------------------

    def _problem(self, d, m, dest: str, reason: str) -> None:
        self.problems.append({"destination": dest, "store": str(d.directory), "location": f"{m.file_id}:{m.offset}",
                              "messageId": getattr(m, "message_id", None), "reason": reason})

    def messages(self, records: tuple[int, int | None] | None = None) -> Iterator[PlannedMessage]:
        """Every message to migrate, converted, in plan order (ids increasing). Iterate once. See
        :meth:`PlanBase.messages` for ``records``."""
        from amqtool.engines.kahadb.document import _openwire_version, iter_live_raw
        from amqtool.engines.migrate.records import BATCH, convert_batches, records_wanted

        if self._iterated:
            raise RuntimeError("MigrationPlan.messages() iterates once")
        self._iterated = True
        for si, d in enumerate(self.results):
            version = _openwire_version(d)
            fast = records_wanted(records, version)
            prepared: dict[str, list] = {}
            if self.include_prepared:
                for tx in d.open_transactions:
                    if tx.state == "prepared" and not tx.id.local:
                        for op in tx.ops:
                            if op[0] == "add":
                                prepared.setdefault(op[1].key, []).append((op[2], tx.id))
            for key in sorted(set(d.replay.destinations) | set(prepared)):
                qmap = self._dest_queues.get((si, key), {})
                if not qmap:
                    continue
                st = d.replay.destinations.get(key)
                t, _, name = key.partition(":")
                topic = int(t) in TOPIC_TYPES
                rt = MULTICAST if topic else ANYCAST
                groups = [("committed", list(st.messages.values()) if st is not None else [], {})]
                if key in prepared:
                    groups.append(("prepared", [m for m, _ in prepared[key]],
                                   {id(m): x for m, x in prepared[key]}))
                for state, entries, xids in groups:
                    def item(m, raw, err, state=state):
                        if topic:
                            waiting = m.waiting if state == "committed" else None
                            qids = [q for sk, q in qmap.items() if waiting is None or sk in waiting]
                        else:
                            qids = [qmap[None]]
                        return m, raw, err, qids

                    def one(it, d=d, name=name, rt=rt, version=version, state=state, xids=xids):
                        m, raw, err, qids = it
                        if err is None:
                            try:
                                msg = decode_message(raw, version)
                            except FormatError as e:
                                err = e.message
                        if err is not None:
                            self._problem(d, m, name, err)
                            return None
                        if not qids:
                            return None
                        try:
                            core = convert(msg, message_id=self.next_id, address=name, routing_type=rt,
                                           store_version=version)
                        except (NotConvertible, FormatError) as e:
                            self._problem(d, m, name, e.message if isinstance(e, FormatError) else str(e))
                            return None
                        self._id()
                        pm = PlannedMessage(core, qids, msg.redelivery_counter, state, xids.get(id(m)),
                                            f"{d.directory}:{m.file_id}:{m.offset}", msg.message_id)
                        self._count(pm)
                        return pm

                    def make(it, record, body_length, redelivery, mid, d=d, state=state, xids=xids):
                        m = it[0]
                        pm = PlannedMessage(None, it[3], redelivery, state, xids.get(id(m)),
                                            f"{d.directory}:{m.file_id}:{m.offset}", None, record, mid, body_length)
                        self._count(pm)
                        return pm

                    found = (item(*x) for x in iter_live_raw(d, entries))
                    if not fast:
                        for it in found:
                            pm = one(it)
                            if pm is not None:
                                yield pm
                        continue
                    while chunk := list(islice(found, BATCH)):
                        yield from convert_batches(
                            self, chunk, raw=lambda it: it[1] if it[2] is None and it[3] else None, python=one,
                            make=make, address=name, routing_type=rt, records=records)

    def source_text(self) -> str:
        return str(getattr(self.store, "root", ""))

    def store_dirs(self) -> list[str]:
        return [str(d.directory) for d in self.results]

    def scheduler_dirs(self) -> list[Path]:
        """Job scheduler stores beside the store (``<dataDirectory>/<broker>/scheduler``): messages waiting
        for a scheduled delivery live there, not in KahaDB, and are not migrated."""
        out = []
        root = Path(getattr(self.store, "root", "."))
        for cand in (root / "scheduler", root.parent / "scheduler"):
            if cand.is_dir() and any(cand.glob("*.log")):
                out.append(cand)
        return out
