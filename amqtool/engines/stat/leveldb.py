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


def leveldb_stat(store, now: int, progress: Callable[[int], None] | None = None, reclaim: bool = False) -> dict:
    from amqtool.engines.leveldb.document import judged_document
    from amqtool.engines.stat import classic_rows, new_queue_row

    doc, _findings, summary = judged_document(store, safe=True, pins=True)  # the verdict is verify's
    rows: list[dict] = []
    journals: list[dict] = []
    for st in doc["nodes"] if store.replicated else [doc]:
        held: dict[str, int] = {}
        for tx in st["transactions"]:
            for dest, n in tx["sendsTo"].items():
                held[dest] = held.get(dest, 0) + n
        rows += classic_rows(st["destinations"], now, _size, lambda d: d["qualifiedName"], held,
                             lambda d: d["qualifiedName"])
        for dest, n in held.items():
            row = new_queue_row(dest.split("://", 1)[-1], dest, None)
            row["prepared"] = n
            rows.append(row)
        size = sum(f["size"] for f in st["logs"])
        live = sum(_size(m) for d in st["destinations"] for m in d["live"])
        journals.append({"journal": "leveldb", "directory": st["directory"], "files": len(st["logs"]),
                         "bytes": size, "dataFiles": len(st["logs"]),
                         "liveRecords": sum(len(d["live"]) for d in st["destinations"]), "liveBytes": live,
                         "liveRatio": round(live / size, 6) if size else None, "compactNeeded": None,
                         "compactFrees": None,
                         "reclaimOnlyFrees": sum(p["size"] for p in st.get("pins", []) if not p["pinned"]),
                         "logEnd": st["replay"]["to"]})
    out = {"verdict": doc["verdict"], "kind": doc["kind"], "path": doc["root"], "queues": rows, "addresses": [],
           "journals": journals}
    if store.replicated:  # verify's comparison of the nodes, from the same load (it weighs in the verdict)
        out["replication"] = {k: summary[k] for k in ("latestNode", "latestPosition", "commonRange",
                                                      "replicasAgree")}
    return out


def _size(m: dict) -> int:
    """A message's bytes in the log: its DATA record (the 10-byte record header and the payload)."""
    return (m.get("dataLength") or 0) + 10
