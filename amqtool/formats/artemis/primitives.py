"""Primitive encodings shared by every Artemis record body (artemis-journal-format.md §0).

Everything is big-endian (Netty ``ByteBuf`` / ``java.nio.ByteBuffer`` defaults). :class:`Reader` decodes
from any buffer with bounds checks that raise :class:`FormatError` (never ``IndexError`` or
``struct.error``); :class:`Writer` is its mirror image.
"""
from __future__ import annotations

import base64
import datetime as _dt
import functools
import math
import struct
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

from amqtool.errors import FormatError

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def decode_modified_utf8(data: bytes) -> str:
    """Java's modified UTF-8 (``DataInput.readUTF``): U+0000 as C0 80 (or a bare 00, as Artemis writes
    it), surrogate halves encoded separately (CESU-8 style)."""
    try:
        text = bytes(data).replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as err:
        raise FormatError(f"invalid modified UTF-8: {err.reason}") from None
    # Join surrogate pairs that CESU-8 spelled out separately.
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    """The inverse of :func:`decode_modified_utf8` as Artemis' ``UTF8Util.saveUTF`` writes it: a char
    <= 0x7F in one byte (U+0000 as a single 0x00 byte), supplementary characters as two 3-byte
    surrogates."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        c = (units[i] << 8) | units[i + 1]
        if c <= 0x7F:
            out.append(c)
        elif c <= 0x7FF:
            out += bytes((0xC0 | (c >> 6), 0x80 | (c & 0x3F)))
        else:
            out += bytes((0xE0 | (c >> 12), 0x80 | ((c >> 6) & 0x3F), 0x80 | (c & 0x3F)))
    return bytes(out)


class Reader:
    """A bounds-checked big-endian cursor over ``buf[start:end]``."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, start: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.end:
            raise FormatError(f"truncated {what}: need {n} bytes at position {self.pos}, "
                              f"{max(self.end - self.pos, 0)} left")
        p = self.pos
        self.pos += n
        return p

    def u8(self, what: str = "byte") -> int:
        return self.buf[self._need(1, what)]

    def i8(self, what: str = "byte") -> int:
        v = self.u8(what)
        return v - 256 if v > 127 else v

    def bool(self, what: str = "boolean") -> bool:
        """Any non-zero byte is true (both the 0xFF ActiveMQBuffer form and Netty's 0x01)."""
        return self.u8(what) != 0

    def i16(self, what: str = "short") -> int:
        return _I16.unpack_from(self.buf, self._need(2, what))[0]

    def u16(self, what: str = "unsigned short") -> int:
        return _U16.unpack_from(self.buf, self._need(2, what))[0]

    def i32(self, what: str = "int") -> int:
        return _I32.unpack_from(self.buf, self._need(4, what))[0]

    def i64(self, what: str = "long") -> int:
        return _I64.unpack_from(self.buf, self._need(8, what))[0]

    def bytes(self, n: int, what: str = "bytes") -> bytes:
        p = self._need(n, what)
        return bytes(self.buf[p:p + n])

    def utf(self, what: str = "UTF string") -> str:
        """``readUTF``: u16 byte length, then modified UTF-8."""
        n = self.u16(what)
        return decode_modified_utf8(self.bytes(n, what))

    def simple_string(self, what: str = "SimpleString") -> str:
        """``SimpleString``: i32 byte length, then UTF-16LE code units."""
        n = self.i32(what)
        if n % 2:
            raise FormatError(f"{what} has an odd byte length {n}")
        return self.bytes(n, what).decode("utf-16-le", "surrogatepass")

    def nullable_simple_string(self, what: str = "SimpleString") -> str | None:
        flag = self.u8(what)
        if flag == 0:
            return None
        return self.simple_string(what)

    def string(self, what: str = "String") -> str:
        """``readString`` (§0): ``i32 charLen`` then, chosen by charLen, charLen big-endian UTF-16 units
        (< 9), a UTF (< 0xFFF) or a SimpleString."""
        n = self.i32(what)
        if n < 0:
            raise FormatError(f"{what} has a negative length {n}")
        if n < 9:
            return self.bytes(2 * n, what).decode("utf-16-be", "surrogatepass")
        if n < 0xFFF:
            return self.utf(what)
        return self.simple_string(what)

    def nullable_string(self, what: str = "String") -> str | None:
        """``readNullableString``: a flag byte (0 = null, anything else = present), then a String."""
        if self.u8(what) == 0:
            return None
        return self.string(what)

    def typed_properties(self, what: str = "TypedProperties") -> "TypedProperties":
        return TypedProperties.read(self, what)

    def xid(self, what: str = "Xid") -> "Xid":
        return Xid.read(self, what)


class Writer:
    """The mirror of :class:`Reader`: appends big-endian encodings to a bytearray."""

    __slots__ = ("out",)

    def __init__(self):
        self.out = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.out)

    def u8(self, v: int) -> "Writer":
        self.out.append(v & 0xFF)
        return self

    def bool_a(self, v: bool) -> "Writer":
        """ActiveMQBuffer boolean: 0xFF for true (ChannelBufferWrapper.writeBoolean)."""
        self.out.append(0xFF if v else 0x00)
        return self

    def bool_n(self, v: bool) -> "Writer":
        """Netty boolean: 0x01 for true."""
        self.out.append(0x01 if v else 0x00)
        return self

    def i16(self, v: int) -> "Writer":
        self.out += _I16.pack(v)
        return self

    def u16(self, v: int) -> "Writer":
        self.out += _U16.pack(v)
        return self

    def i32(self, v: int) -> "Writer":
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> "Writer":
        self.out += _I64.pack(v)
        return self

    def raw(self, b: bytes) -> "Writer":
        self.out += b
        return self

    def utf(self, text: str) -> "Writer":
        data = encode_modified_utf8(text)
        if len(data) > 0xFFFF:
            raise FormatError(f"UTF string of {len(data)} bytes exceeds 65535")
        return self.u16(len(data)).raw(data)

    def simple_string(self, text: str) -> "Writer":
        data = text.encode("utf-16-le", "surrogatepass")
        return self.i32(len(data)).raw(data)

    def nullable_simple_string(self, text: str | None) -> "Writer":
        if text is None:
            return self.u8(0)
        return self.u8(1).simple_string(text)


    def string(self, text: str) -> "Writer":
        """``UTF8Util.writeString``: the length in UTF-16 chars picks the form (see :meth:`Reader.string`)."""
        units = text.encode("utf-16-be", "surrogatepass")
        n = len(units) // 2
        self.i32(n)
        if n < 9:
            return self.raw(units)
        if n < 0xFFF:
            return self.utf(text)
        return self.simple_string(text)

    def nullable_string(self, text: str | None) -> "Writer":
        if text is None:
            return self.u8(0)
        return self.u8(1).string(text)

    def typed_properties(self, props: "TypedProperties | None") -> "Writer":
        if props is None:
            return self.u8(0)
        return props.write(self)

    def xid(self, xid: "Xid") -> "Writer":
        return xid.write(self)


# --- Java HashMap iteration order --------------------------------------------------------------------------
#
# Several texts Artemis prints come straight from a java.util.HashMap (message properties, per-queue counts,
# transformer properties). Its iteration order is a pure function of the key hashes, the table capacity and
# the insertion order: ascending bucket ``spread(hash) & (capacity - 1)``, ties in insertion order (a resize
# splits every bucket keeping the relative order, so growth does not change that rule).


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def java_string_hash(text: str) -> int:
    """``String.hashCode``: ``h = 31·h + char`` over the UTF-16 units, 32-bit wrap-around (unsigned result)."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


@functools.lru_cache(maxsize=4096)
def simple_string_hash(text: str) -> int:
    """``SimpleString.hashCode``: ``h = 31·h + b`` over the UTF-16LE bytes taken as *signed* bytes.
    Memoized: it orders every message's property map, whose names repeat message after message (a
    migration computed it some ten times per message: 12% of ``create --from``'s time)."""
    h = 0
    for b in text.encode("utf-16-le", "surrogatepass"):
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h


def long_hash(v: int) -> int:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))``."""
    v &= 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & 0xFFFFFFFF


def hashmap_writer_capacity(count: int) -> int:
    """Capacity of a default ``new HashMap<>()`` after ``count`` puts: 16, doubled while count > 0.75·cap."""
    cap = 16
    while count > cap * 3 // 4:
        cap *= 2
    return cap


def hashmap_presized_capacity(count: int) -> int:
    """Capacity of ``new HashMap<>(count, 1.0f)`` (``tableSizeFor``): the next power of two >= count, at
    least 1. With load factor 1.0 it never grows while at most ``count`` keys are put."""
    cap = 1
    while cap < count:
        cap *= 2
    return cap


def hashmap_order(hashes: Iterable[int], capacity: int) -> list[int]:
    """Indices of keys (given by their Java ``hashCode`` in insertion order, keys distinct) in the
    iteration order of a HashMap table of ``capacity`` buckets."""
    mask = capacity - 1
    return sorted(range(len(hashes := list(hashes))), key=lambda i: (_spread(hashes[i]) & mask, i))


def hashmap_growing_order(hashes: Iterable[int]) -> list[int]:
    """Iteration order of a default ``HashMap`` built by putting the keys in the given order."""
    hashes = list(hashes)
    return hashmap_order(hashes, hashmap_writer_capacity(len(hashes)))


def long_key_order(keys: Iterable[int]) -> list[int]:
    """The keys of a default ``HashMap<Long, …>`` in iteration order; ``keys`` distinct, in first-put
    order (``data print`` message-reference counts and page counters, §6.1 item 9)."""
    return list(_long_key_order(tuple(keys)))


@functools.lru_cache(maxsize=4096)
def _long_key_order(keys: tuple[int, ...]) -> tuple[int, ...]:
    # a store's messages are routed to a few sets of queues, each asked for once per message
    return tuple(keys[i] for i in hashmap_growing_order([long_hash(k) for k in keys]))


# --- text forms Artemis prints -------------------------------------------------------------------------------


def uuid_text(raw: bytes) -> str:
    """The 8-4-4-4-12 text of a message userID as Artemis prints it. ``new UUID(TYPE_TIME_BASED, bytes)``
    rewrites the version nibble of byte 6 to 1 and the variant bits of byte 8 to 10 before printing, so
    this applies the same masks (the bytes on disk are not changed)."""
    if len(raw) != 16:
        raise FormatError(f"UUID needs 16 bytes, got {len(raw)}")
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x10
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of an 8-4-4-4-12 UUID text."""
    h = text.replace("-", "")
    if len(h) != 32:
        raise FormatError(f"not a UUID: {text!r}")
    try:
        return bytes.fromhex(h)
    except ValueError:
        raise FormatError(f"not a UUID: {text!r}") from None


def b64url(data: bytes) -> str:
    """``Base64.getUrlEncoder()``: URL-safe alphabet, padded, no line breaks (the tools' base64, §0)."""
    return base64.urlsafe_b64encode(bytes(data)).decode("ascii")


def b64url_decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise FormatError("invalid URL-safe base64 text") from None


def bytes_to_hex(data: bytes, group: int = 2) -> str:
    """``ByteUtil.bytesToHex(bytes, group)``: upper-case hex, one space between groups of ``group`` bytes,
    ``[]`` for no bytes."""
    if not data:
        return "[]"
    h = bytes(data).hex().upper()
    step = 2 * group
    return " ".join(h[i:i + step] for i in range(0, len(h), step))


def max_string(text: str, size: int) -> str:
    """``ByteUtil.maxString``: texts of ``size`` chars or more keep their first and last size/2 chars."""
    if len(text) < size:
        return text
    return text[: size // 2] + " ... " + text[len(text) - size // 2:]


def _java_fp_text(value: float, digits: str, exp10: int) -> str:
    """Lay out a shortest decimal ``0.digits × 10^exp10`` the way Float/Double.toString do."""
    # value = 0.d1d2d3... × 10^exp10 ; the decimal exponent of the first digit is e = exp10 - 1
    e = exp10 - 1
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if -3 <= e < 7:
        if e >= 0:
            int_part = digits[: e + 1].ljust(e + 1, "0")
            frac = digits[e + 1:] or "0"
        else:
            int_part = "0"
            frac = "0" * (-e - 1) + digits
        return f"{sign}{int_part}.{frac}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{e}"


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """The digits (and exponent as in ``0.digits × 10^exp``) Java's ``toString`` picks: the shortest
    decimal that rounds back to the value (binary32 when ``single``), the closest one among those; when one
    digit would do, the closest two-digit decimal instead (the JDK 19+ specification; 1.0E23, 4.9E-324)."""
    a = abs(value)
    if single:
        target = struct.pack(">f", a)

        def fits(t: str) -> bool:
            try:
                return struct.pack(">f", float(t)) == target
            except OverflowError:  # rounds past Float.MAX_VALUE
                return False
        top = 9
    else:
        fits = lambda t: float(t) == a  # noqa: E731
        top = 17
    text = f"{a:.{top - 1}e}"
    for prec in range(1, top + 1):
        t = f"{a:.{prec - 1}e}"
        if fits(t):
            text = t if prec > 1 else f"{a:.1e}"
            break
    mant, ex = text.split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    return digits, int(ex) + 1


def java_double_text(value: float) -> str:
    """``Double.toString`` (JDK 19+: shortest decimal that round-trips)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exp10 = _shortest_digits(value, single=False)
    return _java_fp_text(value, digits, exp10)


def java_float_text(value: float) -> str:
    """``Float.toString`` (JDK 19+: shortest decimal that round-trips in binary32)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exp10 = _shortest_digits(value, single=True)
    return _java_fp_text(value, digits, exp10)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_text(millis: int, tz: "_dt.tzinfo | str | None" = None) -> str:
    """``new java.util.Date(millis).toString()`` — ``EEE MMM dd HH:mm:ss zzz yyyy`` with English names —
    in ``tz`` (a tzinfo or an IANA name; UTC by default, printed as ``UTC``)."""
    if tz is None or tz == "UTC":
        zone = _dt.timezone.utc
        zone_name = "UTC"
    else:
        if isinstance(tz, str):
            from zoneinfo import ZoneInfo
            zone = ZoneInfo(tz)
        else:
            zone = tz
        zone_name = None
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    try:
        t = (epoch + _dt.timedelta(milliseconds=millis)).astimezone(zone)
    except (OverflowError, ValueError):
        raise FormatError(f"timestamp {millis} is outside the printable date range") from None
    if zone_name is None:
        zone_name = t.tzname() or "GMT"
    return (f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d} "
            f"{zone_name} {t.year}")


# --- TypedProperties (§0) --------------------------------------------------------------------------------

# Property type tags (TypedProperties / DataConstants)
NULL = 0
BOOLEAN = 2
BYTE = 3
BYTES = 4
SHORT = 5
INT = 6
LONG = 7
FLOAT = 8
DOUBLE = 9
STRING = 10
CHAR = 11

PROPERTY_TYPE_NAMES = {
    NULL: "null", BOOLEAN: "boolean", BYTE: "byte", BYTES: "bytes", SHORT: "short", INT: "integer",
    LONG: "long", FLOAT: "float", DOUBLE: "double", STRING: "simple-string", CHAR: "char",
}

_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class Property(NamedTuple):
    """One TypedProperties entry. ``value`` is the Python value (None, bool, int, bytes, float, str — a
    one-char str for CHAR). ``bits`` keeps the raw IEEE bits of a FLOAT/DOUBLE so NaN payloads survive a
    round trip; it is None for other types (and may be None for floats built by hand)."""

    key: str
    type: int
    value: Any
    bits: int | None = None

    def float_bits(self) -> int:
        if self.bits is not None:
            return self.bits
        if self.type == FLOAT:
            return _U32.unpack(_F32.pack(self.value))[0]
        return _U64.unpack(_F64.pack(self.value))[0]

    def value_text(self) -> str:
        """The value as ``TypedProperties.toString`` prints it (§6.1 "<props>")."""
        t, v = self.type, self.value
        if t == NULL or v is None:
            return "NULL-value"
        if t == BOOLEAN:
            return "true" if v else "false"
        if t in (BYTE, SHORT, INT, LONG):
            return str(v)
        if t == FLOAT:
            return java_float_text(v)
        if t == DOUBLE:
            return java_double_text(v)
        if t in (STRING, CHAR):
            return v
        if t == BYTES:
            text = "[" + max_string(bytes_to_hex(v, 2), 150) + "]"
            if self.key.startswith("_AMQ_ROUTE_TO"):
                longs = [struct.unpack_from(">q", v, i)[0] for i in range(0, len(v) - len(v) % 8, 8)]
                text += ", bytesAsLongs[" + ", ".join(str(x) for x in longs)
                if len(v) % 8:
                    # ByteBuffer.getLong on fewer than 8 bytes throws BufferUnderflowException (no message)
                    text += (", " if longs else "") + "error-converting-longs=null"
                text += "]"
            return text
        raise FormatError(f"unknown property type {t}")


def _check_value(t: int, v: Any) -> None:
    if t == NULL:
        ok = v is None
    elif t == BOOLEAN:
        ok = isinstance(v, bool)
    elif t in (BYTE, SHORT, INT, LONG):
        bits = {BYTE: 8, SHORT: 16, INT: 32, LONG: 64}[t]
        ok = isinstance(v, int) and not isinstance(v, bool) and -(1 << (bits - 1)) <= v < (1 << (bits - 1))
    elif t == BYTES:
        ok = isinstance(v, (bytes, bytearray))
    elif t in (FLOAT, DOUBLE):
        ok = isinstance(v, float)
    elif t == STRING:
        ok = isinstance(v, str)
    elif t == CHAR:
        ok = isinstance(v, str) and len(v.encode("utf-16-le", "surrogatepass")) == 2
    else:
        ok = False
    if not ok:
        raise FormatError(f"property value {v!r} does not fit type {PROPERTY_TYPE_NAMES.get(t, t)}")


@dataclass(frozen=True)
class TypedProperties:
    """A TypedProperties block as it stands on disk: ``entries`` in on-disk order.

    ``entries is None`` is the flag-0 form (null or empty, what a writer emits for no properties);
    an empty tuple is the rare flag-1/count-0 form, kept so a decode/encode round trip is byte-exact.
    Build one from values with :meth:`of` (the writer's HashMap order).
    """

    entries: tuple[Property, ...] | None = None

    @classmethod
    def of(cls, items: "Iterable[Property] | dict[str, tuple[int, Any]]") -> "TypedProperties":
        """Properties in the order a broker would write them: a default HashMap filled in the given order
        (capacity 16 doubling past 0.75), i.e. by bucket, ties in insertion order. A dict maps key ->
        (type, value). Later duplicates of a key replace the value in place, as HashMap.put does."""
        if isinstance(items, dict):
            items = [Property(k, t, v) for k, (t, v) in items.items()]
        merged: dict[str, Property] = {}
        for p in items:
            _check_value(p.type, p.value)
            merged[p.key] = p
        props = list(merged.values())
        if not props:
            return cls(None)
        order = hashmap_growing_order([simple_string_hash(p.key) for p in props])
        return cls(tuple(props[i] for i in order))

    @classmethod
    def read(cls, r: Reader, what: str = "TypedProperties") -> "TypedProperties":
        if r.u8(what) == 0:
            return cls(None)
        n = r.i32(f"{what} count")
        if n < 0 or n * 5 > r.remaining:  # every entry takes at least 5 bytes (empty key, NULL)
            raise FormatError(f"{what} count {n} does not fit in {r.remaining} bytes")
        out = []
        for _ in range(n):
            key = r.simple_string(f"{what} key")
            t = r.u8(f"{what} type")
            bits = None
            if t == NULL:
                v = None
            elif t == BOOLEAN:
                v = r.bool()
            elif t == BYTE:
                v = r.i8()
            elif t == BYTES:
                ln = r.i32(f"{what} bytes length")
                if ln < 0:
                    raise FormatError(f"{what} bytes value with negative length {ln}")
                v = r.bytes(ln, f"{what} bytes value")
            elif t == SHORT:
                v = r.i16()
            elif t == INT:
                v = r.i32()
            elif t == LONG:
                v = r.i64()
            elif t == FLOAT:
                bits = r.i32() & 0xFFFFFFFF
                v = _F32.unpack(_U32.pack(bits))[0]
            elif t == DOUBLE:
                bits = r.i64() & 0xFFFFFFFFFFFFFFFF
                v = _F64.unpack(_U64.pack(bits))[0]
            elif t == STRING:
                v = r.simple_string(f"{what} string value")
            elif t == CHAR:
                u = r.u16(f"{what} char value")
                v = chr(u)
            else:
                raise FormatError(f"{what}: unknown property type {t} for key {key!r}")
            out.append(Property(key, t, v, bits))
        return cls(tuple(out))

    def write(self, w: Writer) -> Writer:
        if self.entries is None:
            return w.u8(0)
        w.u8(1).i32(len(self.entries))
        for p in self.entries:
            w.simple_string(p.key).u8(p.type)
            t, v = p.type, p.value
            if t == NULL:
                pass
            elif t == BOOLEAN:
                w.bool_n(v)
            elif t == BYTE:
                w.u8(v)
            elif t == BYTES:
                w.i32(len(v)).raw(bytes(v))
            elif t == SHORT:
                w.i16(v)
            elif t == INT:
                w.i32(v)
            elif t == LONG:
                w.i64(v)
            elif t == FLOAT:
                w.raw(_U32.pack(p.float_bits()))
            elif t == DOUBLE:
                w.raw(_U64.pack(p.float_bits()))
            elif t == STRING:
                w.simple_string(v)
            elif t == CHAR:
                w.raw(v.encode("utf-16-be", "surrogatepass"))
            else:
                raise FormatError(f"unknown property type {t} for key {p.key!r}")
        return w

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    def encode_size(self) -> int:
        return len(self.encode())

    def __len__(self) -> int:
        return len(self.entries or ())

    def to_dict(self) -> dict[str, Any]:
        """Key -> Python value (a later duplicate key wins, as in the broker's map)."""
        return {p.key: p.value for p in self.entries or ()}

    def types(self) -> dict[str, str]:
        """Key -> type name (``PROPERTY_TYPE_NAMES``)."""
        return {p.key: PROPERTY_TYPE_NAMES[p.type] for p in self.entries or ()}

    def get(self, key: str, default: Any = None) -> Any:
        found = default
        for p in self.entries or ():
            if p.key == key:
                found = p.value
        return found

    def reader_order(self) -> list[Property]:
        """The entries in the order the broker's *reader* iterates them (and ``data print`` prints them):
        a HashMap presized to the next power of two >= count with load factor 1.0, filled in on-disk
        order; a duplicate key keeps its first position and takes the last value (§0 "Property order")."""
        merged: dict[str, Property] = {}
        for p in self.entries or ():
            merged[p.key] = p
        props = list(merged.values())
        cap = hashmap_presized_capacity(len(self.entries or ()))
        order = hashmap_order([simple_string_hash(p.key) for p in props], cap)
        return [props[i] for i in order]

    def describe(self) -> str:
        """``TypedProperties.toString``: ``TypedProperties[k=v, ...]`` in reader order."""
        return "TypedProperties[" + ", ".join(f"{p.key}={p.value_text()}" for p in self.reader_order()) + "]"


# --- Xid (XidCodecSupport) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Xid:
    """``i32 formatId, i32 bqLen, bq, i32 gtxLen, gtx`` (XidCodecSupport)."""

    format_id: int
    branch_qualifier: bytes
    global_transaction_id: bytes

    @classmethod
    def read(cls, r: Reader, what: str = "Xid") -> "Xid":
        fmt = r.i32(f"{what} formatId")
        n = r.i32(f"{what} branch qualifier length")
        if n < 0:
            raise FormatError(f"{what} branch qualifier length {n}")
        bq = r.bytes(n, f"{what} branch qualifier")
        n = r.i32(f"{what} global transaction id length")
        if n < 0:
            raise FormatError(f"{what} global transaction id length {n}")
        gtx = r.bytes(n, f"{what} global transaction id")
        return cls(fmt, bq, gtx)

    @classmethod
    def decode(cls, data: bytes) -> "Xid":
        """Decode an Xid occupying ``data`` (trailing bytes are ignored, as Artemis ignores them)."""
        return cls.read(Reader(data))

    def write(self, w: Writer) -> Writer:
        w.i32(self.format_id)
        w.i32(len(self.branch_qualifier)).raw(self.branch_qualifier)
        return w.i32(len(self.global_transaction_id)).raw(self.global_transaction_id)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    def base64_text(self) -> str:
        """``XidImpl.toBase64String``: bq + gtx + 4 bytes ``(byte)((formatId >> 8i) % 255)`` (Java
        remainder, which keeps the sign), URL-safe base64."""
        tail = bytearray()
        for i in range(4):
            x = self.format_id >> (8 * i)
            rem = abs(x) % 255
            tail.append((-rem if x < 0 else rem) & 0xFF)
        return b64url(self.branch_qualifier + self.global_transaction_id + bytes(tail))

    def describe(self, hash_text: str = "0") -> str:
        """``XidImpl.toString`` (no closing parenthesis); ``hash_text`` stands for the identity hash."""
        def rep(b: bytes) -> str:
            return ".".join(str(x - 256 if x > 127 else x) for x in b)
        return (f"XidImpl ({hash_text} bq:{rep(self.branch_qualifier)} formatID:{self.format_id} "
                f"gtxid:{rep(self.global_transaction_id)} base64:{self.base64_text()}")
