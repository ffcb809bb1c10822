"""Benchmark: `verify` and `print --format json --safe` of a >= 1 GiB Artemis store against `cat`, one run.

Issue 2's acceptance: both at 1 GB/s or more with a warm page cache, never slower than Artemis' own journal
load (2.70 s for the 1 GiB perf-anchors store, /work/shared/docs/perf-anchors.md), peak memory under 200 MiB.

The store is either ``amqtool create --demo 1GiB`` (a realistic broker: journal, bindings, paging, large
messages; the default when the command exists) or a synthetic message journal (``--source synthetic``: 104
files of 10 MiB, ~2.5 M records of which ~1.36 M live, many more records per byte than the demo). It is
built once under ``--dir`` and reused. Everything runs as the CLI runs (a fresh process each time: startup and
imports count); the files are read once before timing, and each figure is the best of ``--runs``. Peak RSS
is each child's own (wait4).

Usage: .venv/bin/python bench/bench_journal.py [--source auto|demo|synthetic] [--dir /tmp/amqbench] [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AMQTOOL = ROOT / ".venv" / "bin" / "amqtool"
PYTHON = ROOT / ".venv" / "bin" / "python"
ARTEMIS_LOAD_S = 2.70  # perf-anchors.md: JournalImpl.load of the 1 GiB store, warm
ANCHOR_BYTES = 103 * 10 * 2**20  # that store: 103 files of 10 MiB
TARGET_BPS = 1e9
RSS_LIMIT_MIB = 200


def build_synthetic(journal: Path, files: int = 104, file_size: int = 10 * 2**20) -> None:
    """A message journal of ``files`` full files: 50 % 1 KiB adds, 15 % 30 B adds, 25 % deletes of random
    live ids, 10 % transactions of 3 adds + commit (seed 1, same bytes every time)."""
    sys.path.insert(0, str(ROOT))
    from amqtool.formats.artemis.records import ADD, ADD_TX, COMMIT, DELETE, FileHeader, Record

    journal.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    body1k, body30 = rng.randbytes(1024), rng.randbytes(30)
    fid, buf, pos = 0, None, 0

    def new_file():
        nonlocal fid, buf, pos
        if buf is not None:
            (journal / f"activemq-data-{fid}.amq").write_bytes(bytes(buf))
        fid += 1
        buf = bytearray(file_size)
        buf[0:16] = FileHeader(2, 0, fid).encode()
        pos = 16

    def put(rec: Record) -> None:
        nonlocal pos
        b = rec.encode()
        if pos + len(b) > file_size:
            new_file()
            b = Record(**{**{k: getattr(rec, k) for k in rec.__slots__}, "tag": fid}).encode()
        buf[pos:pos + len(b)] = b
        pos += len(b)

    new_file()
    rid, tx, live = 0, 10**6, []
    while fid <= files:
        r = rng.random()
        if r < 0.5:
            rid += 1
            put(Record(ADD, fid, 0, record_id=rid, user_record_type=45, body=body1k))
            live.append(rid)
        elif r < 0.65:
            rid += 1
            put(Record(ADD, fid, 0, record_id=rid, user_record_type=32, body=body30))
            live.append(rid)
        elif r < 0.9 and live:
            i = rng.randrange(len(live))
            live[i], live[-1] = live[-1], live[i]
            put(Record(DELETE, fid, 0, record_id=live.pop()))
        else:
            tx += 1
            for _ in range(3):
                rid += 1
                put(Record(ADD_TX, fid, 0, tx_id=tx, record_id=rid, user_record_type=45, body=body30))
                live.append(rid)
            put(Record(COMMIT, fid, 0, tx_id=tx, number_of_records=3))
    new_file()


def has_demo() -> bool:
    out = subprocess.run([str(AMQTOOL), "create", "--help"], capture_output=True, text=True)
    return out.returncode == 0 and "--demo" in out.stdout


def run(cmd: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, exit code) of one child, stdout to /dev/null. The RSS comes from wait4; this
    process stays small (the store is built in a child), since Linux carries the parent's high-water mark
    at fork into the child's ru_maxrss."""
    with open(os.devnull, "wb") as null:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        elapsed = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", choices=["auto", "demo", "synthetic"], default="auto")
    ap.add_argument("--dir", default="/tmp/amqbench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build-synthetic", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build_synthetic:
        build_synthetic(Path(args.build_synthetic))
        return 0
    source = args.source
    if source == "auto":
        source = "demo" if has_demo() else "synthetic"
    base = Path(args.dir)
    if source == "demo":
        store = base / "demo"
        if not (store / "data" / "journal").is_dir():
            shutil.rmtree(store, ignore_errors=True)
            subprocess.run([str(AMQTOOL), "create", "--demo", "1GiB", str(store), "-q"], check=True,
                           stdout=subprocess.DEVNULL)
    else:
        store = base / "synthetic"
        if not any((store / "journal").glob("*.amq")):
            subprocess.run([sys.executable, __file__, "--build-synthetic", str(store / "journal")], check=True)
    files = sorted(p for p in store.rglob("*") if p.is_file() and p.name != "manifest.json")
    nbytes = sum(p.stat().st_size for p in files)
    journal_bytes = sum(p.stat().st_size for p in files if p.suffix in (".amq", ".bindings"))

    cat = ["cat", *map(str, files)]
    verify = [str(AMQTOOL), "verify", "--format", "json", "-q", str(store)]
    prn = [str(AMQTOOL), "print", "--format", "json", "--safe", "-q", str(store)]
    # the journals alone: --max-pages 0 leaves out the paging section (page files are decoded message by
    # message in Python, amqtool.engines.paging), so the two lines show where print's time goes
    prn_journal = prn[:-1] + ["--max-pages", "0", str(store)]
    startup = [str(AMQTOOL), "--help"]
    for cmd in (cat, verify, prn):  # warm the page cache (and the interpreter's .pyc files)
        run(cmd)
    best: dict[str, tuple[float, float, int]] = {}
    for _ in range(args.runs):
        for name, cmd in (("cat", cat), ("startup", startup), ("verify", verify), ("print", prn),
                          ("print-j", prn_journal)):
            r = run(cmd)
            if name not in best or r[0] < best[name][0]:
                best[name] = (r[0], max(r[1], best.get(name, (0, 0, 0))[1]), r[2])

    gb = nbytes / 1e9
    print(f"store: {source} at {store}: {len(files)} files, {nbytes / 2**20:.0f} MiB "
          f"({journal_bytes / 2**20:.0f} MiB of journal files); best of {args.runs}, warm cache")
    print(f"machine load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (shared machines are noisy)")
    t_cat = best["cat"][0]
    artemis_here = ARTEMIS_LOAD_S * nbytes / ANCHOR_BYTES  # Artemis' 400 MB/s scaled to this store
    print(f"{'':8} {'seconds':>8} {'GB/s':>7} {'vs cat':>7} {'peak RSS':>10}  exit")
    for name in ("cat", "startup", "verify", "print", "print-j"):
        t, rss, code = best[name]
        rate = f"{gb / t:7.2f}" if name != "startup" else "      -"
        ratio = f"{t / t_cat:6.1f}x" if name != "cat" else "      -"
        print(f"{name:8} {t:8.3f} {rate} {ratio} {rss:7.0f} MiB  {code}")
    ok = True
    print("  (print-j: print --max-pages 0, the journals without the paging section)")
    for name in ("verify", "print", "print-j"):
        t, rss, _ = best[name]
        checks = [(gb / t * 1e9 >= TARGET_BPS, f">= 1 GB/s ({gb / t:.2f})"),
                  (t <= artemis_here, f"faster than Artemis' load ({t:.2f} s vs {artemis_here:.2f} s scaled)"),
                  (rss < RSS_LIMIT_MIB, f"peak RSS < {RSS_LIMIT_MIB} MiB ({rss:.0f})")]
        for good, what in checks:
            ok &= good
            print(f"  {name}: {'ok  ' if good else 'MISS'} {what}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
