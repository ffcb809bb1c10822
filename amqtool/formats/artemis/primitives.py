"""Primitive encodings shared by every Artemis record body (artemis-journal-format.md §0).

Everything is big-endian (Netty ``ByteBuf`` / ``java.nio.ByteBuffer`` defaults). :class:`Reader` decodes
from any buffer with bounds checks that raise :class:`FormatError` (never ``IndexError`` or
``struct.error``); :class:`Writer` is its mirror image.
"""
from __future__ import annotations

import struct

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
