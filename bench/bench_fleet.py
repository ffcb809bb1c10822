#!/usr/bin/env python3
"""A fleet export with Spark against the local engine (issue 15 targets): a fleet of --stores stores
(Artemis demo stores of --size, two KahaDB fixture copies, one damaged store, one empty directory) exported
on a standalone cluster on loopback (a master and two workers of one core each, started here and stopped
by PID) with one worker's core (spark.cores.max=1) and with both, in one run; and each store's
single-store local-engine export, timed one after the other.

Targets: two workers >= 1.8x one, and at least 95% of this machine's own two-process ceiling (the stores'
local exports in one process, then shared by two processes at once, measured in the same run); the fleet on
two workers within 1.3x of the sum of the stores' local times divided by the cores used. Also (--memory): the driver's peak RSS (the Python driver process,
VmHWM) for a fleet of 16 and of 64 small stores on local[2], which must not grow with the stores.

Usage: .venv/bin/python bench/bench_fleet.py [--stores 16] [--size 64MiB] [--work DIR] [--runs N] [--keep]
                                             [--local] [--no-ship]
       .venv/bin/python bench/bench_fleet.py --memory [--work DIR]

Each Spark export is a fresh driver process; the session start (JVM, executors registered, each having
fetched and unpacked the shipped environment and imported the engine in a warm-up job) is reported apart
and the ratios are taken on the export alone (what a nightly job pays once per fleet, not per store). The
1-minute load average is printed before each run: other work on this machine skews the figures. The rows of every store are checked equal across the runs (the stores table).
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from amqtool.engines.artemis.create import parse_size  # noqa: E402

KAHADB = Path(os.environ.get("AMQTOOL_FIXTURES") or REPO.parent / "shared" / "fixtures") / "kahadb"
if not KAHADB.is_dir():
    KAHADB = Path("/work/shared/fixtures/kahadb")


def build_fleet(root: Path, stores: int, size: int) -> list[Path]:
    """``stores`` inputs: demo stores (seeds 1..), a damaged one, two KahaDB copies, an empty directory."""
    from amqtool.engines.artemis.demo import create_demo

    root.mkdir(parents=True, exist_ok=True)
    paths = []
    kaha = [ds for ds in ("basic", "mkahadb") if (KAHADB / ds).is_dir()]
    demos = stores - 1 - len(kaha)  # the damaged store is the last demo store; then KahaDB, then the empty one
    for i in range(demos):
        p = root / f"site-{i % 4}" / f"broker-{i:02d}"
        if not p.exists():
            create_demo(p, size, seed=i + 1)
        paths.append(p)
    damaged = paths[-1]  # the last demo store: a journal file's header no broker wrote
    jf = sorted((damaged / "data" / "journal").glob("*.amq"))[0]
    with open(jf, "r+b") as fh:
        fh.write(b"\xff" * 16)
    for ds in kaha:
        p = root / "site-k" / ds
        if not p.exists():
            shutil.copytree(KAHADB / ds, p)
        paths.append(p)
    empty = root / "site-e" / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    paths.append(empty)
    return paths


def _load() -> str:
    return "load %.2f" % os.getloadavg()[0]


def local_times(paths: list[Path], work: Path) -> tuple[float, dict[str, int], float]:
    """Each store's single-store local export, one after the other: (sum of wall times, rows by path, CPU
    seconds of this process meanwhile -- the local engine writes its tables on a second thread, so it uses
    more than one core)."""
    import resource

    from amqtool.engines.export import ExportRequest, run_export
    from amqtool.errors import AmqtoolError

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    total, rows = 0.0, {}
    cpu0 = cpu()
    for i, p in enumerate(paths):
        out = work / f"local-{i}"
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        try:
            doc, _ = run_export(ExportRequest(str(p), str(out), "parquet", engine="local"))
            rows[str(p)] = doc["rows"]
        except AmqtoolError:
            rows[str(p)] = 0  # the empty directory: not a store
        total += time.perf_counter() - t
        shutil.rmtree(out, ignore_errors=True)
    return total, rows, cpu() - cpu0


def _export_share(paths: list[str], out: str, done) -> None:
    """A process's share of the fleet's local exports (the ceiling's unit of work); puts its wall time (after
    its imports) on ``done``."""
    from amqtool.engines.export import ExportRequest, run_export
    from amqtool.errors import AmqtoolError

    t = time.perf_counter()
    for i, p in enumerate(paths):
        o = f"{out}-{i}"
        try:
            run_export(ExportRequest(p, o, "parquet", engine="local"))
        except AmqtoolError:
            pass  # the empty directory: not a store
        shutil.rmtree(o, ignore_errors=True)
    done.put(time.perf_counter() - t)


def ceiling(paths: list[Path], work: Path) -> tuple[float, float]:
    """This machine's own two-process ceiling for the fleet's work: the stores' local exports in one fresh
    process, then shared by two at once (largest first, to the less loaded, by journal bytes); no Spark.
    Two processes do not run twice as fast as one on this virtual machine, and that bounds what Spark's two
    cores can do. Returns (one process, the slower of two) seconds."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    sizes = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in paths}
    shares: list[list[str]] = [[], []]
    loads = [0, 0]
    for p in sorted(paths, key=lambda p: -sizes[p]):
        i = loads.index(min(loads))
        shares[i].append(str(p))
        loads[i] += sizes[p]
    times = []
    for groups in ([[str(p) for p in paths]], shares):
        done = spawn.Queue()
        procs = [spawn.Process(target=_export_share, args=(g, str(work / f"ceiling-{j}"), done))
                 for j, g in enumerate(groups)]
        for p in procs:
            p.start()
        took = [done.get() for _ in procs]
        for p in procs:
            p.join()
        times.append(max(took))
    return times[0], times[1]


DRIVER = """
import json, os, sys, time
sys.path.insert(0, {repo!r})
from amqtool.engines.export import spark as S
conf = S.session_conf
S.session_conf = lambda master, **kw: dict(conf(master, **kw), **{extra!r})
from amqtool.engines.export.fleet import FleetRequest, run_fleet_export
from amqtool.engines.export import spark_export as E
jobs = []
run_job = E.run_job
def timed_job(sc, items, func, progress):  # each job's wall time and the sum of its tasks' own seconds
    t = time.perf_counter()
    results = run_job(sc, items, func, progress)
    jobs.append([len(items), time.perf_counter() - t, sum(r.seconds for r in results)])
    return results
E.run_job = timed_job
t0 = time.perf_counter()
spark = S.get_session({master!r}, log_path={log!r}, ship={ship!r})
sc = spark.sparkContext
while sc._jsc.sc().getExecutorMemoryStatus().size() < 1 + {executors}:
    time.sleep(0.2)
def warm(_):  # every executor fetches and unpacks the shipped archive and imports the engine, before timing
    import amqtool.engines.export.spark_export, amqtool.engines.export.local, pyarrow.parquet
    time.sleep(0.3)
    return 1
n = 4 * max(1, {executors})
sc.parallelize(range(n), n).map(warm).count()
os.sync()  # the unpacked environments' dirty pages (~250 MB an executor) written back before timing
t1 = time.perf_counter()
doc, verdict = run_fleet_export(FleetRequest(stores={stores!r}, out={out!r}, engine="spark"), spark_session=spark)
t2 = time.perf_counter()
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({{"session": t1 - t0, "export": t2 - t1, "rows": {{s["path"]: s["rows"] for s in doc["stores"]}},
                  "verdicts": doc["storesByVerdict"], "hwm_kib": int(hwm), "jobs": jobs}}))
"""


def spark_run(paths: list[Path], out: Path, master: str, executors: int, extra: dict, ship: bool = True) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    code = DRIVER.format(repo=str(REPO), master=master, log=str(out) + ".spark.log", executors=executors,
                         stores=[str(p) for p in paths], out=str(out), extra=extra, ship=ship)
    env = dict(os.environ, AMQTOOL_SPARK_DRIVER_MEMORY="1g")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"spark run failed: {p.stderr[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def start_cluster(work: Path):
    """A master and two one-core workers on loopback (the integration tests' way); returns (url, procs)."""
    import pyspark

    from tests.integration.test_spark_standalone import _free_port, _wait_port

    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(work / "spark-work"))
    port, ui = _free_port(), _free_port()
    procs = []
    mlog = work / "master.log"
    procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(ui)], env=env,
                                  stdout=open(mlog, "wb"), stderr=subprocess.STDOUT))
    _wait_port(port, procs[0], mlog)
    url = f"spark://127.0.0.1:{port}"
    for i in range(2):
        wlog = work / f"worker-{i}.log"
        wport, wui = _free_port(), _free_port()
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--port", str(wport), "--webui-port", str(wui), "--cores", "1",
                                       "--memory", "1g", url], env=env, stdout=open(wlog, "wb"),
                                      stderr=subprocess.STDOUT))
        _wait_port(wport, procs[-1], wlog)
    return url, procs


def stop(procs) -> None:
    from tests.integration.test_spark_standalone import _stop

    for p in reversed(procs):
        _stop(p)


def memory(work: Path) -> int:
    """Driver peak RSS for 16 and 64 small stores on local[2]."""
    stores = build_fleet(work / "small", 64, 4 << 20)
    rows = []
    for n in (16, 64):
        sel = stores[:n - 3] + stores[-3:]  # the KahaDB copies and the empty directory in both
        print(f"# {n} stores ({_load()})", flush=True)
        r = spark_run(sel, work / f"mem-{n}", "local[2]", 0, {})
        rows.append((n, r["hwm_kib"], r["export"]))
    print("stores  driver peak RSS  export")
    for n, hwm, t in rows:
        print(f"{n:6d}  {hwm / 1024:11.1f} MiB  {t:6.1f} s")
    print(f"peak RSS 64 / 16 stores: {rows[1][1] / rows[0][1]:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=16)
    ap.add_argument("--size", default="64MiB", help="each demo store's size (default 64MiB)")
    ap.add_argument("--work", default="/tmp/amqtool-bench-fleet")
    ap.add_argument("--runs", type=int, default=1, help="rounds (default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the fleet")
    ap.add_argument("--memory", action="store_true", help="driver peak RSS, 16 vs 64 small stores")
    ap.add_argument("--local", action="store_true", help="Spark local[1] and local[2] instead of the cluster")
    ap.add_argument("--no-ship", action="store_true", help="the workers use this venv's Python (same machine)")
    args = ap.parse_args()
    if args.stores < 5 or args.runs < 1:
        raise SystemExit("--stores must be at least 5 and --runs at least 1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.memory:
        return memory(work)
    size = parse_size(args.size)
    t = time.perf_counter()
    paths = build_fleet(work / "fleet", args.stores, size)
    gib = sum(f.stat().st_size for p in paths for f in p.rglob("*") if f.is_file()) / 2**30
    print(f"# fleet: {len(paths)} stores, {gib:.2f} GiB"
          f" ({time.perf_counter() - t:.0f} s to build)", flush=True)
    url, procs = (None, []) if args.local else start_cluster(work)
    results = {"local": [], "one": [], "two": []}
    try:
        for r in range(args.runs):
            print(f"# round {r + 1}: local engine, store by store ({_load()})", flush=True)
            total, local_rows, cpu_s = local_times(paths, work)
            results["local"].append(total)
            results.setdefault("local_cpu", []).append(cpu_s)
            print(f"# round {r + 1}: the two-process ceiling, local engine ({_load()})", flush=True)
            c1, c2 = ceiling(paths, work)
            results.setdefault("ceiling", []).append(c1 / c2)
            print(f"  one process {c1:.1f} s, two at once {c2:.1f} s: {c1 / c2:.2f}x")
            for key, cores in (("one", 1), ("two", 2)):
                print(f"# round {r + 1}: Spark, {cores} worker(s) ({_load()})", flush=True)
                if args.local:
                    run = spark_run(paths, work / f"out-{key}", f"local[{cores}]", 0, {})
                else:
                    run = spark_run(paths, work / f"out-{key}", url, cores, {"spark.cores.max": str(cores)},
                                    ship=not args.no_ship)
                results[key].append(run["export"])
                if run["rows"] != local_rows:
                    print(f"ROWS DIFFER ({key}): {run['rows']} != {local_rows}")
                    return 1
                print(f"  session {run['session']:.1f} s, export {run['export']:.1f} s, verdicts {run['verdicts']}")
                for n, wall, own in run["jobs"]:
                    if n:
                        print(f"    job of {n} tasks: {wall:.2f} s; the tasks' own time {own:.2f} s")
    finally:
        stop(procs)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    local, one, two = (statistics.median(results[k]) for k in ("local", "one", "two"))
    print(f"local engine, sum of the stores' times   {local:7.1f} s")
    print(f"Spark, one worker (1 core)               {one:7.1f} s")
    print(f"Spark, two workers (2 cores)             {two:7.1f} s")
    print(f"two workers / one: {one / two:.2f}x (target >= 1.8x)")
    ceil = statistics.median(results["ceiling"])
    print(f"this machine's two-process ceiling (local engine, fleet shared by two processes): {ceil:.2f}x; "
          f"Spark's 1 -> 2 scaling is {one / two / ceil:.0%} of it (target >= 95%)")
    print(f"two workers against local sum / 2 cores: {two / (local / 2):.2f}x (target <= 1.3x)")
    print(f"one worker against local sum: {one / local:.2f}x")
    cpu_s = statistics.median(results["local_cpu"])
    print(f"local engine's CPU time (it writes on a second thread): {cpu_s:.1f} s = {cpu_s / local:.2f} cores; "
          f"two workers against that / 2 cores: {two / (cpu_s / 2):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
