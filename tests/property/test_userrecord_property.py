"""Property tests for the user-record and message codecs: generated values round-trip byte for byte, and any
bytes decode to a value or raise FormatError, nothing else."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import CoreMessage, LargeMessage, MessageHeaders, decode_persisted_message
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
)
from amqtool.formats.artemis.userrecords import (
    AddressBindingRecord,
    DivertRecord,
    DuplicateIdRecord,
    QueueBindingRecord,
    RoleRecord,
    SecuritySettingRecord,
    UserRecord,
    decode_user_record,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(codec="utf-16", exclude_categories=("Cs",)), max_size=20)
long_text = st.text(max_size=5000)
i8 = st.integers(-128, 127)
i16 = st.integers(-(1 << 15), (1 << 15) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _prop(key):
    return st.one_of(
        st.just(Property(key, NULL, None)),
        st.booleans().map(lambda v: Property(key, BOOLEAN, v)),
        i8.map(lambda v: Property(key, BYTE, v)),
        st.binary(max_size=40).map(lambda v: Property(key, BYTES, v)),
        i16.map(lambda v: Property(key, SHORT, v)),
        i32.map(lambda v: Property(key, INT, v)),
        i64.map(lambda v: Property(key, LONG, v)),
        st.floats(width=32).map(lambda v: Property(key, FLOAT, v)),
        st.floats().map(lambda v: Property(key, DOUBLE, v)),
        text.map(lambda v: Property(key, STRING, v)),
        st.characters(codec="utf-16", exclude_categories=("Cs",)).filter(lambda c: ord(c) < 0x10000)
        .map(lambda v: Property(key, CHAR, v)),
    )


properties = st.lists(text, max_size=15, unique=True).flatmap(
    lambda keys: st.tuples(*[_prop(k) for k in keys])).map(lambda ps: TypedProperties.of(list(ps)))


@SETTINGS
@given(long_text)
def test_java_string_round_trip(s):
    assert Reader(Writer().string(s).getvalue()).string() == s


@SETTINGS
@given(properties)
def test_typed_properties_round_trip(props):
    data = props.encode()
    back = TypedProperties.read(Reader(data))
    assert back.encode() == data
    assert back.describe().startswith("TypedProperties[")
    assert len(back.reader_order()) == len(props)


@SETTINGS
@given(st.builds(
    CoreMessage.build, message_id=i64, address=st.none() | text, body=st.binary(max_size=200), type=i8,
    durable=st.booleans(), expiration=i64.filter(lambda v: abs(v) < 10**14), timestamp=st.integers(0, 10**13),
    priority=i8, user_id=st.none() | st.binary(min_size=16, max_size=16), properties=properties))
def test_core_message_round_trip(m):
    data = m.encode()
    back = decode_persisted_message(data)
    assert back == m or back.encode() == data  # NaN floats compare unequal but re-encode identically
    assert back.encode() == data
    assert back.describe().startswith(f"Message(messageID={m.message_id};")


@SETTINGS
@given(st.builds(MessageHeaders, i64, st.none() | text, st.none() | st.binary(min_size=16, max_size=16), i8,
                 st.booleans(), st.integers(0, 10**13), st.integers(0, 10**13), i8, properties))
def test_large_message_header_round_trip(h):
    lm = LargeMessage(h)
    assert LargeMessage.decode(lm.encode()).encode() == lm.encode()


records = st.one_of(
    st.builds(QueueBindingRecord.build, record_id=i64, name=text, address=text, routing_type=st.integers(0, 1),
              filter=st.none() | text, user=st.none() | text.filter(lambda u: ";" not in u and "=" not in u),
              auto_created=st.booleans()),
    st.builds(AddressBindingRecord, text, st.lists(st.integers(0, 1), max_size=2).map(tuple), st.booleans(),
              st.none() | st.booleans()),
    st.builds(DuplicateIdRecord, text, st.binary(max_size=40)),
    st.builds(UserRecord, long_text, text),
    st.builds(RoleRecord, text, st.lists(text, max_size=5).map(tuple)),
    st.builds(SecuritySettingRecord, text, st.none() | text, st.none() | text),
    st.builds(DivertRecord, st.none() | text, st.none() | text, st.none() | text, st.none() | text, st.booleans(),
              st.none() | text, st.integers(0, 3), st.none() | text),
)


@SETTINGS
@given(records)
def test_user_records_round_trip(rec):
    data = rec.encode()
    back = type(rec).decode(data, record_id=getattr(rec, "record_id", 0))
    assert back == rec and back.encode() == data
    assert isinstance(back.describe(), str)


@SETTINGS
@given(st.integers(0, 255), st.booleans(), st.binary(max_size=120))
def test_any_bytes_decode_or_raise_format_error(t, is_update, body):
    try:
        obj = decode_user_record(t, body, is_update=is_update)
    except FormatError:
        return
    assert obj.encode() == body
    try:
        assert isinstance(obj.describe(), str)
    except FormatError:
        pass  # e.g. a date outside the printable range in a message header


@SETTINGS
@given(st.binary(max_size=200))
def test_any_message_bytes_decode_or_raise_format_error(body):
    try:
        decode_persisted_message(b"\x01" + body)
    except FormatError:
        pass
