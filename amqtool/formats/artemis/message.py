"""Persisted messages: the ADD_MESSAGE_PROTOCOL (45) body, the ADD_LARGE_MESSAGE (30) header and their
``data print`` texts (artemis-journal-format.md §5.2, §6.1 "Message text").

A type-45 body starts with a persister byte (``PersisterIDs``): 1 is a core message (``CoreMessagePersister``),
2, 3 and 5 are AMQP messages (``AMQPMessagePersister``, V2, V3) and 4 an AMQP large message. A type-30 body
is a core large message's headers+properties block with no persister byte (``LargeMessagePersister``); its
body lives in ``<messageID>.msg``.

Every class decodes with bounds checks (FormatError for bad bytes) and encodes back byte for byte.
``describe()`` reproduces ``DescribeJournal.MessageDescribe.toString``; the Java text carries
``System.identityHashCode`` after ``@``, which no reader can know, so it is a parameter (``hash_text``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from amqtool.errors import FormatError
from amqtool.formats.artemis.primitives import (
    Reader,
    TypedProperties,
    Writer,
    java_date_text,
    uuid_text,
)

# PersisterIDs
CORE_LARGE_PERSISTER = 0
CORE_PERSISTER = 1
AMQP_PERSISTER = 2
AMQP_PERSISTER_V2 = 3
AMQP_LARGE_PERSISTER = 4
AMQP_PERSISTER_V3 = 5

# Message.getType() values (Message.java)
DEFAULT_TYPE = 0
OBJECT_TYPE = 2
TEXT_TYPE = 3
BYTES_TYPE = 4
MAP_TYPE = 5
STREAM_TYPE = 6
EMBEDDED_TYPE = 7
LARGE_EMBEDDED_TYPE = 8

# The lower-case "pretty" names ``data exp`` writes (XmlDataExporterUtil).
MESSAGE_TYPE_NAMES = {
    DEFAULT_TYPE: "default",
    OBJECT_TYPE: "object",
    TEXT_TYPE: "text",
    BYTES_TYPE: "bytes",
    MAP_TYPE: "map",
    STREAM_TYPE: "stream",
    EMBEDDED_TYPE: "embedded",
    LARGE_EMBEDDED_TYPE: "large-embedded",
}

# PacketImpl.PACKET_HEADERS_SIZE: endOfBodyPosition counts from the start of a packet whose 13-byte header
# (i32 length, u8 type, i64 channel) is not stored, so the body is endOfBodyPosition - 13 bytes long.
BUFFER_HEADER_SPACE = 13

HASH_PLACEHOLDER = "0"  # stands for System.identityHashCode in texts


def _date(millis: int, tz) -> str:
    return "0" if millis == 0 else java_date_text(millis, tz)


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _nullable(v) -> str:
    return "null" if v is None else str(v)


@dataclass(frozen=True)
class MessageHeaders:
    """The CoreMessage headers+properties block (``encodeHeadersAndProperties``)."""

    message_id: int
    address: str | None
    user_id: bytes | None  # 16 raw bytes, or None
    type: int
    durable: bool
    expiration: int
    timestamp: int
    priority: int  # a signed byte, as getPriority() returns it
    properties: TypedProperties = field(default_factory=TypedProperties)

    @classmethod
    def read(cls, r: Reader) -> "MessageHeaders":
        mid = r.i64("messageID")
        address = r.nullable_simple_string("address")
        user_id = r.bytes(16, "userID") if r.u8("userID flag") == 1 else None
        mtype = r.i8("message type")
        durable = r.bool("durable")
        expiration = r.i64("expiration")
        timestamp = r.i64("timestamp")
        priority = r.i8("priority")
        props = TypedProperties.read(r)
        return cls(mid, address, user_id, mtype, durable, expiration, timestamp, priority, props)

    def write(self, w: Writer) -> Writer:
        w.i64(self.message_id).nullable_simple_string(self.address)
        if self.user_id is None:
            w.u8(0)
        else:
            if len(self.user_id) != 16:
                raise FormatError(f"userID needs 16 bytes, got {len(self.user_id)}")
            w.u8(1).raw(bytes(self.user_id))
        w.u8(self.type).bool_n(self.durable).i64(self.expiration).i64(self.timestamp).u8(self.priority)
        return w.typed_properties(self.properties)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    @property
    def user_id_text(self) -> str | None:
        return None if self.user_id is None else uuid_text(self.user_id)


def _header(name: str) -> property:
    """A read-only attribute that is the message's ``headers.<name>`` (MessageHeaders)."""
    return property(attrgetter(f"headers.{name}"), doc=f"``headers.{name}``")


class _MessageAccessors:
    """Accessors the exporter uses, shared by core and large messages (which hold a ``headers``)."""

    headers: MessageHeaders

    durable = _header("durable")          # bool
    priority = _header("priority")        # int
    timestamp = _header("timestamp")      # int, epoch milliseconds
    expiration = _header("expiration")    # int, epoch milliseconds, 0 = never
    type = _header("type")                # int, Message.getType()

    @property
    def type_name(self) -> str:
        return MESSAGE_TYPE_NAMES.get(self.headers.type, str(self.headers.type))

    @property
    def user_id(self) -> str | None:
        """The userID as Artemis prints it (8-4-4-4-12), or None."""
        return self.headers.user_id_text

    @property
    def properties(self) -> dict[str, Any]:
        return self.headers.properties.to_dict()

    @property
    def property_types(self) -> dict[str, str]:
        return self.headers.properties.types()


@dataclass(frozen=True)
class CoreMessage(_MessageAccessors):
    """A core message as ``CoreMessagePersister`` stores it (persister 1).

    ``message_id`` and ``address`` are the persister's own copies, which win over the ones inside the
    buffer (``CoreMessagePersister.decode`` sets both after reloading the buffer). ``tail`` holds buffer
    bytes after the properties, which Artemis ignores (normally none).
    """

    message_id: int
    address: str | None
    body: bytes
    headers: MessageHeaders
    tail: bytes = b""

    persister = CORE_PERSISTER
    is_large = False

    @classmethod
    def read(cls, r: Reader) -> "CoreMessage":
        """Read what follows the persister byte."""
        mid = r.i64("messageID")
        address = r.nullable_simple_string("address")
        buf_len = r.i32("message buffer length")
        if buf_len < 4 or buf_len > r.remaining:
            raise FormatError(f"core message buffer of {buf_len} bytes does not fit in {r.remaining}")
        inner = Reader(r.buf, r.pos, r.pos + buf_len)
        r.pos += buf_len
        end_of_body = inner.i32("endOfBodyPosition")
        body_len = end_of_body - BUFFER_HEADER_SPACE
        if body_len < 0:
            raise FormatError(f"endOfBodyPosition {end_of_body} is below the {BUFFER_HEADER_SPACE}-byte packet header")
        body = inner.bytes(body_len, "message body")
        headers = MessageHeaders.read(inner)
        tail = inner.bytes(inner.remaining, "message buffer tail")
        return cls(mid, address, body, headers, tail)

    @classmethod
    def decode(cls, data: bytes) -> "CoreMessage":
        """Decode a whole type-45 body whose persister byte is 1."""
        r = Reader(data)
        p = r.u8("persister id")
        if p != CORE_PERSISTER:
            raise FormatError(f"persister id {p} is not the core message persister (1)")
        return cls.read(r)

    @classmethod
    def build(cls, *, message_id: int, address: str | None, body: bytes = b"", type: int = DEFAULT_TYPE,
              durable: bool = True, expiration: int = 0, timestamp: int = 0, priority: int = 4,
              user_id: bytes | None = None, properties: TypedProperties | None = None) -> "CoreMessage":
        """A message as a broker writes it: the same id and address inside and outside the buffer."""
        headers = MessageHeaders(message_id, address, user_id, type, durable, expiration, timestamp, priority,
                                 properties or TypedProperties())
        return cls(message_id, address, bytes(body), headers)

    @staticmethod
    def text_body(text: str | None) -> bytes:
        """The body of a TEXT message: one NullableSimpleString (§5.2)."""
        return Writer().nullable_simple_string(text).getvalue()

    def buffer(self) -> bytes:
        """The CoreMessage buffer (what ``persist`` writes after its length)."""
        w = Writer().i32(len(self.body) + BUFFER_HEADER_SPACE).raw(self.body)
        self.headers.write(w)
        return w.raw(self.tail).getvalue()

    def write(self, w: Writer) -> Writer:
        buf = self.buffer()
        return w.u8(CORE_PERSISTER).i64(self.message_id).nullable_simple_string(self.address).i32(len(buf)).raw(buf)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    @property
    def buf_len(self) -> int:
        """``bufLen``: the buffer length, which is the message's encode size."""
        return 4 + len(self.body) + len(self.headers.encode()) + len(self.tail)

    def encode_size(self) -> int:
        """``getPersistentSize``/``getEncodeSize`` as ``data print`` shows it after decoding. When the
        persister's address differs from the buffer's, ``setAddress`` invalidated the buffer and the size is
        that of the re-encoded message (same body, the persister's address)."""
        if self.address == self.headers.address:
            return self.buf_len
        return 4 + len(self.body) + len(replace(self.headers, address=self.address).encode())

    @property
    def text(self) -> str | None:
        """The text of a TEXT message (the body's NullableSimpleString)."""
        return Reader(self.body).nullable_simple_string("text body")

    def to_string(self, *, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        """``CoreMessage.toString()``."""
        h = self.headers
        return (f"CoreMessage[messageID={self.message_id}, durable={_bool(h.durable)}, "
                f"userID={_nullable(h.user_id_text)}, priority={h.priority}, "
                f"timestamp={_date(h.timestamp, tz)}, expiration={_date(h.expiration, tz)}, "
                f"durable={_bool(h.durable)}, address={_nullable(self.address)}, size={self.encode_size()}, "
                f"properties={h.properties.describe()}]@{hash_text}")

    def safe_text(self) -> str:
        return f"CoreMessage(safe data, size={self.encode_size()})"

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        """``MessageDescribe.toString`` (no closing parenthesis, as in Artemis)."""
        if safe:
            return self.safe_text()
        uid = self.headers.user_id_text
        return (f"Message(messageID={self.message_id}" + (f";userMessageID={uid}" if uid else "")
                + f";msg={self.to_string(hash_text=hash_text, tz=tz)}")


@dataclass(frozen=True)
class LargeMessage(_MessageAccessors):
    """A core large message's header (record type 30, and the paged large-message header): the
    headers+properties block, no persister byte. ``tail`` keeps ignored trailing bytes."""

    headers: MessageHeaders
    tail: bytes = b""

    is_large = True

    @classmethod
    def read(cls, r: Reader) -> "LargeMessage":
        headers = MessageHeaders.read(r)
        return cls(headers, r.bytes(r.remaining, "large message tail"))

    @classmethod
    def decode(cls, data: bytes) -> "LargeMessage":
        return cls.read(Reader(data))

    def write(self, w: Writer) -> Writer:
        return self.headers.write(w).raw(self.tail)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    message_id = _header("message_id")  # int: a large message has no persister copy of its own
    address = _header("address")        # str | None

    @property
    def body(self) -> bytes:
        """The body is not in the journal but in ``<messageID>.msg``."""
        return b""

    @property
    def large_size(self) -> int | None:
        """``_AMQ_LARGE_SIZE`` (the body size), when the writer set it."""
        v = self.headers.properties.get("_AMQ_LARGE_SIZE")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def to_string(self, *, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        """``LargeServerMessageImpl.toString()`` with its irregular spacing."""
        h = self.headers
        return (f"LargeServerMessage[messageID={h.message_id},durable={_bool(h.durable)},"
                f"userID={_nullable(h.user_id_text)},priority={h.priority}, timestamp={_date(h.timestamp, tz)},"
                f"expiration={_date(h.expiration, tz)}, durable={_bool(h.durable)}, "
                f"address={_nullable(h.address)}, properties={h.properties.describe()}]@{hash_text}")

    def paged_text(self) -> str:
        """``NullStorageLargeServerMessage.toString()`` (paged large messages in ``data print``)."""
        h = self.headers
        return (f"NullStorageLargeServerMessage[messageID={h.message_id}, durable={_bool(h.durable)}, "
                f"address={_nullable(h.address)},properties={h.properties.describe()}]")

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        if safe:
            # getPersistentSize needs a storage manager the tool does not have: no size (§6.1 safe mode)
            return "LargeServerMessageImpl(safe data)"
        uid = self.headers.user_id_text
        return (f"LargeMessage(messageID={self.headers.message_id}" + (f";userMessageID={uid}" if uid else "")
                + f";msg={self.to_string(hash_text=hash_text, tz=tz)}")


class _AmqpAccessors:
    """What AMQP messages (AmqpMessage, AmqpLargeMessage) share: the AMQP sections are not decoded, so there
    is no userID and the properties are the extra properties the broker added (``extraPropsSize`` then a
    TypedProperties when the size is not 0)."""

    extra_size: int
    extra_properties: TypedProperties | None

    @property
    def user_id(self) -> str | None:
        return None

    @property
    def properties(self) -> dict[str, Any]:
        return self.extra_properties.to_dict() if self.extra_properties else {}

    @property
    def property_types(self) -> dict[str, str]:
        return self.extra_properties.types() if self.extra_properties else {}

    def _write_extra(self, w: Writer) -> Writer:
        """``extraPropsSize`` and the extra properties: size 0 and nothing when there are none."""
        if self.extra_properties is None:
            return w.i32(0)
        enc = self.extra_properties.encode()
        return w.i32(self.extra_size or len(enc)).raw(enc)


@dataclass(frozen=True)
class AmqpMessage(_AmqpAccessors):
    """An AMQP message (persisters 2, 3 and 5): the raw AMQP 1.0 encoding is kept as bytes.

    Persister 3 adds ``i32 extraPropsSize`` + TypedProperties (when non-zero); 5 adds ``i64 expiration``.
    """

    persister: int
    message_id: int
    message_format: int
    address: str | None
    data: bytes
    extra_size: int = 0
    extra_properties: TypedProperties | None = None
    expiration: int = 0

    is_large = False

    @classmethod
    def read(cls, r: Reader, persister: int) -> "AmqpMessage":
        mid = r.i64("messageID")
        fmt = r.i64("messageFormat")
        address = r.nullable_simple_string("address")
        n = r.i32("AMQP data length")
        if n < 0:
            raise FormatError(f"AMQP data length {n}")
        data = r.bytes(n, "AMQP data")
        extra_size, extra, expiration = 0, None, 0
        if persister in (AMQP_PERSISTER_V2, AMQP_PERSISTER_V3):
            extra_size = r.i32("extra properties size")
            if extra_size != 0:
                extra = TypedProperties.read(r, "extra properties")
        if persister == AMQP_PERSISTER_V3:
            expiration = r.i64("expiration")
        return cls(persister, mid, fmt, address, data, extra_size, extra, expiration)

    def write(self, w: Writer) -> Writer:
        w.u8(self.persister).i64(self.message_id).i64(self.message_format).nullable_simple_string(self.address)
        w.i32(len(self.data)).raw(self.data)
        if self.persister in (AMQP_PERSISTER_V2, AMQP_PERSISTER_V3):
            self._write_extra(w)
        if self.persister == AMQP_PERSISTER_V3:
            w.i64(self.expiration)
        return w

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    @property
    def body(self) -> bytes:
        return self.data

    @property
    def durable(self) -> bool | None:
        return None  # in the AMQP header section, not decoded here

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        """An abbreviation of ``AMQPStandardMessage.toString``: the AMQP sections are not decoded, so the
        durable flag, application properties, annotations and properties Artemis would print are left out
        (not byte-identical to ``data print``)."""
        size = len(self.data)
        if safe:
            return f"AMQPStandardMessage(safe data, size={size})"
        extra = self.extra_properties.describe() if self.extra_properties else "null"
        return (f"Message(messageID={self.message_id};msg=AMQPStandardMessage( [messageID={self.message_id}, "
                f"address={_nullable(self.address)}, size={size}, extraProperties = {extra}]")


@dataclass(frozen=True)
class AmqpLargeMessage(_AmqpAccessors):
    """An AMQP large message (persister 4): the fields before the saved AMQP header encoding are decoded;
    the rest (saved encoding, optional expiration and reencoded flag) is kept opaque (§5.2 UNCERTAIN)."""

    message_id: int
    durable: bool
    message_format: int
    address: str | None
    extra_size: int
    extra_properties: TypedProperties | None
    rest: bytes

    persister = AMQP_LARGE_PERSISTER
    is_large = True
    expiration = None

    @classmethod
    def read(cls, r: Reader) -> "AmqpLargeMessage":
        mid = r.i64("messageID")
        durable = r.bool("durable")
        fmt = r.i64("messageFormat")
        address = r.nullable_simple_string("address")
        extra_size = r.i32("extra properties size")
        extra = TypedProperties.read(r, "extra properties") if extra_size != 0 else None
        return cls(mid, durable, fmt, address, extra_size, extra, r.bytes(r.remaining, "AMQP large message data"))

    def write(self, w: Writer) -> Writer:
        w.u8(AMQP_LARGE_PERSISTER).i64(self.message_id).bool_a(self.durable).i64(self.message_format)
        w.nullable_simple_string(self.address)
        return self._write_extra(w).raw(self.rest)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    @property
    def body(self) -> bytes:
        return b""

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        """An abbreviation of ``AMQPLargeMessage.toString`` (AMQP sections not decoded)."""
        if safe:
            return "AMQPLargeMessage(safe data)"
        return (f"LargeMessage(messageID={self.message_id};msg=AMQPLargeMessage( [durable={_bool(self.durable)}, "
                f"messageID={self.message_id}, address={_nullable(self.address)}]")


PersistedMessage = CoreMessage | AmqpMessage | AmqpLargeMessage


def decode_persisted_message(body: bytes) -> PersistedMessage:
    """Decode a type-45 body (or a paged non-large message) by its persister byte (§5.2). Bytes after the
    message are ignored, as Artemis ignores them."""
    return read_persisted_message(Reader(body))


def read_persisted_message(r: Reader) -> PersistedMessage:
    """Like :func:`decode_persisted_message` from a reader positioned at the persister byte; stops after
    the message (for page records, where queue ids follow). An AMQP large message takes the rest."""
    p = r.u8("persister id")
    if p == CORE_PERSISTER:
        return CoreMessage.read(r)
    if p in (AMQP_PERSISTER, AMQP_PERSISTER_V2, AMQP_PERSISTER_V3):
        return AmqpMessage.read(r, p)
    if p == AMQP_LARGE_PERSISTER:
        return AmqpLargeMessage.read(r)
    raise FormatError(f"unknown message persister id {p} (expected 1..5)")


def message_times(body, user_record_type: int = 45) -> tuple[int, int]:
    """(timestamp, expiration) of a stored message, in epoch milliseconds (0: not set), without decoding
    its body or properties: what ``Message.getTimestamp()``/``getExpiration()`` return after the broker's
    load (``CoreMessagePersister.decode``, then ``CoreMessage.decodeHeadersAndProperties``).

    A core message (type 45, persister 1) is read in place: the headers follow the body inside the
    message buffer (§5.2); a large message's header (type 30) is the headers block itself. Other
    persisters are decoded (AMQP: no timestamp is kept outside the AMQP sections, 0; the V3 expiration).
    Raises FormatError for a body that does not hold them."""
    import struct

    mv = memoryview(body)
    try:
        if user_record_type == 45 and len(mv) and mv[0] == CORE_PERSISTER:
            pos = 9
            if mv[pos]:
                pos += 5 + struct.unpack_from(">i", mv, pos + 1)[0]
            else:
                pos += 1
            inner = pos + 4
            end_of_body = struct.unpack_from(">i", mv, inner)[0]
            h = inner + end_of_body - BUFFER_HEADER_SPACE + 4 + 8  # past the body and the headers' messageID
            if end_of_body < BUFFER_HEADER_SPACE:
                raise FormatError(f"endOfBodyPosition {end_of_body} is below the packet header")
            h = h + 5 + struct.unpack_from(">i", mv, h + 1)[0] if mv[h] else h + 1  # address
            h += 17 if mv[h] == 1 else 1  # userID
            expiration, timestamp = struct.unpack_from(">qq", mv, h + 2)  # past type and durable
            return timestamp, expiration
    except (struct.error, IndexError):
        raise FormatError("message record too short for its headers") from None
    if user_record_type == 31:
        raise FormatError("ADD-MESSAGE (31) records of Artemis 1.x are not decodable")
    if user_record_type == 30:
        m = LargeMessage.decode(bytes(body))
    else:
        m = decode_persisted_message(bytes(body))
    return (getattr(m, "timestamp", 0) or 0), (getattr(m, "expiration", 0) or 0)
