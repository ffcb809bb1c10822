"""The export's message columns: the C decoder (native/export_columns.c) against the Python reference
(export.parse.decode_message), on every fixture, the built store, a demo store and generated messages; and
the schema-2 columns (text, properties map, annotations) against what the messages were built with."""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.export.columns import MessageBatch, row
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.parse import LargeBodies
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import TEXT_TYPE, AmqpMessage, CoreMessage
from amqtool.store.layout import detect
from tests.engines.export_store import demo, store  # noqa: F401 - fixtures
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

needs_native = pytest.mark.skipif(not native.HAVE_MESSAGE_COLUMNS, reason=native.NATIVE_REASON or "no libcrypto")


def _table(path, use_native: bool, **opts):
    with LocalArtemisExport(detect(path), ExportOptions(salvage=True, **opts)) as ex:
        ex.binding_rows()
        batches = list(ex.batches(use_native=use_native))
        schema = MessageBatch(safe=False, large=None, summary=None).schema
        return pa.Table.from_batches(batches, schema=schema), ex.summary.to_json()


def _stores(store, demo):
    out = {f"oracle/{s}": ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({p.parent.name: p.parent for p in PUBLIC_JOURNALS})
    out.update(built=store, demo=demo)
    return out


@needs_native
@pytest.mark.parametrize("safe", [False, True])
def test_native_columns_equal_the_reference_on_every_store(store, demo, safe):  # noqa: F811
    checked = 0
    for name, path in _stores(store, demo).items():
        got, got_summary = _table(path, True, safe=safe)
        want, want_summary = _table(path, False, safe=safe)
        assert got.equals(want), name
        assert got_summary == want_summary, name
        checked += got.num_rows
    assert checked > 500  # the demo store alone has hundreds of rows


def test_the_built_store_text_and_maps(store):  # noqa: F811
    t, summary = _table(store, native.HAVE_MESSAGE_COLUMNS)
    rows = {r["message_id"]: r for r in t.to_pylist()}
    amqp = rows[110]  # "\x00Sp\xc0\x02\x01A": a header section, durable true
    assert (amqp["protocol"], amqp["durable"], amqp["priority"], amqp["expiration"]) == ("amqp", True, 4,
                                                                                         1717999999999)
    assert amqp["properties"] == [] and amqp["annotations"] == [] and amqp["text"] is None
    large = rows[109]
    assert large["large"] and large["text"] is None and dict(large["properties"])["_AMQ_LARGE_SIZE"] is not None
    assert summary["problemCount"] == 1  # the legacy type-31 record


# --- generated core messages ---------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # non-BMP included, no lone surrogates
_values = st.one_of(
    st.tuples(st.just(P.NULL), st.none()),
    st.tuples(st.just(P.BOOLEAN), st.booleans()),
    st.tuples(st.just(P.BYTE), st.integers(-128, 127)),
    st.tuples(st.just(P.SHORT), st.integers(-2**15, 2**15 - 1)),
    st.tuples(st.just(P.INT), st.integers(-2**31, 2**31 - 1)),
    st.tuples(st.just(P.LONG), st.integers(-2**63, 2**63 - 1)),
    st.tuples(st.just(P.FLOAT), st.floats(width=32, allow_nan=False)),
    st.tuples(st.just(P.DOUBLE), st.floats(allow_nan=False)),
    st.tuples(st.just(P.STRING), _text),
    st.tuples(st.just(P.BYTES), st.binary(max_size=20)),
    st.tuples(st.just(P.CHAR), st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))),
)
_message = st.fixed_dictionaries({
    "props": st.dictionaries(_text, _values, max_size=8),
    "text": st.one_of(st.none(), _text),
    "type": st.sampled_from([0, 2, TEXT_TYPE, 4, 5, 6]),
    "user_id": st.one_of(st.none(), st.binary(min_size=16, max_size=16)),
    "address": st.one_of(st.none(), _text),
    "queues": st.integers(1, 3),
})


def _expected_text(t, v) -> str | None:
    if t == P.NULL:
        return None
    if t == P.BOOLEAN:
        return "true" if v else "false"
    if t == P.FLOAT:
        return P.java_float_text(v)
    if t == P.DOUBLE:
        return P.java_double_text(v)
    if t == P.BYTES:
        return P.b64url(v)
    return v if isinstance(v, str) else str(v)


def _batch(messages, use_native):
    summary = ExportSummary("local", "artemis")
    b = MessageBatch(safe=False, large=None, summary=summary, use_native=use_native)
    for i, m in enumerate(messages):
        props = P.TypedProperties.of({k: v for k, v in m["props"].items()})
        body = CoreMessage.text_body(m["text"]) if m["type"] == TEXT_TYPE else (m["text"] or "").encode()
        msg = CoreMessage.build(message_id=i + 1, address=m["address"], body=body, type=m["type"],
                                user_id=m["user_id"], properties=props)
        b.add(45, msg.encode(), i + 1, [row(f"q{k}", k, "ANYCAST") for k in range(m["queues"])])
    return b.take()


@needs_native
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message, min_size=1, max_size=6))
def test_generated_core_messages(messages):
    got = _batch(messages, True)
    want = _batch(messages, False)
    assert got.equals(want)
    rows = got.to_pylist()
    assert len(rows) == sum(m["queues"] for m in messages)
    it = iter(rows)
    for m in messages:
        for _ in range(m["queues"]):
            r = next(it)
            assert r["text"] == (m["text"] if m["type"] == TEXT_TYPE else None)
            assert dict(r["properties"]) == {k: _expected_text(t, v) for k, (t, v) in m["props"].items()}
            assert r["address"] == m["address"]


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doubles=st.lists(st.floats(allow_nan=False), min_size=1, max_size=120),
       floats=st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=120))
def test_float_and_double_text_is_the_shortest_that_reads_back(doubles, floats):
    """Float.toString/Double.toString in C (core_codec.h put_fp, a bisection over the precision, without the
    GIL) equal the reference's linear search, over many values a message: subnormals, extremes, integers."""
    props = {f"d{i}": (P.DOUBLE, v) for i, v in enumerate(doubles)}
    props.update({f"f{i}": (P.FLOAT, v) for i, v in enumerate(floats)})
    message = {"props": props, "text": None, "type": 0, "user_id": None, "address": "a", "queues": 1}
    (row_,) = _batch([message], True).to_pylist()
    assert dict(row_["properties"]) == {k: _expected_text(t, v) for k, (t, v) in props.items()}


@needs_native
def test_float_and_double_text_edge_values():
    import struct

    edges = [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1e16, 1e-7, 123456789012345680.0,
             9007199254740993.0, -0.0, 2.0 ** -1074 * 3, 1 / 3]
    fedges = [struct.unpack(">f", struct.pack(">I", b))[0] for b in (1, 0x7F7FFFFF, 0x00800000, 0x3DCCCCCD)]
    props = {f"d{i}": (P.DOUBLE, v) for i, v in enumerate(edges)}
    props.update({f"f{i}": (P.FLOAT, v) for i, v in enumerate(fedges)})
    message = {"props": props, "text": None, "type": 0, "user_id": None, "address": "a", "queues": 1}
    (row_,) = _batch([message], True).to_pylist()
    got = dict(row_["properties"])
    assert got == {k: _expected_text(t, v) for k, (t, v) in props.items()}
    assert got["d0"] == "4.9E-324" and got["d3"] == "0.1" and got["f3"] == "0.1"


# --- AMQP sections -------------------------------------------------------------------------------------


def _str8(s: str, code=0xA1) -> bytes:
    b = s.encode()
    return bytes([code, len(b)]) + b


def _list8(items: list[bytes]) -> bytes:
    body = b"".join(items)
    return bytes([0xC0, len(body) + 1, len(items)]) + body


def _map8(pairs: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    return bytes([0xC1, len(body) + 1, 2 * len(pairs)]) + body


def test_amqp_sections_become_columns():
    header = b"\x00\x53\x70" + _list8([b"\x41", b"\x50\x07"])  # durable true, priority 7
    # properties: message-id .. absolute-expiry-time null (9 fields), creation-time
    props = b"\x00\x53\x73" + _list8([b"\x40"] * 9 + [b"\x83" + struct.pack(">q", 1717000000000)])
    ann = b"\x00\x53\x72" + _map8([(_str8("x-opt-a", 0xA3), _str8("v"))])
    app = b"\x00\x53\x74" + _map8([(_str8("region"), _str8("EU")), (_str8("n"), b"\x54\x05"),
                                   (_str8("d"), b"\x82" + struct.pack(">d", 1.5)), (_str8("z"), b"\x40")])
    value = b"\x00\x53\x77" + _str8("h\u00e9llo \U0001F600")
    msg = AmqpMessage(5, 7, 0, "orders", header + props + ann + app + value, 0, None, 0)
    summary = ExportSummary("local", "artemis")
    b = MessageBatch(safe=False, large=None, summary=summary)
    b.add(45, msg.encode(), 7, [row("orders", 1, "ANYCAST")])
    (r,) = b.take().to_pylist()
    assert (r["protocol"], r["durable"], r["priority"], r["timestamp"]) == ("amqp", True, 7, 1717000000000)
    assert r["text"] == "h\u00e9llo \U0001F600"
    assert dict(r["properties"]) == {"region": "EU", "n": "5", "d": "1.5", "z": None}
    assert [(p["name"], p["type"]) for p in r["typed_properties"]] == [("region", "string"), ("n", "int"),
                                                                        ("d", "double"), ("z", "null")]
    assert dict(r["annotations"]) == {"x-opt-a": "v"}


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message, min_size=1, max_size=3), st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
                                                             max_size=4), st.integers(0, 40), st.booleans())
def test_damaged_records_decode_alike(messages, flips, cut, large):
    """Flipped and cut record bytes: C refuses what the reference refuses (the same problems), never reads out of
    bounds, and whatever decodes gives the same columns."""
    def run(use_native):
        summary = ExportSummary("local", "artemis")
        b = MessageBatch(safe=False, large=LargeBodies(bodies), summary=summary, use_native=use_native)
        for i, m in enumerate(messages):
            props = P.TypedProperties.of({k: v for k, v in m["props"].items()})
            msg = CoreMessage.build(message_id=i + 1, address=m["address"], body=CoreMessage.text_body(m["text"]),
                                    type=TEXT_TYPE, user_id=m["user_id"], properties=props)
            data = bytearray(msg.headers.encode() if large else msg.encode())
            for at, x in flips:
                if data:
                    data[at % len(data)] ^= x
            if cut and len(data) > cut:
                data = data[:-cut]
            b.add(30 if large else 45, bytes(data), i + 1, [row("q", 1, "ANYCAST")])
        t = b.take()
        return (None if t is None else t.to_pylist()), summary.to_json()

    with tempfile.TemporaryDirectory() as bodies:
        for i in range(len(messages)):
            if i % 2 == 0:  # every other large message has its body file
                (Path(bodies) / f"{i + 1}.msg").write_bytes(bytes([i]) * (i * 100))
        assert run(True) == run(False)


@pytest.mark.parametrize("use_native", [True, False])
def test_a_lone_surrogate_becomes_a_replacement_character(use_native):
    """Java strings may hold a lone UTF-16 surrogate; Arrow text cannot. The row is kept, the unit replaced (the
    export crashed on such a message before)."""
    if use_native and not native.HAVE_MESSAGE_COLUMNS:
        pytest.skip("no C decoder")
    props = P.TypedProperties.of({"k\ud800": (P.STRING, "v\udc00w")})
    msg = CoreMessage.build(message_id=1, address="a\ud83d", body=CoreMessage.text_body("t\udfff"), type=TEXT_TYPE,
                            properties=props)
    summary = ExportSummary("local", "artemis")
    b = MessageBatch(safe=False, large=None, summary=summary, use_native=use_native)
    b.add(45, msg.encode(), 1, [row("q\udc01", 1, "ANYCAST")])
    (r,) = b.take().to_pylist()
    assert (r["address"], r["queue"], dict(r["properties"])) == ("a\ufffd", "q\ufffd", {"k\ufffd": "v\ufffdw"})
    assert r["text"] == "t\ufffd"
    assert summary.problem_count == 0 and summary.rows == 1
    # only the text holds one: C leaves the message to the reference, which replaces it the same way
    msg = CoreMessage.build(message_id=2, address="a", body=CoreMessage.text_body("t\udfff"), type=TEXT_TYPE)
    b.add(45, msg.encode(), 2, [row("q", 1, "ANYCAST")])
    (r,) = b.take().to_pylist()
    assert r["text"] == "t\ufffd"


# --- generated AMQP messages ---------------------------------------------------------------------------

def _enc_value(kind: str, v) -> bytes:
    if kind == "null":
        return b"\x40"
    if kind == "boolean":
        return b"\x41" if v else b"\x42"
    if kind == "ubyte":
        return b"\x50" + bytes([v])
    if kind == "int":
        return b"\x71" + struct.pack(">i", v)
    if kind == "smallint":
        return b"\x54" + struct.pack(">b", v)
    if kind == "long":
        return b"\x81" + struct.pack(">q", v)
    if kind == "ulong":
        return b"\x80" + struct.pack(">Q", v)
    if kind == "float":
        return b"\x72" + struct.pack(">f", v)
    if kind == "double":
        return b"\x82" + struct.pack(">d", v)
    if kind == "timestamp":
        return b"\x83" + struct.pack(">q", v)
    if kind == "char":
        return b"\x73" + struct.pack(">I", v)
    if kind == "uuid":
        return b"\x98" + v
    if kind == "binary":
        return b"\xa0" + bytes([len(v)]) + v
    if kind == "string":
        b = v.encode()
        return (b"\xa1" + bytes([len(b)]) if len(b) < 256 else b"\xb1" + struct.pack(">I", len(b))) + b
    if kind == "symbol":
        return b"\xa3" + bytes([len(v)]) + v.encode("ascii")
    if kind == "list":
        return b"\x45"
    if kind == "described":
        return b"\x00\x53\x01" + _enc_value(*v)
    raise AssertionError(kind)


_scalar = st.one_of(
    st.tuples(st.just("null"), st.none()), st.tuples(st.just("boolean"), st.booleans()),
    st.tuples(st.just("ubyte"), st.integers(0, 255)), st.tuples(st.just("int"), st.integers(-2**31, 2**31 - 1)),
    st.tuples(st.just("smallint"), st.integers(-128, 127)), st.tuples(st.just("long"), st.integers(-2**63, 2**63 - 1)),
    st.tuples(st.just("ulong"), st.integers(0, 2**64 - 1)), st.tuples(st.just("float"), st.floats(width=32)),
    st.tuples(st.just("double"), st.floats()), st.tuples(st.just("timestamp"), st.integers(-2**63, 2**63 - 1)),
    st.tuples(st.just("char"), st.integers(0, 0x11FFFF)), st.tuples(st.just("uuid"), st.binary(min_size=16, max_size=16)),
    st.tuples(st.just("binary"), st.binary(max_size=8)), st.tuples(st.just("string"), _text),
    st.tuples(st.just("symbol"), st.text("abcxyz-:", max_size=6)), st.tuples(st.just("list"), st.none()),
)
_valued = st.one_of(_scalar, st.tuples(st.just("described"), _scalar))
_key = st.one_of(st.tuples(st.just("string"), _text), st.tuples(st.just("symbol"), st.text("abkz", max_size=3)), _scalar)


def _enc_list(items: list[bytes]) -> bytes:
    body = b"".join(items)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def _enc_map(pairs) -> bytes:
    body = b"".join(_enc_value(*k) + _enc_value(*v) for k, v in pairs)
    return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(pairs)) + body


@st.composite
def _amqp_messages(draw):
    sections = []
    if draw(st.booleans()):
        sections.append(b"\x00\x53\x70" + _enc_list([_enc_value(*draw(_valued)) for _ in range(draw(st.integers(0, 3)))]))
    if draw(st.booleans()):
        sections.append(b"\x00\x53\x72" + _enc_map(draw(st.lists(st.tuples(_key, _valued), max_size=3))))
    if draw(st.booleans()):
        sections.append(b"\x00\x53\x73" + _enc_list([_enc_value(*draw(_valued)) for _ in range(draw(st.integers(0, 11)))]))
    if draw(st.booleans()):
        sections.append(b"\x00\x53\x74" + _enc_map(draw(st.lists(st.tuples(_key, _valued), max_size=4))))
    if draw(st.booleans()):
        sections.append(b"\x00\x53\x77" + _enc_value(*draw(_valued)))
    elif draw(st.booleans()):
        sections.append(b"\x00\x53\x75" + _enc_value("binary", draw(st.binary(max_size=6))))
    data = bytearray(b"".join(sections))
    for at, x in draw(st.lists(st.tuples(st.integers(0, 500), st.integers(1, 255)), max_size=2)):
        if data:
            data[at % len(data)] ^= x
    persister = draw(st.sampled_from([2, 3, 5]))
    extra = None
    if persister != 2 and draw(st.booleans()):
        extra = P.TypedProperties.of({k: v for k, v in draw(st.dictionaries(_text, _values, max_size=3)).items()})
    return AmqpMessage(persister, 1, 0, draw(st.one_of(st.none(), _text)), bytes(data), 0, extra,
                       draw(st.integers(-2**63, 2**63 - 1)))


@needs_native
def test_an_empty_property_value_first_in_its_column_is_no_null():
    # hypothesis found it (the suite's run of test_generated_amqp_messages): application properties {'': vbin8 of
    # no bytes}, the first value of the batch's column; C read the column's unallocated data buffer as a null
    data = b"\x00St\xd1\x00\x00\x00\x08\x00\x00\x00\x02\xa1\x00\xa0\x00"
    msg = AmqpMessage(persister=2, message_id=1, message_format=0, address=None, data=data, extra_size=0,
                      extra_properties=None, expiration=0)

    def run(use_native):
        b = MessageBatch(safe=False, large=None, summary=ExportSummary("local", "artemis"), use_native=use_native)
        b.add(45, msg.encode(), 1, [row("q", 1, "ANYCAST")])
        return b.take().to_pylist()

    got, want = run(True), run(False)
    assert got == want and got[0]["properties"] == [("", "")]


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_amqp_messages(), min_size=1, max_size=4))
def test_generated_amqp_messages(messages):
    """AMQP messages with every section, value type and described values, some with flipped bytes: C's columns
    equal the reference's (what C does not cover, or the reference refuses, goes to the reference)."""
    def run(use_native):
        summary = ExportSummary("local", "artemis")
        b = MessageBatch(safe=False, large=None, summary=summary, use_native=use_native)
        for i, m in enumerate(messages):
            b.add(45, m.encode(), i + 1, [row("q", 1, "ANYCAST")] * (1 + i % 2))
        t = b.take()
        return (None if t is None else t.to_pylist()), summary.to_json()

    got, want = run(True), run(False)
    assert got == want
