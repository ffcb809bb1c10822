#!/usr/bin/env python3
"""amqtool bench against fio: the same write pattern, the same directory, the same run.

For each line of `amqtool bench` this runs the equivalent fio job right after amqtool's loop and prints
amqtool/fio ratios for ops/s and p99 latency (target 0.8-1.25). Timing only; not a test.

    .venv/bin/python bench/bench_fio.py [DIR] [--seconds 3] [--rounds 3] [--producers 32]

Job equivalence (4 KiB blocks, a 10 MiB pre-filled file, sequential with wrap-around):

| amqtool line                | fio job                                                              |
|-----------------------------|----------------------------------------------------------------------|
| NIO, 1 producer             | ioengine=psync fdatasync=1                                           |
| NIO, N per sync             | ioengine=psync fdatasync=1 bs=N*4k (ops counted in 4 KiB records)    |
| ASYNCIO, 1 / N in flight    | ioengine=libaio direct=1 iodepth=1 / N                               |
| MAPPED, 1 producer          | ioengine=mmap fdatasync=1 (fio msyncs the mapping)                   |
| MAPPED, N per sync          | ioengine=mmap fdatasync=1 bs=N*4k                                    |
| IO_URING, 1 / N in flight   | ioengine=io_uring direct=1 iodepth=1 / N                             |

p99: amqtool times write+sync as one operation. fio reports the write and the sync separately, so for
the sync jobs fio's figure is p99(sync) + mean(write) (stated in the output); for AIO/io_uring it is fio's
total latency p99 (lat_percentiles=1: submission to completion, as amqtool measures).
With --rounds > 1 every figure is the median over rounds (these machines are noisy).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from amqtool import native  # noqa: E402
from amqtool.engines import bench  # noqa: E402

BS = 4096
SIZE = 10 * 1024 * 1024


def fio_job(directory: Path, name: str, seconds: float, **opts) -> dict:
    cmd = ["fio", f"--name={name}", f"--filename={directory / 'fio-bench.tmp'}", f"--size={SIZE}", "--rw=write",
           "--time_based", f"--runtime={seconds}", "--output-format=json", "--lat_percentiles=1",
           "--percentile_list=50:90:99:99.9", "--unlink=1"]
    cmd += [f"--{k}={v}" for k, v in opts.items()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]


def fio_figures(job: dict, records_per_io: int, sync: bool) -> tuple[float, float]:
    w = job["write"]
    ops = w["iops"] * records_per_io
    if sync:
        s = job["sync"]["lat_ns"]
        p99 = (s["percentile"]["99.000000"] + w["lat_ns"]["mean"]) / 1000
    else:
        p99 = w["lat_ns"]["percentile"]["99.000000"] / 1000
    return ops, p99


def lines(producers: int):
    n = producers
    return [
        ("NIO", "nio", "one", dict(ioengine="psync", fdatasync=1, bs=BS), 1, True),
        ("NIO", "nio", "many", dict(ioengine="psync", fdatasync=1, bs=BS * n), n, True),
        ("ASYNCIO", "asyncio", "one", dict(ioengine="libaio", direct=1, iodepth=1, bs=BS), 1, False),
        ("ASYNCIO", "asyncio", "many", dict(ioengine="libaio", direct=1, iodepth=n, bs=BS), 1, False),
        ("MAPPED", "mapped", "one", dict(ioengine="mmap", fdatasync=1, bs=BS), 1, True),
        ("MAPPED", "mapped", "many", dict(ioengine="mmap", fdatasync=1, bs=BS * n), n, True),
        ("IO_URING", "io_uring", "one", dict(ioengine="io_uring", direct=1, iodepth=1, bs=BS), 1, False),
        ("IO_URING", "io_uring", "many", dict(ioengine="io_uring", direct=1, iodepth=n, bs=BS), 1, False),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", nargs="?", default=None)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--producers", type=int, default=32)
    args = ap.parse_args()
    if shutil.which("fio") is None:
        print("fio not found (apt-get install -y fio)", file=sys.stderr)
        return 3
    if not native.HAVE_NATIVE:
        print(f"amqtool._native missing: {native.NATIVE_REASON}", file=sys.stderr)
        return 3
    tmp = None
    if args.directory is None:
        tmp = tempfile.mkdtemp(prefix="amqtool-bench-fio-", dir=".")
    directory = Path(args.directory or tmp)
    rows = []
    try:
        for label, method, pattern, job, per_io, sync in lines(args.producers):
            a_ops, a_p99, f_ops, f_p99 = [], [], [], []
            for _ in range(args.rounds):
                rep = bench.run_bench(directory, methods=[method], patterns=[pattern], file_size=SIZE,
                                      block_size=BS, seconds=args.seconds, producers=args.producers)
                r = rep.results[0]
                if not r.available:
                    break
                a_ops.append(r.ops_per_sec)
                a_p99.append(r.latency["p99Us"])
                o, p = fio_figures(fio_job(directory, f"{method}-{pattern}", args.seconds, **job), per_io, sync)
                f_ops.append(o)
                f_p99.append(p)
            if not a_ops:
                rows.append((label, r.label, None, None, None, None, r.reason))
                continue
            med = statistics.median
            rows.append((label, r.label, med(a_ops), med(f_ops), med(a_p99), med(f_p99), ""))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"directory {directory} ({bench._fstype(directory)}), {args.seconds:g} s per line, {args.rounds} round(s), "
          f"4 KiB records; ratios amqtool/fio, target 0.8-1.25")
    hdr = f"{'line':<26}{'amq ops/s':>11}{'fio ops/s':>11}{'ratio':>7}{'amq p99µs':>11}{'fio p99µs':>11}{'ratio':>7}"
    print(hdr)
    print("-" * len(hdr))
    for label, what, ao, fo, ap, fp, reason in rows:
        name = f"{label} {what}"
        if ao is None:
            print(f"{name:<26}  n/a: {reason}")
            continue
        ro, rp = ao / fo, ap / fp
        flag = "" if 0.8 <= ro <= 1.25 and 0.8 <= rp <= 1.25 else "  *"
        print(f"{name:<26}{ao:>11,.0f}{fo:>11,.0f}{ro:>7.2f}{ap:>11,.1f}{fp:>11,.1f}{rp:>7.2f}{flag}")
    print("* outside 0.8-1.25.  fio p99 for sync jobs = p99(sync) + mean(write).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
