"""``stat`` for database stores (``--jdbc-url``, or a broker.xml ``<database-store>`` / an activemq.xml
``jdbcPersistenceAdapter``), from the loads ``print`` and ``verify`` make of them:

* Artemis (``JDBCJournalImpl``: the journals are tables of records): the bindings and messages tables are
  loaded by :func:`amqtool.engines.jdbc.artemis.load` into the same live state as the file journal, so the
  queue rows are :func:`amqtool.engines.stat.artemis.queue_rows` of those loads, figure for figure. One
  journal row per table: its rows' live records and bytes and the table's size on disk; compaction does not
  apply to tables (the broker deletes rows), so the compaction figures are null. Page-store tables give the
  address rows (pages, bytes); which paged messages each queue still has to consume is not figured for
  tables (the page cursors' counters are not read), so ``paged`` stays 0 there.
* Classic (``JDBCPersistenceAdapter``): one row per destination with its live messages (rows not yet
  acknowledged) and one per durable subscription with the messages it still owes, from
  :func:`amqtool.engines.jdbc.classic.print_document`; ``bytes`` is the stored message size (``MSG``), the
  times are the OpenWire ``timestamp`` and ``expiration``; ``prepared`` counts the sends of a prepared XA
  transaction to its destination when the transaction sent to one destination only.
"""
from __future__ import annotations

from typing import Callable


def artemis_jdbc_stat(store, now: int, progress: Callable[[int], None] | None = None) -> dict:
    from amqtool.engines.jdbc import artemis
    from amqtool.engines.stat.artemis import queue_rows

    from amqtool.errors import overall_verdict

    data = artemis.load(store, progress)
    # verify's verdict on the same load, as print's (one rule: amqtool.engines.verdicts); load_verdict saw only
    # the load's own findings, not the page tables' nor the records that do not decode
    verdict = overall_verdict(artemis.verify_load(store, data)[0])
    by_name, _row_for = queue_rows(data.result("bindings"), data.result("messages"), now)
    journals = []
    for j in data.journals:
        live = j.result.live
        journals.append({"journal": j.kind, "directory": j.table, "files": None,
                         "bytes": data.facts.get(j.kind, {}).get("bytes"), "dataFiles": None,
                         "liveRecords": len(live), "liveBytes": sum(rec.body_len for rec in live),
                         "liveRatio": None, "compactNeeded": None, "compactFrees": None, "reclaimOnlyFrees": None})
    addresses = [{"address": ps["address"], "folder": ps["table"], "pageFiles": len(ps["pages"]),
                  "bytes": sum(p["size"] for p in ps["pages"]), "pagesToConsume": None, "pagedMessages": None}
                 for ps in data.page_stores or ()]
    return {"verdict": verdict.name, "kind": store.kind, "path": str(store.root), "queues": list(by_name.values()),
            "addresses": addresses, "journals": journals}


def classic_jdbc_stat(store, now: int, progress: Callable[[int], None] | None = None) -> dict:
    from amqtool.engines.jdbc import classic
    from amqtool.engines.kahadb.pins import qualified
    from amqtool.engines.stat import classic_rows

    doc = classic.print_document(store, safe=True, progress=progress)
    held: dict[str, int] = {}
    for tx in doc["transactions"]:
        dests = tx.get("destinations") or []
        if tx.get("state") == "prepared" and len(dests) == 1:
            held[dests[0]] = held.get(dests[0], 0) + (tx.get("sends") or 0)
    rows = classic_rows(doc["destinations"], now, lambda m: m.get("msgSize") or 0, lambda d: qualified(d["key"]),
                        held, lambda d: d["key"])
    journals = [{"journal": role, "directory": f.get("table"), "files": None, "bytes": f.get("bytes"),
                 "dataFiles": None, "liveRecords": doc["summary"]["live"] if role == "messages" else None,
                 "liveBytes": sum(r["bytes"] for r in rows if r["subscription"] is None) if role == "messages"
                 else None, "liveRatio": None, "compactNeeded": None, "compactFrees": None,
                 "reclaimOnlyFrees": None}
                for role, f in doc["tables"].items() if f.get("exists")]
    return {"verdict": doc["verdict"], "kind": store.kind, "path": str(store.root), "queues": rows,
            "addresses": [], "journals": journals}
