#!/usr/bin/env python3
"""Export of an ActiveMQ Classic JDBC store (1 million ACTIVEMQ_MSGS rows by default) to Parquet: the local
engine, then Spark's JDBC source with 1 partition and with 2 partitions over the ID column (both in
``local[2]``), in interleaved rounds; the issue's target is 2 partitions >= 1.6x one partition.

Usage: [AMQTOOL_FIXTURES=DIR] .venv/bin/python bench/bench_jdbc_export.py [--rows 1000000] [--runs 3] [--jdbc-url URL] [--work DIR]
                                                    [--no-local]

Without --jdbc-url a throwaway PostgreSQL cluster is started (tests/pg_cluster.py: initdb in a temporary
directory, a free loopback port, fsync off) and removed at the end. The rows are made in the database
(``INSERT ... SELECT FROM generate_series``) from four real OpenWire messages of the KahaDB ``basic`` fixture
(text and bytes, with properties), spread over 4 queues and a topic with 2 durable subscriptions (one of
which has acked the first half), ~10% of the rows a prepared XA send. Each Spark run is a fresh process with
its own JVM (session start reported apart; the ratio is on the export alone), writing to a fresh directory;
the outputs must hold the same rows (counts per queue). PostgreSQL runs on the same machine and its backend
sending the rows takes CPU too: the load average is printed before each run, and each round measures the
ceiling the machine gives at that time (the same pure-Python CPU work in Spark tasks in 1 and in 2 partitions):
the JDBC export cannot scale better than that.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqtool.engines.export import ExportRequest, run_export  # noqa: E402


def fill(pg, db: str, rows: int) -> str:
    from tests.classic_jdbc_writer import add_subscription, encoded_xid, kahadb_messages, schema
    from tests.support import KAHADB

    msgs = kahadb_messages(KAHADB / "basic" / "kahadb")
    picks = [m for m in msgs if len(m.raw) < 2000][:: max(1, len(msgs) // 40)][:4]
    url = pg.create_database(db)
    with pg.connect(db) as c:
        for s in schema():
            c.execute(s)
        c.execute("CREATE TEMP TABLE tpl(k INT, prod TEXT, msg BYTEA)")
        for k, m in enumerate(picks):
            c.execute("INSERT INTO tpl VALUES (%s, %s, %s)", (k, m.message_id.rpartition(":")[0], m.raw))
        xid = encoded_xid(b"+")
        c.execute(
            "INSERT INTO ACTIVEMQ_MSGS(ID, CONTAINER, MSGID_PROD, MSGID_SEQ, EXPIRATION, PRIORITY, MSG, XID) "
            "SELECT g, CASE WHEN g %% 5 = 4 THEN 'topic://bench.t' ELSE 'queue://bench.q' || (g %% 5) END, "
            "tpl.prod, g, 0, 4, tpl.msg, CASE WHEN g %% 10 = 7 THEN %s END "
            "FROM generate_series(1, %s) g JOIN tpl ON tpl.k = g %% 4", (xid, rows))
        add_subscription(c, "topic://bench.t", "bench-a", "all", -1)
        add_subscription(c, "topic://bench.t", "bench-b", "half", rows // 2)
        c.execute("ANALYZE ACTIVEMQ_MSGS")
    return url


def spark_run(url: str, out: Path, partitions: int, env: dict) -> dict:
    code = f"""
import json, sys, time
sys.path.insert(0, {str(ROOT)!r})
from amqtool.engines.export.spark import get_session
from amqtool.engines.export import ExportRequest, run_export
t0 = time.perf_counter()
spark = get_session("local[2]", log_path={str(out) + '.spark.log'!r}, jars=["/usr/share/java/postgresql.jar"])
spark.range(1).count()
t1 = time.perf_counter()
doc, verdict = run_export(ExportRequest(".", {str(out)!r}, "parquet", engine="spark", jdbc_url={url!r},
                                        jdbc_partitions={partitions}), spark_session=spark)
t2 = time.perf_counter()
print(json.dumps({{"session": t1 - t0, "export": t2 - t1, "rows": doc["rows"], "rowsByQueue": doc["rowsByQueue"]}}))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"spark run failed: {p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ceiling_run(env: dict) -> tuple[float, float]:
    """The 1 -> 2 partition ceiling this machine gives right now: pure-Python CPU work in Spark tasks (no JDBC,
    no decoding), the same amount in 1 and in 2 partitions of one local[2] session."""
    code = f"""
import json, sys, time
sys.path.insert(0, {str(ROOT)!r})
from amqtool.engines.export.spark import get_session
spark = get_session("local[2]", log_path="/dev/null")
sc = spark.sparkContext
def burn(it):
    n = 0
    for x in it:
        for i in range(3000):
            n += i * x
    yield n
sc.parallelize(range(2000), 2).mapPartitions(burn).collect()
out = []
for parts in (1, 2):
    t = time.perf_counter()
    sc.parallelize(range(30000), parts).mapPartitions(burn).collect()
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"ceiling run failed: {p.stderr[-2000:]}")
    one, two = json.loads(p.stdout.strip().splitlines()[-1])
    return one, two


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jdbc-url")
    ap.add_argument("--work")
    ap.add_argument("--no-local", action="store_true", help="skip the local engine")
    args = ap.parse_args()
    # the fixtures: AMQTOOL_FIXTURES, else ../shared/fixtures beside the checkout (tests/support.py)
    work = Path(args.work or tempfile.mkdtemp(prefix="amqtool-bench-jdbc-"))
    work.mkdir(parents=True, exist_ok=True)
    pg = None
    try:
        if args.jdbc_url:
            url = args.jdbc_url
        else:
            from tests.pg_cluster import PASSWORD, USER, start_cluster

            pg = start_cluster()
            os.environ["AMQTOOL_JDBC_USER"], os.environ["AMQTOOL_JDBC_PASSWORD"] = USER, PASSWORD
            t = time.perf_counter()
            url = fill(pg, "bench", args.rows)
            print(f"filled {args.rows} rows in {time.perf_counter() - t:.1f} s")
        env = dict(os.environ)
        times: dict[str, list[float]] = {"local": [], "spark-1": [], "spark-2": []}
        ceilings: list[float] = []
        counts = {}
        for rnd in range(args.runs):
            for name in ("local", "spark-1", "spark-2"):
                if name == "local" and args.no_local:
                    continue
                out = work / f"{name}-{rnd}"
                shutil.rmtree(out, ignore_errors=True)
                print(f"round {rnd + 1} {name}: load average {os.getloadavg()[0]:.2f}", flush=True)
                if name == "local":
                    t = time.perf_counter()
                    doc, _ = run_export(ExportRequest(".", str(out), "parquet", engine="local", jdbc_url=url))
                    r = {"export": time.perf_counter() - t, "session": 0.0, "rows": doc["rows"],
                         "rowsByQueue": doc["rowsByQueue"]}
                else:
                    r = spark_run(url, out, int(name[-1]), env)
                times[name].append(r["export"])
                counts.setdefault(name, (r["rows"], r["rowsByQueue"]))
                print(f"  {r['export']:.1f} s export (+{r['session']:.1f} s session start), {r['rows']} rows",
                      flush=True)
                shutil.rmtree(out, ignore_errors=True)
            one, two = ceiling_run(env)
            ceilings.append(one / two)
            print(f"  ceiling (pure-Python CPU in Spark tasks, 1 -> 2 partitions): {one:.1f} s / {two:.1f} s "
                  f"= {one / two:.2f}x", flush=True)
        same = len({json.dumps(v, sort_keys=True) for v in counts.values()}) == 1
        med = {k: statistics.median(v) for k, v in times.items() if v}
        print()
        for k, v in med.items():
            print(f"{k:8} median {v:6.1f} s  ({', '.join(f'{x:.1f}' for x in times[k])})"
                  f"  {args.rows / v:,.0f} rows/s")
        ratio = med["spark-1"] / med["spark-2"]
        print(f"Spark 2 partitions vs 1: {ratio:.2f}x (target >= 1.6x) {'MET' if ratio >= 1.6 else 'NOT MET'}; "
              f"this machine's ceiling meanwhile: median {statistics.median(ceilings):.2f}x")
        if "local" in med:
            print(f"Spark 2 partitions vs local engine: {med['local'] / med['spark-2']:.2f}x")
        print(f"same rows in every output: {same}")
    finally:
        if pg is not None:
            from tests.pg_cluster import stop_cluster

            stop_cluster(pg)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
