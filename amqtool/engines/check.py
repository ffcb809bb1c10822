"""``amqtool check``: is this disk fit to hold a journal? Facts from ``amqtool.inspectors``, judged here.

Each check returns a :class:`CheckReport`: findings (severity, stable code, one-line message, path) and a
``checks`` dict with the facts behind them (the JSON ``checks`` object, documented in man/amqtool-check.1).
Nothing here changes the system: fixes are *said* (``hdparm -W0``, ``sdparm --clear=WCE``,
``nvme set-feature -f 6 -v 0``), never run. The only write is the AIO check's O_DIRECT test file, which is
removed again.

Write-cache verdicts, and why:

* a physical disk with a volatile write-back cache that is not below a redundant md array: CRITICAL. Artemis'
  persistence docs: with the cache on, "even after syncing ... there is no guarantee the data has actually
  made it to disk"; a disk that drops or reorders a flush, or loses power with dirty cache, loses journal
  records the broker acknowledged.
* the same below a redundant md level (raid1/4/5/6/10): WARNING. A mirror survives a dead disk, not a power
  cut: every member loses its cache at the same instant.
* a virtual disk (virtio, xen, VMware, Hyper-V, cloud volumes) saying "write back": WARNING. The guest
  kernel sends flushes for every fsync; whether they reach stable storage depends on the hypervisor's cache
  mode (QEMU ``cache=none``/``writeback``/``directsync`` pass them to the host, ``cache=unsafe`` drops them),
  which cannot be seen from inside the guest. It is not proven unsafe, so not CRITICAL; it is not proven
  safe, so not OK.
* "write through": OK (no volatile cache, or one protected against power loss).
* a memory filesystem (tmpfs) or RAM block device (zram) anywhere in the stack: CRITICAL, the journal would
  not survive a reboot.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from amqtool.errors import CapabilityError, Finding, Severity, Verdict, overall_verdict
from amqtool.units import as_given, binary

# A limit is "close" when less than this share of the filesystem (or of a Classic limit) is left.
HEADROOM_WARN_FRACTION = 0.05
CLASSIC_MAX_FILE_LENGTH = 32 * 1024 * 1024  # KahaDB journalMaxFileLength default (Journal.DEFAULT_MAX_FILE_LENGTH)
DEFAULT_PROBE_SECONDS = 3.0
SUSPECT_FSYNC_RATE = 5000  # flushes/s at QD1 (peers.md 3.3, rules of thumb)


@dataclass
class Target:
    """A directory to check and its role (journal, bindings, paging, large-messages, kahadb, path)."""

    role: str
    path: str
    explicit: bool = True   # named on the command line (must exist) or taken from a broker config (may not yet)


@dataclass
class CheckReport:
    findings: list[Finding] = field(default_factory=list)
    checks: dict = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        return overall_verdict(self.findings)

    def add(self, severity: Severity, code: str, message: str, path: str | None = None, **details) -> None:
        self.findings.append(Finding(severity, code, message, path, None, details))

    def merge(self, other: "CheckReport", name: str) -> None:
        self.findings.extend(other.findings)
        self.checks[name] = other.checks

    def to_json(self) -> dict:
        return {"verdict": self.verdict.name, "findings": [f.to_json() for f in self.findings],
                "checks": self.checks}


@dataclass
class CheckConfig:
    """What the checks need, from the command line, broker.xml / activemq.xml and Artemis' defaults."""

    targets: list[Target]
    limit: object = None              # inspectors.space.ArtemisLimit
    classic: object = None            # store.activemqxml.ActiveMQSettings, when --activemq-xml was given
    journal_type: str = "ASYNCIO"
    journal_max_io: int = 4096
    device_block_size: int | None = None


def configure(paths=None, broker_xml: str | None = None, activemq_xml: str | None = None,
              max_disk_usage: int | None = None, min_disk_free: str | None = None,
              journal_max_io: int | None = None, journal_device_block_size: str | None = None) -> CheckConfig:
    """Resolve the options against the broker configuration files; an option wins over the file.

    Without ``paths`` the targets are the store directories the configuration names (they may not exist
    yet), else the current directory. Raises UsageError for values out of range.
    """
    from amqtool.inspectors.space import ArtemisLimit
    from amqtool.store.activemqxml import read_activemq_xml
    from amqtool.store.brokerxml import DEFAULT_MAX_DISK_USAGE, parse_byte_size, read_broker_xml
    from amqtool.units import check_number

    settings = read_broker_xml(broker_xml) if broker_xml else None
    classic = read_activemq_xml(activemq_xml) if activemq_xml else None
    if paths:
        targets = [Target("path", p, True) for p in paths]
    else:
        targets = [Target(role, str(d), False) for conf in (settings, classic) if conf
                   for role, d in conf.directories().items()] or [Target("path", ".", True)]
    mdu = max_disk_usage if max_disk_usage is not None else (
        settings.max_disk_usage if settings else DEFAULT_MAX_DISK_USAGE)
    check_number(mdu, "--max-disk-usage", minimum=0, maximum=100, also=(-1,))
    if min_disk_free is not None:
        mdf = -1 if min_disk_free.strip() == "-1" else parse_byte_size(min_disk_free)
    else:
        mdf = settings.min_disk_free if settings else None
    check_number(journal_max_io, "--journal-max-io", minimum=1)
    if journal_device_block_size is not None:
        block_size = parse_byte_size(journal_device_block_size)
    else:
        block_size = settings.journal_device_block_size if settings else None
    return CheckConfig(targets, ArtemisLimit(max_disk_usage=mdu, min_disk_free=mdf,
                                             min_disk_free_given=min_disk_free), classic,
                       settings.journal_type if settings else "ASYNCIO",
                       journal_max_io or (settings.effective_max_io if settings else 4096), block_size)


def _resolve_targets(targets: list[Target], report: CheckReport) -> list[tuple[Target, str]]:
    """(target, existing path to inspect). Missing explicit paths become UNKNOWN findings."""
    out = []
    for t in targets:
        try:
            os.stat(t.path)
            out.append((t, t.path))
            continue
        except FileNotFoundError:
            pass
        except PermissionError:
            report.add(Severity.UNKNOWN, "permission-denied", "permission denied (cannot look up the path)", t.path,
                       role=t.role)
            continue
        except OSError as err:
            report.add(Severity.UNKNOWN, "path-unreadable", err.strerror or str(err), t.path, role=t.role)
            continue
        if t.explicit:
            report.add(Severity.UNKNOWN, "path-not-found", "no such file or directory", t.path, role=t.role)
            continue
        from amqtool.inspectors.mounts import nearest_existing

        parent = nearest_existing(t.path)
        report.add(Severity.INFO, "directory-not-created",
                   f"{t.role} directory does not exist yet; judged on the filesystem of {parent}", t.path,
                   role=t.role, inspected=parent)
        out.append((t, parent))
    return out


# --------------------------------------------------------------------------------------------------
# write-cache


def _disk_summary(d) -> str:
    parts = [d.transport + (" (virtual)" if d.virtual else "")]
    ident = " ".join(x for x in (d.vendor, d.model) if x)
    if ident:
        parts.append(ident)
    parts.append(f"write cache {d.write_cache!r}" if d.write_cache else "write cache unknown")
    if d.scsi_cache_type:
        parts.append(f"SCSI cache_type {d.scsi_cache_type!r}")
    if d.ata_write_cache_enabled is not None:
        parts.append(f"udev ATA write cache {'enabled' if d.ata_write_cache_enabled else 'disabled'}")
    parts.append("FUA" if d.fua else "no FUA")
    if d.rotational is not None:
        parts.append("rotational" if d.rotational else "non-rotational")
    if len(d.via) > 1:
        parts.append("via " + " > ".join(d.via))
    return ", ".join(parts)


def _fix_command(d) -> str:
    if d.transport.startswith("nvme"):
        return (f"nvme set-feature /dev/{d.nvme_controller or 'nvmeX'} -f 6 -v 0 (volatile write cache off; "
                "add --save where the controller supports it)")
    if d.transport in ("sata", "usb") or d.ata_write_cache is not None:
        return f"hdparm -W0 {d.devnode} (persist with 'write_cache = off' in /etc/hdparm.conf)"
    return f"sdparm --clear=WCE --save {d.devnode}"


def judge_disk(d, path: str, report: CheckReport) -> None:
    """Findings for one disk under ``path``."""
    report.add(Severity.INFO, "disk", f"{d.name}: {_disk_summary(d)}", path, disk=d.name)
    if d.ata_write_cache_enabled is not None and d.write_back is not None and \
            d.ata_write_cache_enabled != d.write_back:
        report.add(Severity.INFO, "udev-ata-cache-stale",
                   f"{d.name}: udev's ID_ATA_WRITE_CACHE_ENABLED={int(d.ata_write_cache_enabled)} was read at "
                   f"probe time; the kernel now reports {d.write_cache!r} (trusting the kernel)", path, disk=d.name)
    wb = d.write_back
    if wb is None:
        report.add(Severity.UNKNOWN, "write-cache-unknown",
                   f"{d.name}: the write-cache mode cannot be read (no queue/write_cache, SCSI cache_type or "
                   f"udev ATA property); check with 'hdparm -W {d.devnode}' or 'sdparm --get=WCE {d.devnode}'",
                   path, disk=d.name)
    elif not wb:
        report.add(Severity.INFO, "write-cache-off",
                   f"{d.name}: write through: no volatile write cache between the journal's fsync and the media",
                   path, disk=d.name)
    elif d.virtual:
        report.add(
            Severity.WARNING, "write-cache-virtual",
            f"{d.name}: virtual {d.transport} disk reports 'write back': the guest kernel sends a cache flush for "
            "every fsync, and the data is safe only if the hypervisor passes those flushes to stable storage "
            "(QEMU cache=none/writeback/directsync do, cache=unsafe does not; cloud volumes document their own); "
            "that cannot be verified from inside the guest. Ask the host for its disk cache mode, or measure: "
            "an fsync rate far above what the backing media can do (thousands per second on disks) means "
            "flushes are not reaching it. Do not change queue/write_cache in the guest: it only stops the "
            "kernel's flushes",
            path, disk=d.name)
    elif d.redundant:
        report.add(
            Severity.WARNING, "write-cache-volatile-redundant",
            f"{d.name}: volatile write-back cache on a member of a redundant array: the array survives a failed "
            f"disk, not a power cut (all members lose their cache at once). To turn it off: {_fix_command(d)}",
            path, disk=d.name, fix=_fix_command(d))
    else:
        report.add(
            Severity.CRITICAL, "write-cache-volatile",
            f"{d.name}: volatile write-back cache on a non-redundant disk: even after the broker syncs there is no "
            "guarantee the journal record has reached the media; a power loss can lose acknowledged messages. "
            f"Disable it (the broker docs ask for this): {_fix_command(d)}; unless the device has power-loss "
            "protection",
            path, disk=d.name, fix=_fix_command(d))


def check_write_cache(targets: list[Target], root: str = "/", udev=None) -> CheckReport:
    from amqtool.inspectors.devices import device_stack
    from amqtool.inspectors.mounts import read_mounts

    report = CheckReport()
    report.checks = {"paths": []}
    mounts = read_mounts(root)
    resolved = _resolve_targets(targets, report) if root in ("/", "") else [(t, t.path) for t in targets]
    seen_disks: dict[str, str] = {}
    for target, path in resolved:
        stack = device_stack(path, root=root, udev=udev, mounts=mounts)
        doc = stack.to_json()
        doc["role"] = target.role
        report.checks["paths"].append(doc)
        shown = target.path
        for problem in stack.problems:
            report.add(Severity.UNKNOWN, "device-unknown", problem, shown)
        for mem in stack.memory_backed:
            report.add(Severity.CRITICAL, "memory-backed",
                       f"the store sits on memory ({mem}): everything in it is gone after a reboot or power loss",
                       shown)
        for nb in stack.no_block_device:
            report.add(Severity.WARNING, "no-block-device",
                       f"no local disk under {nb}: the write cache that matters is on the server or host and "
                       "cannot be read from here; ask its operator whether it is battery- or flash-backed",
                       shown)
        if not stack.disks and not (stack.problems or stack.memory_backed or stack.no_block_device):
            report.add(Severity.UNKNOWN, "device-unknown", "no disk found under this path", shown)
        for disk in stack.disks:
            key = disk.sys_path
            if key in seen_disks:
                report.add(Severity.INFO, "disk-shared", f"{disk.name}: same disk as {seen_disks[key]}", shown,
                           disk=disk.name)
                continue
            seen_disks[key] = shown
            judge_disk(disk, shown, report)
    return report


# --------------------------------------------------------------------------------------------------
# disk-space


def check_disk_space(targets: list[Target], limit=None, classic=None) -> CheckReport:
    """Artemis limits for ``targets`` (grouped by filesystem) and Classic usage limits for ``classic``."""
    from amqtool.inspectors.space import ArtemisLimit, disk_usage

    report = CheckReport()
    limit = limit or ArtemisLimit()
    report.checks = {"limit": limit.to_json(), "filesystems": [], "classic": []}
    resolved = _resolve_targets(targets, report)
    groups: dict[int, list[tuple[Target, str]]] = {}
    usages = {}
    for target, path in resolved:
        try:
            usage = disk_usage(path)
        except OSError as err:
            report.add(Severity.UNKNOWN, "disk-usage-unreadable", f"cannot read free space: {err.strerror}",
                       target.path)
            continue
        groups.setdefault(usage.device, []).append((target, path))
        usages[usage.device] = usage
    if limit.mode == "off" and targets:
        report.add(Severity.WARNING, "disk-limit-off",
                   "max-disk-usage is -1 and min-disk-free unset: the broker never blocks producers, so the "
                   "disk can fill until journal writes fail")
    for dev, members in groups.items():
        usage = usages[dev]
        roles = [t.role for t, _ in members]
        where = members[0][0].path
        headroom = limit.headroom(usage)
        floor = limit.blocking_usable(usage.total)
        doc = {"device": f"{os.major(dev)}:{os.minor(dev)}", "paths": [t.path for t, _ in members],
               "roles": roles, **usage.to_json(), "blockingUsable": floor, "headroom": headroom,
               "headroomPercent": None if headroom is None or not usage.total
               else round(headroom * 100 / usage.total, 2), "withinLimit": limit.within(usage)}
        report.checks["filesystems"].append(doc)
        used = f"{usage.used_fraction * 100:.1f}% used, {binary(usage.usable)} usable of {binary(usage.total)}"
        if limit.mode == "min-disk-free":
            rule = f"min-disk-free {as_given(limit.min_disk_free_given, limit.min_disk_free)}"
        elif limit.mode == "max-disk-usage":
            rule = f"max-disk-usage {limit.max_disk_usage}%"
        else:
            rule = "no limit"
        if len(members) > 1:
            report.add(Severity.INFO, "shared-filesystem",
                       f"{', '.join(roles)} share one filesystem: paging or large messages can use up the "
                       "journal's space, and one limit blocks them all", where, paths=doc["paths"])
        if not limit.within(usage):
            report.add(Severity.CRITICAL, "disk-limit-breached",
                       f"{used}: over {rule}; the broker blocks producers (and pages nothing more) until space is "
                       "freed", where, roles=roles)
        elif headroom is not None and headroom < usage.total * HEADROOM_WARN_FRACTION:
            report.add(Severity.WARNING, "disk-headroom-low",
                       f"{used}: only {binary(headroom)} ({doc['headroomPercent']}% of the filesystem) until "
                       f"{rule} blocks producers", where, roles=roles)
        else:
            report.add(Severity.INFO, "disk-space",
                       f"{used}; {rule}: {binary(headroom)} until producers block" if headroom is not None
                       else f"{used}; {rule}", where, roles=roles)
    if classic is not None:
        _check_classic(classic, report)
    return report


def _check_classic(classic, report: CheckReport) -> None:
    """storeUsage/tempUsage of an ActiveMQSettings (``store.activemqxml``) against their filesystems."""
    from amqtool.inspectors.mounts import nearest_existing
    from amqtool.inspectors.space import assess_classic, directory_size, disk_usage

    for lim in classic.limits:
        directory = str(lim.directory)
        inspect = directory if os.path.exists(directory) else nearest_existing(directory)
        try:
            usage = disk_usage(inspect)
        except OSError as err:
            report.add(Severity.UNKNOWN, "disk-usage-unreadable", f"cannot read free space: {err.strerror}",
                       directory)
            continue
        current = directory_size(directory) if os.path.isdir(directory) else 0
        a = assess_classic(lim.limit, usage, current, classic.adjust_usage_limits, lim.percent_limit, lim.total)
        report.checks["classic"].append({**lim.to_json(), **a.to_json()})
        name = lim.name
        if a.refuses_start:
            report.add(Severity.CRITICAL, "classic-limit-refuses-start",
                       f"{name} limit {binary(a.configured_limit)} exceeds the {binary(usage.usable + current)} this "
                       "filesystem can hold and adjustUsageLimits is false: the broker refuses to start",
                       directory, limit=name)
        elif a.current >= a.effective_limit:
            report.add(Severity.CRITICAL, "classic-limit-breached",
                       f"{name} {binary(current)} used of {binary(a.effective_limit)}: producers are blocked",
                       directory, limit=name)
        elif a.cut_at_start:
            report.add(Severity.WARNING, "classic-limit-exceeds-disk",
                       f"{name} limit {binary(a.configured_limit)} is more than the filesystem can hold; the broker "
                       f"cuts it to {binary(a.effective_limit)} at start, {binary(a.headroom)} left", directory,
                       limit=name)
        elif a.headroom < a.effective_limit * HEADROOM_WARN_FRACTION:
            report.add(Severity.WARNING, "classic-headroom-low",
                       f"{name} {binary(current)} used of {binary(a.effective_limit)}: {binary(a.headroom)} until "
                       "producers block", directory, limit=name)
        else:
            report.add(Severity.INFO, "classic-usage",
                       f"{name} {binary(current)} used of {binary(a.effective_limit)}"
                       f"{'' if lim.explicit else ' (broker default)'}: {binary(a.headroom)} until producers block",
                       directory, limit=name)
        if 0 < a.effective_limit < CLASSIC_MAX_FILE_LENGTH:
            report.add(Severity.WARNING, "classic-limit-below-journal-file",
                       f"{name} limit {binary(a.effective_limit)} is smaller than one 32 MiB journal file: the store "
                       "will not accept any data", directory, limit=name)


# --------------------------------------------------------------------------------------------------
# aio


def check_aio(path: str, journal_max_io: int = 4096, journal_device_block_size: int | None = None,
              journal_type: str = "ASYNCIO", explicit: bool = True, root: str = "/",
              libaio_finder=None, io_setup=None, role: str = "path") -> CheckReport:
    """Can the ASYNCIO journal run in ``path``? ``libaio_finder``/``io_setup`` are injectable for tests."""
    from amqtool.inspectors import filesystems as fsi
    from amqtool.inspectors.devices import top_block_device

    report = CheckReport()
    resolved = _resolve_targets([Target(role, path, explicit)], report)
    if not resolved:
        return report
    _, inspect = resolved[0]
    if not os.path.isdir(inspect):
        report.add(Severity.UNKNOWN, "not-a-directory", "the AIO check needs a directory", path)
        return report
    aio_wanted = journal_type.upper() == "ASYNCIO"
    # A failure that only means "falls back to NIO" matters when the broker is set to ASYNCIO.
    fallback = Severity.WARNING if aio_wanted else Severity.INFO
    facts = fsi.filesystem_facts(inspect, root)
    block = top_block_device(inspect, root)
    report.checks = {"path": path, "inspected": inspect, "journalType": journal_type, "filesystem": facts,
                     "blockDevice": block}
    fstype, cls = facts["fstype"], facts["fsClass"]
    report.add(Severity.INFO, "fs-type", f"{fstype} ({cls})", path, fstype=fstype)
    if cls == "memory":
        report.add(Severity.CRITICAL, "fs-memory",
                   f"{fstype} keeps files in RAM: a journal here is lost on every reboot or power loss", path)
    elif cls == "network":
        report.add(Severity.WARNING, "fs-network",
                   f"{fstype} is a network filesystem: every sync is a round trip, and Artemis supports shared "
                   "stores only on NFSv4 with its lock semantics; prefer a local disk for a single broker", path)
    elif cls == "union":
        report.add(Severity.WARNING, "fs-union",
                   f"{fstype} is a container's writable layer: the journal goes when the container is removed, and "
                   "copy-up makes writes slow; mount a volume for the data directory", path)
    elif cls == "fuse":
        report.add(Severity.WARNING, "fs-fuse",
                   f"{fstype} is a FUSE filesystem: O_DIRECT and sync semantics depend on the daemon", path)
    elif cls == "other":
        report.add(Severity.WARNING, "fs-unusual", f"{fstype}: not a filesystem Artemis is usually run on", path)
    if facts.get("ext4DataJournal"):
        report.add(Severity.WARNING, "ext4-data-journal",
                   "ext4 mounted data=journal: O_DIRECT is silently done as buffered I/O", path)

    # O_DIRECT, as validateAIO.bin
    align = max(4096, (block or {}).get("logicalBlockSize") or 0, journal_device_block_size or 0)
    if facts.get("readOnly"):
        probe = fsi.ProbeResult(None, "the filesystem is mounted read-only")
    else:
        probe = fsi.o_direct_probe(inspect, align)
    report.checks["oDirect"] = {**probe.to_json(), "testFile": os.path.join(inspect, fsi.TEST_FILE),
                                "writeSize": align}
    if probe.ok:
        report.add(Severity.INFO, "o-direct-ok", probe.detail, path)
    elif probe.ok is None:
        report.add(Severity.UNKNOWN, "o-direct-not-tested", f"O_DIRECT not tested: {probe.detail}", path)
    else:
        report.add(fallback, "o-direct-unsupported",
                   f"{probe.detail}: Artemis switches the journal to NIO here", path)

    # io_setup
    io = (io_setup or fsi.io_setup_probe)()
    report.checks["ioSetup"] = io.to_json()
    libs = (libaio_finder or fsi.find_libaio)()
    report.checks["libaio"] = libs
    have_so1 = libs.get("libaio.so.1", False)
    have_t64 = libs.get("libaio.so.1t64", False)
    if io.ok:
        report.add(Severity.INFO, "io-setup-ok", io.detail, path)
    elif io.ok is None:
        report.add(Severity.UNKNOWN, "io-setup-not-tested", io.detail, path)
    else:
        sev = Severity.CRITICAL if aio_wanted and (have_so1 or have_t64) else fallback
        report.add(sev, "io-setup-failed",
                   f"{io.detail}: an ASYNCIO journal cannot create its AIO context; use journal-type NIO", path)

    # libaio
    if have_so1:
        report.add(Severity.INFO, "libaio-ok", "libaio.so.1 loads", path)
    elif have_t64:
        report.add(fallback, "libaio-t64-only",
                   "only libaio.so.1t64 is present (Debian/Ubuntu time64 rename); Artemis' native layer asks for "
                   "libaio.so.1 and falls back to NIO unless a libaio.so.1 link to it exists", path)
    else:
        report.add(fallback, "libaio-missing",
                   "libaio is not installed (neither libaio.so.1 nor libaio.so.1t64): Artemis falls back to the NIO "
                   "journal; install libaio1 (libaio1t64 on Ubuntu 24.04+/Debian 13+, libaio on RHEL)", path)

    # aio-max-nr against journal-max-io (fs/aio.c ioctx_alloc counts nr_events as requested)
    lim = fsi.aio_limits(root)
    free = None if None in lim.values() else lim["aioMaxNr"] - lim["aioNr"]
    report.checks["aioLimits"] = {**lim, "free": free, "journalMaxIo": journal_max_io}
    if lim["aioMaxNr"] is None:
        report.add(Severity.UNKNOWN, "aio-max-nr-unreadable", "/proc/sys/fs/aio-max-nr cannot be read", path)
    elif aio_wanted and lim["aioMaxNr"] < journal_max_io:
        report.add(Severity.CRITICAL, "aio-max-nr-low",
                   f"fs.aio-max-nr {lim['aioMaxNr']} < journal-max-io {journal_max_io}: io_setup fails with "
                   f"EAGAIN; raise it (sysctl -w fs.aio-max-nr=1048576) or lower journal-max-io", path)
    elif aio_wanted and free is not None and free < journal_max_io:
        report.add(Severity.WARNING, "aio-nr-exhausted",
                   f"only {free} AIO events free (aio-nr {lim['aioNr']} of aio-max-nr {lim['aioMaxNr']}) for "
                   f"journal-max-io {journal_max_io}: a broker starting now would fail io_setup", path)
    else:
        report.add(Severity.INFO, "aio-max-nr-ok",
                   f"aio-nr {lim['aioNr']} of aio-max-nr {lim['aioMaxNr']}; journal-max-io {journal_max_io} fits",
                   path)

    # Block sizes
    logical = (block or {}).get("logicalBlockSize")
    physical = (block or {}).get("physicalBlockSize")
    alignment = journal_device_block_size or facts.get("stBlksize")
    report.checks["alignment"] = {"journalDeviceBlockSize": journal_device_block_size,
                                  "stBlksize": facts.get("stBlksize"), "effective": alignment,
                                  "logicalBlockSize": logical, "physicalBlockSize": physical}
    if journal_device_block_size is not None:
        bs = journal_device_block_size
        if bs <= 0 or bs & (bs - 1):
            report.add(Severity.CRITICAL, "device-block-size-invalid",
                       f"journal-device-block-size {bs} is not a power of two: O_DIRECT writes fail", path)
        elif logical and bs % logical:
            report.add(Severity.CRITICAL, "device-block-size-misaligned",
                       f"journal-device-block-size {bs} is not a multiple of the device's logical block size "
                       f"{logical}: O_DIRECT writes fail with EINVAL", path)
        elif physical and bs < physical:
            report.add(Severity.WARNING, "device-block-size-below-physical",
                       f"journal-device-block-size {bs} < physical block size {physical}: every write is a "
                       "read-modify-write on the device", path)
        else:
            report.add(Severity.INFO, "block-size-ok",
                       f"journal-device-block-size {bs}; device logical {logical}, physical {physical}", path)
    elif logical is not None:
        report.add(Severity.INFO, "block-size",
                   f"journal alignment {alignment} (st_blksize); device logical {logical}, physical {physical}", path)
    return report


# --------------------------------------------------------------------------------------------------
# all


def fsync_probe(directory: str, seconds: float) -> dict | None:
    """The benchmark's fsync probe when it exists; None (with the reason raised as CapabilityError) if not."""
    try:
        from amqtool.engines import bench  # noqa: WPS433 - optional, built separately
        probe = bench.fsync_probe
    except (ImportError, AttributeError) as err:
        raise CapabilityError(f"fsync probe not available ({err.__class__.__name__}: {err})") from None
    return probe(directory, seconds)


def check_all(targets: list[Target], limit=None, classic=None, journal_max_io: int = 4096,
              journal_device_block_size: int | None = None, journal_type: str = "ASYNCIO",
              probe_seconds: float = DEFAULT_PROBE_SECONDS, libaio_finder=None) -> CheckReport:
    """Every check for every store directory, plus an fsync-rate probe where the benchmark exists."""
    report = CheckReport()
    wc = check_write_cache(targets)
    report.merge(wc, "writeCache")
    report.merge(check_disk_space(targets, limit, classic), "diskSpace")
    report.checks["aio"] = []
    # One AIO test per filesystem: the result is a property of the filesystem, not of the directory.
    seen = set()
    for t in targets:
        from amqtool.inspectors.mounts import find_mount, nearest_existing

        inspect = t.path if os.path.exists(t.path) else (None if t.explicit else nearest_existing(t.path))
        if inspect is None:
            continue  # already reported as path-not-found by the write-cache check
        mount = find_mount(inspect)
        key = (mount.major, mount.minor, mount.mount_point) if mount else inspect
        if key in seen:
            continue
        seen.add(key)
        sub = check_aio(t.path, journal_max_io, journal_device_block_size, journal_type, t.explicit,
                        libaio_finder=libaio_finder, role=t.role)
        # path-not-found / directory-not-created were already said once by write-cache
        sub.findings = [f for f in sub.findings if f.code not in ("path-not-found", "directory-not-created")]
        report.findings.extend(sub.findings)
        report.checks["aio"].append(sub.checks)
    report.checks["fsyncProbe"] = _probe(targets, probe_seconds, report)
    return report


def _probe(targets: list[Target], seconds: float, report: CheckReport) -> dict | None:
    if seconds <= 0:
        return None
    target = next((t for t in targets if os.path.isdir(t.path)), None)
    if target is None:
        report.add(Severity.INFO, "fsync-probe-skipped", "no existing store directory to probe")
        return None
    try:
        result = fsync_probe(target.path, seconds)
    except CapabilityError as err:
        report.add(Severity.INFO, "fsync-probe-skipped", str(err), target.path)
        return None
    result = result or {}
    rate = result.get("opsPerSec")
    p99 = result.get("p99Us")
    msg = f"{rate:.0f} fsyncs/s over {seconds:g} s" if isinstance(rate, (int, float)) else "fsync probe ran"
    if isinstance(p99, (int, float)):
        msg += f", p99 {p99 / 1000:.2f} ms"
    report.add(Severity.INFO, "fsync-rate", msg, target.path,
               **{k: v for k, v in result.items() if isinstance(v, (int, float, str, bool))})
    # peers.md 3.3: more than ~5,000 flushes/s at queue depth 1 from a stack reporting "write back" means the
    # flushes are absorbed by a cache somewhere (host page cache, lying firmware), not written to media.
    write_back = [d["name"] for p in report.checks.get("writeCache", {}).get("paths", [])
                  if p.get("path") == os.path.realpath(target.path) for d in p.get("disks", []) if d.get("writeBack")]
    if isinstance(rate, (int, float)) and rate > SUSPECT_FSYNC_RATE and write_back:
        report.add(Severity.WARNING, "fsync-rate-suspect",
                   f"{rate:.0f} fsyncs/s at queue depth 1 on {', '.join(sorted(set(write_back)))} reporting 'write "
                   f"back': above ~{SUSPECT_FSYNC_RATE} a flush is very likely absorbed by a volatile cache (host page "
                   "cache, lying firmware) rather than reaching stable media", target.path)
    return result
