"""Helpers for the check tests: recorded machines, and real loop/tmpfs mounts where this machine allows them.

``RecordedMachine`` writes into a temporary directory the files sysfs, mountinfo and the udev database would
hold (``sys/devices/...`` with ``sys/dev/block/M:m`` and ``sys/class/block/<name>`` symlinks, ``slaves/``
links, ``queue/*`` attributes, ``proc/self/mountinfo``, ``run/udev/data/bM:m``). The inspectors read it
through their ``root`` parameter exactly as they read the live machine.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest


class RecordedMachine:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.sys = self.root / "sys"
        self._mounts: list[str] = []
        self._next_mount_id = 20
        (self.root / "proc/self").mkdir(parents=True, exist_ok=True)
        (self.root / "run/udev/data").mkdir(parents=True, exist_ok=True)

    # -- helpers

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    @staticmethod
    def _link(link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, link.parent), link)

    def _register(self, block_dir: Path, name: str, major: int, minor: int, udev: dict | None) -> None:
        self._write(block_dir / "dev", f"{major}:{minor}")
        self._write(block_dir / "uevent", f"MAJOR={major}\nMINOR={minor}\nDEVNAME={name}")
        self._link(self.sys / "dev/block" / f"{major}:{minor}", block_dir)
        self._link(self.sys / "class/block" / name, block_dir)
        props = {"DEVNAME": f"/dev/{name}", "MAJOR": str(major), "MINOR": str(minor), **(udev or {})}
        self._write(self.root / "run/udev/data" / f"b{major}:{minor}",
                    "\n".join(f"E:{k}={v}" for k, v in props.items()))

    def _queue(self, block_dir: Path, queue: dict) -> None:
        defaults = {"logical_block_size": 512, "physical_block_size": 4096, "rotational": 0, "fua": 0,
                    "write_cache": "write through"}
        for key, value in {**defaults, **queue}.items():
            self._write(block_dir / "queue" / key, str(value))

    # -- devices

    def disk(self, device_path: str, name: str, major: int, minor: int, *, queue: dict | None = None,
             device: dict | None = None, udev: dict | None = None, device_link: str | None = None) -> Path:
        """A whole disk at ``sys/devices/<device_path>/block/<name>``; ``device`` files go in its device dir."""
        dev_dir = self.sys / "devices" / device_path
        block_dir = dev_dir / "block" / name
        block_dir.mkdir(parents=True)
        self._link(block_dir / "device", self.sys / "devices" / (device_link or device_path))
        for rel, value in (device or {}).items():
            self._write(self.sys / "devices" / (device_link or device_path) / rel, value)
        self._queue(block_dir, queue or {})
        self._register(block_dir, name, major, minor, udev)
        self._link(self.sys / "block" / name, block_dir)
        return block_dir

    def partition(self, disk_dir: Path, name: str, major: int, minor: int, number: int) -> Path:
        part = disk_dir / name
        part.mkdir()
        self._write(part / "partition", str(number))
        self._write(part / "start", "2048")
        self._register(part, name, major, minor, {"DEVTYPE": "partition"})
        return part

    def virtual(self, name: str, major: int, minor: int, *, files: dict | None = None,
                slaves: list[Path] = (), queue: dict | None = None) -> Path:
        block_dir = self.sys / "devices/virtual/block" / name
        block_dir.mkdir(parents=True)
        for rel, value in (files or {}).items():
            self._write(block_dir / rel, value)
        self._queue(block_dir, queue or {})
        for lower in slaves:
            self._link(block_dir / "slaves" / lower.name, lower)
            self._link(lower / "holders" / name, block_dir)
        self._register(block_dir, name, major, minor, None)
        self._link(self.sys / "block" / name, block_dir)
        return block_dir

    def mount(self, mount_point: str, major: int, minor: int, fstype: str, source: str,
              super_options: str = "rw") -> None:
        mid = self._next_mount_id
        self._next_mount_id += 1
        self._mounts.append(f"{mid} 1 {major}:{minor} / {mount_point} rw,relatime shared:{mid} - "
                            f"{fstype} {source} {super_options}")
        (self.root / "proc/self/mountinfo").write_text("\n".join(self._mounts) + "\n")


# --------------------------------------------------------------------------------------------------
# Real mounts (root only; skipped with the reason when the machine does not allow them)


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (mount, losetup)")


@contextmanager
def tmpfs_mount(where: Path, size: str = "8m"):
    _need_root()
    where.mkdir(parents=True, exist_ok=True)
    try:
        _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", f"amqtool-test-{uuid.uuid4().hex[:8]}",
             str(where))
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        pytest.skip(f"cannot mount tmpfs here: {getattr(err, 'stderr', err)}")
    try:
        yield where
    except BaseException:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        raise
    done = subprocess.run(["umount", str(where)], capture_output=True, text=True)
    if done.returncode != 0:  # a file left open in there: a leak the test must report (then detach it)
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        raise AssertionError(f"{where} still in use after the test: {done.stderr.strip()}")


# Smallest filesystem mkfs accepts: xfsprogs 6 refuses anything under 300 MB. The image is sparse, so
# the size costs no disk.
MIN_SIZE_MB = {"xfs": 320}


@contextmanager
def loop_filesystem(tmp_path: Path, fstype: str, size_mb: int = 64):
    """A real filesystem on a loop device backed by a (sparse) file in ``tmp_path``; always torn down."""
    size_mb = max(size_mb, MIN_SIZE_MB.get(fstype, 0))
    _need_root()
    mkfs = shutil.which(f"mkfs.{fstype}")
    if mkfs is None:
        pytest.skip(f"mkfs.{fstype} is not installed")
    image = tmp_path / f"{fstype}.img"
    mnt = tmp_path / f"{fstype}-mnt"
    mnt.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    try:
        _run(mkfs, "-q", *(["-F"] if fstype.startswith("ext") else ["-f"]), str(image))
    except subprocess.CalledProcessError as err:
        pytest.skip(f"mkfs.{fstype} failed: {err.stderr.strip()}")
    try:
        loop = _run("losetup", "--find", "--show", str(image))
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        pytest.skip(f"losetup failed: {getattr(err, 'stderr', err)}")
    mounted = False
    try:
        try:
            _run("mount", "-t", fstype, loop, str(mnt))
            mounted = True
        except subprocess.CalledProcessError as err:
            pytest.skip(f"cannot mount {fstype} on {loop}: {err.stderr.strip()}")
        yield mnt, loop
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", loop], capture_output=True)


@contextmanager
def overlay_mount(tmp_path: Path):
    _need_root()
    lower, upper, work, merged = (tmp_path / n for n in ("lower", "upper", "work", "merged"))
    for d in (lower, upper, work, merged):
        d.mkdir()
    try:
        _run("mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged))
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        pytest.skip(f"cannot mount overlay here: {getattr(err, 'stderr', err)}")
    try:
        yield merged, upper
    finally:
        subprocess.run(["umount", str(merged)], capture_output=True)
