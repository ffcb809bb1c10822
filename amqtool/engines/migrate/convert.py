"""One stored OpenWire message -> the core message Artemis makes of it.

Mirrors ``OpenWireMessageConverter.inbound`` (artemis-openwire-protocol), which Artemis runs on every
OpenWire message a client sends (``AMQSession.send``), so a migrated message is the message a Classic client
would have left in an Artemis broker by sending it there:

* headers: ``durable`` = persistent, ``expiration``, ``priority``, ``timestamp``; the core type from the
  OpenWire class (``toCoreType``: Message 0 DEFAULT, Object 2, Text 3, Bytes 4, Map 5, Stream 6); a
  BlobMessage is refused (``toCoreType`` throws "We don't support BLOB type yet!");
* body (compressed bodies are inflated and ``__HDR_COMPRESSED`` = true is set, so the broker re-deflates it
  for OpenWire consumers): TEXT one NullableSimpleString (null text: the null flag); MAP the entries as a
  TypedProperties block (``loadMapIntoProperties``; a nested map or list value is refused, as
  ``TypedProperties.setObjectProperty`` throws); OBJECT ``i32`` length + the serialized bytes; STREAM each
  element re-typed to ``DataConstants`` (``writeStreamType``: a char as a short, a string as a nullable
  string, a null as a null string; nested maps/lists, which that loop cannot read, are refused); BYTES and
  DEFAULT the bytes as stored (inflated);
* properties, in ``inbound``'s order (the order decides the on-disk HashMap order, see
  :meth:`TypedProperties.of`): ``JMSType``, ``__HDR_COMPRESSED``, ``__HDR_ARRIVAL``,
  ``__HDR_BROKER_IN_TIME``, ``__HDR_BROKER_PATH``, ``__HDR_CLUSTER`` (broker ids joined by ``,``),
  ``__HDR_COMMAND_ID``, ``JMSCorrelationID``, ``__HDR_DATASTRUCTURE``, ``_AMQ_GROUP_ID`` (``JMSXGroupID``),
  ``__HDR_GROUP_SEQUENCE`` (``JMSXGroupSeq``), ``__HDR_MESSAGE_ID``, ``__HDR_PRODUCER_ID``,
  ``__HDR_MARSHALL_PROP`` (the stored property bytes) followed by every user property
  (``putObjectProperty`` in the Java ``HashMap`` order of ``MarshallingSupport.unmarshalPrimitiveMap``; a map
  or list value becomes its ``toString`` text, as the converter's ``ActiveMQPropertyConversionException``
  fallback does), ``__HDR_REPLY_TO``, ``__HDR_USER_ID``, ``__HDR_DROPPABLE``, ``__HDR_ORIG_DESTINATION``;
  then ``_AMQ_ROUTING_TYPE`` (``AMQSession.send``: ANYCAST 1 for a queue, MULTICAST 0 for a topic);
* the OpenWire objects in ``__HDR_*`` bytes properties (message id, producer id, reply-to, original
  destination, data structure) are what ``marshaller.marshal(object)`` gives with the protocol manager's wire
  format: ``OpenWireProtocolManager`` builds it with ``OpenWireFormatFactory.createWireFormat()``, whose
  ``OpenWireFormat`` is loose-encoded, size-prefixed, uncached, version 12 (the preferred tight encoding only
  applies after a negotiation that this instance never takes part in). The stored loose encodings are
  reused; a MessageId of a store older than OpenWire 10 gets the ``textView`` field (null) that version 12
  has.

Scheduled delivery: Classic keeps a message with ``AMQ_SCHEDULED_DELAY``/``CRON`` in its job scheduler store
(``scheduler/``), not in KahaDB, until it is due; a message found in KahaDB was already released, and Artemis'
converter gives the ``AMQ_SCHEDULED_*`` properties no meaning either, so they stay ordinary properties and no
``_AMQ_SCHED_DELIVERY`` is set. Jobs still in the scheduler store are not migrated (the plan reports the
directory).

The message id (``CoreMessage.messageID``) and the address come from the caller (the migration plan).
"""
from __future__ import annotations

import struct

from amqtool.errors import FormatError
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
from amqtool.formats.kahadb.openwire import OpenWireMessage, _Reader, _typed_value

# CommandTypes -> Message type bytes (OpenWireMessageConverter.toCoreType)
CORE_TYPES = {23: DEFAULT_TYPE, 24: BYTES_TYPE, 25: MAP_TYPE, 26: OBJECT_TYPE, 27: STREAM_TYPE, 28: TEXT_TYPE}
ANYCAST, MULTICAST = 1, 0  # RoutingType.getType()
HDR = "__HDR_"
GROUP_ID = "_AMQ_GROUP_ID"  # Message.HDR_GROUP_ID
ROUTING_TYPE = "_AMQ_ROUTING_TYPE"  # Message.HDR_ROUTING_TYPE
LARGE_SIZE = "_AMQ_LARGE_SIZE"  # Message.HDR_LARGE_BODY_SIZE

# MarshallingSupport type bytes
_M_NULL, _M_BOOLEAN, _M_BYTE, _M_CHAR, _M_SHORT, _M_INT, _M_LONG, _M_DOUBLE, _M_FLOAT, _M_STRING = range(10)
_M_BYTES, _M_MAP, _M_LIST, _M_BIG_STRING = 10, 11, 12, 13
# MarshallingSupport type -> TypedProperties/DataConstants type (maps and lists have none)
_TYPED = {_M_NULL: P.NULL, _M_BOOLEAN: P.BOOLEAN, _M_BYTE: P.BYTE, _M_CHAR: P.CHAR, _M_SHORT: P.SHORT,
          _M_INT: P.INT, _M_LONG: P.LONG, _M_DOUBLE: P.DOUBLE, _M_FLOAT: P.FLOAT, _M_STRING: P.STRING,
          _M_BYTES: P.BYTES, _M_BIG_STRING: P.STRING}


class NotConvertible(Exception):
    """A message Artemis' converter would refuse (the reason in words)."""


def _bits(t: int, v: float) -> int:
    if t == P.FLOAT:
        return struct.unpack(">I", struct.pack(">f", v))[0]
    return struct.unpack(">Q", struct.pack(">d", v))[0]


def typed_entries(raw: bytes, *, named: bool) -> list[tuple[str | None, int, object]]:
    """``(name, MarshallingSupport type, value)`` of a marshalled primitive map (``named``) or a stream body
    (a run of typed values), in stored order."""
    r = _Reader(raw)
    out = []
    if named:
        n = r.int()
        if n == -1:
            return []
        if n < 0 or n > r.end - r.pos:
            raise FormatError(f"primitive map of {n} entries does not fit")
        for _ in range(n):
            name = r.utf()
            if r.pos >= r.end:
                raise FormatError("primitive map: value runs past the end")
            t = r.buf[r.pos]
            out.append((name, t, _typed_value(r, 0)))
    else:
        while r.pos < r.end:
            t = r.buf[r.pos]
            out.append((None, t, _typed_value(r, 0)))
    if r.pos != r.end:
        raise FormatError(f"primitive map: {r.end - r.pos} bytes left over")
    return out


def java_map_order(names: list[str]) -> list[int]:
    """Indices of ``names`` (distinct, in stored order) in the iteration order of the ``HashMap`` that
    ``MarshallingSupport.unmarshalPrimitiveMap`` fills (``new HashMap<>(Math.min(128, size))``, load factor
    0.75, grown while filling)."""
    n = len(names)
    cap = P.hashmap_presized_capacity(min(128, n))
    while n > cap * 3 // 4:
        cap *= 2
    return P.hashmap_order([P.java_string_hash(k) for k in names], cap)


def _java_text(v) -> str:
    """``toString`` of a map or list property value (``HashMap``/``ArrayList``); a byte array, whose Java
    text is an identity hash, is shown as URL-safe base64."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray)):
        return P.b64url(bytes(v))
    if isinstance(v, float):
        return P.java_double_text(v)
    if isinstance(v, dict):
        keys = list(v)
        return "{" + ", ".join(f"{keys[i]}={_java_text(v[keys[i]])}" for i in java_map_order(keys)) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_java_text(x) for x in v) + "]"
    return str(v)


def _property(name: str, t: int, v) -> P.Property:
    """``putObjectProperty`` of one OpenWire property, with the converter's toString fallback."""
    if t in (_M_MAP, _M_LIST):
        return P.Property(name, P.STRING, _java_text(v))
    pt = _TYPED[t]
    if pt in (P.FLOAT, P.DOUBLE):
        return P.Property(name, pt, v, _bits(pt, v))
    if pt == P.NULL:
        return P.Property(name, P.NULL, None)
    return P.Property(name, pt, bytes(v) if pt == P.BYTES else v)


def user_properties(raw: bytes | None) -> list[P.Property]:
    """The message's OpenWire properties as core properties, in ``HashMap`` iteration order."""
    if not raw:
        return []
    entries = {}
    for name, t, v in typed_entries(raw, named=True):
        entries[name] = (t, v)  # a repeated key: the last value, first place (HashMap.put)
    names = list(entries)
    return [_property(names[i], *entries[names[i]]) for i in java_map_order(names)]


def _map_body(data: bytes) -> bytes:
    entries = {}
    for name, t, v in typed_entries(data, named=True):
        if t in (_M_MAP, _M_LIST):
            raise NotConvertible(f"map body entry {name!r} is a nested {'map' if t == _M_MAP else 'list'} "
                                 f"(TypedProperties.setObjectProperty refuses it)")
        entries[name] = (t, v)
    names = list(entries)
    props = [_property(names[i], *entries[names[i]]) for i in java_map_order(names)]
    return P.TypedProperties.of(props).encode()


def _stream_body(data: bytes) -> bytes:
    w = P.Writer()
    for _, t, v in typed_entries(data, named=False):
        if t == _M_BOOLEAN:
            w.u8(P.BOOLEAN).bool_a(v)
        elif t == _M_BYTE:
            w.u8(P.BYTE).u8(v)
        elif t == _M_BYTES:
            w.u8(P.BYTES).i32(len(v)).raw(bytes(v))
        elif t == _M_CHAR:
            w.u8(P.CHAR).u16(ord(v) if len(v) == 1 else 0xFFFD)
        elif t == _M_DOUBLE:
            w.u8(P.DOUBLE).raw(struct.pack(">d", v))
        elif t == _M_FLOAT:
            w.u8(P.FLOAT).raw(struct.pack(">f", v))
        elif t == _M_INT:
            w.u8(P.INT).i32(v)
        elif t == _M_LONG:
            w.u8(P.LONG).i64(v)
        elif t == _M_SHORT:
            w.u8(P.SHORT).i16(v)
        elif t in (_M_STRING, _M_BIG_STRING):
            w.u8(P.STRING).nullable_string(v)
        elif t == _M_NULL:
            w.u8(P.STRING).nullable_string(None)
        else:
            raise NotConvertible(f"stream body element of type {t} (a nested map or list) cannot be read "
                                 f"by the converter's stream loop")
    return w.getvalue()


def core_body(msg: OpenWireMessage, core_type: int) -> bytes:
    """The core body buffer of ``msg`` (``writeTextType`` ... ``writeDefaultType``)."""
    if msg.content is None:
        return CoreMessage.text_body(None) if core_type == TEXT_TYPE else b""
    data = msg.inflated_content() or b""
    if core_type == TEXT_TYPE:
        return CoreMessage.text_body(msg.body())
    if core_type == MAP_TYPE:
        return _map_body(data)
    if core_type == OBJECT_TYPE:
        return struct.pack(">i", len(data)) + data
    if core_type == STREAM_TYPE:
        return _stream_body(data)
    return data


def marshalled(wire: bytes | None, *, message_id: bool = False, store_version: int = 11) -> bytes:
    """``OpenWireFormat.marshal(object)`` (loose, size prefix, version 12) from the object's stored loose
    encoding (type byte + fields); ``marshal(null)`` when there is none."""
    if wire is None:
        return struct.pack(">iB", 1, 0)  # size 1, NULL_TYPE
    if message_id and store_version < 10:
        wire = wire[:1] + b"\x00" + wire[1:]  # MessageId.textView, null (OpenWire 10+)
    return struct.pack(">i", len(wire)) + wire


def convert(msg: OpenWireMessage, *, message_id: int, address: str, routing_type: int,
            store_version: int = 11) -> CoreMessage:
    """The core message of ``msg`` as ``OpenWireMessageConverter.inbound`` + ``AMQSession.send`` make it.
    Raises :class:`NotConvertible` (BLOB messages, nested map values in a map body, ...) or FormatError (a
    body or property block that does not decode)."""
    core_type = CORE_TYPES.get(msg.type_code)
    if core_type is None:
        raise NotConvertible(f"{msg.type_name} is not convertible (OpenWireMessageConverter.toCoreType: "
                             f"BLOB messages are not supported)")
    body = core_body(msg, core_type)
    wire = msg.extra.get("wire", {})
    props: list[P.Property] = []
    add = props.append
    if msg.jms_type is not None:
        add(P.Property("JMSType", P.STRING, msg.jms_type))
    if msg.content is not None and msg.compressed:
        add(P.Property(HDR + "COMPRESSED", P.BOOLEAN, True))
    add(P.Property(HDR + "ARRIVAL", P.LONG, msg.arrival))
    add(P.Property(HDR + "BROKER_IN_TIME", P.LONG, msg.broker_in_time))
    for key, name in (("brokerPath", "BROKER_PATH"), ("cluster", "CLUSTER")):
        ids = msg.extra.get(key)
        if ids is not None:
            add(P.Property(HDR + name, P.STRING, ",".join("null" if b is None else b for b in ids)))
    add(P.Property(HDR + "COMMAND_ID", P.INT, msg.command_id))
    if msg.correlation_id is not None:
        add(P.Property("JMSCorrelationID", P.STRING, msg.correlation_id))
    if "data_structure" in wire:
        add(P.Property(HDR + "DATASTRUCTURE", P.BYTES, marshalled(wire["data_structure"])))
    if msg.group_id is not None:
        add(P.Property(GROUP_ID, P.STRING, msg.group_id))
    add(P.Property(HDR + "GROUP_SEQUENCE", P.INT, msg.group_sequence))
    add(P.Property(HDR + "MESSAGE_ID", P.BYTES,
                   marshalled(wire.get("message_id"), message_id=True, store_version=store_version)))
    if "producer_id" in wire:
        add(P.Property(HDR + "PRODUCER_ID", P.BYTES, marshalled(wire["producer_id"])))
    if msg.marshalled_properties is not None:
        add(P.Property(HDR + "MARSHALL_PROP", P.BYTES, bytes(msg.marshalled_properties)))
        props.extend(user_properties(msg.marshalled_properties))
    if "reply_to" in wire:
        add(P.Property(HDR + "REPLY_TO", P.BYTES, marshalled(wire["reply_to"])))
    if msg.user_id is not None:
        add(P.Property(HDR + "USER_ID", P.STRING, msg.user_id))
    add(P.Property(HDR + "DROPPABLE", P.BOOLEAN, bool(msg.extra.get("droppable", False))))
    if "original_destination" in wire:
        add(P.Property(HDR + "ORIG_DESTINATION", P.BYTES, marshalled(wire["original_destination"])))
    add(P.Property(ROUTING_TYPE, P.BYTE, routing_type))
    try:
        typed = P.TypedProperties.of(props)
    except FormatError as err:
        raise NotConvertible(f"a property does not fit its core type: {err.message}") from None
    priority = msg.priority - 256 if msg.priority > 127 else msg.priority
    return CoreMessage.build(message_id=message_id, address=address, body=body, type=core_type,
                             durable=bool(msg.persistent), expiration=msg.expiration, timestamp=msg.timestamp,
                             priority=priority, user_id=None, properties=typed)
