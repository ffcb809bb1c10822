"""Test-side encoder of stored OpenWire messages (loose encoding, size prefix, the field order of
MessageMarshaller.looseMarshal that amqtool.formats.kahadb.openwire.decode_message reads), for message kinds
the broker fixtures do not hold: map, stream, object, compressed, groups, reply-to."""
from __future__ import annotations

import struct
import zlib


def _utf(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


def _str(s: str | None) -> bytes:
    return b"\x00" if s is None else b"\x01" + _utf(s)


def _bytes(b: bytes | None) -> bytes:
    return b"\x00" if b is None else b"\x01" + struct.pack(">i", len(b)) + b


def producer_id(conn: str, session: int, value: int) -> bytes:
    return b"\x01\x7b" + _str(conn) + struct.pack(">qq", value, session)


def message_id(conn: str, session: int, value: int, seq: int, version: int = 11) -> bytes:
    text = b"\x00" if version >= 10 else b""
    return b"\x01\x6e" + text + producer_id(conn, session, value) + struct.pack(">qq", seq, 0)


def destination(kind: int, name: str) -> bytes:
    return b"\x01" + bytes([kind]) + _str(name)


def prim(t: int, v) -> bytes:
    """MarshallingSupport.marshalPrimitive for the types used here."""
    if t == 0:
        return b"\x00"
    if t == 1:
        return b"\x01" + (b"\x01" if v else b"\x00")
    if t == 2:
        return b"\x02" + struct.pack(">b", v)
    if t == 3:
        return b"\x03" + struct.pack(">H", ord(v))
    if t == 4:
        return b"\x04" + struct.pack(">h", v)
    if t == 5:
        return b"\x05" + struct.pack(">i", v)
    if t == 6:
        return b"\x06" + struct.pack(">q", v)
    if t == 7:
        return b"\x07" + struct.pack(">d", v)
    if t == 8:
        return b"\x08" + struct.pack(">f", v)
    if t == 9:
        return b"\x09" + _utf(v)
    if t == 10:
        return b"\x0a" + struct.pack(">i", len(v)) + v
    if t == 11:
        return b"\x0b" + prim_map(v)
    if t == 12:
        return b"\x0c" + struct.pack(">i", len(v)) + b"".join(prim(*x) for x in v)
    raise ValueError(t)


def prim_map(entries: list[tuple[str, int, object]]) -> bytes:
    return struct.pack(">i", len(entries)) + b"".join(_utf(k) + prim(t, v) for k, t, v in entries)


def message(type_code: int, content: bytes | None, *, props=None, compressed=False, dest=(100, "q"), seq=1,
            group=None, group_seq=0, correlation=None, jms_type=None, reply_to=None, priority=4, expiration=0,
            timestamp=1_700_000_000_000, redelivery=0, persistent=True, version=11, command_id=7,
            response_required=False, conn="ID:test-1") -> bytes:
    if compressed and content is not None:
        if type_code == 24:
            content = struct.pack(">i", len(content)) + zlib.compress(content)
        else:
            content = zlib.compress(content)
    body = bytes([type_code]) + struct.pack(">i", command_id) + (b"\x01" if response_required else b"\x00")
    body += producer_id(conn, 1, 1)
    body += destination(*dest)
    body += b"\x00"  # transaction
    body += b"\x00"  # original destination
    body += message_id(conn, 1, 1, seq, version)
    body += b"\x00"  # original transaction
    body += _str(group) + struct.pack(">i", group_seq) + _str(correlation)
    body += (b"\x01" if persistent else b"\x00") + struct.pack(">q", expiration) + bytes([priority])
    body += (destination(*reply_to) if reply_to else b"\x00") + struct.pack(">q", timestamp) + _str(jms_type)
    body += _bytes(content)
    body += _bytes(prim_map(props) if props is not None else None)
    body += b"\x00\x00"  # dataStructure, targetConsumerId
    body += (b"\x01" if compressed else b"\x00") + struct.pack(">i", redelivery)
    body += b"\x00"  # brokerPath
    body += struct.pack(">q", 5) + _str("alice") + b"\x00\x00"  # arrival, userID, recievedByDFBridge, droppable
    body += b"\x00"  # cluster
    body += struct.pack(">qq", timestamp + 1, 0)
    if version >= 10:
        body += b"\x00"  # jmsxGroupFirstForConsumer
    return struct.pack(">i", len(body)) + body


def text_content(text: str) -> bytes:
    b = text.encode("utf-8")
    return struct.pack(">i", len(b)) + b
