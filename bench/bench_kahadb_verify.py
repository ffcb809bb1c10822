"""Benchmark: `verify` of a KahaDB store of >= 512 MiB against `cat` of the same files, same run.

The store is built by replicating the batches of the broker-written `basic` fixture (each batch keeps its
own valid Adler-32) into 32 MiB journal files, with the fixture's db.data beside them. Both sides run warm
(the files are read once before timing). Prints MiB/s for each and the ratio (target >= 0.5), best of
--runs, plus the CPU seconds of both sides (the machines are shared: a loaded box stretches wall times,
and the verify side runs its checksum pass on a second thread), the load average, and verify's peak RSS. The verify is timed twice: the engine in this process, and
`amqtool verify` as a fresh process (interpreter and CLI start-up included, about 0.15 s).

Usage: .venv/bin/python bench/bench_kahadb_verify.py [--size-mib 544] [--dir /tmp/kahadb-bench] [--keep]
                                                     [--runs 3] [--python]
``--python`` times the pure-Python reference loop instead of the C one (amqtool._native.kahadb_scan_file).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verify_vs_cat import race  # bench/, the script's own directory

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "kahadb" / "basic" / "kahadb"
FILE_SIZE = 32 * 1024 * 1024


def fixture_batches() -> list[bytes]:
    from amqtool.formats.kahadb import journal as jr

    out = []
    for f in sorted(FIXTURE.glob("db-*.log"), key=lambda p: int(p.stem[3:])):
        data = f.read_bytes()
        for ev in jr.scan_file(data):
            if isinstance(ev, jr.Batch):
                out.append(data[ev.offset:ev.end])
    return out


def build(target: Path, size_mib: int) -> int:
    from amqtool.formats.kahadb.journal import EOF_RECORD

    target.mkdir(parents=True, exist_ok=True)
    batches = fixture_batches()
    total = 0
    fid = 0
    while total < size_mib * 1024 * 1024:
        fid += 1
        parts, n = [], 0
        i = 0
        while True:
            b = batches[i % len(batches)]
            if n + len(b) + 5 > FILE_SIZE:
                break
            parts.append(b)
            n += len(b)
            i += 1
        parts.append(EOF_RECORD)
        parts.append(b"\x00" * (FILE_SIZE - n - 5))
        (target / f"db-{fid}.log").write_bytes(b"".join(parts))
        total += FILE_SIZE
    shutil.copy(FIXTURE / "db.data", target / "db.data")
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=544)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", action="store_true", help="time the pure-Python loop (no C fast path)")
    args = ap.parse_args()
    if args.python:
        from amqtool import native

        native.kahadb_scan_file = None
    target = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kahadb-bench-"))
    try:
        if not any(target.glob("db-*.log")):
            build(target, args.size_mib)
        files = sorted(target.glob("db-*.log"))
        nbytes = sum(f.stat().st_size for f in files)
        from amqtool.engines.kahadb import verify_store
        from amqtool.store.layout import detect

        store = detect(target)
        r = race(files, lambda: verify_store(store), args.runs)
        best_cat, cpu_cat, best_verify, cpu_verify = r.best_cat, r.cpu_cat, r.best_verify, r.cpu_verify
        findings, summary = r.result
        # The same verify as an operator runs it: a fresh `amqtool verify` process, interpreter and CLI
        # start-up included (in-process figures above measure the engine alone).
        cli = [str(ROOT / ".venv" / "bin" / "amqtool"), "verify", str(target), "--format", "json", "-q"]
        best_cli = float("inf")
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run(cli, stdout=subprocess.DEVNULL)
            best_cli = min(best_cli, time.perf_counter() - t)
        mib = nbytes / 2**20
        print(f"store: {len(files)} files, {mib:.0f} MiB, {summary['records']} records, "
              f"{summary['live']} live, {len(findings)} findings; loop: {'python' if args.python else 'C'}; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"cat    : {best_cat:.3f} s  {mib / best_cat:8.0f} MiB/s  (cpu {cpu_cat:.3f} s)")
        print(f"verify : {best_verify:.3f} s  {mib / best_verify:8.0f} MiB/s  (cpu {cpu_verify:.3f} s, both threads)")
        print(f"ratio verify/cat throughput: {best_cat / best_verify:.2f} (target >= 0.50); "
              f"cpu ratio {cpu_cat / cpu_verify:.2f}")
        print(f"amqtool verify (CLI process, start-up included): {best_cli:.3f} s  {mib / best_cli:8.0f} MiB/s; "
              f"ratio {best_cat / best_cli:.2f}")
        print(f"verify peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
              "(mapped journal pages included)")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(target, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
