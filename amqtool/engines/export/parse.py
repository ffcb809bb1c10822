"""The export's per-message row builder, shared by both engines.

* :func:`decode_message` turns a message record's body (type 45 with its persister byte, or a type-30 large
  message header) into the message's columns; :func:`message_row` adds one queue reference and gives a row in
  ``schema.MESSAGE_COLUMNS`` order. Both engines build every row through these two functions (the Spark
  engine's tasks run the local engine's :func:`~amqtool.engines.export.local.journal_message_rows` and
  :func:`~amqtool.engines.artemis.paging.paged_export_rows`), so the local and the Spark engine cannot disagree on
  how a message looks. Paged messages feed :func:`message_row` too: it takes ``paged``, ``page`` and
  ``page_position``.

Property values are the text ``artemis data exp`` writes (``XmlDataExporterUtil.convertProperty``): Java
``toString`` of the value, bytes as URL-safe base64, a null value as ``_AMQ_NULL`` typed ``bytes``; a char has
no type (``getPropertyType`` returns null for Character).
"""
from __future__ import annotations

import hashlib
import os

from amqtool.errors import FormatError
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import (
    BYTES_TYPE,
    MAP_TYPE,
    OBJECT_TYPE,
    STREAM_TYPE,
    TEXT_TYPE,
    AmqpLargeMessage,
    AmqpMessage,
    CoreMessage,
    LargeMessage,
    decode_persisted_message,
)

ADD_LARGE_MESSAGE = 30
ADD_MESSAGE = 31
ADD_MESSAGE_PROTOCOL = 45
MESSAGE_TYPES = frozenset({ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL})

# XmlDataExporterUtil.getMessagePrettyType: every other type (0, 7, 8, unknown) is "default".
XML_TYPE_NAMES = {BYTES_TYPE: "bytes", MAP_TYPE: "map", OBJECT_TYPE: "object", STREAM_TYPE: "stream",
                  TEXT_TYPE: "text"}

# XmlDataExporterUtil.getPropertyType by TypedProperties tag (a null value is "bytes", a char has none).
PROPERTY_TYPES = {P.NULL: "bytes", P.BOOLEAN: "boolean", P.BYTE: "byte", P.SHORT: "short", P.INT: "integer",
                  P.LONG: "long", P.FLOAT: "float", P.DOUBLE: "double", P.STRING: "simple-string",
                  P.BYTES: "bytes", P.CHAR: None}
NULL_VALUE = "_AMQ_NULL"


# --- message records -> message columns -----------------------------------------------------------------


def _lone_surrogate_free(v):
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return v
        except UnicodeEncodeError:
            return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in v)
    if isinstance(v, dict):
        return {_lone_surrogate_free(k): _lone_surrogate_free(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_lone_surrogate_free(x) for x in v)
    return v


def text_safe(values):
    """``values`` (a row, a column, a dict of columns) with every lone UTF-16 surrogate in its strings replaced
    by U+FFFD. A Java string may hold one (SimpleString and modified UTF-8 carry UTF-16 units as they are);
    Arrow and JSON text are UTF-8, which cannot. Only called when the text as it is does not encode."""
    return _lone_surrogate_free(values)


def property_rows(props) -> list[dict]:
    """TypedProperties as ``[{name, type, value}]`` in the reader's (``data exp``'s) iteration order."""
    if props is None or not props.entries:
        return []
    out = []
    for p in props.reader_order():
        t, v = p.type, p.value
        if t == P.NULL or v is None:
            text = NULL_VALUE
        elif t == P.BOOLEAN:
            text = "true" if v else "false"
        elif t == P.FLOAT:
            text = P.java_float_text(v)
        elif t == P.DOUBLE:
            text = P.java_double_text(v)
        elif t == P.BYTES:
            text = P.b64url(v)
        elif t in (P.STRING, P.CHAR):
            text = v
        else:
            text = str(v)
        out.append({"name": p.key, "type": PROPERTY_TYPES.get(t), "value": text})
    return out


class LargeBodies:
    """Where large-message bodies are: ``<dir>/<messageID>.msg`` (§7.2). ``None`` directory: none."""

    def __init__(self, directory: str | os.PathLike | None):
        self.directory = None if directory is None else os.fspath(directory)

    def path(self, message_id: int) -> str | None:
        if self.directory is None:
            return None
        p = os.path.join(self.directory, f"{message_id}.msg")
        return p if os.path.isfile(p) else None

    def read(self, message_id: int) -> bytes | None:
        """The body, or None when the file is missing or cannot be read (permissions, I/O): its row is
        written without a body and the export lists it (``missing_body``); verify names the file."""
        p = self.path(message_id)
        if p is None:
            return None
        try:
            with open(p, "rb") as fh:
                return fh.read()
        except OSError:
            return None

    def size(self, message_id: int) -> int | None:
        p = self.path(message_id)
        return None if p is None else os.path.getsize(p)


def property_map(rows: list[dict]) -> list[tuple[str, str | None]]:
    """The ``properties`` map column from typed property rows: name -> value text in the same order, a null
    value (``_AMQ_NULL``) as null; a repeated name keeps its first place and takes the last value."""
    out: dict[str, str | None] = {}
    for p in rows:
        v = p["value"]
        out[p["name"]] = None if v == NULL_VALUE and p["type"] == "bytes" else v
    return list(out.items())


def amqp_property_rows(pairs) -> list[dict]:
    """AMQP map entries ``(key, type, value)`` as typed property rows (type the AMQP type name)."""
    from amqtool.formats.artemis.amqp import value_text

    return [{"name": k, "type": t, "value": value_text(t, v)} for k, t, v in pairs]


def _dedup(rows: list[dict]) -> list[tuple[str, str | None]]:
    out: dict[str, str | None] = {}
    for p in rows:
        out[p["name"]] = p["value"]
    return list(out.items())


def core_text(msg) -> str | None:
    """The ``text`` column of a core message: the body's NullableSimpleString when the message is a TEXT
    message (``TextMessageUtil.readBodyText``), null otherwise and when the body does not hold one whole."""
    if msg.headers.type != TEXT_TYPE or msg.is_large:
        return None
    r = P.Reader(msg.body)
    try:
        text = r.nullable_simple_string("text body")
    except (FormatError, UnicodeDecodeError):
        return None
    return text if r.remaining == 0 else None


def _amqp_columns(msg) -> dict:
    """The AMQP message's columns from its sections (:mod:`amqtool.formats.artemis.amqp`); an encoding that
    does not decode leaves them null, the row is still exported (its body is the raw encoding)."""
    from amqtool.formats.artemis.amqp import decode_sections

    extra = property_rows(msg.extra_properties)
    cols = dict(durable=msg.durable if isinstance(msg, AmqpLargeMessage) else None, priority=None, timestamp=None,
                expiration=msg.expiration if isinstance(msg, AmqpMessage) and msg.persister == 5 else None,
                user_id=None, type=None, text=None, annotations=None)
    sections = None
    if isinstance(msg, AmqpMessage):
        try:
            sections = decode_sections(msg.data)
        except FormatError:
            sections = None
    app = []
    if sections is not None:
        if sections.durable is not None:
            cols["durable"] = sections.durable
        cols["priority"] = sections.priority
        cols["timestamp"] = sections.creation_time
        if cols["expiration"] is None:
            cols["expiration"] = sections.absolute_expiry_time
        if sections.user_id is not None:
            try:
                cols["user_id"] = sections.user_id.decode("utf-8")
            except UnicodeDecodeError:
                cols["user_id"] = None
        cols["text"] = sections.text
        app = amqp_property_rows(sections.application_properties)
        cols["annotations"] = _dedup(amqp_property_rows(sections.message_annotations))
    typed = extra + app
    cols["typed_properties"] = typed
    cols["properties"] = _dedup([dict(r, value=None if r["value"] == NULL_VALUE and r["type"] == "bytes"
                                      else r["value"]) for r in extra] + app)
    return cols


def decode_message(user_record_type: int, body: bytes, *, message_id: int, large: LargeBodies | None = None,
                   safe: bool = False) -> dict:
    """The message columns of a message record (type 45 or 30). Raises FormatError for a body that does not
    decode, including the legacy type 31 that current Artemis cannot read either."""
    if user_record_type == ADD_MESSAGE:
        raise FormatError("ADD-MESSAGE (31) records of Artemis 1.x are not decodable (use export/import of 1.x)")
    if user_record_type == ADD_LARGE_MESSAGE:
        msg = LargeMessage.decode(body)
    elif user_record_type == ADD_MESSAGE_PROTOCOL:
        msg = decode_persisted_message(body)
    else:
        raise FormatError(f"user record type {user_record_type} is not a message record")
    cols: dict = {"message_id": message_id, "large": bool(msg.is_large)}
    if isinstance(msg, (CoreMessage, LargeMessage)):
        h = msg.headers
        typed = property_rows(h.properties)
        cols.update(protocol="core", address=msg.address, durable=bool(h.durable), priority=h.priority,
                    timestamp=h.timestamp, expiration=h.expiration, user_id=h.user_id_text,
                    type=XML_TYPE_NAMES.get(h.type, "default"), typed_properties=typed,
                    properties=property_map(typed), annotations=None, text=core_text(msg))
    else:
        cols.update(protocol="amqp", address=msg.address, **_amqp_columns(msg))
    if msg.is_large:
        data = None if large is None else large.read(message_id)
        if data is None:
            size = msg.large_size if isinstance(msg, LargeMessage) else None
            cols.update(body=None, body_size=size, body_sha256=None)
        else:
            cols.update(body=None if safe else data, body_size=len(data),
                        body_sha256=hashlib.sha256(data).hexdigest())
    else:
        data = msg.body
        cols.update(body=None if safe else data, body_size=len(data), body_sha256=hashlib.sha256(data).hexdigest())
    return cols


def missing_body(cols: dict, where: str = "") -> str | None:
    """The problem text of a large message whose body file could not be read (its row is still written, with
    its declared size and no body), else None."""
    if cols["large"] and cols["body_sha256"] is None:
        return (f"{where}large message {cols['message_id']}: its body file {cols['message_id']}.msg is missing "
                f"or not a readable file; the row has no body")
    return None


def message_row(msg: dict, *, queue: str, queue_id: int | None, routing_type: str | None,
                delivery_count: int = 0, scheduled_time: int | None = None, transaction_state: str = "committed",
                transaction_id: int | None = None, paged: bool = False, page: int | None = None,
                page_position: int | None = None, store_message_id: str | None = None) -> tuple:
    """One export row (``schema.MESSAGE_COLUMNS`` order): a decoded message on one queue."""
    return (
        msg["message_id"], queue, queue_id, msg["address"], routing_type, msg["protocol"], msg["durable"],
        msg["priority"], msg["timestamp"], msg["expiration"], msg["user_id"], msg["type"], msg["typed_properties"],
        msg["body"], msg["body_size"], msg["body_sha256"], msg["large"], paged, page, page_position,
        delivery_count, scheduled_time, transaction_state, transaction_id, store_message_id,
        msg["properties"], msg["annotations"], msg["text"],
    )


# --- bindings ----------------------------------------------------------------------------------------------


class Bindings:
    """The bindings journal's addresses and queues as ``data exp`` reads them (XmlDataExporter.getBindings):
    every live QUEUE_BINDING_RECORD (21) and ADDRESS_BINDING_RECORD (44) put into a ``HashMap<Long, …>`` by
    record id in live-list order (a later record of the same id replaces the value, keeping its place), and
    written in that map's iteration order. Built from ``(record_id, user_record_type, body)`` in live order,
    whichever engine resolved the live list. Bodies that do not decode are counted in ``problems``."""

    def __init__(self, live_records, undefined_prefix: str = "UndefinedQueue_"):
        from amqtool.formats.artemis.userrecords import AddressBindingRecord, QueueBindingRecord

        self.undefined_prefix = undefined_prefix
        self.addresses: dict[int, AddressBindingRecord] = {}
        self.queues: dict[int, QueueBindingRecord] = {}
        self.problems: list[tuple[int, str]] = []
        for rid, utype, body in live_records:
            try:
                if utype == 21:
                    self.queues[rid] = QueueBindingRecord.decode(bytes(body), record_id=rid)
                elif utype == 44:
                    self.addresses[rid] = AddressBindingRecord.decode(bytes(body), record_id=rid)
            except FormatError as err:
                self.problems.append((rid, err.message))

    def queue_name(self, queue_id: int) -> str:
        q = self.queues.get(queue_id)
        return q.name if q is not None else f"{self.undefined_prefix}{queue_id}"

    def routing_type(self, queue_id: int) -> str | None:
        q = self.queues.get(queue_id)
        if q is None:
            return None
        # PersistentQueueBindingEncoding without the routing-type group decodes to the default (MULTICAST)
        return q.routing_type_name or "MULTICAST"

    def queue_map(self) -> dict[int, tuple[str, str | None]]:
        """queue id -> (name, routing type), for shipping to workers."""
        return {qid: (q.name, self.routing_type(qid)) for qid, q in self.queues.items()}

    def rows(self) -> list[tuple]:
        """``schema.BINDING_COLUMNS`` rows: addresses, then queues, each in HashMap iteration order."""
        out = []
        for aid in P.long_key_order(list(self.addresses)):
            a = self.addresses[aid]
            out.append(("address", aid, a.name, a.name, ",".join(a.routing_type_names), None, bool(a.auto_created),
                        None))
        for qid in P.long_key_order(list(self.queues)):
            q = self.queues[qid]
            out.append(("queue", qid, q.name, q.address, self.routing_type(qid), q.filter_string,
                        bool(q.auto_created), q.user))
        return out


def xml_queue_order(queue_ids_in_ref_order: list[int]) -> list[int]:
    """The order ``data exp`` lists a message's queues: its ``HashMap<Long, …>`` of ADD_REFs filled in ref
    order (``extractQueueNames`` iterates ``values()``)."""
    if len(queue_ids_in_ref_order) < 2:
        return list(queue_ids_in_ref_order)
    return P.long_key_order(queue_ids_in_ref_order)
