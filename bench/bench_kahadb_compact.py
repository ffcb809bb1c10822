#!/usr/bin/env python3
"""Benchmark: `amqtool compact` of a KahaDB store against `cp` of the whole store (issue 20).

Builds a KahaDB store of SIZE (default 1 GiB) in 32 MiB log files, written with amqtool's own journal
writer (the broker's batch layout and checksums): messages of ~4 KiB sent round-robin to 8 queues, and all
but LIVE (default 10%) of them acknowledged, spread so that every file keeps a few live messages (the
pinned-files emergency). Then, in the same run and on the same filesystem, with the page cache warm for
both:

* ``cp -r`` of the whole store, then ``sync -f`` of the copy (compaction fsyncs what it writes);
* ``amqtool compact <copy>`` in place (replay, write, fsync, switch), whole process, with its peak RSS.

Prints both times and the ratio; target: compaction within 2x of the copy. Timing goes here, never in tests.
Usage: bench/bench_kahadb_compact.py [--size 1GiB] [--live 0.1] [--dir D] [--runs 2]
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
AMQTOOL = str(REPO / ".venv" / "bin" / "amqtool")

from amqtool.engines.kahadb.compact.write import JournalWriter  # noqa: E402
from amqtool.formats.kahadb.commands import EntryType  # noqa: E402
from amqtool.formats.kahadb.protobuf import encode_field, encode_varint  # noqa: E402


def _frame(t: int, body: bytes) -> bytes:
    return bytes([t]) + encode_varint(len(body)) + body


def build(store: Path, size: int, live: float, body_size: int = 4096) -> tuple[int, int]:
    store.mkdir(parents=True)
    writer = JournalWriter(store, 32 * 1024 * 1024, True)
    rng = random.Random(1)
    body = rng.randbytes(body_size)
    dests = [encode_field(1, 0) + encode_field(2, f"bench.q{i}") for i in range(8)]
    n = size // (body_size + 120)
    keep_every = max(1, round(1 / live)) if live > 0 else 0
    pending: list[tuple[bytes, str]] = []
    kept = 0
    for i in range(n):
        d = dests[i % 8]
        mid = f"ID:bench-1-1:1:1:{i}"
        add = encode_field(2, d) + encode_field(3, mid) + encode_field(4, body) + encode_field(5, 4)
        writer.append(_frame(EntryType.ADD_MESSAGE, add))
        if keep_every and i % keep_every == 0:
            kept += 1
        else:
            pending.append((d, mid))
        if len(pending) >= 64:  # acks follow their messages closely, as consumers do
            for dd, m in pending:
                writer.append(_frame(EntryType.REMOVE_MESSAGE, encode_field(2, dd) + encode_field(3, m)))
            pending = []
    for dd, m in pending:
        writer.append(_frame(EntryType.REMOVE_MESSAGE, encode_field(2, dd) + encode_field(3, m)))
    files = writer.close()
    (store / "lock").write_bytes(b"\0" * 8)
    return len(files), kept


def _time(argv: list[str]) -> tuple[float, float]:
    gnu_time = "/usr/bin/time"
    t0 = time.perf_counter()
    if os.path.exists(gnu_time):
        r = subprocess.run([gnu_time, "-f", "%M", *argv], capture_output=True, text=True)
        rss = float(r.stderr.strip().splitlines()[-1]) / 1024 if r.returncode == 0 else 0.0
    else:
        r = subprocess.run(argv, capture_output=True, text=True)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"{' '.join(argv)} failed with exit {r.returncode}")
    return elapsed, rss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--live", type=float, default=0.1)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    from amqtool.store.brokerxml import parse_byte_size

    size = parse_byte_size(a.size)
    base = Path(tempfile.mkdtemp(prefix="amqtool-kbench-", dir=a.dir))
    try:
        src = base / "store"
        t0 = time.perf_counter()
        nfiles, kept = build(src, size, a.live)
        print(f"store: {nfiles} log files, {a.size}, {kept} live messages ({a.live:.0%}), built in "
              f"{time.perf_counter() - t0:.1f} s")
        subprocess.run(["cat"] + [str(p) for p in src.iterdir()], stdout=subprocess.DEVNULL, check=True)
        best_cp = best_compact = float("inf")
        rss = 0.0
        for run in range(a.runs):
            dst = base / f"copy{run}"
            t0 = time.perf_counter()
            subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
            subprocess.run(["sync", "-f", str(dst)], check=True)
            best_cp = min(best_cp, time.perf_counter() - t0)
            elapsed, rss = _time([AMQTOOL, "compact", "-q", str(dst)])
            best_compact = min(best_compact, elapsed)
            after = sorted(dst.glob("db-*.log"))
            shutil.rmtree(dst)
        print(f"cp -r + sync:      {best_cp:.2f} s (best of {a.runs})")
        print(f"amqtool compact:   {best_compact:.2f} s (best of {a.runs}), peak RSS {rss:.0f} MiB, "
              f"{len(after)} log files after")
        print(f"ratio compact/cp:  {best_compact / best_cp:.2f}x (target <= 2x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
