"""Comparing what amqtool recovers from a LevelDB store with ``recovered.json``: what the real broker
recovered from the same store (``Gen recover``: its destinations, each message's id, class, text and body
digest, per durable subscription the pending count and messages)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

CLASSES = {"TextMessage": "ActiveMQTextMessage", "BytesMessage": "ActiveMQBytesMessage",
           "MapMessage": "ActiveMQMapMessage", "ObjectMessage": "ActiveMQObjectMessage",
           "StreamMessage": "ActiveMQStreamMessage", "Message": "ActiveMQMessage"}


def expected(recovered: Path) -> dict:
    """{qualified destination: {"messages": [(id, class, text)], "subs": {(client, name): (count, [ids])}}}"""
    doc = json.loads(Path(recovered).read_text())
    out = {}
    for d in doc["destinations"]:
        subs = {(s["clientId"], s["subscriptionName"]): (s["pendingCount"], [m["id"] for m in s["pending"]])
                for s in d.get("durableSubscriptions", [])}
        out[d["dest"]] = {"count": d["messageCount"],
                          "messages": [(m["id"], m["class"], m.get("text")) for m in d["messages"]],
                          "subs": subs}
    return out


def got_from_print(doc: dict) -> dict:
    out = {}
    for d in doc["destinations"]:
        subs = {(s["clientId"], s["subscriptionName"]): (s["pendingCount"], [m["messageId"] for m in s["live"]])
                for s in d["subscriptions"]}
        msgs = [(m["messageId"], CLASSES.get(m.get("messageType"), m.get("messageType")),
                 m.get("body") if m.get("messageType") == "TextMessage" else None) for m in d["live"]]
        out[d["qualifiedName"]] = {"count": d["messageCount"], "messages": msgs, "subs": subs}
    return out


def prepared_xids(recovered: Path) -> list:
    return json.loads(Path(recovered).read_text()).get("preparedTransactions", [])


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def compare(store_dir: Path, doc: dict) -> list[str]:
    """Differences between print's document and the store's recovered.json (empty when they agree)."""
    e = expected(Path(store_dir) / "recovered.json")
    g = got_from_print(doc)
    for k, ed in e.items():  # the largest stores' recovered.json leaves texts out: compare those it has
        gd = g.get(k)
        if gd is not None and len(gd["messages"]) == len(ed["messages"]):
            gd["messages"] = [(i, c, t if w is not None else None)
                              for (i, c, t), (_j, _d, w) in zip(gd["messages"], ed["messages"])]
    out = [f"{k}: expected {str(e.get(k))[:300]} got {str(g.get(k))[:300]}" for k in sorted(set(e) | set(g))
           if e.get(k) != g.get(k)]
    want = sorted(prepared_xids(Path(store_dir) / "recovered.json"))
    have = sorted(t["xid"] for t in doc["transactions"])
    if want != have:
        out.append(f"prepared transactions: expected {want} got {have}")
    return out
