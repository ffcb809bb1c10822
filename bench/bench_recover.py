#!/usr/bin/env python3
"""Benchmark: `amqtool recover -o DEST` of an undamaged `create --demo` store against `amqtool compact -o DEST`
of the same store (issue 17: recover at most 1.5x compact -o).

Creates a demo store of SIZE (default 1GiB) once, then for each run, alternating the two commands so cache
state is shared fairly:

* ``amqtool compact STORE -o DEST --quiet`` (load, layout, write, fsync, carry pages and large messages,
  rename);
* ``amqtool recover STORE -o DEST --quiet`` (the same, plus decoding of what the scan skipped, which is
  nothing on an undamaged store, EVENT listing, verify's page and large-message checks);

each in a subprocess under /usr/bin/time -v (wall, CPU and peak RSS), DEST removed after each run. Prints the
medians and the ratio recover/compact. Timing goes here, never in tests.

Usage: bench/bench_recover.py [--size 1GiB] [--runs 3] [--dir D] [--reuse]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AMQTOOL = str(REPO / ".venv" / "bin" / "amqtool")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_journal import gnu_time_usage  # noqa: E402  (same directory; one reader of /usr/bin/time -v)


def _timed(argv: list[str], ok=(0,)) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one run."""
    gnu_time = "/usr/bin/time"
    use_time = os.path.exists(gnu_time)
    t0 = time.perf_counter()
    r = subprocess.run(([gnu_time, "-v"] if use_time else []) + argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode not in ok:
        sys.stderr.write(r.stderr[-2000:])
        raise SystemExit(f"{' '.join(argv)} failed with exit {r.returncode}")
    cpu = rss = float("nan")
    if use_time:
        cpu, peak = gnu_time_usage(r.stderr)
        rss = float("nan") if peak is None else peak
    return wall, cpu, rss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true", help="reuse a demo store already in --dir")
    args = ap.parse_args()
    if args.runs < 1:
        raise SystemExit("--runs must be 1 or more")
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-recover-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    if not (args.reuse and store.exists()):
        if store.exists():
            shutil.rmtree(store)
        t0 = time.perf_counter()
        subprocess.run([AMQTOOL, "create", str(store), "--demo", args.size, "--quiet"], check=True,
                       stdout=subprocess.DEVNULL)
        print(f"demo store of {args.size} created in {time.perf_counter() - t0:.1f} s at {store}")
    size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    results: dict[str, list[tuple[float, float, float]]] = {"compact -o": [], "recover -o": []}
    for i in range(args.runs):
        for name, argv in (("compact -o", [AMQTOOL, "compact", str(store), "-o", str(work / "dest"), "--quiet"]),
                           ("recover -o", [AMQTOOL, "recover", str(store), "-o", str(work / "dest"), "--quiet"])):
            results[name].append(_timed(argv))
            shutil.rmtree(work / "dest")
            subprocess.run(["sync"], check=False)
    print(f"store: {size / 2**30:.2f} GiB on disk, {args.runs} run(s) each, medians:")
    print(f"{'command':<12} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}")
    med = {}
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        rss = statistics.median(r[2] for r in rows)
        med[name] = wall
        print(f"{name:<12} {wall:>8.2f} {cpu:>8.2f} {rss:>9.1f}")
    ratio = med["recover -o"] / med["compact -o"]
    print(f"recover/compact wall ratio: {ratio:.2f} (target <= 1.5)")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
