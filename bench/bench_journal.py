"""Benchmark: `verify` and `print --format json --safe` of a >= 1 GiB Artemis store against `cat`, one run.

Issue 2's acceptance: both at 1 GB/s or more with a warm page cache, never slower than Artemis' own journal
load (2.70 s for the 1 GiB perf-anchors store, /work/shared/docs/perf-anchors.md), peak memory under 200 MiB.

The store is either ``amqtool create --demo 1GiB`` (a realistic broker: journal, bindings, paging, large
messages; the default when the command exists) or a synthetic message journal (``--source synthetic``: 104
files of 10 MiB, ~2.5 M records of which ~1.36 M live, many more records per byte than the demo). It is
built once under ``--dir`` and reused. Everything runs as the CLI runs (a fresh process each time: startup and
imports count); the files are read once before timing, and each figure is the best of ``--runs``. Peak RSS
is each child's own (wait4).

With ``--source paged`` the store is a broker whose data is almost all page files (issue 8: "paged stores of
1 GiB or more verify and export at the same throughput targets as journals"): ~1.1 GiB of 10 MiB pages of
two addresses (three queues; core messages of 200 B to 4 KiB, some in page transactions -- committed, rolled
back, prepared --, two core large messages) and a small message journal with the cursor acks, page-complete
records and counters of partly consumed pages. For every store the table has ``print-j`` (``--max-pages 0``:
the journals without paged messages) so the paging section's share shows.

Usage: .venv/bin/python bench/bench_journal.py [--source auto|demo|synthetic|paged] [--dir /tmp/amqbench]
       [--runs 3]
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


def build_paged(root: Path, total: int = 1100 * 2**20, page_size: int = 10 * 2**20) -> None:
    """A broker data directory whose bytes are almost all page files (see the module docstring); seed 1,
    the same bytes every time. Records are patched copies of a few encoded templates (one codec call per
    body size), so building 1 GiB takes seconds, not the minutes a message-by-message encode would."""
    sys.path.insert(0, str(ROOT))
    import struct

    from amqtool.formats.artemis.message import TEXT_TYPE, CoreMessage, LargeMessage, MessageHeaders
    from amqtool.formats.artemis.paging import PagedMessage, encode_page_record, page_file_name
    from amqtool.formats.artemis.primitives import INT, LONG, Property, TypedProperties, Writer
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import BINDINGS, MESSAGES

    rng = random.Random(1)
    queues = {10: ("orders.a", "orders"), 11: ("orders.b", "orders"), 12: ("events", "events")}
    routes = {"orders": [10, 11], "events": [12]}
    share = {"orders": 0.75, "events": 0.25}
    sizes = [200, 600, 1000, 2000, 4000]
    templates = {}  # (address, body size) -> (record bytes, offsets of the message ids, of the tx id)
    for address, qids in routes.items():
        for size in sizes:
            msg = CoreMessage.build(message_id=0x1111111111111111, address=address, body=rng.randbytes(size),
                                    type=TEXT_TYPE, timestamp=1735689600000, user_id=rng.randbytes(16),
                                    properties=TypedProperties.of([Property("seq", INT, 1)]))
            rec = bytearray(encode_page_record(PagedMessage.build(msg, qids, 0x2222222222222222)))
            mids = [i for i in range(len(rec) - 7) if rec[i:i + 8] == b"\x11" * 8]
            templates[address, size] = (rec, mids, rec.index(b"\x22" * 8))
    page_tx = {"committed": [], "prepared": []}
    acks, completes = [], []
    mid, tx = 1, 1000
    paging = root / "paging"
    lm = root / "large-messages"
    lm.mkdir(parents=True, exist_ok=True)
    for ai, address in enumerate(routes):
        folder = paging / f"{ai:08x}-0000-4000-8000-000000000000"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "address.txt").write_text(address + "\n")
        budget = int(total * share[address])
        pid = 1
        while budget > 0:
            out, n, tx_left = bytearray(), 0, 0
            while len(out) < page_size:
                if tx_left == 0 and rng.random() < 0.02:  # a page transaction of 20 messages
                    tx += 1
                    tx_left = 20
                    fate = rng.random()
                    if fate < 0.95:
                        page_tx["committed"].append(tx)
                    elif fate < 0.96:
                        page_tx["prepared"].append(tx)  # else rolled back: no record
                if pid == 2 and n == 5:  # a paged core large message with its body
                    h = MessageHeaders(mid, address, None, 4, True, 0, 1735689600000, 4,
                                       TypedProperties.of([Property("_AMQ_LARGE_SIZE", LONG, 150_000)]))
                    out += encode_page_record(PagedMessage.build(LargeMessage(h), routes[address]))
                    (lm / f"{mid}.msg").write_bytes(rng.randbytes(150_000))
                else:
                    rec, mids, txat = templates[address, rng.choice(sizes)]
                    rec = bytearray(rec)
                    for at in mids:
                        struct.pack_into(">q", rec, at, mid)
                    struct.pack_into(">q", rec, txat, tx if tx_left else -1)
                    out += rec
                tx_left = max(tx_left - 1, 0)
                if pid <= 2:  # the first pages are partly consumed
                    if n % 2 == 0:
                        acks.append((routes[address][0], pid, n))
                    if len(routes[address]) > 1 and n % 3 == 0:
                        acks.append((routes[address][1], pid, n))
                mid += 1
                n += 1
            (folder / page_file_name(pid)).write_bytes(out)
            budget -= len(out)
            pid += 1
        if len(routes[address]) > 1:
            completes.append((routes[address][1], 1))
    ids = iter(range(10**9, 2 * 10**9))
    with JournalWriter.create(root / "bindings", BINDINGS) as w:
        for qid, (name, address) in queues.items():
            t = next(ids)
            w.append_add_tx(t, qid, 21, Writer().simple_string(name).simple_string(address)
                            .nullable_simple_string(None).nullable_simple_string("").bool_a(False).getvalue())
            w.append_commit(t)
    with JournalWriter.create(root / "journal", MESSAGES, file_size=10 * 2**20) as w:
        for t in page_tx["committed"]:
            w.append_add(next(ids), 35, Writer().i64(t).i32(20).getvalue())
        for q, page, n in acks:
            w.append_add(next(ids), 39, Writer().i64(q).i64(page).i32(n).getvalue())
        for q, page in completes:
            w.append_add(next(ids), 42, Writer().i64(q).i64(page).i32(0).getvalue())
        for q in queues:
            w.append_add(next(ids), 40, Writer().i64(q).i64(0).i64(0).getvalue())
        for t in page_tx["prepared"]:
            j = next(ids)
            w.append_add_tx(j, next(ids), 35, Writer().i64(t).i32(20).getvalue())
            w.append_prepare(j, b"")


def has_demo() -> bool:
    out = subprocess.run([str(AMQTOOL), "create", "--help"], capture_output=True, text=True)
    return out.returncode == 0 and "--demo" in out.stdout


def demo_store(base: Path, size: str = "1GiB") -> Path:
    """The ``amqtool create --demo SIZE`` store under ``base`` (``demo`` for 1 GiB, else ``demo-<size>``), built
    once and reused by every bench that reads a demo store."""
    store = base / ("demo" if size == "1GiB" else f"demo-{size}")
    if not (store / "data" / "journal").is_dir():
        shutil.rmtree(store, ignore_errors=True)
        subprocess.run([str(AMQTOOL), "create", "--demo", size, str(store), "-q"], check=True,
                       stdout=subprocess.DEVNULL)
    return store


def gnu_time_usage(stderr: str) -> tuple[float, float | None]:
    """(CPU seconds, user + system; peak RSS MiB, None when absent) from the report ``/usr/bin/time -v`` writes
    at the end of stderr: for the benches that capture a child's output and so cannot use :func:`run`."""
    cpu, rss = 0.0, None
    for line in stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1]) / 1024.0
        elif "User time (seconds)" in line or "System time (seconds)" in line:
            cpu += float(line.split(":")[1])
    return cpu, rss


def run(cmd: list[str]) -> tuple[float, float, int, float]:
    """(seconds, peak RSS MiB, exit code, CPU seconds) of one child, stdout to /dev/null. The RSS and CPU
    time come from wait4; this process stays small (the store is built in a child), since Linux carries the
    parent's high-water mark at fork into the child's ru_maxrss. CPU seconds (user + system) say more than
    wall seconds on a loaded machine."""
    with open(os.devnull, "wb") as null:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        elapsed = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, p.returncode, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", choices=["auto", "demo", "synthetic", "paged"], default="auto")
    ap.add_argument("--dir", default="/tmp/amqbench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build-synthetic", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--build-paged", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build_synthetic:
        build_synthetic(Path(args.build_synthetic))
        return 0
    if args.build_paged:
        build_paged(Path(args.build_paged))
        return 0
    source = args.source
    if source == "auto":
        source = "demo" if has_demo() else "synthetic"
    base = Path(args.dir)
    if source == "demo":
        store = demo_store(base)
    elif source == "paged":
        store = base / "paged"
        if not (store / "journal").is_dir():
            shutil.rmtree(store, ignore_errors=True)
            subprocess.run([sys.executable, __file__, "--build-paged", str(store)], check=True)
    else:
        store = base / "synthetic"
        if not any((store / "journal").glob("*.amq")):
            subprocess.run([sys.executable, __file__, "--build-synthetic", str(store / "journal")], check=True)
    files = sorted(p for p in store.rglob("*") if p.is_file() and p.name != "manifest.json")
    nbytes = sum(p.stat().st_size for p in files)
    journal_bytes = sum(p.stat().st_size for p in files if p.suffix in (".amq", ".bindings"))
    page_bytes = sum(p.stat().st_size for p in files if p.suffix == ".page")

    cat = ["cat", *map(str, files)]
    verify = [str(AMQTOOL), "verify", "--format", "json", "-q", str(store)]
    prn = [str(AMQTOOL), "print", "--format", "json", "--safe", "-q", str(store)]
    # the journals alone: --max-pages 0 leaves out the paged messages, so the two lines show the paging
    # section's share of print's time
    prn_journal = prn[:-1] + ["--max-pages", "0", str(store)]
    startup = [str(AMQTOOL), "--help"]
    for cmd in (cat, verify, prn):  # warm the page cache (and the interpreter's .pyc files)
        run(cmd)
    best: dict[str, tuple[float, float, int, float]] = {}
    for _ in range(args.runs):
        for name, cmd in (("cat", cat), ("startup", startup), ("verify", verify), ("print", prn),
                          ("print-j", prn_journal)):
            r = run(cmd)
            if name not in best or r[0] < best[name][0]:
                best[name] = (r[0], max(r[1], best.get(name, (0, 0, 0, 0))[1]), r[2],
                              min(r[3], best.get(name, (0, 0, 0, r[3]))[3]))

    gb = nbytes / 1e9
    print(f"store: {source} at {store}: {len(files)} files, {nbytes / 2**20:.0f} MiB "
          f"({journal_bytes / 2**20:.0f} MiB of journal files, {page_bytes / 2**20:.0f} MiB of page files); "
          f"best of {args.runs}, warm cache")
    print("machine load average: %s (1, 5, 15 min) on %d CPUs (shared machines are noisy)"
          % (", ".join(f"{x:.2f}" for x in os.getloadavg()), os.cpu_count()))
    t_cat = best["cat"][0]
    artemis_here = ARTEMIS_LOAD_S * nbytes / ANCHOR_BYTES  # Artemis' 400 MB/s scaled to this store
    print(f"{'':8} {'seconds':>8} {'GB/s':>7} {'vs cat':>7} {'CPU s':>7} {'peak RSS':>10}  exit")
    for name in ("cat", "startup", "verify", "print", "print-j"):
        t, rss, code, cpu = best[name]
        rate = f"{gb / t:7.2f}" if name != "startup" else "      -"
        ratio = f"{t / t_cat:6.1f}x" if name != "cat" else "      -"
        print(f"{name:8} {t:8.3f} {rate} {ratio} {cpu:7.2f} {rss:7.0f} MiB  {code}")
    ok = True
    print("  (print-j: print --max-pages 0, the journals without the paged messages)")
    if page_bytes:
        extra = best["print"][0] - best["print-j"][0]
        extra_cpu = best["print"][3] - best["print-j"][3]
        rate = f"{page_bytes / extra / 1e9:.2f} GB/s of page files" if extra > 0 else "within noise"
        print(f"  paged messages in print: {extra:.2f} s ({rate}), {extra_cpu:.2f} CPU s")
    for name in ("verify", "print", "print-j"):
        t, rss, _, _ = best[name]
        checks = [(gb / t * 1e9 >= TARGET_BPS, f">= 1 GB/s ({gb / t:.2f})"),
                  (t <= artemis_here, f"faster than Artemis' load ({t:.2f} s vs {artemis_here:.2f} s scaled)"),
                  (rss < RSS_LIMIT_MIB, f"peak RSS < {RSS_LIMIT_MIB} MiB ({rss:.0f})")]
        for good, what in checks:
            ok &= good
            print(f"  {name}: {'ok  ' if good else 'MISS'} {what}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
