"""``amqtool create --from`` on a store written by a real ActiveMQ 5.17 broker (Debian's ``activemq``,
loopback only, stopped by PID): queues, a topic with two durable subscriptions at different positions,
text and bytes bodies, bodies over 100 KiB, priorities, expirations, JMS headers (correlation id, type,
reply-to, group id and sequence), string properties, a committed and an aborted transaction. Fed over
STOMP, stopped, migrated. amqtool's Artemis reading of the new store gives per queue exactly the messages
the Classic broker still held, with their bodies, headers and properties as the conversion rules say; the
store verifies clean; the XML export of the KahaDB store equals the Artemis export of the created one.
"""
from __future__ import annotations

import base64
import hashlib
import json

import pytest

from tests.integration.test_activemq_broker import Broker, Stomp, amq_live, brokers, consume  # noqa: F401
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.store.layout import detect

N = {n: i for i, n in enumerate(MESSAGE_COLUMN_NAMES)}
pytestmark = pytest.mark.integration
BIG = 150 * 1024


def body_for(ident: str, size: int) -> bytes:
    seed = hashlib.sha256(ident.encode()).hexdigest()
    return (ident + "|" + seed * (size // 64 + 1))[:max(size, len(ident) + 1)].encode()


def send(c: Stomp, dest: str, ident: str, size: int, *, as_bytes=False, tx=None, **headers) -> dict:
    body = body_for(ident, size)
    h = {"destination": dest, "persistent": "true", "it_id": ident, **headers}
    if as_bytes:
        h["content-length"] = str(len(body))
    if tx:
        h["transaction"] = tx
    c.request("SEND", h, body)
    return {"id": ident, "body": body, "bytes": as_bytes, "headers": headers}


def prop(row, name):
    for p in row[N["typed_properties"]]:
        if p["name"] == name:
            return p["type"], p["value"]
    return None


def consumer_bytes(row) -> bytes:
    b = row[N["body"]]
    if row[N["type"]] == "text":
        return b[5:].decode("utf-16-le").encode("utf-8")
    return b


def test_migrated_store_holds_what_the_classic_broker_held(tmp_path, brokers, run_cli):  # noqa: F811
    b = Broker(tmp_path / "classic")
    brokers.append(b)
    b.start()
    for cid, name in (("it-a", "audit"), ("it-b", "billing")):
        s = Stomp(b.port, client_id=cid)
        s.request("SUBSCRIBE", {"destination": "/topic/it.events", "id": "d", "ack": "client-individual",
                                "activemq.subscriptionName": name})
        s.close()
    p = Stomp(b.port)
    sent: dict[str, dict] = {}
    for i in range(60):
        hdr = {"priority": str(i % 10), "region": "EU" if i % 2 else "US"}
        if i % 7 == 0:
            hdr.update({"correlation-id": f"corr-{i}", "type": "order", "reply-to": "/queue/it.replies"})
        if i % 5 == 0:
            hdr.update({"JMSXGroupID": f"grp-{i % 3}", "JMSXGroupSeq": str(i // 5 + 1)})
        if i % 11 == 0:
            hdr["expires"] = str(4_000_000_000_000)
        size = BIG + i if i % 20 == 3 else 100 + 37 * i
        m = send(p, "/queue/it.orders", f"o-{i:03d}", size, as_bytes=i % 4 == 1, **hdr)
        sent[m["id"]] = dict(m, dest="it.orders")
    for i in range(30):
        m = send(p, "/topic/it.events", f"e-{i:03d}", 200 + i, as_bytes=i % 3 == 0,
                 **({"big": "yes"} if i == 4 else {}))
        sent[m["id"]] = dict(m, dest="it.events")
    m = send(p, "/topic/it.events", "e-big", BIG * 2, as_bytes=True)
    sent[m["id"]] = dict(m, dest="it.events")
    p.request("BEGIN", {"transaction": "t-ok"})
    for i in range(3):
        m = send(p, "/queue/it.tx", f"tx-{i}", 300, tx="t-ok")
        sent[m["id"]] = dict(m, dest="it.tx")
    p.request("COMMIT", {"transaction": "t-ok"})
    p.request("BEGIN", {"transaction": "t-no"})
    send(p, "/queue/it.tx", "tx-aborted", 300, tx="t-no")
    p.request("ABORT", {"transaction": "t-no"})
    p.close()
    # consume some: every third order; the billing subscription acks its first 12 events
    c = Stomp(b.port)
    acked = set()
    for f in consume(c, "/queue/it.orders", 60):
        if int(f[1]["it_id"][2:]) % 3 == 0:
            c.request("ACK", {"id": f[1]["ack"]})
            acked.add(f[1]["it_id"])
    c.close()
    c = Stomp(b.port, client_id="it-b")
    got = c.request("SUBSCRIBE", {"destination": "/topic/it.events", "id": "d", "ack": "client-individual",
                                  "activemq.subscriptionName": "billing", "activemq.prefetchSize": "1"})
    frames, billing_acked = list(got), []
    while len(billing_acked) < 12:
        f = frames.pop(0) if frames else c.read(timeout=20)
        if f[0] == "MESSAGE":
            billing_acked.append(f[1]["it_id"])
            c.request("ACK", {"id": f[1]["ack"]})
    c.close()
    b.stop()
    live, subs = amq_live(b.data)  # what the Classic store holds, by amqtool's KahaDB reading

    events = [k for k in sent if sent[k]["dest"] == "it.events"]
    want = {"it.orders": {k for k in sent if sent[k]["dest"] == "it.orders"} - acked,
            "it.tx": {"tx-0", "tx-1", "tx-2"},
            "it-a.audit": set(events), "it-b.billing": set(events) - set(billing_acked)}
    assert live["/queue/it.orders"] == want["it.orders"] and subs["it-b/billing"] == want["it-b.billing"]

    dest = tmp_path / "artemis"
    code, out, err = run_cli("create", dest, "--from", b.data, "--format", "json", "-q")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["notConverted"] == [] and doc["openLocalTransactions"]["transactions"] == 0
    with LocalArtemisExport(detect(dest), ExportOptions()) as ex:
        bindings = ex.binding_rows()
        rows = list(ex.rows())
    got_q: dict[str, set] = {}
    for r in rows:
        ident = prop(r, "it_id")[1]
        got_q.setdefault(r[N["queue"]], set()).add(ident)
        m = sent[ident]
        assert consumer_bytes(r) == m["body"], ident
        assert r[N["type"]] == ("bytes" if m["bytes"] else "text")
        assert r[N["large"]] == (len(r[N["body"]]) > 100 * 1024), ident
        assert r[N["address"]] == m["dest"] and r[N["durable"]]
        h = m["headers"]
        assert r[N["priority"]] == int(h.get("priority", 4))
        assert r[N["expiration"]] == int(h.get("expires", 0))
        assert prop(r, "JMSCorrelationID") == (("simple-string", h["correlation-id"]) if "correlation-id" in h
                                               else None)
        assert prop(r, "JMSType") == (("simple-string", h["type"]) if "type" in h else None)
        assert (prop(r, "__HDR_REPLY_TO") is not None) == ("reply-to" in h)
        assert prop(r, "_AMQ_GROUP_ID") == (("simple-string", h["JMSXGroupID"]) if "JMSXGroupID" in h else None)
        assert prop(r, "__HDR_GROUP_SEQUENCE") == ("integer", h.get("JMSXGroupSeq", "0"))
        if "region" in h:
            assert prop(r, "region") == ("simple-string", h["region"])
        assert prop(r, "_AMQ_ROUTING_TYPE") == ("byte", "0" if m["dest"] == "it.events" else "1")
        assert base64.urlsafe_b64decode(prop(r, "__HDR_MESSAGE_ID")[1])[4] == 110  # a marshalled MessageId
    assert got_q == want
    assert {x[2] for x in bindings if x[0] == "queue"} == set(want)
    assert sum(1 for r in rows if r[N["large"]]) >= 3
    code, out, _ = run_cli("verify", dest, "--format", "json")
    assert code == 0 and json.loads(out)["verdict"] == "OK", out

    # one conversion, two outputs: the KahaDB XML equals the Artemis export of the created store
    assert run_cli("export", b.data, "-o", tmp_path / "k.xml", "--format", "xml", "-q")[0] == 0
    assert run_cli("export", dest, "-o", tmp_path / "a.xml", "--format", "xml", "-q")[0] == 0
    assert (tmp_path / "k.xml").read_bytes() == (tmp_path / "a.xml").read_bytes()


def test_openwire_message_kinds_migrate(tmp_path, brokers, run_cli, monkeypatch):  # noqa: F811
    """Every message kind and property type, sent by an OpenWire producer, stored by the real broker and
    migrated: core types, bodies (map and stream re-typed, object length-prefixed, compressed ones inflated
    with __HDR_COMPRESSED), typed properties, group, correlation id, reply-to, expiration, priority."""
    import struct

    from tests.engines.migrate import openwire_builder as B
    from tests.integration import test_activemq_broker as tab
    from tests.integration.openwire_client import OpenWireProducer
    from amqtool.formats.artemis import primitives as P

    ow_port = tab.free_port()
    monkeypatch.setattr(tab.Broker, "config", tab.Broker.config.replace(
        '<transportConnector name="stomp"',
        f'<transportConnector name="openwire" uri="tcp://127.0.0.1:{ow_port}"/><transportConnector name="stomp"'))
    b = Broker(tmp_path / "classic")
    brokers.append(b)
    b.start()
    s = Stomp(b.port, client_id="it-sub")
    s.request("SUBSCRIBE", {"destination": "/topic/it.kinds.t", "id": "d", "ack": "client-individual",
                            "activemq.subscriptionName": "all"})
    s.close()
    props = [("p_bool", 1, True), ("p_byte", 2, -7), ("p_short", 4, -300), ("p_int", 5, 70000),
             ("p_long", 6, 2**40), ("p_double", 7, 2.5), ("p_float", 8, 1.5), ("p_str", 9, "héllo")]
    map_entries = [("m_bool", 1, False), ("m_int", 5, 42), ("m_str", 9, "v"), ("m_bytes", 10, b"\x00\x01\x02"),
                   ("m_double", 7, 0.125), ("m_long", 6, -5)]
    stream = [(1, True), (5, 9), (9, "s"), (10, b"zz"), (7, 1.25), (0, None)]
    ser = b"\xac\xed\x00\x05" + b"java-serialized" * 20
    big = bytes(range(256)) * 600  # 150 KiB: a large message
    text = "compressible text " * 500
    # the broker starts its connectors one by one and start() waits for STOMP: on a busy machine the OpenWire
    # one may still be coming up
    import socket
    import time

    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", ow_port), timeout=5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    p = OpenWireProducer(ow_port)
    q = (100, "it.kinds")
    kinds = {
        1: dict(type_code=28, content=B.text_content("plain text"), props=props, dest=q, group="g1", group_seq=2,
                correlation="c-1", jms_type="invoice", reply_to=(100, "it.replies"), priority=8,
                expiration=4_000_000_000_000),
        2: dict(type_code=28, content=B.text_content(text), compressed=True, dest=q),
        3: dict(type_code=24, content=big, compressed=True, dest=q),
        4: dict(type_code=25, content=B.prim_map(map_entries), dest=q),
        5: dict(type_code=25, content=B.prim_map(map_entries), compressed=True, dest=q),
        6: dict(type_code=27, content=b"".join(B.prim(t, v) for t, v in stream), dest=q),
        7: dict(type_code=26, content=ser, dest=q),
        8: dict(type_code=26, content=ser, compressed=True, dest=q),
        9: dict(type_code=23, content=None, props=[("only", 9, "headers")], dest=q),
        10: dict(type_code=28, content=B.text_content("to the topic"), props=props, dest=(101, "it.kinds.t")),
    }
    for seq, kw in kinds.items():
        kw = dict(kw)
        p.send(kw.pop("type_code"), kw.pop("content"), seq=seq, **kw)
    p.close()
    b.stop()

    dest = tmp_path / "artemis"
    code, out, err = run_cli("create", dest, "--from", b.data, "--format", "json", "-q")
    assert code == 0, err
    assert json.loads(out)["notConverted"] == []
    with LocalArtemisExport(detect(dest), ExportOptions()) as ex:
        rows = list(ex.rows())
    by_seq = {}
    for r in rows:
        mid = base64.urlsafe_b64decode(prop(r, "__HDR_MESSAGE_ID")[1])
        by_seq[struct.unpack_from(">q", mid, len(mid) - 16)[0]] = r  # producerSequenceId
    assert sorted(by_seq) == list(kinds) and len(rows) == len(kinds)
    assert by_seq[10][N["queue"]] == "it-sub.all" and by_seq[1][N["queue"]] == "it.kinds"

    r = by_seq[1]
    assert r[N["type"]] == "text" and consumer_bytes(r) == b"plain text"
    assert (r[N["priority"]], r[N["expiration"]]) == (8, 4_000_000_000_000)
    assert prop(r, "_AMQ_GROUP_ID") == ("simple-string", "g1") and prop(r, "__HDR_GROUP_SEQUENCE") == ("integer", "2")
    assert prop(r, "JMSCorrelationID") == ("simple-string", "c-1")
    assert prop(r, "JMSType") == ("simple-string", "invoice")
    assert base64.urlsafe_b64decode(prop(r, "__HDR_REPLY_TO")[1])[4:] == b"\x64\x01\x00\x0ait.replies"
    for rr in (by_seq[1], by_seq[10]):
        assert [prop(rr, n) for n, _, _ in props] == [
            ("boolean", "true"), ("byte", "-7"), ("short", "-300"), ("integer", "70000"), ("long", str(2**40)),
            ("double", "2.5"), ("float", "1.5"), ("simple-string", "héllo")]
    r = by_seq[2]
    assert consumer_bytes(r) == text.encode() and prop(r, "__HDR_COMPRESSED") == ("boolean", "true")
    r = by_seq[3]
    assert r[N["type"]] == "bytes" and r[N["large"]] and r[N["body"]] == big
    for n in (4, 5):
        m = P.TypedProperties.read(P.Reader(by_seq[n][N["body"]])).to_dict()
        assert by_seq[n][N["type"]] == "map"
        assert m == {"m_bool": False, "m_int": 42, "m_str": "v", "m_bytes": b"\x00\x01\x02", "m_double": 0.125,
                     "m_long": -5}
    w = P.Writer()
    w.u8(P.BOOLEAN).bool_a(True).u8(P.INT).i32(9).u8(P.STRING).nullable_string("s").u8(P.BYTES).i32(2).raw(b"zz")
    w.u8(P.DOUBLE).raw(struct.pack(">d", 1.25)).u8(P.STRING).nullable_string(None)
    assert by_seq[6][N["type"]] == "stream" and by_seq[6][N["body"]] == w.getvalue()
    for n in (7, 8):
        assert by_seq[n][N["type"]] == "object" and by_seq[n][N["body"]] == struct.pack(">i", len(ser)) + ser
    assert by_seq[9][N["type"]] == "default" and by_seq[9][N["body"]] == b""
    code, out, _ = run_cli("verify", dest, "--format", "json")
    assert code == 0, out
