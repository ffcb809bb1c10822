"""``stat`` for LevelDB stores, from print's document (the store as the broker recovers it, with the pins of
its GC pass, :mod:`amqtool.engines.leveldb.pins`).

Rows: one per queue and topic (its recovered messages) and one per durable subscription (the messages after
its ack position), with ``bytes`` the DATA records' bytes (as stored: compressed with
``logCompression=snappy``), oldest/newest the OpenWire ``timestamp``, ``expired``, ``redelivered`` (the
entry's delivery count), ``prepared`` the sends of prepared XA transactions to it; ``scheduled``, ``paged``
and ``large`` do not apply and stay 0. One journal row per store (per node of a replicated store): log
files, bytes, live ratio and what the broker's next GC would free (``reclaimOnlyFrees``: files nothing pins);
there is no offline compaction of LevelDB stores (``compactNeeded``/``compactFrees`` null). A replicated store
also gets ``replication``: which node holds the latest log position and whether the nodes agree up to the
shortest (verify's comparison).
"""
from __future__ import annotations

from typing import Callable


def _add(row: dict, m: dict, now: int) -> None:
    from amqtool.engines.stat import see_time

    row["messages"] += 1
    row["bytes"] += (m.get("dataLength") or 0) + 10
    see_time(row, m.get("timestamp"))
    exp = m.get("expiration") or 0
    if 0 < exp <= now:
        row["expired"] += 1
    if (m.get("redeliveryCounter") or 0) > 0:
        row["redelivered"] += 1


def leveldb_stat(store, now: int, progress: Callable[[int], None] | None = None, reclaim: bool = False) -> dict:
    from amqtool.engines.leveldb.document import print_document
    from amqtool.engines.stat import new_queue_row

    doc = print_document(store, safe=True, pins=True)
    rows: list[dict] = []
    journals: list[dict] = []
    for st in doc["nodes"] if store.replicated else [doc]:
        held: dict[str, int] = {}
        for tx in st["transactions"]:
            for dest, n in tx["sendsTo"].items():
                held[dest] = held.get(dest, 0) + n
        for d in st["destinations"]:
            row = new_queue_row(d["name"], d["qualifiedName"], d["type"])
            for m in d["live"]:
                _add(row, m, now)
            row["prepared"] = held.pop(d["qualifiedName"], 0)
            rows.append(row)
            for s in d["subscriptions"]:
                srow = new_queue_row(d["name"], d["qualifiedName"], d["type"],
                                     subscription=f"{s['clientId']}:{s['subscriptionName']}")
                for m in s["live"]:
                    _add(srow, m, now)
                rows.append(srow)
        for dest, n in held.items():
            row = new_queue_row(dest.split("://", 1)[-1], dest, None)
            row["prepared"] = n
            rows.append(row)
        size = sum(f["size"] for f in st["logs"])
        live = sum((m.get("dataLength") or 0) + 10 for d in st["destinations"] for m in d["live"])
        journals.append({"journal": "leveldb", "directory": st["directory"], "files": len(st["logs"]),
                         "bytes": size, "dataFiles": len(st["logs"]),
                         "liveRecords": sum(len(d["live"]) for d in st["destinations"]), "liveBytes": live,
                         "liveRatio": round(live / size, 6) if size else None, "compactNeeded": None,
                         "compactFrees": None,
                         "reclaimOnlyFrees": sum(p["size"] for p in st.get("pins", []) if not p["pinned"]),
                         "logEnd": st["replay"]["to"]})
    out = {"verdict": doc["verdict"], "kind": doc["kind"], "path": doc["root"], "queues": rows, "addresses": [],
           "journals": journals}
    if store.replicated:
        from amqtool.engines.leveldb.verify import verify_store

        findings, summary = verify_store(store)
        out["replication"] = {k: summary[k] for k in ("latestNode", "latestPosition", "commonRange",
                                                      "replicasAgree")}
        if not summary["replicasAgree"]:
            out["verdict"] = "CRITICAL"
    return out
