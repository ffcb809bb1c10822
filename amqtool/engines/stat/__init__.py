"""``stat``: what a store holds, per queue, per paged address and per journal, for operators.

The questions asked first are about space and backlog, not records ("what is eating my journal disk",
"which queue holds the oldest message"). Artemis answers them only on a running broker (``artemis queue
stat`` reads the queue controls: ``getMessageCount``, ``getScheduledCount``, ``getDeliveringCount``,
``getPersistentSize``); this engine answers them from the files, with the loaders every other command uses:

* Artemis (:mod:`amqtool.engines.stat.artemis`): each journal is loaded once by the compaction planner
  (``plan_journal``, which is ``load_journal`` plus the layout compaction would write), the queues come from
  the :class:`~amqtool.engines.artemis.broker_state.BrokerState` of those loads (refs minus acks, as
  ``data exp`` resolves them: the same figures as print's ``queueSummary``), paging from the paging engine's
  entries and the journal view;
* KahaDB (:mod:`amqtool.engines.stat.kahadb`): print's document (``MessageDatabase`` replayed, with the
  pins of the GC pass) and the KahaDB compaction dry run;
* database stores (:mod:`amqtool.engines.stat.jdbc`): the table loads of print and verify.

The document (man/amqtool-stat.1)::

    {"verdict", "kind", "path", "now", "sort",
     "queues": [{"name", "address", "routingType", "subscription", "messages", "bytes", "oldest", "newest",
                 "oldestAgeSeconds", "scheduled", "expired", "redelivered", "prepared", "paged", "large"}],
     "addresses": [{"address", "folder", "pageFiles", "bytes", "pagesToConsume", "pagedMessages"}],
     "journals": [{"journal", "directory", "files", "bytes", "dataFiles", "liveRecords", "liveBytes",
                   "liveRatio", "compactNeeded", "compactFrees", "reclaimOnlyFrees"}],
     "totals": {"queues", "messages", "bytes", "journalBytes", "pagingBytes"}}
"""
from __future__ import annotations

import time
from typing import Callable

SORT_KEYS = ("bytes", "messages", "oldest")


def now_millis() -> int:
    return int(time.time() * 1000)


def sort_rows(rows: list[dict], key: str) -> list[dict]:
    """Queue rows by ``key``: bytes and messages largest first, oldest earliest first (rows without a
    message time last); ties by name, so the order is stable run to run."""
    if key not in SORT_KEYS:
        raise ValueError(key)
    if key == "oldest":
        return sorted(rows, key=lambda r: (r["oldest"] is None, r["oldest"] or 0, r["name"], r["subscription"] or ""))
    return sorted(rows, key=lambda r: (-(r[key] or 0), r["name"], r["subscription"] or ""))


def new_queue_row(name: str, address: str | None, routing_type: str | None,
                  subscription: str | None = None) -> dict:
    """A queue (or durable subscription) row with every figure at zero."""
    return {"name": name, "address": address, "routingType": routing_type, "subscription": subscription,
            "messages": 0, "bytes": 0, "oldest": None, "newest": None, "oldestAgeSeconds": None,
            "scheduled": 0, "expired": 0, "redelivered": 0, "prepared": 0, "paged": 0, "large": 0}


def see_time(row: dict, millis: int | None) -> None:
    """Widen the row's oldest/newest message time (epoch milliseconds; 0 and None mean unknown)."""
    if not millis or millis <= 0:
        return
    if row["oldest"] is None or millis < row["oldest"]:
        row["oldest"] = millis
    if row["newest"] is None or millis > row["newest"]:
        row["newest"] = millis


def classic_rows(destinations, now: int, size_of, address_of, held: dict[str, int], held_key) -> list[dict]:
    """The rows of ActiveMQ Classic destinations as a print document lists them (KahaDB, LevelDB, the JDBC
    adapter): one per destination with its live messages, one per durable subscription with its pending ones.
    ``size_of(message)`` is the message's stored size in that store kind; ``address_of(destination)`` the
    qualified name; ``held`` (destination key -> sends of prepared transactions) is consumed by
    ``held_key(destination)``, what is left naming destinations with nothing live."""

    def add(row: dict, m: dict) -> None:
        row["messages"] += 1
        row["bytes"] += size_of(m)
        see_time(row, m.get("timestamp"))
        exp = m.get("expiration") or 0
        if 0 < exp <= now:
            row["expired"] += 1
        if (m.get("redeliveryCounter") or 0) > 0:
            row["redelivered"] += 1

    rows = []
    for d in destinations:
        address = address_of(d)
        row = new_queue_row(d["name"], address, d["type"])
        for m in d["live"]:
            add(row, m)
        row["prepared"] = held.pop(held_key(d), 0)
        rows.append(row)
        for sub in d["subscriptions"]:
            srow = new_queue_row(d["name"], address, d["type"],
                                 subscription=f"{sub['clientId']}:{sub['subscriptionName']}")
            for m in sub["live"]:
                add(srow, m)
            rows.append(srow)
    return rows


def finish_rows(rows: list[dict], now: int) -> None:
    for r in rows:
        r["oldestAgeSeconds"] = None if r["oldest"] is None else max(0, (now - r["oldest"]) // 1000)


def stat_store(store, *, sort: str = "bytes", top: int | None = None, now: int | None = None,
               reclaim: bool = False, progress: Callable[[int], None] | None = None) -> dict:
    """The stat document of ``store`` (an ArtemisStore or KahaDBStore from ``store.layout.detect``, or a
    database store from ``engines.jdbc.resolve.jdbc_store``).

    ``now``: the instant (epoch ms) that decides expired, still-scheduled and ages (default: the clock).
    ``top``: keep only the first ``top`` queue rows after sorting (totals still count every queue).
    ``reclaim``: also figure what ``compact --reclaim-only`` would free (Artemis; one more pass over every
    record, so off by default: ``reclaimOnlyFrees`` is null then)."""
    now = now_millis() if now is None else now
    if store.kind == "kahadb":
        from amqtool.engines.stat.kahadb import kahadb_stat

        doc = kahadb_stat(store, now, progress, reclaim)
    elif store.kind == "artemis-jdbc":
        from amqtool.engines.stat.jdbc import artemis_jdbc_stat

        doc = artemis_jdbc_stat(store, now, progress)
    elif store.kind == "classic-jdbc":
        from amqtool.engines.stat.jdbc import classic_jdbc_stat

        doc = classic_jdbc_stat(store, now, progress)
    elif store.kind in ("leveldb", "replicated-leveldb"):
        from amqtool.engines.stat.leveldb import leveldb_stat

        doc = leveldb_stat(store, now, progress, reclaim)
    else:
        from amqtool.engines.stat.artemis import artemis_stat

        doc = artemis_stat(store, now, progress, reclaim)
    rows = doc["queues"]
    finish_rows(rows, now)
    doc["totals"] = {
        "queues": len(rows),
        "messages": sum(r["messages"] for r in rows),
        "bytes": sum(r["bytes"] for r in rows),
        "journalBytes": sum(j["bytes"] or 0 for j in doc["journals"]),
        "pagingBytes": sum(a["bytes"] or 0 for a in doc["addresses"]),
    }
    rows = sort_rows(rows, sort)
    if top is not None:
        rows = rows[:max(0, top)]
    ordered = {"verdict": doc.pop("verdict"), "kind": doc.pop("kind"), "path": doc.pop("path"), "now": now,
               "sort": sort}
    ordered["queues"] = rows
    ordered["addresses"] = doc["addresses"]
    ordered["journals"] = doc["journals"]
    ordered["totals"] = doc["totals"]
    if "replication" in doc:
        ordered["replication"] = doc["replication"]
    return ordered
