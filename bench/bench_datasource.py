#!/usr/bin/env python3
"""The Spark data source (``spark.read.format("amqtool")``) against the local engine's export, on one
``create --demo`` store, in one run: ``df.count()`` and ``df.write.parquet`` with Spark ``local[2]``, each as a
ratio of the local engine's ``amqtool export --format parquet`` of the same store (issue 29's target: at most
1.2x each).

Usage: .venv/bin/python bench/bench_datasource.py [--store DIR | --size 1GiB] [--work DIR] [--runs N] [--keep]
                                                  [--conf KEY=VALUE ...]

Without --store a demo store of --size is created first (deterministic, seed 1) under --work. Each round
runs the local engine's export (in this process: store detection, load, decode, write, fsync, rename), then
one Spark process (a fresh JVM each round): its session start (JVM launch) is reported apart and left out
of the ratios, as it is paid once per session; then ``df.count()`` and ``df.write.parquet`` on the same
session, each a query of its own (each loads the store again in its tasks: the data source keeps no state
between queries). The ratios are taken on the medians of the rounds; the 1-minute load average is printed
before each run (other work on this machine skews the figures), and the CPU seconds each side used (the
local engine's process; the Spark process, its JVM and Python workers, from /proc) beside the wall times.
Also checks that the counts agree.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqtool.engines.artemis.create import parse_size  # noqa: E402
from amqtool.engines.export import ExportRequest, run_export  # noqa: E402


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) used so far by the processes under ``root`` (not ``root`` itself): the
    JVM and its Python workers, read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
        times[int(d)] = int(fields[11]) + int(fields[12])  # utime, stime
    total, todo = 0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += children.get(pid, [])
    return total / tick


def _spark_round(store: Path, out: Path, master: str, extra: dict[str, str] | None = None) -> dict:
    code = f"""
import json, os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from amqtool.engines.export import spark as S
from amqtool.engines.export.spark import get_session
conf = S.session_conf
S.session_conf = lambda master, **kw: dict(conf(master, **kw), **{extra or {}!r})
from amqtool.spark import register
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from bench_datasource import tree_cpu
me = os.getpid()
def cpu():
    return tree_cpu(me) + time.process_time()
t0 = time.perf_counter()
spark = get_session({master!r}, log_path={str(out) + '.spark.log'!r})
spark.range(1).count()
register(spark)
t1, c1 = time.perf_counter(), cpu()
n = spark.read.format("amqtool").load({str(store)!r}).count()
t2, c2 = time.perf_counter(), cpu()
spark.read.format("amqtool").load({str(store)!r}).write.parquet({str(out)!r})
t3, c3 = time.perf_counter(), cpu()
parts = spark.read.format("amqtool").load({str(store)!r}).rdd.getNumPartitions()
spark.stop()
print(json.dumps({{"session": t1 - t0, "count": t2 - t1, "write": t3 - t2, "countCpu": c2 - c1,
                   "writeCpu": c3 - c2, "rows": n, "partitions": parts}}))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"spark round failed: {p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="an existing store (default: create a demo store)")
    ap.add_argument("--size", default="1GiB", help="demo size when creating one (default 1GiB)")
    ap.add_argument("--work", default="/tmp/amqtool-bench-datasource", help="work directory")
    ap.add_argument("--runs", type=int, default=1, help="interleaved rounds (default 1)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting over the session's (repeatable), e.g. spark.driver.extraJavaOptions=")
    args = ap.parse_args()
    extra = dict(c.split("=", 1) for c in args.conf)

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.store:
            store = Path(args.store)
        else:
            from amqtool.engines.artemis.demo import create_demo

            store = work / "store"
            if not store.exists():
                t = time.perf_counter()
                create_demo(store, parse_size(args.size), seed=1)
                print(f"created a {args.size} demo store in {time.perf_counter() - t:.1f} s")
        local, count, write, session = [], [], [], []
        local_cpu, count_cpu, write_cpu = [], [], []
        for rnd in range(1, args.runs + 1):
            out = work / f"local-{rnd}"
            print(f"round {rnd}: load average before the local engine: {_load()}")
            t, c = time.perf_counter(), time.process_time()
            doc, _ = run_export(ExportRequest(str(store), str(out), "parquet", engine="local"))
            local.append(time.perf_counter() - t)
            local_cpu.append(time.process_time() - c)
            shutil.rmtree(out)
            print(f"round {rnd}: local engine export {local[-1]:.2f} s ({local_cpu[-1]:.2f} s CPU), {doc['rows']} rows")
            print(f"round {rnd}: load average before Spark {args.master}: {_load()}")
            r = _spark_round(store, work / f"spark-{rnd}", args.master, extra)
            shutil.rmtree(work / f"spark-{rnd}", ignore_errors=True)
            if r["rows"] != doc["rows"]:
                raise SystemExit(f"row counts differ: data source {r['rows']}, export {doc['rows']}")
            count.append(r["count"])
            write.append(r["write"])
            session.append(r["session"])
            count_cpu.append(r["countCpu"])
            write_cpu.append(r["writeCpu"])
            print(f"round {rnd}: Spark session {r['session']:.2f} s, df.count() {r['count']:.2f} s "
                  f"({r['countCpu']:.2f} s CPU), df.write.parquet {r['write']:.2f} s ({r['writeCpu']:.2f} s CPU; "
                  f"{r['partitions']} partitions)")
        lm, cm, wm = statistics.median(local), statistics.median(count), statistics.median(write)
        print(f"medians of {args.runs} round(s): local engine {lm:.2f} s, df.count() {cm:.2f} s, "
              f"df.write.parquet {wm:.2f} s, Spark session start {statistics.median(session):.2f} s (not in the ratios)")
        print(f"ratio df.count() / local export: {cm / lm:.2f}x (target <= 1.2x)")
        print(f"ratio df.write.parquet / local export: {wm / lm:.2f}x (target <= 1.2x)")
        lc = statistics.median(local_cpu)
        print(f"CPU seconds (medians; what a loaded machine does not skew as much): local export {lc:.2f}, "
              f"df.count() {statistics.median(count_cpu):.2f} ({statistics.median(count_cpu) / lc:.2f}x), "
              f"df.write.parquet {statistics.median(write_cpu):.2f} ({statistics.median(write_cpu) / lc:.2f}x)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
