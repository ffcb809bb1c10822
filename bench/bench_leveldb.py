"""Benchmark: LevelDB stores. `verify` against `cat` of the same log files, and `create DEST --from LEVELDB`
throughput, measured in one run on the largest LevelDB store available.

The store: ``--store PATH``, else the largest ``*/store`` under ``AMQTOOL_TEST_LEVELDB_STORES`` (the generated
stores, one of them >= 256 MiB written by the real LevelDBStore), else the fixture (far too small for the
targets: the figures are then only a smoke run). Both sides run warm (the files are read once before
timing); best of --runs. Prints MiB/s for cat and verify and their ratio (target >= 0.5), the CPU seconds
of each and their ratio (the machines are shared: a loaded box stretches wall times; where the time goes:
bench/leveldb_phases.py), and create --from's MB/s of log bytes
read (target >= 100 MB/s) with its messages per second. With ``--cold`` both sides are also timed with the
store's files out of the page cache (``posix_fadvise(DONTNEED)`` on each of its files before each run: only
this store's pages are dropped, nothing else on the machine).

Usage: .venv/bin/python bench/bench_leveldb.py [--store DIR] [--runs 3] [--keep-dest] [--cold]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verify_vs_cat import race  # bench/, the script's own directory

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "leveldb" / "basic" / "store"


def log_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.glob("*.log"))


def evict(store: Path) -> None:
    """Drop the store's files (logs and index) from the page cache (clean pages: nothing is written)."""
    for p in store.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def pick_store(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    extra = os.environ.get("AMQTOOL_TEST_LEVELDB_STORES")
    cands = [p for p in Path(extra).glob("*/store") if p.is_dir()] if extra and Path(extra).is_dir() else []
    return max(cands, key=log_bytes) if cands else FIXTURE


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep-dest", action="store_true")
    ap.add_argument("--cold", action="store_true", help="also time cat and verify with the store out of the page cache")
    args = ap.parse_args()
    store_dir = pick_store(args.store)
    from amqtool.engines.leveldb.verify import verify_store
    from amqtool.engines.migrate.write import create_from
    from amqtool.store.layout import detect

    store = detect(store_dir)
    files = sorted(store_dir.glob("*.log"))
    nbytes = sum(f.stat().st_size for f in files)
    mib = nbytes / 2**20
    cat_cmd = ["cat", *map(str, files)]
    r = race(files, lambda: verify_store(store), args.runs)
    best_cat, cpu_cat, best_verify, cpu_verify = r.best_cat, r.cpu_cat, r.best_verify, r.cpu_verify
    findings, summary = r.result
    cold_cat = cold_verify = float("inf")
    if args.cold:
        for _ in range(args.runs):
            evict(store_dir)
            t = time.perf_counter()
            subprocess.run(cat_cmd, stdout=subprocess.DEVNULL, check=True)
            cold_cat = min(cold_cat, time.perf_counter() - t)
            evict(store_dir)
            t = time.perf_counter()
            verify_store(store)
            cold_verify = min(cold_verify, time.perf_counter() - t)
        subprocess.run(cat_cmd, stdout=subprocess.DEVNULL, check=True)  # warm again
    cli = [str(ROOT / ".venv" / "bin" / "amqtool"), "verify", str(store_dir), "--format", "json", "-q"]
    best_cli = float("inf")
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run(cli, stdout=subprocess.DEVNULL)
        best_cli = min(best_cli, time.perf_counter() - t)
    tmp = Path(tempfile.mkdtemp(prefix="leveldb-bench-"))
    best_create = float("inf")
    doc = {}
    try:
        for i in range(max(1, args.runs - 1)):
            dest = tmp / f"artemis-{i}"
            t = time.perf_counter()
            doc = create_from(dest, store_dir)
            best_create = min(best_create, time.perf_counter() - t)
            if not args.keep_dest:
                shutil.rmtree(dest)
    finally:
        if not args.keep_dest:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"store: {store_dir} ({len(files)} log files, {mib:.0f} MiB, {summary['records']} records, "
          f"{summary['messages']} messages, {len(findings)} findings); load average {os.getloadavg()[0]:.1f}")
    if nbytes < 256 * 2**20:
        print("note: the store is smaller than the 256 MiB the targets are set for")
    print(f"cat          : {best_cat:.3f} s  {mib / best_cat:8.0f} MiB/s  (cpu {cpu_cat:.3f} s)")
    print(f"verify       : {best_verify:.3f} s  {mib / best_verify:8.0f} MiB/s  (cpu {cpu_verify:.3f} s)")
    print(f"verify (CLI) : {best_cli:.3f} s  {mib / best_cli:8.0f} MiB/s  (a fresh process)")
    print(f"ratio verify/cat throughput: {best_cat / best_verify:.2f} (target >= 0.5); CLI {best_cat / best_cli:.2f}")
    # on a loaded machine every process gets a share of the cores and both walls stretch: the ratio of CPU
    # seconds is then the steadier figure (verify's scan thread runs beside its main thread: on an idle
    # machine its wall is the longer of the two, not their sum)
    print(f"ratio of CPU seconds cat/verify: {cpu_cat / cpu_verify:.2f}")
    if args.cold:
        print(f"cold cat     : {cold_cat:.3f} s  {mib / cold_cat:8.0f} MiB/s")
        print(f"cold verify  : {cold_verify:.3f} s  {mib / cold_verify:8.0f} MiB/s; ratio {cold_cat / cold_verify:.2f}")
    print(f"create --from: {best_create:.3f} s  {nbytes / 1e6 / best_create:8.1f} MB/s of log  "
          f"({doc.get('messages', 0) / best_create:,.0f} messages/s, {doc.get('bodyBytes', 0) / 1e6 / best_create:.1f} "
          f"MB/s of bodies; target >= 100 MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
