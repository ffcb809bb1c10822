"""Where LevelDB ``verify`` spends its time: CPU seconds of each phase of ``verify_store`` on one store, best
of --runs (a profile of the phases, not a benchmark: each phase's function is wrapped with a timer; the
thread CPU clock counts the scan-ahead thread apart from the main one).

Usage: .venv/bin/python bench/leveldb_phases.py --store DIR [--runs 3]
"""
from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from amqtool.engines.leveldb import index as I, load as LD, verify as V
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
