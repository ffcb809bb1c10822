"""Benchmark: `print --style artemis` (the `artemis data print` replacement) against Artemis' own DescribeJournal.

Issue 14's target: no slower per record than Artemis' `data print` logic, i.e. <= 2 µs a record (the
perf-anchors.md figure: 4.4 s to /dev/null for its 1 GiB store of 2.16 M records, ~2.04 µs a record);
<= 3.5 s on the 1 GiB `create --demo` store. Whole process (startup and imports count), stdout to
/dev/null, warm page cache, best of ``--runs``; peak RSS from wait4. ``--python`` also times one run with
``AMQTOOL_NO_NATIVE=1`` (the pure-Python reference, ~15 times slower) for the ratio.

The record count is the number of ``operation@`` lines (one per journal record, as DescribeJournal writes
them), taken from one extra run.

Usage: .venv/bin/python bench/bench_print_artemis.py [--dir /tmp/amqbench] [--size 1GiB] [--runs 3] [--python]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_journal import AMQTOOL, demo_store, run  # noqa: E402  (same directory; one timing helper)

ANCHOR_S = 4.4  # perf-anchors.md: Artemis data print logic (DescribeJournal) to /dev/null
ANCHOR_RECORDS = 2.16e6  # records of that store
ANCHOR_US = ANCHOR_S / ANCHOR_RECORDS * 1e6


def count_records(cmd: list[str]) -> tuple[int, int]:
    """(operation@ lines, bytes of text) of one run."""
    n = size = 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:
        for line in p.stdout:
            size += len(line)
            if line.startswith(b"operation@"):
                n += 1
    return n, size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/amqbench")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", action="store_true", help="also time one AMQTOOL_NO_NATIVE=1 run")
    args = ap.parse_args()
    store = demo_store(Path(args.dir), args.size)
    cmd = [str(AMQTOOL), "print", "--style", "artemis", "-q", str(store)]
    records, text = count_records(cmd)  # also warms the page cache
    best = min((run(cmd) for _ in range(args.runs)), key=lambda r: r[0])
    t, rss, code, cpu = best
    us = t / records * 1e6
    print(f"store {store}: {records} records, {text / 1e6:.0f} MB of text")
    print(f"{'':14} {'seconds':>8} {'µs/record':>10} {'vs Artemis':>10} {'cpu s':>7} {'peak RSS':>9}  exit")
    print(f"{'native':14} {t:8.3f} {us:10.2f} {ANCHOR_US / us:9.2f}x {cpu:7.2f} {rss:7.0f} MiB  {code}")
    if args.python:
        env = dict(os.environ, AMQTOOL_NO_NATIVE="1")
        old = os.environ.copy()
        os.environ.update(env)
        try:
            pt, prss, pcode, pcpu = run(cmd)
        finally:
            os.environ.clear()
            os.environ.update(old)
        pus = pt / records * 1e6
        print(f"{'python (ref)':14} {pt:8.3f} {pus:10.2f} {ANCHOR_US / pus:9.2f}x {pcpu:7.2f} {prss:7.0f} MiB  {pcode}")
        print(f"native is {pt / t:.1f}x the Python reference")
    target = ANCHOR_US
    print(f"Artemis anchor: {ANCHOR_S} s / {ANCHOR_RECORDS / 1e6:.2f} M records = {ANCHOR_US:.2f} µs a record; "
          f"target <= {target:.2f} µs: {'met' if us <= target else 'NOT met'}")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
