"""A small fleet for the fleet-export tests: demo Artemis stores (one with a ``server.lock`` node id), KahaDB
fixture copies, a copy of the LevelDB fixture, one damaged store (a journal file whose header the loader refuses) and one empty directory;
and helpers to compare a fleet export with the single-store exports of its stores."""
from __future__ import annotations

from pathlib import Path

from amqtool.engines.export import ExportRequest, run_export
from tests.engines.export_store import normalise, read_jsonl_table, read_parquet_table
from tests.engines.leveldb.stores import FIXTURE as LEVELDB_FIXTURE
from tests.support import KAHADB, copy_tree

NODE_UUID = bytes(range(0x10, 0x20))
NODE_ID = "10111213-1415-1617-1819-1a1b1c1d1e1f"


def build_fleet(root: Path, *, demos: int = 3, size: int = 4 * 1024 * 1024) -> dict[str, Path]:
    """The fleet under ``root/backups``: name the export gives each store -> its path."""
    from amqtool.engines.artemis.demo import create_demo

    base = root / "backups"
    stores: dict[str, Path] = {}
    for i in range(demos):
        p = base / f"site-{i % 2}" / f"broker-{i}"
        create_demo(p, size, file_size=1024 * 1024, seed=11 + i)
        stores[p.relative_to(base).as_posix()] = p
    # the first demo store keeps a node id in its journal directory (FileLockNodeManager's server.lock)
    first = stores.pop("site-0/broker-0")
    (first / "data" / "journal" / "server.lock").write_bytes(b"L" + b"\0\0" + NODE_UUID)
    stores[NODE_ID] = first
    if KAHADB.is_dir():
        for ds in ("basic", "mkahadb"):
            p = base / "site-1" / f"kaha-{ds}"
            copy_tree(KAHADB / ds, p)
            stores[p.relative_to(base).as_posix()] = p
    if (LEVELDB_FIXTURE / "store").is_dir():
        p = base / "site-1" / "leveldb-basic"
        copy_tree(LEVELDB_FIXTURE / "store", p)
        stores[p.relative_to(base).as_posix()] = p
    damaged = base / "site-0" / "damaged"
    create_demo(damaged, size, file_size=1024 * 1024, seed=99)
    jf = damaged / "data" / "journal" / "activemq-data-1.amq"
    with open(jf, "r+b") as fh:  # a format version no broker wrote: Artemis refuses the file
        fh.write(b"\xff" * 16)
    stores["site-0/damaged"] = damaged
    empty = base / "site-1" / "empty"
    empty.mkdir(parents=True)
    stores["site-1/empty"] = empty
    return stores


def read_table(directory: Path, fmt: str) -> list[dict]:
    return read_jsonl_table(directory) if fmt == "jsonl" else read_parquet_table(directory)


def single_rows(path: Path, out: Path, fmt: str) -> tuple[list[dict], list[dict], dict]:
    """The messages and bindings rows (normalised) and the summary of ``path``'s single-store export."""
    doc, _ = run_export(ExportRequest(path=str(path), out=str(out), fmt=fmt, engine="local"))
    return (normalise(read_table(out / "messages", fmt)), normalise(read_table(out / "bindings", fmt)), doc)


def fleet_rows_by_store(out: Path, table: str, fmt: str) -> dict[str, list[dict]]:
    """A fleet export's ``table`` split by store, the ``store`` column taken out, normalised."""
    by: dict[str, list[dict]] = {}
    for r in read_table(out / table, fmt):
        r = dict(r)
        by.setdefault(str(r.pop("store")), []).append(r)
    return {k: normalise(v) for k, v in by.items()}
