"""Where LevelDB ``verify`` spends its time: CPU seconds of each phase of ``verify_store`` on one store, best
of --runs (a profile of the phases, not a benchmark: each phase's function is wrapped with a timer; the
thread CPU clock counts the scan-ahead thread apart from the main one); then the floor: cat's CPU seconds
against those of the C log scan alone, which verify cannot go below.

Usage: .venv/bin/python bench/leveldb_phases.py --store DIR [--runs 3]
"""
from __future__ import annotations

import argparse
import functools
import mmap
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from amqtool.engines.leveldb import index as I, load as LD, verify as V
from amqtool.engines.leveldb.logfiles import log_files, scan
from amqtool.store.layout import detect

acc: dict = defaultdict(float)
calls: dict = defaultdict(int)


def timed(name, fn):
    @functools.wraps(fn)
    def w(*a, **k):
        c = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            acc[name] += time.thread_time() - c
            calls[name] += 1
    return w


# (phase name, module, attribute): nested phases are subtracted from their parent in the table
PHASES = [
    ("verify_store (main thread)", V, "verify_store"),
    ("  load", V, "load"),
    ("    read_index (snapshot)", LD, "read_index"),
    ("      read_log (write-ahead log)", I, "read_log"),
    ("      apply_log (its write batches)", I, "apply_log"),
    ("    scan of the last log file", LD, "scan"),
    ("    replay from the snapshot", LD, "_replay"),
    ("    load collections", LD, "_load_collections"),
    ("  verify_state", V, "verify_state"),
    ("    _scan_file (findings, found)", V, "_scan_file"),
    ("      scan (files not scanned ahead)", V, "scan_log"),
    ("    units after the cut", V, "_units_after"),
    ("    index evidence", V, "_index_evidence"),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for _name, mod, attr in PHASES:
        setattr(mod, attr, timed(_name, getattr(mod, attr)))
    store = detect(Path(args.store))
    files = sorted(Path(args.store).glob("*.log"))
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    best: dict = {}
    walls = []
    for _ in range(args.runs + 1):
        acc.clear()
        calls.clear()
        cpu, t = time.process_time(), time.perf_counter()
        V.verify_store(store)
        walls.append((time.perf_counter() - t, time.process_time() - cpu))
        for k, v in acc.items():
            best[k] = min(best.get(k, v), v)
    walls = walls[1:]  # the first run warms imports and caches
    total = best["verify_store (main thread)"]
    print(f"{'phase':42s} {'cpu s':>7s} {'calls':>6s}")
    for name, _m, _a in PHASES:
        if name in best:
            print(f"{name:42s} {best[name]:7.3f} {calls[name]:6d}")
    wall, cpu = min(walls)
    print(f"process: wall {wall:.3f} s, cpu {cpu:.3f} s (all threads); main thread {total:.3f} s; the rest "
          f"is the scan-ahead thread ({max(0.0, cpu - total):.3f} s)")
    # the floor: cat's CPU seconds against the log scan alone (framing and CRC-32 of every record, mapped as
    # verify maps them), best of --runs each, in this run
    cat = scan_only = float("inf")
    for _ in range(args.runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cat = min(cat, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        c = time.thread_time()
        for f in log_files(Path(store.log_dir())):
            if f.size:
                with open(f.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    scan(m, f.position)
        scan_only = min(scan_only, time.thread_time() - c)
    print(f"floor: cat cpu {cat:.3f} s, the log scan alone {scan_only:.3f} s (cat/scan {cat / scan_only:.2f}); "
          f"cat/verify cpu {cat / cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
