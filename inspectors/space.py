"""Free space against the brokers' own limits: Artemis ``max-disk-usage``/``min-disk-free`` and ActiveMQ
Classic ``storeUsage``/``tempUsage``.

Artemis (``ActiveMQServerImpl.deployFileStoreMonitor``, ``FileStoreMonitor.tick``):

* ``min-disk-free`` (bytes, ``-1`` = unset) wins when set; then a store is within its limit while
  ``usable > min-disk-free``.
* otherwise ``max-disk-usage`` (percent, default 90, ``-1`` = off): within the limit while
  ``1 - usable/total < max-disk-usage/100``.
* usable/total are ``FileStore.getUsableSpace()``/``getTotalSpace()``, i.e. ``f_bavail*f_frsize`` and
  ``f_blocks*f_frsize`` (psutil's ``free`` and ``total``). The journal, bindings, large-messages and paging
  directories are watched (only those that exist); any one over the limit blocks producers for all.

ActiveMQ Classic (``BrokerService.checkUsageLimit``, ``XBeanByteConverterUtil``): ``storeUsage`` limits the
size of the persistence adapter's directory (default 100 GiB), ``tempUsage`` the ``tmp_storage`` directory
(default 50 GiB); sizes like ``100 gb`` are binary (1024) units. ``percentLimit`` sets the limit to that
share of the partition. A limit above ``usable + current usage`` is cut down to it at start
(``adjustUsageLimits``, default true) or, with ``adjustUsageLimits="false"``, the broker refuses to start.
Producers block when the usage reaches the limit.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UsageError

CLASSIC_DEFAULT_STORE_LIMIT = 100 * 1024**3   # BrokerService.getSystemUsage
CLASSIC_DEFAULT_TEMP_LIMIT = 50 * 1024**3


@dataclass
class Usage:
    """One filesystem's numbers, in Artemis' terms."""

    path: str
    device: int
    total: int
    usable: int

    @property
    def used_fraction(self) -> float:
        # FileStoreMonitor.calculateUsage: 0 when total is 0
        return 0.0 if self.total == 0 else 1.0 - self.usable / self.total

    def to_json(self) -> dict:
        return {"total": self.total, "usable": self.usable, "used_percent": round(self.used_fraction * 100, 2)}


def disk_usage(path: str) -> Usage:
    """psutil's view of the filesystem holding ``path`` (which must exist)."""
    import psutil

    du = psutil.disk_usage(path)
    return Usage(path=path, device=os.stat(path).st_dev, total=int(du.total), usable=int(du.free))


@dataclass
class ArtemisLimit:
    """The rule the broker will apply: ``min-disk-free``, ``max-disk-usage`` or none."""

    max_disk_usage: int = 90
    min_disk_free: int | None = None

    @property
    def mode(self) -> str:
        if self.min_disk_free is not None and self.min_disk_free != -1:
            return "min-disk-free"
        if self.max_disk_usage != -1:
            return "max-disk-usage"
        return "off"

    def blocking_usable(self, total: int) -> int | None:
        """Usable bytes at (and below) which producers block; None when no limit applies."""
        if self.mode == "min-disk-free":
            return self.min_disk_free
        if self.mode == "max-disk-usage":
            # usage >= max  <=>  usable <= total * (1 - max/100)
            return total * (100 - self.max_disk_usage) // 100  # integers: no float fuzz at the boundary
        return None

    def within(self, usage: Usage) -> bool:
        if self.mode == "min-disk-free":
            return usage.usable > self.min_disk_free
        if self.mode == "max-disk-usage":
            return usage.used_fraction < self.max_disk_usage / 100
        return True

    def headroom(self, usage: Usage) -> int | None:
        """Bytes that can still be written before the limit blocks producers (negative: already over)."""
        floor = self.blocking_usable(usage.total)
        return None if floor is None else usage.usable - floor

    def to_json(self) -> dict:
        return {"mode": self.mode, "max_disk_usage": self.max_disk_usage, "min_disk_free": self.min_disk_free}


def directory_size(path: str) -> int:
    """Bytes allocated to regular files under ``path`` (apparent size; symlinks not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


# --------------------------------------------------------------------------------------------------
# ActiveMQ Classic activemq.xml (only what the space check needs)

_CLASSIC_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(b)?\s*$", re.IGNORECASE)


def parse_classic_size(text: str) -> int:
    """``XBeanByteConverterUtil.convertToLongBytes``: ``20 Mb``, ``1024kb``, ``1g``; powers of 1024."""
    m = _CLASSIC_SIZE.match(text or "")
    if not m:
        raise UsageError(f"invalid ActiveMQ size {text!r} (expected e.g. 100 gb, 512 mb, 1024)")
    return int(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower())


@dataclass
class ClassicUsageLimit:
    name: str                 # "storeUsage" | "tempUsage"
    directory: Path
    limit: int
    percent_limit: int = 0
    total: int = 0            # usage "total" attribute (overrides the partition size)
    explicit: bool = False    # set in activemq.xml (else the broker default)

    def to_json(self) -> dict:
        return {"name": self.name, "directory": str(self.directory), "limit": self.limit,
                "percent_limit": self.percent_limit, "total": self.total, "explicit": self.explicit}


@dataclass
class ClassicSettings:
    source: str
    data_directory: Path
    broker_name: str
    store_directory: Path | None
    tmp_directory: Path
    adjust_usage_limits: bool = True
    limits: list[ClassicUsageLimit] = field(default_factory=list)

    def directories(self) -> dict[str, Path]:
        dirs = {"kahadb": self.store_directory, "tmp_storage": self.tmp_directory}
        return {k: v for k, v in dirs.items() if v is not None}


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def read_activemq_xml(path: str | os.PathLike) -> ClassicSettings:
    """Read the store directory and usage limits from an ActiveMQ Classic ``activemq.xml``.

    ``${activemq.base}`` is the parent of the file's directory (``conf/``), ``${activemq.data}`` is
    ``${activemq.base}/data`` (the ``bin/activemq`` defaults); environment variables of the same names win.
    """
    from defusedxml import ElementTree as ET

    path = Path(path)
    try:
        tree = ET.parse(path)
    except FileNotFoundError:
        raise UsageError("activemq.xml not found", path=str(path)) from None
    except (OSError, ET.ParseError) as err:
        raise UsageError(f"cannot read activemq.xml: {err}", path=str(path)) from None
    except Exception as err:  # defusedxml refusals
        raise UsageError(f"refusing activemq.xml: {err}", path=str(path)) from None
    broker = next((e for e in tree.iter() if _local(e.tag) == "broker"), None)
    if broker is None:
        raise UsageError("not an ActiveMQ activemq.xml (no <broker> element)", path=str(path))
    base = path.resolve().parent.parent
    props = {
        "activemq.base": os.environ.get("ACTIVEMQ_BASE", str(base)),
        "activemq.home": os.environ.get("ACTIVEMQ_HOME", str(base)),
        "activemq.conf": os.environ.get("ACTIVEMQ_CONF", str(path.resolve().parent)),
    }
    props["activemq.data"] = os.environ.get("ACTIVEMQ_DATA", props["activemq.base"] + "/data")

    def expand(text: str) -> str:
        return re.sub(r"\$\{([^}:]*)(?::([^}]*))?\}", lambda m: props.get(m.group(1), m.group(2) or m.group(0)),
                      text)

    def as_path(text: str) -> Path:
        p = Path(expand(text))
        return p if p.is_absolute() else base / p

    data_dir = as_path(broker.get("dataDirectory", "activemq-data"))
    name = broker.get("brokerName", "localhost")
    tmp = broker.get("tmpDataDirectory")
    tmp_dir = as_path(tmp) if tmp else data_dir / name / "tmp_storage"
    store_dir = None
    for elem in tree.iter():
        tag = _local(elem.tag)
        if tag in ("kahaDB", "mKahaDB", "levelDB", "replicatedLevelDB") and elem.get("directory"):
            store_dir = as_path(elem.get("directory"))
            break
        if tag in ("kahaDB", "mKahaDB"):
            store_dir = data_dir / name / "KahaDB"  # BrokerService: default persistence directory
            break
    adjust = broker.get("adjustUsageLimits", "true").strip().lower() != "false"
    settings = ClassicSettings(str(path), data_dir, name, store_dir, tmp_dir, adjust)
    defaults = {"storeUsage": CLASSIC_DEFAULT_STORE_LIMIT, "tempUsage": CLASSIC_DEFAULT_TEMP_LIMIT}
    found: dict[str, ClassicUsageLimit] = {}
    for elem in tree.iter():
        tag = _local(elem.tag)
        # <storeUsage><storeUsage limit="..."/></storeUsage>: the inner element carries the attributes.
        if tag in defaults and (elem.get("limit") or elem.get("percentLimit")):
            try:
                limit = parse_classic_size(expand(elem.get("limit"))) if elem.get("limit") else defaults[tag]
                percent = int(expand(elem.get("percentLimit", "0")))
                total = parse_classic_size(expand(elem.get("total"))) if elem.get("total") else 0
            except ValueError:
                raise UsageError(f"<{tag}> has a non-numeric attribute", path=str(path)) from None
            found[tag] = ClassicUsageLimit(tag, Path(), limit, percent, total, explicit=True)
    for tag, default in defaults.items():
        lim = found.get(tag) or ClassicUsageLimit(tag, Path(), default)
        lim.directory = (store_dir or data_dir) if tag == "storeUsage" else tmp_dir
        settings.limits.append(lim)
    return settings


@dataclass
class ClassicAssessment:
    limit: ClassicUsageLimit
    fs_total: int
    fs_usable: int
    current: int
    configured_limit: int      # after percentLimit
    effective_limit: int       # after the start-up cut to usable space
    cut_at_start: bool
    refuses_start: bool

    @property
    def headroom(self) -> int:
        return self.effective_limit - self.current

    def to_json(self) -> dict:
        return {**self.limit.to_json(), "current_usage": self.current, "configured_limit": self.configured_limit,
                "effective_limit": self.effective_limit, "cut_at_start": self.cut_at_start,
                "refuses_start": self.refuses_start, "headroom": self.headroom,
                "fs_total": self.fs_total, "fs_usable": self.fs_usable}


def assess_classic(limit: ClassicUsageLimit, usage: Usage, current: int, adjust: bool) -> ClassicAssessment:
    """What the broker makes of ``limit`` at start (``checkUsageLimit``) given the filesystem and usage."""
    total = limit.total if limit.total > 0 else usage.total
    configured = limit.limit
    if limit.percent_limit > 0:
        configured = total * limit.percent_limit // 100  # PercentLimitUsage.updateLimitBasedOnPercent
    usable_plus_current = (limit.total if limit.total > 0 else usage.usable) + current
    effective, cut, refuses = configured, False, False
    if configured > usable_plus_current:
        if adjust:
            effective, cut = usable_plus_current, True
        else:
            refuses = True
    return ClassicAssessment(limit, usage.total, usage.usable, current, configured, effective, cut, refuses)
