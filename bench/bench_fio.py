#!/usr/bin/env python3
"""amqtool bench against fio: the same write pattern, on the same file, in the same run.

For each line of `amqtool bench` this runs the equivalent fio job on the SAME pre-filled file
(amqtool's bench file: 10 MiB of zeros, fsynced) right before or after amqtool's loop, alternating
the order each round, and prints amqtool/fio ratios of the medians for ops/s and p99 (target 0.8-1.25).
Timing only; not a test.

    .venv/bin/python bench/bench_fio.py [DIR] [--seconds 2] [--rounds 5] [--producers 32] [--only nio,mapped]

Why each pair is the same job (checked with `strace -f -c` / `strace -f -tt` on both sides):

| amqtool line (= the broker)          | fio job                                    | syscalls per op, both sides    |
|--------------------------------------|--------------------------------------------|--------------------------------|
| NIO 1 producer: pwrite 4 KiB +       | psync bs=4k fdatasync=1                    | pwrite64 + fdatasync           |
|   fdatasync (NIOSequentialFile)      |                                            |                                |
| NIO N per sync: N records in one     | psync bs=N*4k fdatasync=1                  | pwrite64(N*4k) + fdatasync     |
|   pwrite + one fdatasync (TimedBuffer)| (ops counted in 4 KiB records)            |                                |
| ASYNCIO 1 / N in flight: O_DIRECT,   | libaio direct=1 iodepth=1/N                | io_submit(1 iocb) per write,   |
|   io_submit(ctx,1,&iocb) per write,  | iodepth_batch_submit=1                     | io_getevents(min 1, max N)     |
|   io_getevents(1, max) (LibaioContext)| iodepth_batch_complete_min=1, _max=N      |                                |
| MAPPED 1 producer: memcpy 4 KiB into | mmap bs=4k fdatasync=1                     | (page fault) + msync(whole     |
|   the whole-file mapping + msync of  |                                            | 10 MiB mapping, MS_SYNC)       |
|   the whole mapping (MappedFile.force)|                                           |                                |
| MAPPED N per sync                    | mmap bs=N*4k fdatasync=1                   | same, N*4k memcpy              |
| IO_URING 1 / N in flight: O_DIRECT   | io_uring direct=1 iodepth=1/N nonvectored=1| io_uring_enter(1, 0) per write,|
|   IORING_OP_WRITE, one enter per     | iodepth_batch_submit=1                     | io_uring_enter(0, min 1,       |
|   write, reap >= 1 (ASYNCIO's shape) | iodepth_batch_complete_min=1, _max=N       | GETEVENTS) when the CQ is empty|

Common to every fio job, so that the file and the bytes are amqtool's:
  --filename=<amqtool's bench file> --size=10M (exists at that size: fio lays nothing out, overwrite=0),
  invalidate=0 (amqtool does not drop the page cache; fio's default POSIX_FADV_DONTNEED would make the
  mmap job fault pages in from disk), fadvise_hint=0 (no FADV/MADV_SEQUENTIAL: amqtool and the broker give
  none), fallocate=none, unlink=0, buffer_pattern=0x74 + scramble_buffers=0 (the same 't' bytes amqtool
  and perf-journal write), rw=write (sequential from offset 0, wrapping at the file's end as amqtool
  does), time_based runtime=<seconds>.

What is compared:
  ops/s: amqtool's records/s against fio's iops x records per I/O.
  p99, NIO and MAPPED: the sync call alone on both sides: amqtool's syncLatency (fdatasync / msync, timed
    in the C loop around the call) against fio's "sync" latency (the fdatasync / msync fio issues after
    each write). amqtool's own table shows write+sync, which fio does not report as one figure.
  p99, ASYNCIO and IO_URING: submission to reaped completion on both sides: amqtool's latency against
    fio's total latency ("lat", lat_percentiles=1).
Each round runs amqtool and fio back to back (who goes first alternates); a ratio is the median over
rounds of that round's amqtool/fio (paired, so a drift in the machine's load cancels), with the range of
the per-round ratios after it; the ops/s and p99 columns are the medians of each side. The load average
is printed (these machines are shared).

Known, unavoidable differences: fio spends more CPU per I/O than amqtool's loops (its own bookkeeping
and statistics); on a CPU-starved machine that shows up as amqtool ahead at high queue depths.
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

# What makes fio use amqtool's file and bytes as they are (see the module docstring).
COMMON = dict(rw="write", invalidate=0, fadvise_hint=0, fallocate="none", overwrite=0, unlink=0,
              scramble_buffers=0, buffer_pattern="0x74", lat_percentiles=1, percentile_list="50:90:99:99.9")


def fio_job(path: Path, name: str, seconds: float, **opts) -> dict:
    """Run one fio job on ``path`` for ``seconds``; its JSON ``jobs[0]``."""
    cmd = ["fio", f"--name={name}", f"--filename={path}", f"--size={SIZE}", "--time_based",
           f"--runtime={int(seconds * 1000)}ms", "--output-format=json"]
    cmd += [f"--{k}={v}" for k, v in {**COMMON, **opts}.items()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]


def fio_figures(job: dict, records_per_io: int, sync: bool) -> tuple[float, float]:
    """(records/s, p99 µs): the sync call's p99 for sync jobs, total (submit-to-completion) p99 else."""
    ops = job["write"]["iops"] * records_per_io
    lat = job["sync"]["lat_ns"] if sync else job["write"]["lat_ns"]
    return ops, lat["percentile"]["99.000000"] / 1000


def lines(n: int):
    """(label, method, pattern, fio options, records per fio I/O, compare sync latency?)"""
    aio = dict(iodepth_batch_submit=1, iodepth_batch_complete_min=1)
    uring = dict(nonvectored=1, iodepth_batch_submit=1, iodepth_batch_complete_min=1)
    return [
        ("NIO", "nio", "one", dict(ioengine="psync", fdatasync=1, bs=BS), 1, True),
        ("NIO", "nio", "many", dict(ioengine="psync", fdatasync=1, bs=BS * n), n, True),
        ("ASYNCIO", "asyncio", "one", dict(ioengine="libaio", direct=1, iodepth=1, bs=BS, **aio,
                                           iodepth_batch_complete_max=1), 1, False),
        ("ASYNCIO", "asyncio", "many", dict(ioengine="libaio", direct=1, iodepth=n, bs=BS, **aio,
                                            iodepth_batch_complete_max=n), 1, False),
        ("MAPPED", "mapped", "one", dict(ioengine="mmap", fdatasync=1, bs=BS), 1, True),
        ("MAPPED", "mapped", "many", dict(ioengine="mmap", fdatasync=1, bs=BS * n), n, True),
        ("IO_URING", "io_uring", "one", dict(ioengine="io_uring", direct=1, iodepth=1, bs=BS, **uring,
                                             iodepth_batch_complete_max=1), 1, False),
        ("IO_URING", "io_uring", "many", dict(ioengine="io_uring", direct=1, iodepth=n, bs=BS, **uring,
                                              iodepth_batch_complete_max=n), 1, False),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", nargs="?", default=None)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--producers", type=int, default=32)
    ap.add_argument("--only", default="", help="comma-separated methods (nio,asyncio,mapped,io_uring)")
    ap.add_argument("--verbose", action="store_true", help="print every run's figures to stderr")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        print("fio not found (apt-get install -y fio)", file=sys.stderr)
        return 3
    if not native.HAVE_NATIVE:
        print(f"amqtool._native missing: {native.NATIVE_REASON}", file=sys.stderr)
        return 3
    only = {m for m in args.only.split(",") if m}
    todo = [ln for ln in lines(args.producers) if not only or ln[1] in only]
    tmp = None
    if args.directory is None:
        tmp = tempfile.mkdtemp(prefix="amqtool-bench-fio-", dir=".")
    directory = Path(args.directory or tmp)
    load_before = os.getloadavg()
    figures = {ln[1:3]: {"a_ops": [], "a_p99": [], "f_ops": [], "f_p99": []} for ln in todo}
    unavailable: dict = {}
    duration_ns = int(args.seconds * 1e9)
    try:
        with bench.bench_file(directory, SIZE) as target:
            for rnd in range(args.rounds):
                for label, method, pattern, job, per_io, sync in todo:
                    if (method, pattern) in unavailable:
                        continue
                    fig = figures[(method, pattern)]

                    def amq():
                        r = bench.run_line(method, pattern, target, block=b"t" * BS, region=SIZE,
                                           writes=10**9, duration_ns=duration_ns, producers=args.producers,
                                           max_io=bench.DEFAULT_MAX_IO, datasync=True)
                        if not r.available:
                            unavailable[(method, pattern)] = r.reason
                            return
                        fig["a_ops"].append(r.ops_per_sec)
                        fig["a_p99"].append((r.sync_latency if sync else r.latency)["p99Us"])
                        if args.verbose:
                            print(f"round {rnd} {method} {pattern} amqtool {fig['a_ops'][-1]:,.0f} ops/s "
                                  f"p99 {fig['a_p99'][-1]:,.1f} µs  load {os.getloadavg()[0]:.2f}", file=sys.stderr)

                    def fio():
                        o, p = fio_figures(fio_job(target.path, f"{method}-{pattern}", args.seconds, **job),
                                           per_io, sync)
                        fig["f_ops"].append(o)
                        fig["f_p99"].append(p)
                        if args.verbose:
                            print(f"round {rnd} {method} {pattern} fio     {o:,.0f} ops/s p99 {p:,.1f} µs  "
                                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)

                    # alternate who goes first, so a drift in the machine's load hits both sides alike
                    for step in ((amq, fio) if rnd % 2 == 0 else (fio, amq)):
                        if (method, pattern) not in unavailable:
                            step()
            fstype = target.fstype
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"directory {directory} ({fstype}), {args.seconds:g} s per run, {args.rounds} round(s), medians; "
          f"4 KiB records; ratios amqtool/fio, target 0.8-1.25")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} ({os.cpu_count()} CPUs)")
    hdr = (f"{'line':<26}{'amq ops/s':>11}{'fio ops/s':>11}{'ratio':>7} {'range':<10}{'amq p99µs':>10}"
           f"{'fio p99µs':>11}{'ratio':>7} {'range':<10} p99 of")
    print(hdr)
    print("-" * len(hdr))
    med = statistics.median
    for label, method, pattern, job, per_io, sync in todo:
        what = "1 producer" if pattern == "one" else (
            f"{args.producers} in flight" if method in ("asyncio", "io_uring") else f"{args.producers} per sync")
        name = f"{label} {what}"
        if (method, pattern) in unavailable:
            print(f"{name:<26}  n/a: {unavailable[(method, pattern)]}")
            continue
        fig = figures[(method, pattern)]
        ao, fo, ap_, fp = (med(fig[k]) for k in ("a_ops", "f_ops", "a_p99", "f_p99"))
        rops = [a / f for a, f in zip(fig["a_ops"], fig["f_ops"])]
        rp99 = [a / f for a, f in zip(fig["a_p99"], fig["f_p99"])]
        ro, rp = med(rops), med(rp99)
        flag = "" if 0.8 <= ro <= 1.25 and 0.8 <= rp <= 1.25 else "  *"
        print(f"{name:<26}{ao:>11,.0f}{fo:>11,.0f}{ro:>7.2f} {min(rops):4.2f}-{max(rops):<5.2f}"
              f"{ap_:>10,.1f}{fp:>11,.1f}{rp:>7.2f} {min(rp99):4.2f}-{max(rp99):<5.2f} "
              f"{'sync call' if sync else 'submit->completion'}{flag}")
    print("ratio: median of the per-round amqtool/fio ratios, then their range; * outside 0.8-1.25")
    return 0


if __name__ == "__main__":
    sys.exit(main())
