"""A minimal hand-written protobuf wire-format reader (proto2, as written by activemq-protobuf).

KahaDB's schema (journal-data.proto) declares field number 1 twice in ``KahaLocalTransactionId``
(``connection_id`` string and ``transaction_id`` int64); activemq-protobuf dispatches on the whole tag, so the
two are told apart by wire type. A generated parser cannot express that, hence this reader: it yields raw
``(field, wire_type, value)`` triples and the message decoders in :mod:`commands` dispatch on both.
"""
from __future__ import annotations

import struct
from typing import Iterator

from amqtool.errors import FormatError

VARINT, FIXED64, LEN, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; returns (value, new position). At most 10 bytes."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise FormatError("varint runs past the end of its message", offset=pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise FormatError("varint longer than 10 bytes", offset=pos)


def to_int32(v: int) -> int:
    """int32 fields: negative values are sign-extended 10-byte varints."""
    v &= 0xFFFFFFFFFFFFFFFF
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def to_int64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v & (1 << 63) else v


def iter_fields(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, object]]:
    """Yield (field number, wire type, value) for every field of one message body ``buf[pos:end]``.

    Varints come as unsigned ints, fixed32/64 as unsigned ints, length-delimited fields as memoryview
    slices. Groups are rejected (activemq-protobuf never writes them).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if end is None:
        end = len(mv)
    while pos < end:
        tag = mv[pos]
        if tag < 0x80:  # fast path: one-byte tags and lengths are the common case
            pos += 1
        else:
            tag, pos = read_varint(mv, pos, end)
        field, wt = tag >> 3, tag & 7
        if field == 0:
            raise FormatError("protobuf field number 0", offset=pos)
        if wt == VARINT:
            value, pos = read_varint(mv, pos, end)
        elif wt == LEN:
            if pos < end and mv[pos] < 0x80:
                n = mv[pos]
                pos += 1
            else:
                n, pos = read_varint(mv, pos, end)
            if pos + n > end:
                raise FormatError(f"length-delimited field {field} of {n} bytes runs past its message", offset=pos)
            value = mv[pos:pos + n]
            pos += n
        elif wt == FIXED64:
            if pos + 8 > end:
                raise FormatError("fixed64 field runs past its message", offset=pos)
            value = struct.unpack_from("<Q", mv, pos)[0]
            pos += 8
        elif wt == FIXED32:
            if pos + 4 > end:
                raise FormatError("fixed32 field runs past its message", offset=pos)
            value = struct.unpack_from("<I", mv, pos)[0]
            pos += 4
        else:
            raise FormatError(f"unsupported protobuf wire type {wt} (field {field})", offset=pos)
        yield field, wt, value


def utf8(value) -> str:
    """A protobuf ``string`` (real UTF-8; invalid bytes are a format error)."""
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"string field is not valid UTF-8 ({err.reason})") from None


def encode_varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_field(field: int, value) -> bytes:
    """Encode one field: ints as varints, bytes/str as length-delimited (for tests and benchmarks)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return encode_varint(field << 3 | VARINT) + encode_varint(value)
    if isinstance(value, str):
        value = value.encode("utf-8")
    return encode_varint(field << 3 | LEN) + encode_varint(len(value)) + bytes(value)


def encode_raw_field(field: int, wt: int, value) -> bytes:
    """Encode one field as :func:`iter_fields` yields it (so a message can be rewritten field by field
    without knowing its schema): varints and fixed ints as ints, length-delimited fields as bytes."""
    tag = encode_varint(field << 3 | wt)
    if wt == VARINT:
        return tag + encode_varint(value)
    if wt == LEN:
        return tag + encode_varint(len(value)) + bytes(value)
    if wt == FIXED64:
        return tag + struct.pack("<Q", value)
    if wt == FIXED32:
        return tag + struct.pack("<I", value)
    raise ValueError(f"unsupported protobuf wire type {wt}")
