"""Finding ActiveMQ Classic LevelDB stores (``<levelDB>``, ``<replicatedLevelDB>``) on disk.

A store directory holds ``store-version.txt`` (``activemq_leveldb_store:1``), log files ``%016x.log``,
the live index ``dirty.index/`` and index snapshots ``%016x.index/`` (``LevelDBClient``); the logs may sit in
a separate ``logDirectory``. A path may be that directory, a data directory or instance holding one under a
usual name (``leveldb``, ``LevelDB``, ``data/…``, ``<brokerName>/LevelDB``), a directory whose children are
the node directories of a replicated LevelDB store (two or more stores), or, with ``--activemq-xml``,
whatever ``<levelDB directory=…>``/``<replicatedLevelDB directory=…>`` says.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UnknownStoreError
from amqtool.formats.leveldb.recordlog import INDEX_NAME, LOG_NAME

VERSION_FILE = "store-version.txt"
VERSION_PREFIX = "activemq_leveldb_store:"
_USUAL_NAMES = ("leveldb", "LevelDB", "levelDB")


@dataclass
class LevelDBStore:
    """One LevelDB store (``nodes`` empty), or the node directories of a replicated one."""

    root: Path
    directory: Path | None = None
    log_directory: Path | None = None
    nodes: list = field(default_factory=list)  # LevelDBStore per replica node
    activemq_xml: str | None = None
    settings: dict = field(default_factory=dict)
    kind: str = "leveldb"

    @property
    def replicated(self) -> bool:
        return bool(self.nodes)

    @property
    def directories(self) -> list[Path]:
        return [n.directory for n in self.nodes] if self.nodes else [self.directory]

    def log_dir(self) -> Path:
        return self.log_directory or self.directory


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def is_store_dir(d: Path) -> bool:
    names = _names(d)
    if VERSION_FILE in names:
        try:
            with open(d / VERSION_FILE, "rb") as fh:
                if fh.read(64).startswith(VERSION_PREFIX.encode()):
                    return True
        except OSError:
            pass
    has_index = "dirty.index" in names or any(INDEX_NAME.match(n) and n != "plist.index" for n in names)
    return has_index and any(LOG_NAME.match(n) for n in names)


def _node_store(d: Path) -> Path | None:
    """A replica node's store: the node directory itself, or the one store directly inside it."""
    if not d.is_dir():
        return None
    if is_store_dir(d):
        return d
    inner = [d / n for n in sorted(_names(d)) if (d / n).is_dir() and is_store_dir(d / n)]
    return inner[0] if len(inner) == 1 else None


def detect_leveldb(path: Path):
    path = Path(path)
    if is_store_dir(path):
        return LevelDBStore(root=path, directory=path)
    subs = [s for s in (_node_store(path / n) for n in sorted(_names(path)) if not n.startswith("."))
            if s is not None]
    if len(subs) >= 2:
        return LevelDBStore(root=path, nodes=[LevelDBStore(root=s, directory=s) for s in subs],
                            kind="replicated-leveldb")
    for base in (path, path / "data"):
        for name in _USUAL_NAMES:
            if is_store_dir(base / name):
                return LevelDBStore(root=base / name, directory=base / name)
        for n in sorted(_names(base)):
            for name in _USUAL_NAMES:
                if is_store_dir(base / n / name):
                    return LevelDBStore(root=base / n / name, directory=base / n / name)
    return None


def from_settings(conf) -> LevelDBStore:
    """The store an activemq.xml's ``<levelDB>``/``<replicatedLevelDB>`` configures (``conf``:
    :class:`amqtool.store.activemqxml.ActiveMQSettings`)."""
    attrs = conf.adapter_attributes
    directory = conf.store_directory or conf.data_directory / conf.broker_name / "LevelDB"
    if not directory.is_dir():
        raise UnknownStoreError(f"the LevelDB directory configured in activemq.xml (<{conf.adapter}>) does "
                                "not exist", path=str(directory))
    logs = None
    if attrs.get("logDirectory"):
        logs = Path(attrs["logDirectory"])
        logs = logs if logs.is_absolute() else conf.base_dir / logs
    return LevelDBStore(root=directory, directory=directory, log_directory=logs, activemq_xml=conf.source,
                        settings={**attrs, "adapter": conf.adapter})
