"""Export rows of a KahaDB (or mKahaDB) store, in the export's row schema (``schema.MESSAGE_COLUMNS``).

Liveness is the KahaDB engine's replay (:func:`amqtool.engines.kahadb.load.load_store`, kahadb-format.md
§6.4: the journal applied in order, as ``MessageDatabase.recover`` does; mKahaDB's txStore resolving the
child stores' prepared transactions). Messages are the stored OpenWire commands, decoded by
:mod:`amqtool.formats.kahadb.openwire`. Both export engines take their KahaDB rows from :class:`KahaDBExport`
(the replay is sequential by nature: each record's effect depends on every record before it).

Row rules:

* a queue's live messages: one row each, ``queue`` and ``address`` the destination's name, ``ANYCAST``;
* a topic keeps a message while a durable subscription still waits for it: one row per (message,
  subscription waiting for it), ``queue`` = ``clientId:subscriptionName`` (from the subscription's stored
  info; the index key otherwise), ``address`` the topic, ``MULTICAST``;
* messages sent in a prepared XA transaction (in doubt) give ``prepared`` rows: on a queue, or on every
  durable subscription of the topic when the transaction was prepared; ``transaction_id`` stays null (KahaDB
  transaction ids are not numbers); open local transactions give nothing (the broker rolls them back);
* ``message_id`` is the ADD record's journal location, ``file id << 32 | offset`` (unique in its store
  directory, increasing in the order the broker stored the messages); ``store_message_id`` the OpenWire
  message id (``ID:...``); ``protocol`` ``openwire``; ``durable`` the persistent flag; ``delivery_count`` the
  stored redelivery counter; ``body`` the bytes a consumer sees (text as UTF-8, bytes as is, other types as
  stored, inflated when compressed); ``large``/``paged`` false; ``queue_id``, ``scheduled_time`` null;
* order: store directories as found, destinations by index key, subscriptions by key, messages in the
  order of their journal location.

The bindings table: one ``address`` row per destination (routing type ANYCAST for a queue, MULTICAST for a
topic) and one ``queue`` row per queue and per durable subscription (its selector as ``filter_string``).

The subscriptions table (``schema.SUBSCRIPTION_COLUMNS``, :meth:`KahaDBExport.subscription_rows`, once the
rows are made): one row per durable subscription that ``--queue`` selects, in the bindings' order, with what
MessageDatabase keeps for it: the stored ``SubscriptionInfo`` (client id, name, selector, noLocal) and the
command's retroactive flag (``subscriptions``), where its record is (``subLocations``), and its last
acknowledged message (``subscriptionAcks``' LastAck: a sequence of the topic's order index, which the
journal alone cannot number; the export names the message instead, by its ``message_id`` and OpenWire id,
see :attr:`amqtool.engines.kahadb.replay.Subscription.last_ack`). ``pending``: the messages rows written
for it (prepared ones included).
"""
from __future__ import annotations

import hashlib
from typing import Callable, Iterator

from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.parse import message_row
from amqtool.errors import FormatError
from amqtool.formats.artemis import primitives as AP

# data exp's type names (the Artemis rows' ``type`` column) for the OpenWire message classes
TYPE_NAMES = {23: "default", 24: "bytes", 25: "map", 26: "object", 27: "stream", 28: "text", 29: "default"}
# MarshallingSupport's primitive type bytes -> the schema's property type names
PROPERTY_TYPES = {1: "boolean", 2: "byte", 3: None, 4: "short", 5: "integer", 6: "long", 7: "double", 8: "float",
                  9: "string", 10: "bytes", 11: "map", 12: "list", 13: "string"}
TOPIC_TYPES = (1, 3)


def _value_text(v) -> str:
    """Java ``toString`` of a property value, as the Artemis rows carry them (bytes as URL-safe base64)."""
    if v is None:
        return "_AMQ_NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray)):
        return AP.b64url(bytes(v))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_value_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value_text(x) for x in v) + "]"
    return str(v)


def property_rows(raw: bytes | None) -> list[dict]:
    """The marshalled OpenWire properties (``MarshallingSupport.marshalPrimitiveMap``) as ``[{name, type,
    value}]`` in stored order. The type byte is read before each value, so short/int/long and float/double
    keep their Java types (``OpenWireMessage.properties()`` gives the values only)."""
    from amqtool.formats.kahadb.openwire import _Reader, _typed_value

    if not raw:
        return []
    r = _Reader(raw)
    n = r.int()
    if n == -1:
        return []
    if n < 0 or n > r.end - r.pos:
        raise FormatError(f"message properties: map of {n} entries does not fit")
    out = []
    for _ in range(n):
        name = r.utf()
        if r.pos >= r.end:
            raise FormatError("message properties: value runs past the end")
        t = r.buf[r.pos]
        v = _typed_value(r, 0)
        if t == 8:
            text = AP.java_float_text(v)
        elif t == 7:
            text = AP.java_double_text(v)
        else:
            text = _value_text(v)
        out.append({"name": name, "type": "bytes" if t == 0 else PROPERTY_TYPES.get(t), "value": text})
    if r.pos != r.end:
        raise FormatError(f"message properties: {r.end - r.pos} bytes left over")
    return out


def decode_openwire(m, msg, *, address: str, safe: bool, message_id: int | None = None) -> dict:
    """The message columns of one stored OpenWire message (``m``: the replay's live entry; ``message_id``:
    the store's own id of it, by default KahaDB's ``file id << 32 | offset`` of ``m``)."""
    from amqtool.engines.export.parse import property_map

    data = msg.body_bytes()
    kind = TYPE_NAMES.get(msg.type_code, "default")
    typed = property_rows(msg.marshalled_properties)
    text = None
    if kind == "text":  # null text stays null (body_bytes would give b""); a lone surrogate has no UTF-8
        b = msg.body()
        if isinstance(b, str):
            try:
                b.encode("utf-8")
                text = b
            except UnicodeEncodeError:
                text = None
    if message_id is None:
        message_id = (m.file_id << 32) | m.offset
    return {"message_id": message_id, "address": address, "protocol": "openwire",
            "durable": bool(msg.persistent), "priority": msg.priority, "timestamp": msg.timestamp,
            "expiration": msg.expiration, "user_id": msg.user_id, "type": kind, "typed_properties": typed,
            "properties": property_map(typed), "annotations": None, "text": text, "body": None if safe else data,
            "body_size": len(data), "body_sha256": hashlib.sha256(data).hexdigest(), "large": False,
            "delivery_count": msg.redelivery_counter}


class KahaDBExport:
    """Export a KahaDB store in process: build (loads and replays the journal), then :meth:`binding_rows`
    and :meth:`rows`. ``engine`` names the engine in the summary (the Spark engine hands these rows to
    Spark)."""

    def __init__(self, store, options: ExportOptions, progress: Callable[[int], None] | None = None,
                 engine: str = "local"):
        from amqtool.engines.kahadb.load import load_store
        from amqtool.engines.kahadb.verify import verify_store
        from amqtool.engines.verdicts import refuse_unless_salvage

        self.options = options
        self.summary = ExportSummary(engine, "kahadb")
        loaded = load_store(store, progress=progress)
        # verify judges the load this export reads (amqtool.engines.verdicts); messages that do not decode
        # are the export's own problems
        self.summary.findings = verify_store(store, results=loaded, decode=False)[0]
        refuse_unless_salvage(self.summary.findings, options.salvage, command="export",
                              path=str(getattr(store, "root", "")))
        self.summary.bytes_scanned = sum(d.bytes_scanned for d in loaded)
        self.results = [d for d in loaded if not d.is_tx_store]  # the txStore holds no messages
        self.root = getattr(store, "root", None)
        # (directory index, destination key, subscription key) -> messages rows made for it (by rows())
        self.pending: dict[tuple[int, str, str], int] = {}
        for d in self.results:
            if d.damage():
                self.summary.problem(None, d.damage_text())

    def _subscriptions(self, d, st) -> list[tuple[str, str, object]]:
        """(sub key, ``clientId:subscriptionName``, subscription) of a topic, by key."""
        from amqtool.engines.kahadb.document import _openwire_version, _split_sub

        version = _openwire_version(d)
        out = []
        for key in sorted(st.subscriptions):
            sub = st.subscriptions[key]
            client, name = _split_sub(key, sub.info, version)
            out.append((key, f"{client}:{name}", sub))
        return out

    def _info(self, d, sub):
        """The subscription's stored ``SubscriptionInfo``, or None when it does not decode."""
        from amqtool.engines.kahadb.document import _openwire_version
        from amqtool.formats.kahadb.openwire import decode_subscription_info

        if not sub.info:
            return None
        try:
            return decode_subscription_info(sub.info, _openwire_version(d))
        except (FormatError, AttributeError):
            return None

    def _selector(self, d, sub) -> str | None:
        info = self._info(d, sub)
        return info.selector if info is not None else None

    def _directory(self, d) -> str:
        """``d``'s directory relative to the store (``.`` for a single KahaDB)."""
        import os

        if self.root is None:
            return str(d.directory)
        return os.path.relpath(d.directory, self.root)

    def subscription_rows(self) -> list[tuple]:
        """The subscriptions table's rows (``schema.SUBSCRIPTION_COLUMNS``; see the module docstring). Call
        it after :meth:`rows` is exhausted: ``pending`` counts what that wrote."""
        rows = []
        for i, d in enumerate(self.results):
            directory = self._directory(d)
            for key in sorted(d.replay.destinations):
                st = d.replay.destinations[key]
                if st.destination.type not in TOPIC_TYPES:
                    continue
                for skey, qname, sub in self._subscriptions(d, st):
                    if not self.options.wants(qname):
                        continue
                    client, name = self._names(d, skey, sub)
                    info = self._info(d, sub)
                    last = sub.last_ack
                    rows.append((st.destination.name, qname, client, name,
                                 info.selector if info is not None else None,
                                 info.no_local if info is not None else None, bool(sub.retroactive), directory,
                                 sub.start[0] << 32 | sub.start[1], sub.file_id << 32 | sub.offset,
                                 None if last is None else last[0] << 32 | last[1],
                                 None if last is None else last[2], self.pending.get((i, key, skey), 0)))
        return rows

    def _names(self, d, key, sub) -> tuple[str, str]:
        from amqtool.engines.kahadb.document import _openwire_version, _split_sub

        return _split_sub(key, sub.info, _openwire_version(d))

    def binding_rows(self) -> list[tuple]:
        rows = []
        for d in self.results:
            for key in sorted(d.replay.destinations):
                st = d.replay.destinations[key]
                topic = st.destination.type in TOPIC_TYPES
                name = st.destination.name
                rows.append(("address", None, name, name, "MULTICAST" if topic else "ANYCAST", None, None, None))
                if not topic:
                    rows.append(("queue", None, name, name, "ANYCAST", None, None, None))
                    continue
                for _key, qname, sub in self._subscriptions(d, st):
                    rows.append(("queue", None, qname, name, "MULTICAST", self._selector(d, sub), None, None))
        self.summary.set_bindings(rows)
        return rows

    def _prepared_adds(self, d) -> dict[str, list]:
        """destination key -> LiveMessage entries sent in prepared (in-doubt) transactions, in order."""
        out: dict[str, list] = {}
        for tx in d.open_transactions:
            if tx.state != "prepared":
                continue
            for op in tx.ops:
                if op[0] == "add":
                    out.setdefault(op[1].key, []).append(op[2])
        return out

    def rows(self) -> Iterator[tuple]:
        """Export rows, store by store, destination by destination (see the module docstring)."""
        from amqtool.engines.kahadb.document import iter_live_decoded

        opts = self.options
        s = self.summary
        pending = self.pending
        for di, d in enumerate(self.results):
            prepared = self._prepared_adds(d)
            keys = sorted(set(d.replay.destinations) | set(prepared))
            for key in keys:
                st = d.replay.destinations.get(key)
                if st is None:  # a destination first seen in a prepared transaction: no subscriptions known
                    if key.split(":", 1)[0] in ("1", "3"):
                        continue
                    name, topic, subs = key.split(":", 1)[1], False, []
                else:
                    name, topic = st.destination.name, st.destination.type in TOPIC_TYPES
                    subs = self._subscriptions(d, st) if topic else []
                wanted = [(k, q) for k, q, _ in subs if opts.wants(q)] if topic else None
                if topic and not wanted or not topic and not opts.wants(name):
                    continue
                groups = [("committed", list(st.messages.values()) if st is not None else [])]
                if key in prepared:
                    groups.append(("prepared", prepared[key]))
                for state, entries in groups:
                    for m, msg, err in iter_live_decoded(d, entries):
                        if err is None:
                            try:
                                cols = decode_openwire(m, msg, address=name, safe=opts.safe)
                            except FormatError as e:
                                err = e.message
                        if err is not None:
                            s.problem(m.message_id, f"{name} ({m.file_id}:{m.offset}): {err}")
                            continue
                        if topic:
                            waiting = m.waiting if state == "committed" else None
                            hits = [(k, q) for k, q in wanted if waiting is None or k in waiting]
                            for k, _q in hits:
                                pk = (di, key, k)
                                pending[pk] = pending.get(pk, 0) + 1
                            queues = [q for _k, q in hits]
                        else:
                            queues = [name]
                        if not queues:
                            continue
                        s.messages += 1
                        for q in queues:
                            s.count_row(q, state)
                            yield message_row(cols, queue=q, queue_id=None,
                                              routing_type="MULTICAST" if topic else "ANYCAST",
                                              delivery_count=cols["delivery_count"], transaction_state=state,
                                              store_message_id=m.message_id)
