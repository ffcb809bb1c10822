#!/usr/bin/env python3
"""Benchmark: `amqtool create DEST --from KAHADB` of a KahaDB store against `amqtool verify` of that store
plus `amqtool create --demo` of an Artemis store of the same size (issue 16 target: migrate < 3x of both).

The KahaDB store (default 512 MiB, 32 MiB log files, written with amqtool's KahaDB journal writer, the
broker's batch layout and checksums) holds real OpenWire messages (the loose encoding KahaDBStore stores):
text and bytes bodies of 512 B .. 8 KiB, a few typed properties each, round-robin over 8 queues, with acks
for all but LIVE (default 30%) of them following closely, as consumers do. Every command runs as a fresh
process on a warm page cache, best of --runs; peak RSS from /usr/bin/time. Timing goes here, never in tests.

Usage: .venv/bin/python bench/bench_migrate.py [--size 512MiB] [--live 0.3] [--dir D] [--runs 1] [--keep]
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
from tests.engines.migrate.openwire_builder import message, text_content  # noqa: E402


def _frame(t: int, body: bytes) -> bytes:
    return bytes([t]) + encode_varint(len(body)) + body


def build(store: Path, size: int, live: float) -> tuple[int, int, int]:
    store.mkdir(parents=True)
    writer = JournalWriter(store, 32 * 1024 * 1024, True)
    rng = random.Random(16)
    pool = rng.randbytes(1 << 16)
    words = "order shipment invoice payment customer warehouse parcel route carrier status".split()
    text_pool = " ".join(rng.choice(words) for _ in range(4000))
    dests = [encode_field(1, 0) + encode_field(2, f"bench.q{i}") for i in range(8)]
    written = kept = n = 0
    pending: list[tuple[bytes, str]] = []
    while written < size:
        d = dests[n % 8]
        blen = int(512 * 16 ** rng.random())
        props = [("orderId", 6, 100000 + n), ("region", 9, rng.choice(("EU", "US"))), ("urgent", 1, n % 7 == 0),
                 ("amount", 7, n * 0.25)]
        if n % 3:
            off = rng.randrange(0, len(text_pool) - blen)
            ow = message(28, text_content(text_pool[off:off + blen]), props=props, dest=(100, f"bench.q{n % 8}"),
                         seq=n + 1, priority=4)
        else:
            off = rng.randrange(0, len(pool) - blen)
            ow = message(24, pool[off:off + blen], props=props, dest=(100, f"bench.q{n % 8}"), seq=n + 1)
        mid = f"ID:test-1:1:1:{n + 1}"
        rec = _frame(EntryType.ADD_MESSAGE, encode_field(2, d) + encode_field(3, mid) + encode_field(4, ow))
        writer.append(rec)
        written += len(rec)
        if rng.random() < live:
            kept += 1
        else:
            pending.append((d, mid))
        if len(pending) >= 64:
            for dd, m in pending:
                writer.append(_frame(EntryType.REMOVE_MESSAGE, encode_field(2, dd) + encode_field(3, m)))
            pending = []
        n += 1
    for dd, m in pending:
        writer.append(_frame(EntryType.REMOVE_MESSAGE, encode_field(2, dd) + encode_field(3, m)))
    files = writer.close()
    return len(files), n, kept


def _time(argv: list[str]) -> tuple[float, float]:
    gnu_time = "/usr/bin/time"
    t0 = time.perf_counter()
    if os.path.exists(gnu_time):
        r = subprocess.run([gnu_time, "-f", "%M", *argv], capture_output=True, text=True)
        rss = float(r.stderr.strip().splitlines()[-1]) / 1024 if r.returncode in (0, 1) else 0.0
    else:
        r = subprocess.run(argv, capture_output=True, text=True)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    elapsed = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        sys.stderr.write(r.stderr)
        raise SystemExit(f"{' '.join(argv)} failed with exit {r.returncode}")
    return elapsed, rss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--live", type=float, default=0.3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    from amqtool.store.brokerxml import parse_byte_size

    size = parse_byte_size(a.size)
    if size <= 0 or a.runs <= 0 or not 0 <= a.live <= 1:
        raise SystemExit("--size and --runs must be positive, --live between 0 and 1")
    base = Path(tempfile.mkdtemp(prefix="amqtool-mbench-", dir=a.dir))
    try:
        src = base / "kahadb"
        t0 = time.perf_counter()
        nfiles, sent, kept = build(src, size, a.live)
        print(f"store: {nfiles} log files, {a.size}, {sent} messages, {kept} live ({a.live:.0%}), built in "
              f"{time.perf_counter() - t0:.1f} s")
        subprocess.run(["cat"] + [str(p) for p in src.iterdir()], stdout=subprocess.DEVNULL, check=True)
        best = {"verify": float("inf"), "demo": float("inf"), "migrate": float("inf")}
        rss = {}
        for run in range(a.runs):
            t, rss["verify"] = _time([AMQTOOL, "verify", "-q", str(src)])
            best["verify"] = min(best["verify"], t)
            demo = base / f"demo{run}"
            t, rss["demo"] = _time([AMQTOOL, "create", "-q", str(demo), "--demo", a.size])
            best["demo"] = min(best["demo"], t)
            shutil.rmtree(demo)
            out = base / f"artemis{run}"
            t, rss["migrate"] = _time([AMQTOOL, "create", "-q", str(out), "--from", str(src)])
            best["migrate"] = min(best["migrate"], t)
            written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            if not a.keep or run < a.runs - 1:
                shutil.rmtree(out)
        both = best["verify"] + best["demo"]
        print(f"amqtool verify KAHADB:        {best['verify']:7.2f} s  peak RSS {rss['verify']:.0f} MiB")
        print(f"amqtool create --demo {a.size}: {best['demo']:7.2f} s  peak RSS {rss['demo']:.0f} MiB")
        print(f"amqtool create --from KAHADB: {best['migrate']:7.2f} s  peak RSS {rss['migrate']:.0f} MiB "
              f"({written / 2**20:.0f} MiB written, {kept} messages)")
        print(f"ratio migrate/(verify+demo):  {best['migrate'] / both:.2f}x (target < 3x; best of {a.runs})")
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
