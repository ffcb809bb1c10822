"""Persisted messages (§5.2 message record, §6.1 message text): layouts, round trips and print texts."""
from __future__ import annotations

import struct

import pytest

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import (
    AMQP_PERSISTER,
    AMQP_PERSISTER_V2,
    AMQP_PERSISTER_V3,
    AmqpLargeMessage,
    AmqpMessage,
    CoreMessage,
    LargeMessage,
    MessageHeaders,
    TEXT_TYPE,
    decode_persisted_message,
)
from amqtool.formats.artemis.primitives import (
    BOOLEAN,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    NULL,
    SHORT,
    STRING,
    BYTE,
    Property,
    TypedProperties,
    Writer,
)

UID = bytes.fromhex("0123456789abcdef0123456789abcdef")
TS = 1735689600000  # Wed Jan 01 00:00:00 UTC 2025


def _text_message(**kw):
    props = TypedProperties.of([Property("color", STRING, "red"), Property("n", INT, 3)])
    args = dict(message_id=42, address="orders", body=CoreMessage.text_body("hello"), type=TEXT_TYPE,
                durable=True, timestamp=TS, expiration=0, priority=4, user_id=UID, properties=props)
    args.update(kw)
    return CoreMessage.build(**args)


def test_core_message_layout():
    m = _text_message()
    data = m.encode()
    # persister, messageID, address, bufLen
    assert data[0] == 1
    assert struct.unpack_from(">q", data, 1)[0] == 42
    addr = Writer().nullable_simple_string("orders").getvalue()
    assert data[9:9 + len(addr)] == addr
    p = 9 + len(addr)
    buf_len = struct.unpack_from(">i", data, p)[0]
    assert buf_len == len(data) - p - 4 == m.buf_len == m.encode_size()
    end_of_body = struct.unpack_from(">i", data, p + 4)[0]
    body = CoreMessage.text_body("hello")
    assert end_of_body == len(body) + 13
    assert data[p + 8:p + 8 + len(body)] == body
    h = data[p + 8 + len(body):]
    assert struct.unpack_from(">q", h, 0)[0] == 42
    # the durable flag is a Netty boolean (0x01)
    after_addr = 8 + len(addr)
    assert h[after_addr] == 1 and h[after_addr + 1:after_addr + 17] == UID
    assert h[after_addr + 17] == TEXT_TYPE and h[after_addr + 18] == 1


def test_core_message_round_trip_and_accessors():
    m = _text_message()
    back = decode_persisted_message(m.encode())
    assert back == m and back.encode() == m.encode()
    assert back.text == "hello" and back.type_name == "text" and back.durable and back.priority == 4
    assert back.user_id == "01234567-89ab-1def-8123-456789abcdef"
    assert back.properties == {"color": "red", "n": 3} and back.property_types == {"color": "simple-string",
                                                                                  "n": "integer"}
    assert back.timestamp == TS and back.expiration == 0 and not back.is_large


def test_core_message_describe():
    m = _text_message()
    props = m.headers.properties.describe()
    assert props in ("TypedProperties[color=red, n=3]", "TypedProperties[n=3, color=red]")
    assert m.describe(hash_text="1234") == (
        "Message(messageID=42;userMessageID=01234567-89ab-1def-8123-456789abcdef;msg=CoreMessage[messageID=42, "
        "durable=true, userID=01234567-89ab-1def-8123-456789abcdef, priority=4, timestamp=Wed Jan 01 00:00:00 UTC "
        f"2025, expiration=0, durable=true, address=orders, size={m.buf_len}, properties={props}]@1234")
    assert m.describe(safe=True) == f"CoreMessage(safe data, size={m.buf_len})"
    anon = _text_message(user_id=None, durable=False, timestamp=0)
    assert anon.describe().startswith("Message(messageID=42;msg=CoreMessage[messageID=42, durable=false, userID=null,"
                                      " priority=4, timestamp=0, expiration=0, durable=false,")


def test_every_property_type_in_print_order():
    entries = [
        Property("pNull", NULL, None), Property("pBool", BOOLEAN, False), Property("pByte", BYTE, -1),
        Property("pBytes", BYTES, b"\x00\x01\x02"), Property("pShort", SHORT, 7), Property("pInt", INT, -8),
        Property("pLong", LONG, 1 << 40), Property("pFloat", FLOAT, 0.5), Property("pDouble", DOUBLE, 0.001),
        Property("pString", STRING, "s"), Property("pChar", CHAR, "c"),
        Property("_AMQ_ROUTE_TO", BYTES, struct.pack(">q", 3)), Property("pBig", DOUBLE, 1.5e300),
    ]
    props = TypedProperties.of(entries)
    m = CoreMessage.build(message_id=1, address="a", properties=props)
    back = decode_persisted_message(m.encode())
    text = back.headers.properties.describe()
    values = {
        "pNull": "NULL-value", "pBool": "false", "pByte": "-1", "pBytes": "[0001 02]", "pShort": "7", "pInt": "-8",
        "pLong": "1099511627776", "pFloat": "0.5", "pDouble": "0.001", "pString": "s", "pChar": "c",
        "_AMQ_ROUTE_TO": "[0000 0000 0000 0003], bytesAsLongs[3]", "pBig": "1.5E300",
    }
    # 13 properties: written with capacity 32, printed with capacity 16 -> the printed order is the reader's
    expected = "TypedProperties[" + ", ".join(f"{p.key}={values[p.key]}" for p in props.reader_order()) + "]"
    assert text == expected
    assert [p.key for p in props.reader_order()] != [p.key for p in props.entries]


def test_address_mismatch_changes_the_printed_size():
    m = _text_message()
    other = CoreMessage(m.message_id, "a-much-longer-address", m.body, m.headers)
    assert other.buf_len == m.buf_len
    assert other.encode_size() == m.buf_len + 2 * (len("a-much-longer-address") - len("orders"))
    assert decode_persisted_message(other.encode()) == other


def test_large_message_header_and_texts():
    props = TypedProperties.of([Property("_AMQ_LARGE_SIZE", LONG, 204800)])
    lm = LargeMessage(MessageHeaders(9, "big", UID, 4, True, 0, TS, 5, props))
    data = lm.encode()
    assert data[:8] == struct.pack(">q", 9)  # no persister byte
    back = LargeMessage.decode(data)
    assert back == lm and back.large_size == 204800 and back.is_large and back.body == b""
    assert back.describe(hash_text="7") == (
        "LargeMessage(messageID=9;userMessageID=01234567-89ab-1def-8123-456789abcdef;msg=LargeServerMessage["
        "messageID=9,durable=true,userID=01234567-89ab-1def-8123-456789abcdef,priority=5, timestamp=Wed Jan 01 "
        "00:00:00 UTC 2025,expiration=0, durable=true, address=big, properties=TypedProperties["
        "_AMQ_LARGE_SIZE=204800]]@7")
    assert back.paged_text() == ("NullStorageLargeServerMessage[messageID=9, durable=true, address=big,"
                                 "properties=TypedProperties[_AMQ_LARGE_SIZE=204800]]")


@pytest.mark.parametrize("persister", [AMQP_PERSISTER, AMQP_PERSISTER_V2, AMQP_PERSISTER_V3])
def test_amqp_messages_round_trip(persister):
    extra = TypedProperties.of([Property("x-opt", INT, 1)]) if persister != AMQP_PERSISTER else None
    m = AmqpMessage(persister, 11, 0, "amqp.q", b"\x00\x53\x70" + b"payload", len(extra.encode()) if extra else 0,
                    extra, 777 if persister == AMQP_PERSISTER_V3 else 0)
    data = m.encode()
    assert data[0] == persister
    back = decode_persisted_message(data)
    assert back == m and back.encode() == data and back.body.endswith(b"payload")
    assert back.describe().startswith("Message(messageID=11;msg=AMQPStandardMessage(")


def test_amqp_v2_without_extra_properties():
    m = AmqpMessage(AMQP_PERSISTER_V2, 1, 0, None, b"x")
    assert m.encode().endswith(struct.pack(">i", 1) + b"x" + struct.pack(">i", 0))
    assert decode_persisted_message(m.encode()) == m


def test_amqp_large_keeps_the_saved_encoding_opaque():
    m = AmqpLargeMessage(12, True, 0, "q", 0, None, b"\x00\x00\x00\x08saved-encoding")
    data = m.encode()
    assert data[0] == 4 and data[9] == 0xFF  # boolA durable
    back = decode_persisted_message(data)
    assert back == m and back.encode() == data and back.is_large


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x06", b"\x01" + bytes(8),
    b"\x01" + bytes(8) + b"\x00" + struct.pack(">i", 1000),          # bufLen beyond the body
    b"\x01" + bytes(8) + b"\x00" + struct.pack(">ii", 4, 5),           # endOfBodyPosition below 13
    b"\x02" + bytes(16) + b"\x00" + struct.pack(">i", -1),             # negative AMQP length
])
def test_bad_messages_raise_format_error(data):
    with pytest.raises(FormatError):
        decode_persisted_message(data)
