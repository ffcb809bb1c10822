"""Block devices under a path, down to the physical disks, and what each disk says about its write cache.

path -> mount (mountinfo) -> block device (``/sys/dev/block/M:m``) -> down the stack through partitions,
device-mapper targets (LVM, dm-crypt, multipath), md RAID and loop devices (a loop device continues at the
mount that holds its backing file) to the disks. For every disk: ``queue/write_cache`` (the kernel's view:
``write back`` means it will send cache flushes, kernel ``Documentation/block/queue-sysfs``), the SCSI
caching mode page (``scsi_disk/*/cache_type``, ``Documentation/scsi/sd-parameters.rst``), the udev ATA
properties ``ID_ATA_WRITE_CACHE*`` (set by ``ata_id`` at probe time, so possibly stale after ``hdparm
-W0``), the NVMe volatile write cache (the kernel mirrors VWC into ``queue/write_cache``), FUA, rotational,
model and transport.

This module only reads facts; judging them is the check engine's job. Nothing here writes to sysfs: the
kernel docs warn that writing ``queue/write_cache`` changes only the kernel's view and stops flushes.

Every entry point takes ``root`` (default ``/``): ``<root>/sys``, ``<root>/proc/self/mountinfo`` and
``<root>/run/udev/data`` are read from there, so tests can hand in recorded trees. On the live machine udev
properties come through pyudev; a recorded tree's come from its udev database files (the same ``E:KEY=VALUE``
lines pyudev reads).
"""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from amqtool.inspectors.mounts import Mount, find_mount, read_mounts, resolve_path

MAX_DEPTH = 16  # a device stack deeper than this is a cycle or a broken tree

# md levels that keep a second copy (or parity) of every block.
REDUNDANT_MD_LEVELS = frozenset({"raid1", "raid4", "raid5", "raid6", "raid10"})

# Vendor/model strings of virtual disks presented by hypervisors and clouds (SCSI INQUIRY or NVMe id-ctrl).
_VIRTUAL_MODELS = re.compile(
    r"QEMU|VMware|Virtual disk|Msft|VBOX|Amazon Elastic Block Store|PersistentDisk|nvme_card-pd|"
    r"Google|Xen|Virtio|KVM",
    re.IGNORECASE,
)


class DeviceError(Exception):
    """A device that cannot be followed (unknown major:minor, unreadable sysfs). Caught by the walker."""


# --------------------------------------------------------------------------------------------------
# Sources: sysfs under a root, udev properties


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class UdevSource:
    """udev properties of block devices by ``major:minor``.

    With ``root == "/"`` pyudev is asked (imported lazily); if that fails, or for a recorded ``root``, the
    udev database file ``<root>/run/udev/data/b<major>:<minor>`` is read directly.
    """

    def __init__(self, root: str = "/"):
        self.root = root

    def properties(self, major: int, minor: int) -> dict[str, str]:
        if self.root in ("/", ""):
            try:
                import pyudev

                dev = pyudev.Devices.from_device_number(pyudev.Context(), "block", os.makedev(major, minor))
                return {str(k): str(v) for k, v in dev.properties.items()}
            except Exception:  # noqa: BLE001 - no udev, no device: fall back to the database file
                pass
        return self._from_db(major, minor)

    def _from_db(self, major: int, minor: int) -> dict[str, str]:
        text = _read(os.path.join(self.root, "run/udev/data", f"b{major}:{minor}"))
        props: dict[str, str] = {}
        for line in (text or "").splitlines():
            if line.startswith("E:") and "=" in line:
                key, _, value = line[2:].partition("=")
                props[key] = value
        return props


# --------------------------------------------------------------------------------------------------
# Facts


@dataclass
class Disk:
    """A bottom-of-stack device: what it reports about caching and what it is."""

    name: str
    devnode: str
    sys_path: str
    transport: str = "unknown"
    virtual: bool = False
    vendor: str | None = None
    model: str | None = None
    serial: str | None = None
    rotational: bool | None = None
    fua: bool | None = None
    write_cache: str | None = None          # queue/write_cache: "write back" | "write through"
    scsi_cache_type: str | None = None      # scsi_disk/*/cache_type
    ata_write_cache: bool | None = None     # udev ID_ATA_WRITE_CACHE (feature present)
    ata_write_cache_enabled: bool | None = None  # udev ID_ATA_WRITE_CACHE_ENABLED (at probe time)
    nvme_controller: str | None = None      # e.g. "nvme0", for `nvme set-feature`
    nvme_volatile_write_cache: bool | None = None
    logical_block_size: int | None = None
    physical_block_size: int | None = None
    redundant: bool = False                 # below a redundant md level (set by the walker)
    via: list[str] = field(default_factory=list)  # the chain from the mount's device down to this disk

    @property
    def write_back(self) -> bool | None:
        """True when a volatile write-back cache is on (the kernel's view first, then the device's)."""
        if self.write_cache is not None:
            return self.write_cache.strip().lower().startswith("write back")
        if self.scsi_cache_type is not None:
            return "write back" in self.scsi_cache_type.lower()
        if self.ata_write_cache_enabled is not None:
            return self.ata_write_cache_enabled
        return None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "devnode": self.devnode,
            "transport": self.transport,
            "virtual": self.virtual,
            "vendor": self.vendor,
            "model": self.model,
            "serial": self.serial,
            "rotational": self.rotational,
            "fua": self.fua,
            "writeCache": self.write_cache,
            "writeBack": self.write_back,
            "scsiCacheType": self.scsi_cache_type,
            "ataWriteCache": self.ata_write_cache,
            "ataWriteCacheEnabled": self.ata_write_cache_enabled,
            "nvmeController": self.nvme_controller,
            "nvmeVolatileWriteCache": self.nvme_volatile_write_cache,
            "logicalBlockSize": self.logical_block_size,
            "physicalBlockSize": self.physical_block_size,
            "redundant": self.redundant,
            "via": self.via,
        }


@dataclass
class Layer:
    """One device in the stack above the disks: partition, lvm, dm-crypt, dm, multipath, md, loop, ..."""

    name: str
    kind: str
    sys_path: str
    details: dict = field(default_factory=dict)
    lower: list["Layer"] = field(default_factory=list)
    backing: "DeviceStack | None" = None   # a loop device's backing file, walked like any path

    def to_json(self) -> dict:
        doc = {"name": self.name, "kind": self.kind, **self.details}
        if self.lower:
            doc["lower"] = [layer.to_json() for layer in self.lower]
        if self.backing is not None:
            doc["backing"] = self.backing.to_json()
        return doc


@dataclass
class DeviceStack:
    """Everything found under one path."""

    path: str
    mount: Mount | None = None
    top: Layer | None = None
    disks: list[Disk] = field(default_factory=list)
    memory_backed: list[str] = field(default_factory=list)   # tmpfs/ramfs/zram/brd found on the way down
    no_block_device: list[str] = field(default_factory=list)  # network/fuse/virtual filesystems on the way
    problems: list[str] = field(default_factory=list)         # what could not be followed, and why

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "mount": self.mount.to_json() if self.mount else None,
            "stack": self.top.to_json() if self.top else None,
            "disks": [d.to_json() for d in self.disks],
            "memoryBacked": self.memory_backed,
            "noBlockDevice": self.no_block_device,
            "problems": self.problems,
        }


# --------------------------------------------------------------------------------------------------
# The walk


class _Walker:
    def __init__(self, root: str, udev: UdevSource, mounts: list[Mount]):
        self.root = root
        self.udev = udev
        self.mounts = mounts
        self.sys = os.path.join(root, "sys")

    # -- sysfs navigation

    def sys_dir_of(self, major: int, minor: int) -> str:
        link = os.path.join(self.sys, "dev/block", f"{major}:{minor}")
        if not os.path.exists(link):
            raise DeviceError(f"no block device {major}:{minor} in sysfs")
        return os.path.realpath(link)

    def sys_dir_of_name(self, name: str) -> str | None:
        for base in ("class/block", "block"):
            link = os.path.join(self.sys, base, name)
            if os.path.exists(link):
                return os.path.realpath(link)
        return None

    def _dev_numbers(self, sys_dir: str) -> tuple[int, int] | None:
        text = _read(os.path.join(sys_dir, "dev"))
        if text and ":" in text:
            a, b = text.split(":", 1)
            try:
                return int(a), int(b)
            except ValueError:
                return None
        return None

    # -- stack

    def walk_path(self, path: str, stack: DeviceStack, depth: int = 0) -> Layer | None:
        if depth > MAX_DEPTH:
            stack.problems.append(f"device stack deeper than {MAX_DEPTH} levels under {path}; stopped")
            return None
        mount = find_mount(path, self.root, self.mounts)
        if stack.mount is None:
            stack.mount = mount
        if mount is None:
            stack.problems.append(f"no mount holds {path}")
            return None
        cls = mount.fs_class
        if cls == "memory":
            stack.memory_backed.append(f"{mount.fstype} at {mount.mount_point}")
            return None
        if cls == "union":
            upper = mount.super_option("upperdir")
            if upper:
                return self.walk_path(upper, stack, depth + 1)
            stack.no_block_device.append(f"{mount.fstype} at {mount.mount_point} (no upperdir)")
            return None
        if cls in ("network", "fuse") and not (mount.major and mount.source.startswith("/dev/")):
            stack.no_block_device.append(f"{mount.fstype} at {mount.mount_point} ({mount.source})")
            return None
        sys_dir = None
        if mount.major != 0:
            try:
                sys_dir = self.sys_dir_of(mount.major, mount.minor)
            except DeviceError:
                sys_dir = None
        if sys_dir is None and mount.source.startswith("/dev/"):
            # btrfs and friends report an anonymous 0:N device; the source names the real one.
            sys_dir = self._sys_dir_from_devnode(mount.source)
        if sys_dir is None:
            if mount.major == 0:
                stack.no_block_device.append(f"{mount.fstype} at {mount.mount_point} ({mount.source})")
            else:
                stack.problems.append(
                    f"unknown device {mount.major}:{mount.minor} ({mount.source}) under {mount.mount_point}")
            return None
        return self.walk_device(sys_dir, stack, [], redundant=False, depth=depth + 1)

    def _sys_dir_from_devnode(self, devnode: str) -> str | None:
        name = os.path.basename(devnode)
        if self.root in ("/", ""):
            try:
                st = os.stat(devnode)
                return self.sys_dir_of(os.major(st.st_rdev), os.minor(st.st_rdev))
            except (OSError, DeviceError):
                real = os.path.realpath(devnode)
                name = os.path.basename(real)
        return self.sys_dir_of_name(name)

    def walk_device(self, sys_dir: str, stack: DeviceStack, via: list[str], redundant: bool,
                    depth: int) -> Layer | None:
        if depth > MAX_DEPTH:
            stack.problems.append(f"device stack deeper than {MAX_DEPTH} levels at {sys_dir}; stopped")
            return None
        name = os.path.basename(sys_dir)
        via = via + [name]
        if os.path.exists(os.path.join(sys_dir, "partition")):
            layer = Layer(name, "partition", sys_dir, {
                "partition": _read_int(os.path.join(sys_dir, "partition")),
                "start": _read_int(os.path.join(sys_dir, "start")),
            })
            parent = os.path.dirname(sys_dir)
            lower = self.walk_device(parent, stack, via, redundant, depth + 1)
            layer.lower = [lower] if lower else []
            return layer
        if os.path.isdir(os.path.join(sys_dir, "dm")):
            uuid = _read(os.path.join(sys_dir, "dm/uuid")) or ""
            kind = _dm_kind(uuid)
            layer = Layer(name, kind, sys_dir, {"dmName": _read(os.path.join(sys_dir, "dm/name")), "dmUuid": uuid})
            layer.lower = self._slaves(sys_dir, stack, via, redundant, depth)
            return layer
        if os.path.isdir(os.path.join(sys_dir, "md")):
            level = (_read(os.path.join(sys_dir, "md/level")) or "").lower()
            degraded = _read_int(os.path.join(sys_dir, "md/degraded"))
            layer = Layer(name, "md", sys_dir, {
                "level": level or None,
                "raidDisks": _read_int(os.path.join(sys_dir, "md/raid_disks")),
                "degraded": degraded,
                "arrayState": _read(os.path.join(sys_dir, "md/array_state")),
            })
            is_redundant = level in REDUNDANT_MD_LEVELS and not degraded
            layer.lower = self._slaves(sys_dir, stack, via, redundant or is_redundant, depth)
            return layer
        if name.startswith("loop"):
            backing = _read(os.path.join(sys_dir, "loop/backing_file"))
            layer = Layer(name, "loop", sys_dir, {
                "backingFile": backing,
                "directIo": _read_int(os.path.join(sys_dir, "loop/dio")),
            })
            if backing is None:
                stack.problems.append(f"loop device {name} has no backing file (detached?)")
                return layer
            backing_path = backing.removesuffix(" (deleted)")
            sub = DeviceStack(path=backing_path)
            sub.top = self.walk_path(backing_path, sub, depth + 1)
            layer.backing = sub
            for disk in sub.disks:
                disk.via = via + disk.via
                disk.redundant = disk.redundant or redundant
            stack.disks.extend(sub.disks)
            stack.memory_backed.extend(sub.memory_backed)
            stack.no_block_device.extend(sub.no_block_device)
            stack.problems.extend(sub.problems)
            return layer
        if name.startswith(("zram", "ram", "pmem")) and not os.path.isdir(os.path.join(sys_dir, "device")):
            stack.memory_backed.append(f"{name} (RAM block device)")
            return Layer(name, "ram", sys_dir)
        if name.startswith(("nbd", "rbd", "drbd")):
            layer = Layer(name, {"nbd": "nbd", "rbd": "rbd", "drb": "drbd"}[name[:3]], sys_dir)
            stack.no_block_device.append(f"{name} (network block device: the cache lives on the far side)")
            return layer
        disk = self.disk_facts(sys_dir)
        disk.via = via
        disk.redundant = redundant
        stack.disks.append(disk)
        return Layer(name, "disk", sys_dir, {"transport": disk.transport})

    def _slaves(self, sys_dir, stack, via, redundant, depth) -> list[Layer]:
        lower = []
        slaves_dir = os.path.join(sys_dir, "slaves")
        try:
            names = sorted(os.listdir(slaves_dir))
        except OSError:
            names = []
        if not names:
            stack.problems.append(f"{os.path.basename(sys_dir)} lists no lower devices (slaves/)")
        for slave in names:
            target = os.path.realpath(os.path.join(slaves_dir, slave))
            if not os.path.isdir(target):
                stack.problems.append(f"{os.path.basename(sys_dir)}: lower device {slave} not in sysfs")
                continue
            layer = self.walk_device(target, stack, via, redundant, depth + 1)
            if layer:
                lower.append(layer)
        return lower

    # -- disk facts

    def disk_facts(self, sys_dir: str) -> Disk:
        name = os.path.basename(sys_dir)
        q = os.path.join(sys_dir, "queue")
        dev = os.path.join(sys_dir, "device")
        nums = self._dev_numbers(sys_dir)
        props = self.udev.properties(*nums) if nums else {}
        disk = Disk(name=name, devnode=props.get("DEVNAME") or f"/dev/{name}", sys_path=sys_dir)
        disk.write_cache = _read(os.path.join(q, "write_cache"))
        fua = _read_int(os.path.join(q, "fua"))
        disk.fua = None if fua is None else bool(fua)
        rot = _read_int(os.path.join(q, "rotational"))
        disk.rotational = None if rot is None else bool(rot)
        disk.logical_block_size = _read_int(os.path.join(q, "logical_block_size"))
        disk.physical_block_size = _read_int(os.path.join(q, "physical_block_size"))
        disk.vendor = _read(os.path.join(dev, "vendor")) or props.get("ID_VENDOR")
        disk.model = _read(os.path.join(dev, "model")) or props.get("ID_MODEL")
        disk.serial = _read(os.path.join(dev, "serial")) or props.get("ID_SERIAL_SHORT")
        cache_types = sorted(glob.glob(os.path.join(dev, "scsi_disk", "*", "cache_type")))
        if cache_types:
            disk.scsi_cache_type = _read(cache_types[0])
        if "ID_ATA_WRITE_CACHE" in props:
            disk.ata_write_cache = props["ID_ATA_WRITE_CACHE"] == "1"
        if "ID_ATA_WRITE_CACHE_ENABLED" in props:
            disk.ata_write_cache_enabled = props["ID_ATA_WRITE_CACHE_ENABLED"] == "1"
        disk.transport = _transport(name, sys_dir, props)
        if disk.transport.startswith("nvme"):
            disk.nvme_controller = _nvme_controller(name, dev)
            if disk.write_cache is not None:
                # The kernel sets the queue's write cache from the controller's VWC bit (nvme_update_disk_info).
                disk.nvme_volatile_write_cache = disk.write_cache.lower().startswith("write back")
        ident = " ".join(x for x in (disk.vendor, disk.model) if x)
        disk.virtual = disk.transport in ("virtio", "virtio-scsi", "xen") or bool(_VIRTUAL_MODELS.search(ident))
        return disk


def _dm_kind(uuid: str) -> str:
    # device-mapper uuids carry the owner's prefix: LVM-..., CRYPT-LUKS2-..., mpath-..., part1-... (kpartx)
    prefix = uuid.split("-", 1)[0].upper() if uuid else ""
    return {"LVM": "lvm", "CRYPT": "dm-crypt", "MPATH": "multipath", "VDO": "vdo", "STRATIS": "stratis"}.get(
        prefix, "partition" if re.match(r"PART\d+$", prefix) else "dm")


def _transport(name: str, sys_dir: str, props: dict) -> str:
    real = os.path.realpath(sys_dir)
    if name.startswith("nvme"):
        fabric = _read(os.path.join(sys_dir, "device", "transport"))
        return "nvme" if fabric in (None, "pcie") else f"nvme-{fabric}"
    if name.startswith("vd") or (props.get("ID_BUS") not in ("ata", "scsi") and "/virtio" in real
                                  and "/host" not in real):
        return "virtio"
    if name.startswith("xvd") or "/vbd-" in real:
        return "xen"
    if name.startswith("mmcblk"):
        return "mmc"
    if props.get("ID_BUS") == "usb" or "/usb" in real:
        return "usb"
    if props.get("ID_BUS") == "ata" or props.get("ID_ATA") == "1" or re.search(r"/ata\d+/", real):
        return "sata"
    if "/virtio" in real:
        return "virtio-scsi"
    if "/rport-" in real:
        return "fc"
    if "/session" in real:
        return "iscsi"
    if "end_device-" in real or "/port-" in real:
        return "sas"
    if props.get("ID_BUS") == "scsi" or os.path.isdir(os.path.join(sys_dir, "device", "scsi_disk")):
        return "scsi"
    return "unknown"


def _nvme_controller(name: str, dev: str) -> str:
    real = os.path.basename(os.path.realpath(dev))
    if re.fullmatch(r"nvme\d+", real):
        return real
    m = re.match(r"(nvme\d+)", name)  # nvme0n1 -> nvme0 (native multipath hides the controller)
    return m.group(1) if m else name


# --------------------------------------------------------------------------------------------------
# Entry points


def device_stack(path: str, root: str = "/", udev: UdevSource | None = None,
                 mounts: list[Mount] | None = None) -> DeviceStack:
    """Walk from ``path`` down to its disks. Never raises for odd devices: problems go into the result."""
    if mounts is None:
        mounts = read_mounts(root)
    walker = _Walker(root, udev or UdevSource(root), mounts)
    stack = DeviceStack(path=resolve_path(path, root))
    stack.top = walker.walk_path(path, stack)
    return stack


def top_block_device(path: str, root: str = "/", mounts: list[Mount] | None = None) -> dict | None:
    """Queue limits of the device the filesystem sits on (block sizes for O_DIRECT alignment), or None."""
    if mounts is None:
        mounts = read_mounts(root)
    mount = find_mount(path, root, mounts)
    if mount is None or mount.major == 0:
        return None
    walker = _Walker(root, UdevSource(root), mounts)
    try:
        sys_dir = walker.sys_dir_of(mount.major, mount.minor)
    except DeviceError:
        return None
    q = os.path.join(sys_dir, "queue")
    if not os.path.isdir(q):  # a partition: the queue belongs to the whole disk
        q = os.path.join(os.path.dirname(sys_dir), "queue")
    return {
        "name": os.path.basename(sys_dir),
        "logicalBlockSize": _read_int(os.path.join(q, "logical_block_size")),
        "physicalBlockSize": _read_int(os.path.join(q, "physical_block_size")),
    }
