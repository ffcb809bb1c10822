"""Benchmark: `amqtool stat` against `amqtool verify` on the 1 GiB `create --demo` store (issue 19).

Issue 19's target: stat costs no more than verify plus the per-queue summary; Spark-free (no JVM). Whole
process (startup and imports count), stdout to /dev/null, warm page cache, best of ``--runs``; peak RSS
and CPU seconds from wait4. Prints each command's figures and stat's ratio to verify, and to
``print --format json --safe`` (which carries the per-queue summary).

Usage: .venv/bin/python bench/bench_stat.py [--dir /tmp/amqbench] [--size 1GiB] [--runs 3]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_journal import AMQTOOL, demo_store, run  # noqa: E402  (same directory; one timing helper)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/amqbench")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    store = demo_store(Path(args.dir), args.size)
    cmds = {
        "verify": [str(AMQTOOL), "verify", "-q", "-f", "json", str(store)],
        "print json": [str(AMQTOOL), "print", "-q", "--safe", "-f", "json", str(store)],
        "stat": [str(AMQTOOL), "stat", "-q", "-f", "json", str(store)],
        "stat --reclaim": [str(AMQTOOL), "stat", "-q", "--reclaim", "-f", "json", str(store)],
    }
    run(cmds["verify"])  # warm the page cache
    best = {name: min((run(cmd) for _ in range(args.runs)), key=lambda r: r[0]) for name, cmd in cmds.items()}
    print(f"store {store}")
    print(f"{'':16} {'seconds':>8} {'cpu s':>7} {'peak RSS':>9}  exit")
    for name, (t, rss, code, cpu) in best.items():
        print(f"{name:16} {t:8.2f} {cpu:7.2f} {rss:6.0f} MiB  {code}")
    v = best["verify"][0]
    print(f"stat / verify: {best['stat'][0] / v:.2f}   stat / print json: {best['stat'][0] / best['print json'][0]:.2f}"
          f"   target: stat <= verify (1.00) and < 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
