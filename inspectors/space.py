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
from dataclasses import dataclass


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
        return {"total": self.total, "usable": self.usable, "usedPercent": round(self.used_fraction * 100, 2)}


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
    min_disk_free_given: str | None = None  # the text the operator typed, echoed beside the bytes

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
        return {"mode": self.mode, "maxDiskUsage": self.max_disk_usage, "minDiskFree": self.min_disk_free}


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


@dataclass
class ClassicAssessment:
    """What the broker makes of one storeUsage/tempUsage limit on this filesystem."""

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
        return {"currentUsage": self.current, "configuredLimit": self.configured_limit,
                "effectiveLimit": self.effective_limit, "cutAtStart": self.cut_at_start,
                "refusesStart": self.refuses_start, "headroom": self.headroom,
                "fsTotal": self.fs_total, "fsUsable": self.fs_usable}


def assess_classic(limit: int, usage: Usage, current: int, adjust: bool, percent_limit: int = 0,
                   total: int = 0) -> ClassicAssessment:
    """What the broker makes of a ``limit`` at start (``checkUsageLimit``) given the filesystem and usage.

    ``percent_limit`` and ``total`` are the usage element's ``percentLimit`` and ``total`` attributes (0: unset).
    """
    configured = limit
    if percent_limit > 0:
        # PercentLimitUsage.updateLimitBasedOnPercent
        configured = (total if total > 0 else usage.total) * percent_limit // 100
    usable_plus_current = (total if total > 0 else usage.usable) + current
    effective, cut, refuses = configured, False, False
    if configured > usable_plus_current:
        if adjust:
            effective, cut = usable_plus_current, True
        else:
            refuses = True
    return ClassicAssessment(usage.total, usage.usable, current, configured, effective, cut, refuses)
