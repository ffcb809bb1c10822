"""OpenWire -> core conversion (OpenWireMessageConverter.inbound): every message of the broker fixtures
lands on the queue the manifest says, with its body, priority, timestamp, properties and OpenWire ids; built
messages cover the body kinds and headers the fixtures do not hold."""
from __future__ import annotations

import hashlib
import json
import struct
import zlib

import pytest

from amqtool.engines.migrate.convert import ANYCAST, MULTICAST, NotConvertible, convert, java_map_order
from amqtool.engines.migrate.plan import MigrationPlan, subscription_queue_name
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import (BYTES_TYPE, DEFAULT_TYPE, MAP_TYPE, OBJECT_TYPE, STREAM_TYPE,
                                             TEXT_TYPE, CoreMessage)
from amqtool.formats.kahadb.openwire import _nested, _Reader, decode_message
from amqtool.store.layout import detect
from tests.engines.migrate import openwire_builder as B
from tests.support import KAHADB

DATASETS = ["basic", "gc", "mkahadb", "tx"]
needs_fixtures = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")


def manifest(ds: str) -> dict:
    return json.loads((KAHADB / ds / "manifest.json").read_text())


def expected_queues(ds: str) -> dict[str, list[str]]:
    """Artemis queue name -> fx ids it must hold (subscriptions: the topic's live ids minus those the
    subscription acked, by the manifest's ack rule when it acked some)."""
    man = manifest(ds)
    out = {}
    for dest, d in man["destinations"].items():
        kind, name = dest.strip("/").split("/", 1)
        if kind == "queue":
            out[name] = list(d["live_fx_ids"])
            continue
        for sub, info in d["durable_subscriptions"].items():
            client, sname = sub.split("/", 1)
            out[subscription_queue_name(client, sname)] = info.get("pending", d["live"])
    return out


def unmarshal_id(raw: bytes) -> str:
    """The id string of a loose-marshalled (size-prefixed) MessageId, read back with the KahaDB decoder."""
    (size,) = struct.unpack_from(">i", raw)
    assert size == len(raw) - 4
    return _nested(_Reader(b"\x01" + raw[4:]), 12)[1]


@needs_fixtures
@pytest.mark.parametrize("ds", DATASETS)
def test_fixture_messages_land_on_the_manifest_queues(ds):
    man = manifest(ds)
    by_fx = {m["fx_id"]: m for m in man["messages"]}
    plan = MigrationPlan(detect(KAHADB / ds))
    got: dict[str, list[str]] = {}
    ids = []
    for pm in plan.messages():
        core = pm.core
        props = core.headers.properties.to_dict()
        fx = props["fx_id"]
        m = by_fx[fx]
        for q in pm.queue_ids:
            got.setdefault(plan.queues[q].name, []).append(fx)
        ids.append(core.message_id)
        assert core.address == m["destination"].split("/", 2)[2]
        assert core.headers.durable and pm.state == "committed"
        if "broker_priority" in m:  # recorded for the messages the fixture's consumer saw
            assert core.headers.priority == m["broker_priority"]
            assert core.headers.timestamp == m["broker_timestamp"]
        text = m["jms_type"] == "TextMessage"
        assert core.headers.type == (TEXT_TYPE if text else BYTES_TYPE)
        body = core.text.encode("utf-8") if text else core.body
        assert hashlib.sha256(body).hexdigest() == m["body_sha256"] and len(body) == m["size"]
        assert unmarshal_id(props["__HDR_MESSAGE_ID"]) == pm.openwire_id
        if m["message_id"] is not None:  # recorded for the messages the fixture's consumer saw
            assert pm.openwire_id == m["message_id"]
        topic = m["destination"].startswith("/topic/")
        assert props["_AMQ_ROUTING_TYPE"] == (MULTICAST if topic else ANYCAST)
        for k, v in m["headers_sent"].items():
            if k.startswith("fx_"):
                assert props[k] == v  # STOMP headers are String properties
        assert props["__HDR_GROUP_SEQUENCE"] == 0 and props["__HDR_DROPPABLE"] is False
        assert "__HDR_MARSHALL_PROP" in props and "__HDR_PRODUCER_ID" in props
        assert CoreMessage.decode(core.encode()) == core  # the record round-trips
    want = expected_queues(ds)
    assert set(got) == set(want)
    for q, fx_ids in want.items():
        if isinstance(fx_ids, int):
            assert len(got[q]) == fx_ids, q
        else:
            assert sorted(got[q]) == sorted(fx_ids), q
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert min(ids) > max(plan.queues)  # bindings take the first ids
    s = plan.summary()
    assert s["notConverted"] == [] and s["messages"] == len(ids)
    assert s["references"] == sum(len(v) if isinstance(v, list) else v for v in want.values())


@needs_fixtures
def test_subscription_queues_and_acked_subscription():
    plan = MigrationPlan(detect(KAHADB / "basic"))
    list(plan.messages())
    qs = {q.name: q for q in plan.queues.values()}
    a, b = qs["fx-durable-a.sub-a"], qs["fx-durable-b.sub-b"]
    assert a.address == b.address == "fx.events" and a.routing_type == b.routing_type == MULTICAST
    assert (a.messages, b.messages) == (50, 100)
    assert plan.addresses["fx.events"].routing_types == (MULTICAST,)
    assert plan.addresses["fx.orders"].routing_types == (ANYCAST,)


def test_subscription_queue_name_escapes():
    assert subscription_queue_name("app.1", "sub\\x") == "app\\.1.sub\\\\x"
    assert subscription_queue_name(None, "s.1") == "s\\.1"


def conv(raw: bytes, **kw):
    msg = decode_message(raw, kw.pop("version", 11))
    return convert(msg, message_id=42, address="q", routing_type=ANYCAST, **kw)


@pytest.mark.parametrize("compressed", [False, True])
def test_text_and_bytes(compressed):
    text = "héllo wörld " * 50
    core = conv(B.message(28, B.text_content(text), compressed=compressed))
    assert core.headers.type == TEXT_TYPE and core.text == text
    assert core.headers.properties.get("__HDR_COMPRESSED") is (True if compressed else None)
    data = bytes(range(256)) * 9
    core = conv(B.message(24, data, compressed=compressed))
    assert core.headers.type == BYTES_TYPE and core.body == data


def test_null_text_and_plain_message():
    core = conv(B.message(28, None))
    assert core.body == b"\x00" and core.text is None
    core = conv(B.message(23, None))
    assert core.headers.type == DEFAULT_TYPE and core.body == b""


@pytest.mark.parametrize("compressed", [False, True])
def test_map_body(compressed):
    entries = [("b", 1, True), ("i8", 2, -5), ("c", 3, "x"), ("s", 4, -300), ("i", 5, 70000), ("l", 6, 2**40),
               ("d", 7, 2.5), ("f", 8, 1.5), ("str", 9, "text"), ("raw", 10, b"\x00\x01"), ("n", 0, None)]
    core = conv(B.message(25, B.prim_map(entries), compressed=compressed))
    assert core.headers.type == MAP_TYPE
    props = P.TypedProperties.read(P.Reader(core.body))
    assert props.to_dict() == {"b": True, "i8": -5, "c": "x", "s": -300, "i": 70000, "l": 2**40, "d": 2.5,
                               "f": 1.5, "str": "text", "raw": b"\x00\x01", "n": None}
    N = P.PROPERTY_TYPE_NAMES
    assert props.types() == {"b": N[P.BOOLEAN], "i8": N[P.BYTE], "c": N[P.CHAR], "s": N[P.SHORT], "i": N[P.INT],
                             "l": N[P.LONG], "d": N[P.DOUBLE], "f": N[P.FLOAT], "str": N[P.STRING],
                             "raw": N[P.BYTES], "n": N[P.NULL]}


def test_map_body_with_nested_map_is_refused():
    with pytest.raises(NotConvertible, match="nested map"):
        conv(B.message(25, B.prim_map([("m", 11, [("x", 5, 1)])])))


def test_stream_body():
    items = [(1, True), (2, 7), (10, b"ab"), (3, "z"), (7, 0.25), (8, 2.0), (5, -1), (6, 3), (4, 9), (9, "s"),
             (0, None)]
    core = conv(B.message(27, b"".join(B.prim(t, v) for t, v in items), compressed=True))
    assert core.headers.type == STREAM_TYPE
    w = P.Writer()
    w.u8(P.BOOLEAN).bool_a(True).u8(P.BYTE).u8(7).u8(P.BYTES).i32(2).raw(b"ab").u8(P.CHAR).u16(ord("z"))
    w.u8(P.DOUBLE).raw(struct.pack(">d", 0.25)).u8(P.FLOAT).raw(struct.pack(">f", 2.0)).u8(P.INT).i32(-1)
    w.u8(P.LONG).i64(3).u8(P.SHORT).i16(9).u8(P.STRING).nullable_string("s").u8(P.STRING).nullable_string(None)
    assert core.body == w.getvalue()


@pytest.mark.parametrize("compressed", [False, True])
def test_object_body(compressed):
    ser = b"\xac\xed\x00\x05" + b"serialized" * 30
    core = conv(B.message(26, ser, compressed=compressed))
    assert core.headers.type == OBJECT_TYPE and core.body == struct.pack(">i", len(ser)) + ser


def test_blob_is_refused():
    raw = B.message(23, None)
    msg = decode_message(raw)
    msg.type_code = 29
    with pytest.raises(NotConvertible, match="BLOB"):
        convert(msg, message_id=1, address="q", routing_type=ANYCAST)


def test_headers_group_and_properties():
    props = [("flag", 1, False), ("n", 5, 12), ("big", 6, 2**33), ("dbl", 7, 0.5), ("nested", 11, [("k", 9, "v")]),
             ("lst", 12, [(5, 1), (9, "a")]), ("ch", 3, "q")]
    raw = B.message(28, B.text_content("x"), props=props, group="g-1", group_seq=3, correlation="corr-9",
                    jms_type="order", reply_to=(101, "replies"), priority=9, expiration=1_800_000_000_000)
    core = conv(raw)
    h = core.headers
    assert (h.priority, h.expiration, h.timestamp, h.durable) == (9, 1_800_000_000_000, 1_700_000_000_000, True)
    d = h.properties.to_dict()
    assert d["_AMQ_GROUP_ID"] == "g-1" and d["__HDR_GROUP_SEQUENCE"] == 3
    assert d["JMSCorrelationID"] == "corr-9" and d["JMSType"] == "order" and d["__HDR_USER_ID"] == "alice"
    assert d["__HDR_COMMAND_ID"] == 7 and d["__HDR_ARRIVAL"] == 5 and d["__HDR_BROKER_IN_TIME"] == 1_700_000_000_001
    assert d["__HDR_REPLY_TO"] == struct.pack(">i", 11) + b"\x65\x01" + b"\x00\x07replies"
    assert d["flag"] is False and d["n"] == 12 and d["big"] == 2**33 and d["dbl"] == 0.5 and d["ch"] == "q"
    assert d["nested"] == "{k=v}" and d["lst"] == "[1, a]"  # toString fallback for maps and lists
    t = h.properties.types()
    N = P.PROPERTY_TYPE_NAMES
    assert (t["n"], t["big"], t["ch"], t["flag"]) == (N[P.INT], N[P.LONG], N[P.CHAR], N[P.BOOLEAN])
    assert unmarshal_id(d["__HDR_MESSAGE_ID"]) == "ID:test-1:1:1:1"


def test_old_store_message_id_gets_text_view():
    core = conv(B.message(28, B.text_content("x"), seq=5, version=6), version=6, store_version=6)
    raw = core.headers.properties.get("__HDR_MESSAGE_ID")
    assert raw[5] == 0  # textView: null, after the size and the type byte
    assert unmarshal_id(raw) == "ID:test-1:1:1:5"


def test_java_map_order_matches_hashmap():
    # HashMap(3): capacity 4; "a" (97) bucket 1, "b" 2, "c" 3
    assert java_map_order(["a", "b", "c"]) == [0, 1, 2]
    # capacity 4 (HashMap(2) grows at the 2nd key): "d" (100) bucket 0, "a" (97) bucket 1
    assert java_map_order(["a", "d"]) == [1, 0]
