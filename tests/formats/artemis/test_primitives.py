"""Primitive encodings and the Java texts Artemis prints (artemis-journal-format.md §0, §5.2, §6.1)."""
from __future__ import annotations

import struct

import pytest

from amqtool.errors import FormatError
from amqtool.formats.artemis.primitives import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    NULL,
    SHORT,
    STRING,
    Property,
    Reader,
    TypedProperties,
    Writer,
    Xid,
    b64url,
    b64url_decode,
    bytes_to_hex,
    hashmap_presized_capacity,
    hashmap_writer_capacity,
    java_date_text,
    java_double_text,
    java_float_text,
    java_string_hash,
    long_key_order,
    max_string,
    simple_string_hash,
    uuid_bytes,
    uuid_text,
)


# --- Java String (writeString / readString) ----------------------------------------------------------------

def test_string_short_form_is_big_endian_utf16_units():
    data = Writer().string("abc").getvalue()
    assert data == bytes.fromhex("00000003" "0061" "0062" "0063")
    assert Reader(data).string() == "abc"


def test_string_middle_form_is_char_count_then_utf():
    text = "x" * 9
    data = Writer().string(text).getvalue()
    assert data == struct.pack(">iH", 9, 9) + b"x" * 9
    assert Reader(data).string() == text
    # the last length of the UTF form: 4094 chars
    text = "é" * 4094
    data = Writer().string(text).getvalue()
    assert data[:6] == struct.pack(">iH", 4094, 2 * 4094)
    assert Reader(data).string() == text


def test_string_long_form_is_char_count_then_simple_string():
    text = "é" * 4095
    data = Writer().string(text).getvalue()
    assert data[:8] == struct.pack(">ii", 4095, 8190)
    assert data[8:] == text.encode("utf-16-le")
    assert Reader(data).string() == text


def test_string_counts_utf16_units_not_code_points():
    text = "\U0001F600" * 4  # 8 UTF-16 units: still the short form
    data = Writer().string(text).getvalue()
    assert data[:4] == struct.pack(">i", 8)
    assert Reader(data).string() == text


def test_nullable_string():
    assert Writer().nullable_string(None).getvalue() == b"\x00"
    data = Writer().nullable_string("ab").getvalue()
    assert data == bytes.fromhex("01" "00000002" "0061" "0062")
    assert Reader(data).nullable_string() == "ab"
    assert Reader(b"\x00").nullable_string() is None


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x05\x00a"])
def test_string_bad_bytes_raise_format_error(data):
    with pytest.raises(FormatError):
        Reader(data).string()


# --- HashMap orders --------------------------------------------------------------------------------------

def test_capacities():
    assert [hashmap_writer_capacity(n) for n in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]
    assert [hashmap_presized_capacity(n) for n in (0, 1, 2, 3, 13, 16, 17)] == [1, 1, 2, 4, 16, 16, 32]


def test_long_key_order_small_ids_is_mod_16_then_first_seen():
    # the spec's example: queues 16, 4, 21, 9, 11 print in that order
    assert long_key_order([16, 4, 21, 9, 11]) == [16, 4, 21, 9, 11]
    assert long_key_order([4, 16, 9, 21]) == [16, 4, 21, 9]
    assert long_key_order([16, 0]) == [16, 0]  # same bucket: first seen first


def test_long_key_order_grows_past_twelve_keys():
    keys = [16, 0] + list(range(1, 12))  # 13 keys: capacity 32, 16 no longer shares bucket 0
    assert long_key_order(keys) == list(range(0, 12)) + [16]


def test_long_key_order_uses_both_halves():
    # Long.hashCode folds the high word in: 1 << 32 hashes to 1
    assert long_key_order([1 << 32, 0]) == [0, 1 << 32]


def test_hashes():
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 97 * 31 + 98
    # SimpleString hashes the UTF-16LE bytes: 'a' is 61 00
    assert simple_string_hash("a") == 97 * 31
    assert simple_string_hash("\u00ff") == (-1 * 31) & 0xFFFFFFFF  # FF 00: signed byte -1


# --- TypedProperties ------------------------------------------------------------------------------------

KEYS13 = [f"key{i}" for i in range(13)]


def test_writer_and_reader_orders_differ_for_13_properties():
    props = TypedProperties.of([Property(k, INT, i) for i, k in enumerate(KEYS13)])
    on_disk = [p.key for p in props.entries]
    printed = [p.key for p in props.reader_order()]
    assert sorted(on_disk) == sorted(KEYS13)
    assert on_disk != printed
    mask32 = [(simple_string_hash(k) ^ (simple_string_hash(k) >> 16)) & 31 for k in on_disk]
    assert mask32 == sorted(mask32)
    mask16 = [(simple_string_hash(k) ^ (simple_string_hash(k) >> 16)) & 15 for k in printed]
    assert mask16 == sorted(mask16)


def test_every_property_type_round_trips_and_prints():
    entries = (
        Property("n", NULL, None),
        Property("b", BOOLEAN, True),
        Property("y", BYTE, -5),
        Property("bs", BYTES, b"\x01\x02\x00\xff"),
        Property("s", SHORT, -300),
        Property("i", INT, 70000),
        Property("l", LONG, -(1 << 40)),
        Property("f", FLOAT, struct.unpack(">f", struct.pack(">f", 1.5))[0]),
        Property("d", DOUBLE, 1e7),
        Property("str", STRING, "héllo"),
        Property("c", CHAR, "Z"),
    )
    props = TypedProperties(entries)
    data = props.encode()
    back = TypedProperties.read(Reader(data))
    assert back.encode() == data
    assert back.to_dict() == {"n": None, "b": True, "y": -5, "bs": b"\x01\x02\x00\xff", "s": -300, "i": 70000,
                              "l": -(1 << 40), "f": 1.5, "d": 1e7, "str": "héllo", "c": "Z"}
    texts = {p.key: p.value_text() for p in back.entries}
    assert texts == {"n": "NULL-value", "b": "true", "y": "-5", "bs": "[0102 00FF]", "s": "-300", "i": "70000",
                     "l": str(-(1 << 40)), "f": "1.5", "d": "1.0E7", "str": "héllo", "c": "Z"}
    assert back.types()["str"] == "simple-string" and back.types()["i"] == "integer"


def test_property_wire_format():
    data = TypedProperties((Property("a", BOOLEAN, True),)).encode()
    assert data == bytes.fromhex("01" "00000001" "00000002" "6100" "02" "01")
    assert TypedProperties().encode() == b"\x00"
    assert TypedProperties(()).encode() == bytes.fromhex("01" "00000000")  # kept for a byte-exact round trip


def test_describe_empty_and_route_to():
    assert TypedProperties().describe() == "TypedProperties[]"
    ids = struct.pack(">qq", 7, 9)
    props = TypedProperties((Property("_AMQ_ROUTE_TO", BYTES, ids),))
    assert props.describe() == ("TypedProperties[_AMQ_ROUTE_TO=[0000 0000 0000 0007 0000 0000 0000 0009], "
                                "bytesAsLongs[7, 9]]")
    assert Property("x", BYTES, b"").value_text() == "[[]]"


def test_long_bytes_value_is_shortened():
    text = Property("x", BYTES, bytes(range(256)) * 2).value_text()
    assert text.startswith("[0001 0203") and " ... " in text
    inner = text[1:-1]
    assert len(inner) == 75 + 5 + 75


def test_duplicate_key_keeps_first_position_last_value():
    props = TypedProperties((Property("a", INT, 1), Property("b", INT, 2), Property("a", INT, 3)))
    assert props.to_dict() == {"a": 3, "b": 2}
    assert TypedProperties.read(Reader(props.encode())).encode() == props.encode()


@pytest.mark.parametrize("data", [
    b"\x01", b"\x01\x00\x00\x00\x01", b"\x01\x7f\xff\xff\xff",
    bytes.fromhex("01" "00000001" "00000002" "6100" "0c"),  # unknown type tag 12
    bytes.fromhex("01" "00000001" "00000002" "6100" "04" "ffffffff"),  # negative bytes length
])
def test_bad_properties_raise_format_error(data):
    with pytest.raises(FormatError):
        TypedProperties.read(Reader(data))


def test_of_rejects_values_of_the_wrong_type():
    with pytest.raises(FormatError):
        TypedProperties.of([Property("x", BYTE, 300)])


# --- numbers, dates, hex, uuid, base64, Xid ----------------------------------------------------------------

@pytest.mark.parametrize("value,text", [
    (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (100.0, "100.0"), (0.001, "0.001"), (0.002, "0.002"),
    (1e-4, "1.0E-4"), (1234567.0, "1234567.0"), (1e7, "1.0E7"), (12345678.0, "1.2345678E7"),
    (123.456, "123.456"), (1e23, "1.0E23"), (5e-324, "4.9E-324"), (float("nan"), "NaN"),
    (float("inf"), "Infinity"), (-2.5, "-2.5"), (0.1 + 0.2, "0.30000000000000004"),
])
def test_double_text(value, text):
    assert java_double_text(value) == text


@pytest.mark.parametrize("bits,text", [
    (0x3DCCCCCD, "0.1"), (0x3F8CCCCD, "1.1"), (0x00000001, "1.4E-45"), (0x7F7FFFFF, "3.4028235E38"),
    (0x4B189680, "1.0E7"), (0xC0200000, "-2.5"),
])
def test_float_text(bits, text):
    assert java_float_text(struct.unpack(">f", struct.pack(">I", bits))[0]) == text


def test_date_text():
    assert java_date_text(1735689600000) == "Wed Jan 01 00:00:00 UTC 2025"
    assert java_date_text(-1000) == "Wed Dec 31 23:59:59 UTC 1969"
    try:
        berlin = java_date_text(1735689600000, "Europe/Berlin")
    except Exception:  # no tz database on this machine
        pytest.skip("no IANA time zone data")
    assert berlin == "Wed Jan 01 01:00:00 CET 2025"


def test_bytes_to_hex_and_max_string():
    assert bytes_to_hex(bytes.fromhex("6475702d30")) == "6475 702D 30"
    assert bytes_to_hex(b"") == "[]"
    assert bytes_to_hex(bytes.fromhex("0102")) == "0102"
    assert max_string("x" * 149, 150) == "x" * 149
    assert max_string("a" * 75 + "b" * 75, 150) == "a" * 75 + " ... " + "b" * 75


def test_uuid_text_applies_artemis_masks():
    raw = bytes(range(16))
    assert uuid_text(raw) == "00010203-0405-1607-8809-0a0b0c0d0e0f"
    assert uuid_text(bytes.fromhex("ff" * 16)) == "ffffffff-ffff-1fff-bfff-ffffffffffff"
    assert uuid_bytes("00010203-0405-0607-0809-0a0b0c0d0e0f") == raw
    with pytest.raises(FormatError):
        uuid_text(b"short")


def test_base64_is_url_safe_and_padded():
    assert b64url(b"\xfb\xff") == "-_8="
    assert b64url(b"") == ""
    assert b64url_decode("-_8=") == b"\xfb\xff"


def test_xid_codec_and_text():
    xid = Xid(0x1234, b"branch-1", b"gtx")
    data = xid.encode()
    assert data == struct.pack(">ii", 0x1234, 8) + b"branch-1" + struct.pack(">i", 3) + b"gtx"
    assert Xid.decode(data) == xid
    # formatId bytes: (0x1234 >> 8i) % 255 -> 46 12 00 00
    assert b64url_decode(xid.base64_text())[-4:] == bytes.fromhex("46120000")
    assert xid.describe("123") == ("XidImpl (123 bq:98.114.97.110.99.104.45.49 formatID:4660 gtxid:103.116.120 "
                                   f"base64:{xid.base64_text()}")
    assert Xid(-1, b"\xff", b"").describe() .split(" bq:")[1].startswith("-1 formatID:-1")
    # negative formatId keeps the remainder's sign: (-1 % 255) in Java is -1 -> 0xFF
    assert b64url_decode(Xid(-1, b"", b"").base64_text()) == b"\xff\xff\xff\xff"
    with pytest.raises(FormatError):
        Xid.decode(b"\x00\x00\x00\x01\xff\xff\xff\xff")
