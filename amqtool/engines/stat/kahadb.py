"""``stat`` for KahaDB and mKahaDB stores, from print's document and the compaction dry run.

``MessageDatabase`` keeps, per destination, the messages not yet acknowledged (``StoredDestination
.locationIndex``) and, for a topic, per durable subscription the messages it still owes (``ackPositions``);
``MessageDatabase.checkpointUpdate(cleanup=true)`` deletes the log files nothing pins. The rows:

* one per queue (and per topic: its live messages) and one per durable subscription (the messages it still
  owes), with ``bytes`` the journal record bytes, oldest/newest the OpenWire ``timestamp``, ``expired`` an
  ``expiration`` already passed (the broker drops them only when it dispatches or sweeps them),
  ``redelivered`` a stored ``redeliveryCounter`` above 0, ``prepared`` the sends of prepared XA
  transactions to it (``MessageDatabase`` keeps them out of the destination until the outcome; held until the
  transaction manager decides); ``scheduled``, ``paged`` and ``large`` do not
  apply to KahaDB (scheduled messages live in the separate JobScheduler store) and stay 0;
* one journal row per (sub-)store: files, bytes, live ratio, what ``compact`` would free (its dry run), and
  what the broker's next GC pass would free (``reclaimOnlyFrees``: the collectable files of ``print --pins``).
"""
from __future__ import annotations

from typing import Callable


def kahadb_stat(store, now: int, progress: Callable[[int], None] | None = None, reclaim: bool = False) -> dict:
    """The stat document's rows for a KahaDB store (see the module docstring). ``reclaim`` is accepted for
    symmetry: the GC figure comes with the pins at no extra cost."""
    from amqtool.engines import kahadb
    from amqtool.engines.kahadb.compact import KahaCompactRequest, compact_kahadb
    from amqtool.engines.kahadb.pins import qualified
    from amqtool.engines.stat import classic_rows, new_queue_row
    from amqtool.errors import AmqtoolError

    doc = kahadb.print_document(store, safe=True, pins=True, progress=progress)
    try:
        compaction = {r.directory: r for r in compact_kahadb(store, KahaCompactRequest(dry_run=True))}
    except AmqtoolError:  # a damaged store compaction refuses: no compaction figure
        compaction = {}
    rows: list[dict] = []
    journals: list[dict] = []
    for st in doc["stores"]:
        held: dict[str, int] = {}  # destination key -> sends of prepared transactions
        for tx in st["transactions"]:
            if tx.get("state") == "prepared":
                for key, n in tx.get("sendsTo", {}).items():
                    held[key] = held.get(key, 0) + n
        rows += classic_rows(st["destinations"], now, lambda m: m.get("recordSize") or 0,
                             lambda d: d["qualifiedName"], held, lambda d: d["key"])
        for key, n in held.items():  # a destination with nothing live, only held sends
            row = new_queue_row(key.partition(":")[2], qualified(key), None)
            row["prepared"] = n
            rows.append(row)
        files = st["files"]
        size = sum(f["size"] for f in files)
        live = sum(m.get("recordSize") or 0 for dest in st["destinations"] for m in dest["live"])
        rep = compaction.get(st["directory"])
        journals.append({
            "journal": "kahadb-txstore" if st.get("txStore") else "kahadb", "directory": st["directory"],
            "files": len(files), "bytes": size, "dataFiles": len(files),
            "liveRecords": sum(len(dest["live"]) for dest in st["destinations"]), "liveBytes": live,
            "liveRatio": round(live / size, 6) if size else None,
            "compactNeeded": bool(rep.reasons) if rep is not None else None,
            "compactFrees": rep.reclaimed if rep is not None else None,
            "reclaimOnlyFrees": sum(p["size"] for p in st.get("pins", []) if not p["pinned"]),
        })
    return {"verdict": doc["verdict"], "kind": doc["kind"], "path": doc["root"], "queues": rows,
            "addresses": [], "journals": journals}
