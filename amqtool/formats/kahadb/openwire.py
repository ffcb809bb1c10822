"""The stored OpenWire message (``KahaAddMessageCommand.message``), loose encoding.

KahaDBStore marshals messages with ``new OpenWireFormat()`` at the store's ``openwireVersion`` (index
metadata; 11 by default, 6 for old stores): cache off, tight encoding off, size prefix on
(kahadb-format.md §4.4). Layout: int32 size, type byte (23 Message, 24 Bytes, 25 Map, 26 Object,
27 Stream, 28 Text, 29 Blob), then the fields of MessageMarshaller.looseUnmarshal in order.

Compressed bodies: Text/Map/Stream/Object deflate the whole content (one zlib stream); a BytesMessage
stores int32 uncompressed length + zlib stream (ActiveMQBytesMessage.storeContent).
"""
from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field

from amqtool.errors import FormatError

MESSAGE_TYPES = {23: "Message", 24: "BytesMessage", 25: "MapMessage", 26: "ObjectMessage",
                 27: "StreamMessage", 28: "TextMessage", 29: "BlobMessage"}
DEST_TYPES = {100: "queue", 101: "topic", 102: "temp-queue", 103: "temp-topic"}
# A body larger than this after inflation is refused (a zip bomb in a damaged store must not eat memory).
MAX_INFLATED = 256 * 1024 * 1024

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_d = struct.Struct(">d")
_f = struct.Struct(">f")
_I_unpack, _Q_unpack = _I.unpack_from, _Q.unpack_from


_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_modified_utf8(b: bytes) -> str:
    """Java modified UTF-8 (``C0 80`` for NUL, surrogates as two 3-byte sequences) to a Python str."""
    try:
        s = bytes(b).replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as err:
        raise FormatError(f"invalid modified UTF-8 ({err.reason})") from None
    if not s.isascii() and _SURROGATE.search(s):
        s = s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return s


class _Reader:
    """Sequential big-endian reader over one buffer; every overrun is a FormatError."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise FormatError(f"OpenWire field of {n} bytes runs past the end ({self.end - self.pos} left)",
                              offset=self.pos)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def _unpack(self, st: struct.Struct):
        if self.pos + st.size > self.end:
            raise FormatError("OpenWire value runs past the end", offset=self.pos)
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise FormatError("OpenWire value runs past the end", offset=pos)
        self.pos = pos + 1
        return self.buf[pos]

    def bool(self) -> bool:
        pos = self.pos
        if pos >= self.end:
            raise FormatError("OpenWire value runs past the end", offset=pos)
        self.pos = pos + 1
        return self.buf[pos] != 0

    def int(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise FormatError("OpenWire value runs past the end", offset=pos)
        self.pos = pos + 4
        return _I_unpack(self.buf, pos)[0]

    def long(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise FormatError("OpenWire value runs past the end", offset=pos)
        self.pos = pos + 8
        return _Q_unpack(self.buf, pos)[0]

    def short(self) -> int:
        return self._unpack(_h)

    def utf(self) -> str:
        return decode_modified_utf8(self.take(self._unpack(_H)))

    def string(self) -> str | None:
        """looseUnmarshalString: bool present, then UTF."""
        return self.utf() if self.bool() else None

    def byte_array(self) -> bytes | None:
        """looseUnmarshalByteArray / ByteSequence: bool present, int32 length, bytes."""
        if not self.bool():
            return None
        n = self.int()
        if n < 0:
            raise FormatError(f"negative byte array length {n}", offset=self.pos - 4)
        return self.take(n)


@dataclass
class OpenWireMessage:
    """The fields of a stored message that operators ask about. ``content`` is the stored body (possibly
    compressed); :meth:`body` inflates and decodes it."""

    type_code: int
    command_id: int = 0
    producer_id: str | None = None
    destination: tuple | None = None  # (kind, physical name)
    transaction_id: str | None = None
    original_destination: tuple | None = None
    message_id: str | None = None
    group_id: str | None = None
    group_sequence: int = 0
    correlation_id: str | None = None
    persistent: bool = False
    expiration: int = 0
    priority: int = 0
    reply_to: tuple | None = None
    timestamp: int = 0
    jms_type: str | None = None
    content: bytes | None = None
    marshalled_properties: bytes | None = None
    compressed: bool = False
    redelivery_counter: int = 0
    arrival: int = 0
    user_id: str | None = None
    broker_in_time: int = 0
    broker_out_time: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def type_name(self) -> str:
        return MESSAGE_TYPES.get(self.type_code, f"type-{self.type_code}")

    def properties(self) -> dict:
        if not self.marshalled_properties:
            return {}
        r = _Reader(self.marshalled_properties)
        m = _primitive_map(r, 0)
        if r.pos != r.end:
            raise FormatError(f"message properties: {r.end - r.pos} bytes left over")
        return m or {}

    def inflated_content(self) -> bytes | None:
        """The body bytes as the message type stores them, inflated if compressed."""
        c = self.content
        if c is None or not self.compressed:
            return c
        if self.type_code == 24:
            if len(c) < 4:
                raise FormatError("compressed BytesMessage body shorter than its length prefix")
            want = _I.unpack_from(c, 0)[0]
            data = _inflate(c[4:])
            if want != len(data):
                raise FormatError(f"compressed BytesMessage: inflated {len(data)} bytes, header says {want}")
            return data
        return _inflate(c)

    def body(self):
        """The decoded body: ``str`` for text (None for a null text), ``bytes`` for bytes messages,
        ``dict``/``list`` for map/stream messages, raw bytes for object/blob/plain messages."""
        data = self.inflated_content()
        if data is None:
            return None
        if self.type_code == 28:
            r = _Reader(data)
            n = r.int()
            if n == -1:
                return None
            text = decode_modified_utf8(r.take(n))
            if r.pos != r.end:
                raise FormatError(f"text body: {r.end - r.pos} bytes after the text")
            return text
        if self.type_code == 25:
            return _primitive_map(_Reader(data), 0)
        if self.type_code == 27:
            r = _Reader(data)
            out = []
            while r.pos < r.end:
                out.append(_typed_value(r, 0))
            return out
        return data

    def body_bytes(self) -> bytes:
        """The body as a consumer sees its bytes: text as UTF-8, bytes as is, others as stored (inflated)."""
        b = self.body()
        if b is None:
            return b""
        if isinstance(b, str):
            return b.encode("utf-8", "surrogatepass")
        if isinstance(b, (bytes, bytearray)):
            return bytes(b)
        return self.inflated_content() or b""


def _inflate(data: bytes) -> bytes:
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, MAX_INFLATED)
    except zlib.error as err:
        raise FormatError(f"compressed body does not inflate: {err}") from None
    if d.unconsumed_tail:
        raise FormatError(f"compressed body inflates past {MAX_INFLATED} bytes")
    return out


def _typed_value(r: _Reader, depth: int):
    """MarshallingSupport.unmarshalPrimitive."""
    t = r.byte()
    if t == 0:
        return None
    if t == 1:
        return r.bool()
    if t == 2:
        return struct.unpack(">b", r.take(1))[0]
    if t == 3:
        return chr(r._unpack(_H))
    if t == 4:
        return r.short()
    if t == 5:
        return r.int()
    if t == 6:
        return r.long()
    if t == 7:
        return r._unpack(_d)
    if t == 8:
        return r._unpack(_f)
    if t == 9:
        return r.utf()
    if t == 10:
        n = r.int()
        return r.take(n)
    if t == 11:
        return _primitive_map(r, depth + 1)
    if t == 12:
        if depth > 32:
            raise FormatError("property list nested too deeply")
        n = r.int()
        if n < 0 or n > r.end - r.pos:
            raise FormatError(f"property list of {n} entries does not fit")
        return [_typed_value(r, depth + 1) for _ in range(n)]
    if t == 13:
        n = r.int()
        return decode_modified_utf8(r.take(n))
    raise FormatError(f"unknown primitive type {t}", offset=r.pos - 1)


def _primitive_map(r: _Reader, depth: int) -> dict | None:
    if depth > 32:
        raise FormatError("property map nested too deeply")
    n = r.int()
    if n == -1:
        return None
    if n < 0 or n > r.end - r.pos:
        raise FormatError(f"property map of {n} entries does not fit")
    out = {}
    for _ in range(n):
        k = r.utf()
        out[k] = _typed_value(r, depth)
    return out


def _producer_id(r: _Reader) -> str:
    # Wire order connectionId, value, sessionId; display order connectionId:sessionId:value (§4.4).
    conn = r.string()
    value = r.long()
    session = r.long()
    return f"{conn}:{session}:{value}"


def _nested(r: _Reader, version: int, depth: int = 0):
    """looseUnmarsalNestedObject / CachedObject (cache off): bool present, type byte, loose body.

    Returns ``(type, value)`` or None."""
    if not r.bool():
        return None
    if depth > 8:
        raise FormatError("OpenWire objects nested too deeply")
    t = r.byte()
    if t in DEST_TYPES:
        return t, (DEST_TYPES[t], r.string())
    if t == 123:
        return t, _producer_id(r)
    if t == 110:
        text_view = r.string() if version >= 10 else None
        prod = _nested(r, version, depth + 1)
        seq = r.long()
        r.long()  # brokerSequenceId
        if text_view is not None:
            return t, text_view if text_view.startswith("ID:") else "ID:" + text_view
        return t, f"{prod[1] if prod else None}:{seq}"
    if t == 111:
        value = r.long()
        conn = _nested(r, version, depth + 1)
        return t, f"TX:{conn[1] if conn else None}:{value}"
    if t == 112:
        fmt = r.int()
        gid = r.byte_array() or b""
        br = r.byte_array() or b""
        return t, f"XID:[{fmt},{gid.hex()},{br.hex()}]"
    if t in (120, 124):  # ConnectionId, BrokerId: one string
        return t, r.string()
    if t == 121:  # SessionId
        conn = r.string()
        return t, f"{conn}:{r.long()}"
    if t == 122:  # ConsumerId: connectionId, sessionId, value
        conn = r.string()
        sess = r.long()
        return t, f"{conn}:{sess}:{r.long()}"
    raise FormatError(f"unsupported nested OpenWire type {t}", offset=r.pos - 1)


def _nested_raw(r: _Reader, version: int, wire: dict, name: str):
    """:func:`_nested`, keeping the object's loose encoding (type byte and fields) in ``wire[name]``."""
    start = r.pos
    v = _nested(r, version)
    if v is not None:
        wire[name] = bytes(r.buf[start + 1:r.pos])
    return v


def _object_array(r: _Reader, version: int) -> list | None:
    if not r.bool():
        return None
    n = r.short()
    if n < 0:
        raise FormatError(f"negative object array size {n}", offset=r.pos - 2)
    return [_nested(r, version) for _ in range(n)]


def decode_message(buf, version: int = 11) -> OpenWireMessage:
    """Decode a size-prefixed loose-encoded message. ``version`` is the store's openwireVersion.

    The message must consume its size prefix exactly; anything else is a FormatError.
    """
    r = _Reader(buf if isinstance(buf, (bytes, bytearray, memoryview)) else memoryview(buf))
    size = r.int()
    if size != r.end - r.pos:
        raise FormatError(f"OpenWire size prefix {size} but {r.end - r.pos} bytes follow")
    t = r.byte()
    if t not in MESSAGE_TYPES:
        raise FormatError(f"OpenWire type {t} is not a message type")
    m = OpenWireMessage(t)
    m.command_id = r.int()
    r.bool()  # responseRequired
    wire = m.extra["wire"] = {}  # loose encodings (type byte + fields) of the nested objects, for re-marshalling
    p = _nested_raw(r, version, wire, "producer_id")
    m.producer_id = p[1] if p else None
    d = _nested(r, version)
    m.destination = d[1] if d else None
    tx = _nested(r, version)
    m.transaction_id = tx[1] if tx else None
    od = _nested_raw(r, version, wire, "original_destination")
    m.original_destination = od[1] if od else None
    mid = _nested_raw(r, version, wire, "message_id")
    m.message_id = mid[1] if mid else None
    _nested(r, version)  # originalTransactionId
    m.group_id = r.string()
    m.group_sequence = r.int()
    m.correlation_id = r.string()
    m.persistent = r.bool()
    m.expiration = r.long()
    m.priority = r.byte()
    rt = _nested_raw(r, version, wire, "reply_to")
    m.reply_to = rt[1] if rt else None
    m.timestamp = r.long()
    m.jms_type = r.string()
    m.content = r.byte_array()
    m.marshalled_properties = r.byte_array()
    ds = _nested_raw(r, version, wire, "data_structure")
    if ds is not None:
        m.extra["dataStructureType"] = ds[0]
    _nested(r, version)  # targetConsumerId
    m.compressed = r.bool()
    m.redelivery_counter = r.int()
    bp = _object_array(r, version)  # brokerPath
    if bp is not None:
        m.extra["brokerPath"] = [b[1] if b else None for b in bp]
    m.arrival = r.long()
    m.user_id = r.string()
    r.bool()  # recievedByDFBridge (reused by KahaDB as the concurrent store-and-dispatch flag)
    m.extra["droppable"] = r.bool()
    cl = _object_array(r, version)  # cluster
    if cl is not None:
        m.extra["cluster"] = [b[1] if b else None for b in cl]
    m.broker_in_time = r.long()
    m.broker_out_time = r.long()
    if version >= 10:
        r.bool()  # jmsxGroupFirstForConsumer
    if t == 29:  # ActiveMQBlobMessage: remoteBlobUrl, mimeType, deletedByBroker
        m.extra["remoteBlobUrl"] = r.string()
        m.extra["mimeType"] = r.string()
        r.bool()
    if r.pos != r.end:
        raise FormatError(f"OpenWire message: {r.end - r.pos} bytes left after the last field")
    return m


@dataclass(frozen=True)
class SubscriptionInfo:
    client_id: str | None
    destination: tuple | None
    selector: str | None
    subscription_name: str | None
    no_local: bool


def decode_subscription_info(buf, version: int = 11) -> SubscriptionInfo:
    """``KahaSubscriptionCommand.subscriptionInfo``: size-prefixed loose SubscriptionInfo (type 55):
    clientId, destination, selector, subscriptionName, subscribedDestination, noLocal."""
    r = _Reader(bytes(buf))
    size = r.int()
    if size != r.end - r.pos:
        raise FormatError(f"SubscriptionInfo size prefix {size} but {r.end - r.pos} bytes follow")
    t = r.byte()
    if t != 55:
        raise FormatError(f"OpenWire type {t} is not a SubscriptionInfo (55)")
    client = r.string()
    d = _nested(r, version)
    selector = r.string()
    name = r.string()
    _nested(r, version)  # subscribedDestination
    no_local = r.bool()
    if r.pos != r.end:
        raise FormatError(f"SubscriptionInfo: {r.end - r.pos} bytes left after the last field")
    return SubscriptionInfo(client, d[1] if d else None, selector, name, no_local)
