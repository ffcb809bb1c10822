"""``amqtool create DEST --from EXPORT.xml``: a new Artemis store from a ``data exp`` document, offline.

The document is what ``artemis data exp`` (or ``amqtool export --format xml``, of an Artemis or a KahaDB
store) writes, in the layout ``XmlDataImporter`` reads: ``<bindings>`` with ``<address-binding
routing-types name id/>`` and ``<queue-binding address filter-string name id routing-type/>``, then
``<messages>`` with ``<message id priority expiration timestamp type [user-id]>``, its ``<properties>``
(``<property name value [type]/>``), ``<queues>`` and ``<body>`` (URL-safe base64; ``isLarge="true"``: one
CDATA per chunk). Where ``data imp`` replays these through a client into a running broker, the same
addresses, queues and core messages are written straight into journals by
:mod:`amqtool.engines.migrate.write`:

* property values are read back as ``XmlDataImporter.processMessageProperties`` reads them: by the type
  attribute (boolean, byte, short, integer, long, float, double, string/simple-string, bytes as URL-safe
  base64, ``_AMQ_NULL`` typed bytes a null); a property with no type is a char (``getPropertyType`` has
  none for Character);
* the message type by its pretty name (default, bytes, map, object, stream, text); ``user-id`` back to its
  16 bytes; the body as decoded;
* new ids, as ``data imp`` gets new ones from the broker it sends to: bindings first, then messages in
  document order (the document's ids are not reused: an id in a hand-edited document may clash).

Parsed as a stream (defusedxml's ``iterparse``: no entity expansion, no external references), one message
at a time, so memory does not grow with the document. A message naming a queue the document does not
declare, or a property that does not decode, is reported and left out.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from amqtool.engines.migrate.convert import ANYCAST, MULTICAST
from amqtool.engines.migrate.plan import PlanBase, PlannedAddress, PlannedMessage, PlannedQueue
from amqtool.errors import FormatError, UsageError
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import (
    BYTES_TYPE,
    DEFAULT_TYPE,
    MAP_TYPE,
    OBJECT_TYPE,
    STREAM_TYPE,
    TEXT_TYPE,
    CoreMessage,
)

TYPES = {"default": DEFAULT_TYPE, "bytes": BYTES_TYPE, "map": MAP_TYPE, "object": OBJECT_TYPE,
         "stream": STREAM_TYPE, "text": TEXT_TYPE}
ROUTING = {"ANYCAST": ANYCAST, "MULTICAST": MULTICAST}


def _int(text: str, bits: int) -> int:
    v = int(text)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"{v} does not fit {bits} bits")
    return v


def _b64(text: str) -> bytes:
    return P.b64url_decode("".join(text.split()))


def property_of(name: str, ptype: str | None, value: str) -> P.Property:
    """One ``<property>`` as ``XmlDataImporter`` types it."""
    if ptype == "bytes" and value == "_AMQ_NULL":
        return P.Property(name, P.NULL, None)
    if ptype is None:
        if len(value.encode("utf-16-le", "surrogatepass")) != 2:
            raise ValueError(f"a property without type is a char, but {value!r} is not one character")
        return P.Property(name, P.CHAR, value)
    if ptype == "boolean":
        return P.Property(name, P.BOOLEAN, value == "true")
    if ptype == "byte":
        return P.Property(name, P.BYTE, _int(value, 8))
    if ptype == "short":
        return P.Property(name, P.SHORT, _int(value, 16))
    if ptype == "integer":
        return P.Property(name, P.INT, _int(value, 32))
    if ptype == "long":
        return P.Property(name, P.LONG, _int(value, 64))
    if ptype == "float":
        return P.Property(name, P.FLOAT, float(value))
    if ptype == "double":
        return P.Property(name, P.DOUBLE, float(value))
    if ptype in ("string", "simple-string"):
        return P.Property(name, P.STRING, value)
    if ptype == "bytes":
        return P.Property(name, P.BYTES, _b64(value))
    raise ValueError(f"unknown property type {ptype!r}")


class XmlImportPlan(PlanBase):
    """The plan of a ``data exp`` document at ``path`` (see the module docstring)."""

    kind = "xml"

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = Path(path)
        try:
            self.bytes_scanned = self.path.stat().st_size
        except OSError as err:
            raise UsageError(f"cannot read the XML document: {err.strerror}", path=str(path)) from None
        self._names: dict[str, int] = {}  # queue name -> id
        self._messages_el = None
        self._events = self._parse()
        self._read_bindings()

    def source_text(self) -> str:
        return str(self.path)

    def _parse(self):
        from defusedxml import ElementTree as ET

        try:
            for event, el in ET.iterparse(str(self.path), events=("start", "end")):
                yield event, el
        except ET.ParseError as err:
            raise UsageError(f"the XML document is not well-formed: {err}", path=str(self.path)) from None
        except OSError as err:
            raise UsageError(f"cannot read the XML document: {err.strerror or err}", path=str(self.path)) from None
        except Exception as err:  # noqa: BLE001 - defusedxml's entity/DTD refusals
            from amqtool.store.xmlconfig import _refusal

            raise UsageError(f"refusing the XML document: {_refusal(err)}", path=str(self.path)) from None

    def _read_bindings(self) -> None:
        from amqtool.store.xmlconfig import local_name

        root_seen = False
        addresses: list[tuple] = []
        queues: list[tuple] = []
        for event, el in self._events:
            tag = local_name(el.tag)
            if event == "start" and not root_seen:
                if tag != "activemq-journal":
                    raise UsageError(f"not a data exp document (root <{tag}>, expected <activemq-journal>)",
                                     path=str(self.path))
                root_seen = True
                continue
            if event == "start" and tag == "messages":
                self._messages_el = el
                break
            if event != "end":
                continue
            if tag == "address-binding":
                rts = tuple(sorted({ROUTING[r.strip()] for r in (el.get("routing-types") or "").split(",")
                                    if r.strip() in ROUTING}))
                addresses.append((el.get("name") or "", rts or (MULTICAST,)))
            elif tag == "queue-binding":
                queues.append((el.get("name") or "", el.get("address") or "", el.get("filter-string") or None,
                               ROUTING.get(el.get("routing-type") or "MULTICAST", MULTICAST)))
            elif tag == "bindings":
                break
        if not root_seen:
            raise UsageError("not a data exp document (empty)", path=str(self.path))
        for name, rts in addresses:
            aid = self._id()
            self._id()  # its bindings transaction
            self.addresses[name] = PlannedAddress(aid, name, rts, "topic" if rts == (MULTICAST,) else "queue")
        for name, address, filt, rt in queues:
            a = self.addresses.get(address)
            if a is None:  # a queue on an address the document does not declare: declare it (auto-create)
                aid = self._id()
                self._id()
                a = self.addresses[address] = PlannedAddress(aid, address, (rt,), "queue" if rt == ANYCAST else "topic")
            elif rt not in a.routing_types:
                a.routing_types = tuple(sorted(set(a.routing_types) | {rt}))
            qid = self._id()
            self._id()
            self.queues[qid] = PlannedQueue(qid, name, address, rt, filt)
            a.queues.append(qid)
            self._names[name] = qid

    def _message(self, el) -> PlannedMessage:
        from amqtool.store.xmlconfig import local_name

        mtype = TYPES.get(el.get("type") or "default", DEFAULT_TYPE)
        props, qids, chunks = [], [], []
        for child in el:
            tag = local_name(child.tag)
            if tag == "properties":
                for p in child:
                    props.append(property_of(p.get("name") or "", p.get("type"), p.get("value") or ""))
            elif tag == "queues":
                for q in child:
                    name = q.get("name") or ""
                    if name not in self._names:
                        raise ValueError(f"queue {name!r} is not declared in <bindings>")
                    qids.append(self._names[name])
            elif tag == "body":
                chunks = [_b64(t) for t in child.itertext() if t.strip()]
        if not qids:
            raise ValueError("no queue")
        uid = el.get("user-id")
        a = self.queues[qids[0]].address
        core = CoreMessage.build(message_id=self.next_id, address=a, body=b"".join(chunks), type=mtype,
                                 durable=True, expiration=int(el.get("expiration") or 0),
                                 timestamp=int(el.get("timestamp") or 0), priority=_int(el.get("priority") or "4", 8),
                                 user_id=P.uuid_bytes(uid) if uid else None,
                                 properties=P.TypedProperties.of(props))
        return PlannedMessage(core, qids, 0, "committed", None, f"{self.path}:message {el.get('id')}", None)

    def _forget(self, el) -> None:
        """Drop a handled message from the tree (memory stays one message whatever the document's size)."""
        el.clear()
        if self._messages_el is not None:
            self._messages_el.clear()

    def messages(self, records: tuple[int, int | None] | None = None) -> Iterator[PlannedMessage]:
        """The document's messages (``records`` is ignored: they are built from the document, not from
        OpenWire bytes)."""
        from amqtool.store.xmlconfig import local_name

        for event, el in self._events:
            if event != "end" or local_name(el.tag) != "message":
                continue
            try:
                pm = self._message(el)
            except (ValueError, FormatError) as err:
                self.problems.append({"destination": None, "store": str(self.path), "location": el.get("id"),
                                      "messageId": el.get("id"), "reason": str(getattr(err, "message", err))})
                self._forget(el)
                continue
            self._forget(el)
            self._id()
            self._count(pm)
            yield pm
