"""The AMQP 1.0 sections of an AMQP message as Artemis stores them (persisters 2, 3 and 5 keep the
message's wire encoding verbatim: artemis-journal-format.md §5.2), decoded for the export's columns.

Artemis' ``AMQPStandardMessage`` scans the same bytes (``AMQPMessage.scanMessageData``): a sequence of
described types whose descriptor (a small ulong, or the symbol ``amqp:...:list``/``:map``) names the
section -- header (0x70), delivery annotations (0x71), message annotations (0x72), properties (0x73),
application properties (0x74), data (0x75), amqp-sequence (0x76), amqp-value (0x77), footer (0x78). The
primitive encodings are those of the AMQP 1.0 specification, part 1 (types), §1.6: a constructor byte,
then fixed-width big-endian values or a size-prefixed payload.

Only what the export shows is kept: the header's durable/priority/ttl, the properties' ids, user id,
creation and absolute expiry times, the application properties and message annotations as
``(key, type, value)`` triples in encoded order, and the text of an ``AmqpValue`` string body. Values are
rendered by :func:`value_text`; compound values (lists, maps, arrays) and decimals become null with their
type kept, since no single text form of them is standard. Every read is bounds-checked: bad bytes raise
FormatError.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from amqtool.errors import FormatError

# section descriptors (AMQP 1.0 part 3, §3.2)
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
_SYMBOLIC = {
    b"amqp:header:list": HEADER, b"amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    b"amqp:message-annotations:map": MESSAGE_ANNOTATIONS, b"amqp:properties:list": PROPERTIES,
    b"amqp:application-properties:map": APPLICATION_PROPERTIES, b"amqp:data:binary": DATA,
    b"amqp:amqp-sequence:list": AMQP_SEQUENCE, b"amqp:amqp-value:*": AMQP_VALUE, b"amqp:footer:map": FOOTER,
}

# fixed-width constructors: code -> (type name, width, struct format or None)
_FIXED = {
    0x40: ("null", 0, None), 0x41: ("boolean", 0, None), 0x42: ("boolean", 0, None),
    0x43: ("uint", 0, None), 0x44: ("ulong", 0, None), 0x45: ("list", 0, None),
    0x50: ("ubyte", 1, ">B"), 0x51: ("byte", 1, ">b"), 0x52: ("uint", 1, ">B"), 0x53: ("ulong", 1, ">B"),
    0x54: ("int", 1, ">b"), 0x55: ("long", 1, ">b"), 0x56: ("boolean", 1, ">B"),
    0x60: ("ushort", 2, ">H"), 0x61: ("short", 2, ">h"),
    0x70: ("uint", 4, ">I"), 0x71: ("int", 4, ">i"), 0x72: ("float", 4, ">f"), 0x73: ("char", 4, ">I"),
    0x74: ("decimal32", 4, None),
    0x80: ("ulong", 8, ">Q"), 0x81: ("long", 8, ">q"), 0x82: ("double", 8, ">d"), 0x83: ("timestamp", 8, ">q"),
    0x84: ("decimal64", 8, None), 0x94: ("decimal128", 16, None), 0x98: ("uuid", 16, None),
}
# variable-width constructors: code -> (type name, size-prefix width)
_VARIABLE = {0xA0: ("binary", 1), 0xA1: ("string", 1), 0xA3: ("symbol", 1),
             0xB0: ("binary", 4), 0xB1: ("string", 4), 0xB3: ("symbol", 4)}
# compound and array constructors: code -> (type name, size/count width)
_COMPOUND = {0xC0: ("list", 1), 0xD0: ("list", 4), 0xC1: ("map", 1), 0xD1: ("map", 4),
             0xE0: ("array", 1), 0xF0: ("array", 4)}

# Values the export gives no text to (null value, type kept): no standard text form.
NO_TEXT_TYPES = frozenset({"list", "map", "array", "decimal32", "decimal64", "decimal128", "described"})


@dataclass
class AmqpSections:
    """What the export takes from an AMQP message. Absent sections leave their fields None/empty."""

    durable: bool | None = None
    priority: int | None = None
    ttl: int | None = None
    message_id: object = None
    user_id: bytes | None = None
    creation_time: int | None = None
    absolute_expiry_time: int | None = None
    application_properties: list[tuple[str, str, object]] = field(default_factory=list)
    message_annotations: list[tuple[str, str, object]] = field(default_factory=list)
    body_kind: str | None = None  # data | amqp-sequence | amqp-value
    text: str | None = None  # an amqp-value section holding a string


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise FormatError(f"AMQP value of {n} bytes at offset {self.pos} runs past the message "
                              f"({len(self.data)} bytes)")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def uint(self, width: int) -> int:
        return int.from_bytes(self.take(width), "big")


MAX_DESCRIBED_DEPTH = 16  # a descriptor is itself a value, which may be described: bounded, not recursed on forever


def _value(r: _Reader, code: int | None = None, depth: int = 0) -> tuple[str, object]:
    """One encoded value: (AMQP type name, Python value). Compound values are skipped (value None)."""
    if code is None:
        code = r.u8()
    if code == 0x00:  # described: descriptor, then the value; the value's type is the one kept
        if depth >= MAX_DESCRIBED_DEPTH:
            raise FormatError(f"AMQP described types nested deeper than {MAX_DESCRIBED_DEPTH} at offset {r.pos - 1}")
        _value(r, None, depth + 1)
        name, v = _value(r, None, depth + 1)
        return name, v
    fixed = _FIXED.get(code)
    if fixed is not None:
        name, width, fmt = fixed
        if code == 0x41:
            return name, True
        if code == 0x42:
            return name, False
        if code in (0x43, 0x44):
            return name, 0
        if code == 0x45:
            return name, None
        raw = r.take(width)
        if fmt is None:
            return name, (str(uuid.UUID(bytes=raw)) if code == 0x98 else None)
        v = struct.unpack(fmt, raw)[0]
        if code == 0x56:
            v = v != 0
        return name, v
    var = _VARIABLE.get(code)
    if var is not None:
        name, width = var
        raw = r.take(r.uint(width))
        if name == "binary":
            return name, raw
        try:
            return name, raw.decode("utf-8" if name == "string" else "ascii")
        except UnicodeDecodeError:
            raise FormatError(f"AMQP {name} at offset {r.pos - len(raw)} is not valid "
                              f"{'UTF-8' if name == 'string' else 'ASCII'}") from None
    comp = _COMPOUND.get(code)
    if comp is not None:
        name, width = comp
        size = r.uint(width)
        r.take(size)  # the count and the elements lie inside the size
        return name, None
    raise FormatError(f"unknown AMQP constructor 0x{code:02x} at offset {r.pos - 1}")


def _compound(r: _Reader, want: str) -> list[tuple[str, object]]:
    """The elements of a list (want 'list') or the keys and values of a map ('map'), in order."""
    code = r.u8()
    if code == 0x40:
        return []
    if code == 0x45 and want == "list":
        return []
    comp = _COMPOUND.get(code)
    if comp is None or comp[0] != want:
        raise FormatError(f"AMQP section: expected a {want}, found constructor 0x{code:02x}")
    width = comp[1]
    size = r.uint(width)
    end = r.pos + size
    if end > len(r.data):
        raise FormatError(f"AMQP {want} of {size} bytes runs past the message")
    count = r.uint(width)
    out = []
    for _ in range(count):
        out.append(_value(r))
    if r.pos != end:
        raise FormatError(f"AMQP {want}: its elements end at {r.pos}, its size says {end}")
    return out


def _pairs(r: _Reader) -> list[tuple[str, str, object]]:
    """A map section (annotations, application properties) as (key, type, value) in encoded order."""
    items = _compound(r, "map")
    if len(items) % 2:
        raise FormatError("AMQP map with an odd number of elements")
    out = []
    for i in range(0, len(items), 2):
        (kt, k), (vt, v) = items[i], items[i + 1]
        if kt not in ("string", "symbol"):
            k = value_text(kt, k)
            if k is None:
                continue  # a key no text can name (compound): not representable as a column key
        out.append((k, vt, v))
    return out


def _descriptor(r: _Reader) -> int:
    if r.u8() != 0x00:
        raise FormatError(f"AMQP message: a section must be a described type (offset {r.pos - 1})")
    name, v = _value(r)
    if name == "ulong":
        return v
    if name == "symbol":
        code = _SYMBOLIC.get(v.encode("ascii"))
        if code is not None:
            return code
    raise FormatError(f"AMQP message: unknown section descriptor {v!r}")


def decode_sections(data: bytes) -> AmqpSections:
    """Decode the sections of one AMQP message encoding (``AMQPMessage.scanMessageData``'s walk)."""
    r = _Reader(bytes(data))
    s = AmqpSections()
    while r.pos < len(r.data):
        code = _descriptor(r)
        # fields of another type than the specification's count as absent (their default)
        if code == HEADER:
            f = _compound(r, "list")
            s.durable = len(f) > 0 and f[0] == ("boolean", True)
            s.priority = f[1][1] if len(f) > 1 and f[1][0] == "ubyte" else 4
            s.ttl = f[2][1] if len(f) > 2 and f[2][0] == "uint" else None
        elif code == PROPERTIES:
            f = _compound(r, "list")
            get = (lambda i: f[i] if len(f) > i else ("null", None))
            s.message_id = get(0)[1]
            uid = get(1)
            s.user_id = uid[1] if uid[0] == "binary" else None
            s.absolute_expiry_time = get(8)[1] if get(8)[0] == "timestamp" else None
            s.creation_time = get(9)[1] if get(9)[0] == "timestamp" else None
        elif code == MESSAGE_ANNOTATIONS:
            s.message_annotations = _pairs(r)
        elif code == APPLICATION_PROPERTIES:
            s.application_properties = _pairs(r)
        elif code in (DELIVERY_ANNOTATIONS, FOOTER):
            _value(r)
        elif code == DATA:
            s.body_kind = "data"
            _value(r)
        elif code == AMQP_SEQUENCE:
            s.body_kind = "amqp-sequence"
            _value(r)
        elif code == AMQP_VALUE:
            s.body_kind = "amqp-value"
            t, v = _value(r)
            s.text = v if t == "string" else None
        else:
            raise FormatError(f"AMQP message: unknown section 0x{code:02x}")
    return s


def value_text(type_name: str, value) -> str | None:
    """The text a value gets in the export's property maps: numbers in decimal, booleans ``true``/``false``,
    floats as Java's ``toString`` (as for core properties), strings and symbols as they are, binary as
    URL-safe base64, timestamps as epoch milliseconds, uuids in canonical form, a char as the character;
    null for null and for the types in :data:`NO_TEXT_TYPES`."""
    from amqtool.formats.artemis.primitives import b64url, java_double_text, java_float_text

    if value is None or type_name in NO_TEXT_TYPES:
        return None
    if type_name == "boolean":
        return "true" if value else "false"
    if type_name == "float":
        return java_float_text(value)
    if type_name == "double":
        return java_double_text(value)
    if type_name == "binary":
        return b64url(value)
    if type_name == "char":
        return chr(value) if value < 0x110000 and not 0xD800 <= value <= 0xDFFF else None
    return value if isinstance(value, str) else str(value)
