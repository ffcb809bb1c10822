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
    for p in row[N["properties"]]:
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
