#!/usr/bin/env python3
"""Benchmark: `amqtool compact` of a `create --demo` store against copying just the live bytes.

For each live ratio (default 10% and 30%) this creates a demo store of SIZE (default 1GiB) with
``amqtool create --demo SIZE --live-ratio R``, then in the same run:

* times ``amqtool compact <store> --format json`` (in place, Artemis' protocol, every fsync included) in a
  subprocess, with its peak RSS (``ru_maxrss`` of the child);
* times ``cp`` of one file holding as many bytes as the compaction's live bytes, without and with a final
  ``sync -f`` of the copy (compaction fsyncs its output, so "cp+sync" is the fair anchor);
* prints the ratios. Target (issue #3): compaction within 3x of the copy, memory proportional to live
  records rather than to journal size.

Timing goes here, never in tests. Usage: bench/bench_compact.py [--size 1GiB] [--ratios 0.1,0.3] [--dir D]
                                                         [--runs 3] [--reuse]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AMQTOOL = str(REPO / ".venv" / "bin" / "amqtool")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_journal import gnu_time_usage  # noqa: E402  (same directory; one reader of /usr/bin/time -v)


def _run(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"{' '.join(argv)} failed with exit {r.returncode}")
    return elapsed, max(peak_kib, before) / 1024.0, r


def _peak_of(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run under /usr/bin/time -v when available for a per-process peak RSS (RUSAGE_CHILDREN is a max over
    every child so far)."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    if os.path.exists(gnu_time):
        t0 = time.perf_counter()
        r = subprocess.run([gnu_time, "-v"] + argv, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if r.returncode not in (0, 1):  # 1: --dry-run says compaction is needed
            sys.stderr.write(r.stderr)
            raise SystemExit(f"{' '.join(argv)} failed with exit {r.returncode}")
        cpu, rss = gnu_time_usage(r.stderr)
        _CPU[0] = cpu
        return elapsed, 0.0 if rss is None else rss, r
    _CPU[0] = float("nan")
    return _run(argv)


_CPU = [0.0]  # user + system seconds of the last _peak_of child (the machine may be shared: wall > CPU)


def _cp(size: int, workdir: Path) -> tuple[float, float]:
    src = workdir / "live-bytes.src"
    with open(src, "wb") as fh:
        chunk = os.urandom(1 << 20)
        left = size
        while left > 0:
            fh.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # warm, as the journal is
    dst = workdir / "live-bytes.dst"
    plain = synced = float("inf")
    for _ in range(3):  # best of three: the anchor should not be flattered by a busy machine
        t0 = time.perf_counter()
        subprocess.run(["cp", str(src), str(dst)], check=True)
        plain = min(plain, time.perf_counter() - t0)
        os.unlink(dst)
        t0 = time.perf_counter()
        subprocess.run(["cp", str(src), str(dst)], check=True)
        subprocess.run(["sync", "-f", str(dst)], check=True)
        synced = min(synced, time.perf_counter() - t0)
        os.unlink(dst)
    os.unlink(src)
    return plain, synced


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--ratios", default="0.1,0.3")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="keep the demo stores in --dir and reuse them next time")
    ap.add_argument("--runs", type=int, default=3, help="compactions per store, each on a fresh copy (best kept)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-compact-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for ratio in [float(x) for x in args.ratios.split(",")]:
            store = work / f"demo-{ratio}"
            created = 0.0
            if store.exists() and not args.reuse:
                shutil.rmtree(store)
            if not store.exists():
                t0 = time.perf_counter()
                subprocess.run([AMQTOOL, "create", str(store), "--demo", args.size, "--live-ratio", str(ratio), "-q",
                                "--format", "json"], check=True, stdout=subprocess.DEVNULL)
                created = time.perf_counter() - t0
            load_before = os.getloadavg()[0]
            dry_s, dry_rss, dry = _peak_of([AMQTOOL, "compact", str(store), "--dry-run", "-q", "--format", "json"])
            dry_cpu = _CPU[0]
            # Each run compacts a fresh copy of the store, written back to disk first (`sync`), so that the
            # compaction's fsyncs pay for its own output only, not for the copy's (or create's) dirty pages.
            best = None
            for _ in range(args.runs):
                copy = work / "compact-run"
                if copy.exists():
                    shutil.rmtree(copy)
                subprocess.run(["cp", "-a", str(store), str(copy)], check=True)
                subprocess.run(["sync"], check=True)
                subprocess.run(["cat"] + [str(p) for p in sorted((copy / "data" / "journal").iterdir())],
                               stdout=subprocess.DEVNULL, check=True)  # warm, as cp's source is
                elapsed, rss, r = _peak_of([AMQTOOL, "compact", str(copy), "-q", "--format", "json"])
                if best is None or elapsed < best[0]:
                    best = (elapsed, rss, r, _CPU[0])
                shutil.rmtree(copy)
            elapsed, rss, r, cpu = best
            doc = json.loads(r.stdout)
            msgs = [j for j in doc["journals"] if j["journal"] == "messages"][0]
            live_bytes = sum(j["liveBytes"] for j in doc["journals"])
            written = sum(j["after"]["dataFiles"] * j["settings"]["fileSize"] for j in doc["journals"])
            cp_plain, cp_sync = _cp(live_bytes, work)
            rows.append((ratio, msgs, elapsed, rss, dry_s, dry_rss, live_bytes, written, cp_plain, cp_sync, created,
                         cpu, dry_cpu, load_before))
            if not args.reuse:
                shutil.rmtree(store)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"amqtool compact vs cp of the live bytes ({args.size} demo store, warm page cache)")
    print(f"{'live':>5} {'journal MiB':>11} {'files':>6} {'liveRecs':>9} {'live MiB':>9} {'written MiB':>11} "
          f"{'compact s':>9} {'dry-run s':>9} {'cp s':>6} {'cp+sync s':>9} {'x cp':>6} {'x cp+sync':>9} "
          f"{'RSS MiB':>8} {'dry RSS':>8} {'CPU s':>6} {'dry CPU':>7} {'load':>5}")
    for ratio, m, el, rss, dry_s, dry_rss, lb, wr, cp, cps, _, cpu, dry_cpu, load in rows:
        print(f"{ratio:>5.0%} {m['before']['bytes'] / 2**20:>11.0f} {m['before']['files']:>6} {m['liveRecords']:>9} "
              f"{lb / 2**20:>9.1f} {wr / 2**20:>11.0f} {el:>9.2f} {dry_s:>9.2f} {cp:>6.2f} {cps:>9.2f} "
              f"{el / cp:>6.1f} {el / cps:>9.1f} {rss:>8.0f} {dry_rss:>8.0f} {cpu:>6.2f} {dry_cpu:>7.2f} {load:>5.1f}")
    print("target: compaction within 3x of cp of the live bytes; RSS grows with live records, not journal size")
    print("compact s / dry-run s: wall time of the CLI (interpreter start included); CPU s: its user+system time;")
    print(f"load: 1-minute load average before the runs on {os.cpu_count()} CPUs (wall > CPU on a shared machine);")
    print(f"compact: best of {args.runs} runs, each on a fresh synced copy; cp / cp+sync: best of three")
    return 0


if __name__ == "__main__":
    sys.exit(main())
