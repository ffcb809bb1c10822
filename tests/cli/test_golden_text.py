"""Issue 27: golden text outputs of every command at 80 and 120 columns, kept in ``tests/cli/golden/``.

The stores are the broker-written fixtures and a demo store made with a fixed seed, copied under one
directory whose name has a fixed length (``/tmp/amqtool-golden-XXXXXXXX``), so that a path folds at the same
column on every machine; the commands run from there with relative paths. Only what truly varies is
normalised: that directory's random part and, for ``bench``, nothing (its engine is replaced by a recorded
report: timings are not reproducible, the layout of their table is). ``check write-cache`` reads a recorded
sysfs/udev tree (``--root``), not the host's.

``AMQTOOL_UPDATE_GOLDEN=1`` rewrites the files; the diff is then reviewed like code."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from amqtool.engines.artemis.demo import create_demo
from tests.support import KAHADB, ORACLE, copy_tree

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("AMQTOOL_UPDATE_GOLDEN") == "1"
AT = "1717286400000"  # 2024-06-02T00:00:00Z: the demo's messages are a day old


@pytest.fixture(scope="module")
def world():
    base = Path(tempfile.mkdtemp(prefix="amqtool-golden-", dir="/tmp"))
    try:
        create_demo(base / "demo", 4 * 1024 * 1024, file_size=1024 * 1024, seed=7)
        copy_tree(ORACLE / "03_transactions" / "journal", base / "tx")
        copy_tree(ORACLE / "04a_before_compact" / "journal", base / "j04a")
        copy_tree(ORACLE / "05a_torn_tail_zeroed" / "journal", base / "torn")
        copy_tree(KAHADB / "basic" / "kahadb", base / "kaha")
        copy_tree(KAHADB / "gc" / "kahadb", base / "gc")
        _machine(base / "machine")
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _machine(root: Path) -> None:
    """A recorded host: a SATA disk with its volatile write cache on, holding /var/lib/artemis."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "inspectors"))
    from machine_support import RecordedMachine

    m = RecordedMachine(root)
    m.mount("/", 254, 0, "ext4", "/dev/vda")
    path = "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0"
    sda = m.disk(path, "sda", 8, 0,
                 queue={"write_cache": "write back", "rotational": 1, "fua": 0},
                 device={"vendor": "ATA     ", "model": "ST2000DM008-2FR1", "scsi_disk/0:0:0:0/cache_type":
                         "write back"},
                 udev={"ID_BUS": "ata", "ID_ATA": "1", "ID_ATA_WRITE_CACHE": "1", "ID_ATA_WRITE_CACHE_ENABLED": "1",
                       "ID_MODEL": "ST2000DM008-2FR1"})
    m.partition(sda, "sda1", 8, 1, 1)
    m.mount("/var/lib/artemis", 8, 1, "ext4", "/dev/sda1")


def _bench_report(directory):
    from amqtool.engines.bench import BenchReport, Result
    from amqtool.errors import Finding, Severity

    def lat(p50, p99, mx):
        return {"count": 100, "minUs": p50 / 2, "p50Us": p50, "p90Us": (p50 + p99) / 2, "p99Us": p99,
                "p999Us": mx, "maxUs": mx, "meanUs": p50}

    results = [
        Result("nio", "one", 1, 4096, "fdatasync", ops=700, elapsed_ns=2_000_000_000, latency=lat(2811.5, 9120.25, 15000)),
        Result("nio", "many", 32, 4096, "fdatasync", ops=21000, elapsed_ns=2_000_000_000,
               latency=lat(3012.0, 11002.5, 21000)),
        Result("asyncio", "one", 1, 4096, "O_DIRECT completion", ops=16000, elapsed_ns=2_000_000_000,
               latency=lat(97.5, 170.75, 900)),
        Result("mapped", "one", 1, 4096, "msync(MS_SYNC)", ops=690, elapsed_ns=2_000_000_000,
               latency=lat(2900.0, 3966.9, 4100)),
        Result("io_uring", "one", 1, 4096, "O_DIRECT completion", available=False,
               reason="io_uring unavailable: disabled by AMQTOOL_NO_IO_URING=1"),
    ]
    findings = [Finding(Severity.INFO, "aio-durability",
                        "ASYNCIO figures are O_DIRECT completions without a cache flush, as Artemis writes them: "
                        "durable only when the device write cache is off or power-protected (see amqtool check "
                        "write-cache)", str(directory))]
    rec = {"journalType": "ASYNCIO", "journalBufferTimeout": 125000, "journalMaxIo": 4096, "pageSyncTimeout": 125000,
           "basis": {"journalBufferTimeout": "ASYNCIO 1 producer"},
           "brokerXml": ["<journal-type>ASYNCIO</journal-type>",
                         "<journal-buffer-timeout>125000</journal-buffer-timeout>",
                         "<journal-max-io>4096</journal-max-io>", "<page-sync-timeout>125000</page-sync-timeout>"]}
    return BenchReport(str(directory), "ext4", {"dev": "254:0", "name": "vda", "rotational": True},
                       {"blockSize": 4096, "fileSize": 10485760}, results, findings, rec)


def _sync_doc(directory):
    def res(n, method, odirect, ops, usecs):
        return {"writesPerOp": n, "method": method, "oDirect": odirect, "available": ops is not None,
                "reason": None if ops else "O_DIRECT not supported", "ops": ops or 0, "elapsedNs": 1_000_000_000,
                "opsPerSec": ops, "usecsPerOp": usecs,
                "latency": {"p50Us": usecs, "p99Us": usecs * 3, "maxUs": usecs * 4} if ops else None}
    results = [res(1, "open_datasync", True, 318.353, 3141.2), res(1, "fdatasync", False, 301.5, 3316.7),
               res(1, "fsync", False, None, None), res(2, "fdatasync", False, 150.25, 6655.4)]
    return {"verdict": "OK", "directory": str(directory), "filesystem": "ext4", "seconds": 1.0, "blockSize": 8192,
            "results": results, "findings": []}


# name -> (command line, how to prepare the run); {w} is the world directory (the runs' working directory).
CASES = {
    "print-oracle-tx": ["print", "tx"],
    "print-demo-bindings": ["print", "demo", "--journal", "bindings", "--safe"],
    "print-demo-pins": ["print", "demo", "--pins"],
    "print-kahadb": ["print", "gc"],
    "print-kahadb-pins": ["print", "gc", "--pins", "--drain", "fx.gc.keep"],
    "verify-demo": ["verify", "demo"],
    "verify-torn": ["verify", "torn"],
    "verify-kahadb": ["verify", "kaha"],
    "stat-demo": ["stat", "demo", "--at", AT],
    "stat-kahadb": ["stat", "kaha", "--at", AT],
    "create-bindings": ["create", "new/bindings", "--kind", "bindings"],
    "create-demo": ["create", "new/demo", "--kind", "broker", "--demo", "4MiB", "--seed", "3"],
    "compact-dry-run": ["compact", "j04a", "--dry-run", "--compact-min-files", "1"],
    "compact-if-needed": ["compact", "demo", "--if-needed", "--dry-run"],
    "recover-demo": ["recover", "demo", "--dry-run"],
    "recover-kahadb": ["recover", "kaha", "--dry-run"],
    "export-demo": ["export", "demo", "-o", "new/export", "-f", "jsonl", "--engine", "local", "-q"],
    "check-write-cache": ["check", "write-cache", "/var/lib/artemis/data", "--root", "machine"],
    "bench": ["bench", ".", "-q"],
    "bench-sync-methods": ["bench", "sync-methods", ".", "-q"],
}


def _normalise(text: str, world: Path) -> str:
    return text.replace(str(world), "/tmp/amqtool-golden-XXXXXXXX")


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(world, run_cli, monkeypatch, name, columns):
    from amqtool.engines import bench

    monkeypatch.chdir(world)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(bench, "run_bench", lambda directory, **kw: _bench_report(Path(directory).resolve()))
    monkeypatch.setattr(bench, "run_sync_methods", lambda directory, **kw: _sync_doc(Path(directory).resolve()))
    shutil.rmtree(world / "new", ignore_errors=True)
    (world / "new").mkdir()
    code, out, _ = run_cli(*CASES[name])
    text = _normalise(f"$ amqtool {' '.join(CASES[name])}\n{out}[exit {code}]\n", world)
    assert max(map(len, out.splitlines()), default=0) <= columns, name  # fitted to the width
    path = GOLDEN / f"{name}.{columns}.txt"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no golden file {path.name}: run with AMQTOOL_UPDATE_GOLDEN=1 and review it")
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs (AMQTOOL_UPDATE_GOLDEN=1 rewrites it)"


def test_every_command_has_a_golden_output():
    """Every command of the app (read from it, so a new one is caught) has a case above; for ``check`` one
    of its subcommands (the rest read the host, whose facts are not reproducible), ``bench sync-methods``
    its own."""
    from amqtool.commands.completion import command_tree

    covered = set()
    for argv in CASES.values():
        covered.add(argv[0])
        if len(argv) > 1:
            covered.add(f"{argv[0]} {argv[1]}")
    wanted = {n.path for n in command_tree() if n.path and (" " not in n.path or n.path == "bench sync-methods")}
    assert wanted - covered == set(), f"commands without a golden text output: {sorted(wanted - covered)}"
