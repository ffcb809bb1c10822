"""Reading an Artemis ``broker.xml`` for the settings amqtool needs (directories, journal and disk limits).

Parsing goes through defusedxml (``store.xmlconfig``). Values follow Artemis' defaults
(``ActiveMQDefaultConfiguration``) when an element is absent. Relative directories resolve against the broker
instance directory (the parent of ``etc/``), as Artemis resolves them against ``artemis.instance``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UsageError
from amqtool.store.xmlconfig import local_name, parse_config

# ActiveMQDefaultConfiguration / ArtemisConstants
DEFAULT_JOURNAL_DIR = "data/journal"
DEFAULT_BINDINGS_DIR = "data/bindings"
DEFAULT_PAGING_DIR = "data/paging"
DEFAULT_LARGE_MESSAGES_DIR = "data/largemessages"
DEFAULT_JOURNAL_FILE_SIZE = 10 * 1024 * 1024
DEFAULT_JOURNAL_MIN_FILES = 2
DEFAULT_JOURNAL_POOL_FILES = -1
DEFAULT_COMPACT_MIN_FILES = 10
DEFAULT_COMPACT_PERCENTAGE = 30
DEFAULT_MAX_DISK_USAGE = 90
DEFAULT_JOURNAL_TYPE = "ASYNCIO"
DEFAULT_JOURNAL_MAX_IO_AIO = 4096
DEFAULT_JOURNAL_MAX_IO_NIO = 1
DEFAULT_JOURNAL_BUFFER_SIZE = 490 * 1024
DEFAULT_JOURNAL_BUFFER_TIMEOUT_AIO = 500_000
DEFAULT_JOURNAL_BUFFER_TIMEOUT_NIO = 3_333_333
DEFAULT_PAGE_SYNC_TIMEOUT_AIO = DEFAULT_JOURNAL_BUFFER_TIMEOUT_AIO
DEFAULT_PAGE_SYNC_TIMEOUT_NIO = DEFAULT_JOURNAL_BUFFER_TIMEOUT_NIO

_UNITS = {
    # ByteUtil.convertTextBytes: decimal and binary suffixes, case-insensitive, optional "B".
    "": 1,
    "b": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
    "t": 1000**4, "tb": 1000**4, "tib": 1024**4,
}


def parse_byte_size(text: str) -> int:
    """Artemis byte sizes (``ByteUtil.convertTextBytes``): ``100GB``, ``10MiB``, ``512K``, ``1048576``.

    Raises UsageError for anything else.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text or "")
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"invalid byte size {text!r} (expected e.g. 100GB, 10MiB, 1048576)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass
class BrokerSettings:
    """What amqtool uses from broker.xml, with Artemis' defaults filled in."""

    source: str | None = None
    instance_dir: Path | None = None
    journal_dir: Path | None = None
    bindings_dir: Path | None = None
    paging_dir: Path | None = None
    large_messages_dir: Path | None = None
    # <node-manager-lock-directory>: where FileLockNodeManager keeps server.lock and serverlock.1/.2
    # (ConfigurationImpl.getNodeManagerLockLocation); None when absent, and then the journal directory holds them.
    node_manager_lock_dir: Path | None = None
    journal_type: str = DEFAULT_JOURNAL_TYPE
    journal_file_size: int = DEFAULT_JOURNAL_FILE_SIZE
    journal_min_files: int = DEFAULT_JOURNAL_MIN_FILES
    journal_pool_files: int = DEFAULT_JOURNAL_POOL_FILES
    journal_compact_min_files: int = DEFAULT_COMPACT_MIN_FILES
    journal_compact_percentage: int = DEFAULT_COMPACT_PERCENTAGE
    journal_max_io: int | None = None
    journal_buffer_timeout: int | None = None
    journal_buffer_size: int = DEFAULT_JOURNAL_BUFFER_SIZE
    journal_device_block_size: int | None = None
    page_sync_timeout: int | None = None
    max_disk_usage: int = DEFAULT_MAX_DISK_USAGE
    min_disk_free: int | None = None
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def effective_max_io(self) -> int:
        if self.journal_max_io is not None:
            return self.journal_max_io
        return DEFAULT_JOURNAL_MAX_IO_AIO if self.journal_type == "ASYNCIO" else DEFAULT_JOURNAL_MAX_IO_NIO

    def directories(self) -> dict[str, Path]:
        """The store directories by role (journal, bindings, paging, large-messages)."""
        dirs = {
            "journal": self.journal_dir,
            "bindings": self.bindings_dir,
            "paging": self.paging_dir,
            "large-messages": self.large_messages_dir,
        }
        return {k: v for k, v in dirs.items() if v is not None}


_CORE_ELEMENTS = (
    "journal-directory", "bindings-directory", "paging-directory", "large-messages-directory",
    "journal-type", "journal-file-size", "journal-min-files", "journal-pool-files",
    "journal-compact-min-files", "journal-compact-percentage", "journal-max-io", "journal-buffer-timeout",
    "journal-buffer-size", "journal-device-block-size", "page-sync-timeout", "max-disk-usage", "min-disk-free",
    "node-manager-lock-directory",
)


def _expand(text: str, props: dict[str, str]) -> str:
    # Artemis substitutes ${name} and ${name:default} from system properties in broker.xml.
    def sub(m: re.Match) -> str:
        name, _, default = m.group(1).partition(":")
        return props.get(name, os.environ.get(name, default))

    return re.sub(r"\$\{([^}]*)\}", sub, text)


def read_broker_xml(path: str | os.PathLike) -> BrokerSettings:
    """Read ``broker.xml``. Raises UsageError when the file is missing or not a broker configuration."""
    path = Path(path)
    tree = parse_config(path, "broker.xml")
    instance = path.resolve().parent.parent if path.resolve().parent.name == "etc" else path.resolve().parent
    values: dict[str, str] = {}
    for elem in tree.iter():
        tag = local_name(elem.tag)
        if tag in _CORE_ELEMENTS and elem.text is not None and tag not in values:
            values[tag] = elem.text.strip()
    if not any(local_name(el.tag) == "core" for el in tree.iter()):
        raise UsageError("not an Artemis broker.xml (no <core> element)", path=str(path))
    props = {"artemis.instance": str(instance), "data.dir": str(instance / "data")}
    values = {k: _expand(v, props) for k, v in values.items()}

    def directory(key: str, default: str) -> Path:
        p = Path(values.get(key, default))
        return p if p.is_absolute() else instance / p

    def integer(key: str, default):
        if key not in values:
            return default
        try:
            return int(values[key])
        except ValueError:
            raise UsageError(f"<{key}> is not an integer: {values[key]!r}", path=str(path)) from None

    s = BrokerSettings(source=str(path), instance_dir=instance, raw=values)
    s.journal_dir = directory("journal-directory", DEFAULT_JOURNAL_DIR)
    s.bindings_dir = directory("bindings-directory", DEFAULT_BINDINGS_DIR)
    s.paging_dir = directory("paging-directory", DEFAULT_PAGING_DIR)
    s.large_messages_dir = directory("large-messages-directory", DEFAULT_LARGE_MESSAGES_DIR)
    if values.get("node-manager-lock-directory"):
        s.node_manager_lock_dir = directory("node-manager-lock-directory", "")
    s.journal_type = values.get("journal-type", DEFAULT_JOURNAL_TYPE).upper()
    if "journal-file-size" in values:
        s.journal_file_size = parse_byte_size(values["journal-file-size"])
    s.journal_min_files = integer("journal-min-files", s.journal_min_files)
    s.journal_pool_files = integer("journal-pool-files", s.journal_pool_files)
    s.journal_compact_min_files = integer("journal-compact-min-files", s.journal_compact_min_files)
    s.journal_compact_percentage = integer("journal-compact-percentage", s.journal_compact_percentage)
    s.journal_max_io = integer("journal-max-io", None)
    s.journal_buffer_timeout = integer("journal-buffer-timeout", None)
    if "journal-buffer-size" in values:
        s.journal_buffer_size = parse_byte_size(values["journal-buffer-size"])
    if "journal-device-block-size" in values:
        s.journal_device_block_size = parse_byte_size(values["journal-device-block-size"])
    s.page_sync_timeout = integer("page-sync-timeout", None)
    s.max_disk_usage = integer("max-disk-usage", s.max_disk_usage)
    if "min-disk-free" in values:
        s.min_disk_free = parse_byte_size(values["min-disk-free"])
    return s


def find_broker_xml(path: Path) -> Path | None:
    """``<instance>/etc/broker.xml`` when ``path`` is a broker instance directory."""
    candidate = path / "etc" / "broker.xml"
    return candidate if candidate.is_file() else None
