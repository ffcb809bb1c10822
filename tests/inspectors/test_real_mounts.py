"""Real loop devices, tmpfs and overlay mounts on this machine (root only; skipped with a reason otherwise).

Every mount and loop device is torn down in the fixtures' ``finally`` blocks (conftest.py).
"""
from __future__ import annotations

import os

import pytest

from amqtool.engines.check import Target, check_aio, check_disk_space, check_write_cache
from amqtool.errors import Verdict
from amqtool.inspectors.devices import device_stack
from amqtool.inspectors.space import ArtemisLimit
from machine_support import loop_filesystem, overlay_mount, tmpfs_mount

pytestmark = pytest.mark.root

LIBAIO_PRESENT = lambda: {"libaio.so.1": True, "libaio.so.1t64": False}  # noqa: E731


def codes(report):
    return [f.code for f in report.findings]


@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_loop_filesystem_walks_to_the_disk_under_its_backing_file(tmp_path, fstype):
    with loop_filesystem(tmp_path, fstype) as (mnt, loop):
        stack = device_stack(str(mnt))
        assert stack.mount.fstype == fstype
        assert stack.top.kind == "loop" and stack.top.name == os.path.basename(loop)
        assert stack.top.details["backingFile"] == str(tmp_path / f"{fstype}.img")
        # The backing file lives on the machine's own filesystem: the walk continues there.
        host = device_stack(str(tmp_path))
        assert [d.sys_path for d in stack.disks] == [d.sys_path for d in host.disks]
        assert stack.memory_backed == host.memory_backed
        if stack.disks:
            assert stack.disks[0].via[0] == os.path.basename(loop)


def test_aio_on_ext4_loop_is_ok_and_leaves_nothing_behind(tmp_path):
    with loop_filesystem(tmp_path, "ext4") as (mnt, _loop):
        before = sorted(os.listdir(mnt))
        report = check_aio(str(mnt), libaio_finder=LIBAIO_PRESENT)
        assert sorted(os.listdir(mnt)) == before
        assert "o-direct-ok" in codes(report) and "fs-type" in codes(report)
        assert report.checks["filesystem"]["fstype"] == "ext4"
        io_ok = report.checks["ioSetup"]["ok"]
        assert report.verdict == (Verdict.OK if io_ok else Verdict.CRITICAL)


def test_aio_on_ext4_without_libaio_falls_back_to_nio(tmp_path):
    with loop_filesystem(tmp_path, "ext4") as (mnt, _loop):
        report = check_aio(str(mnt), libaio_finder=lambda: {"libaio.so.1": False, "libaio.so.1t64": False})
        assert "libaio-missing" in codes(report)
        only_t64 = check_aio(str(mnt), libaio_finder=lambda: {"libaio.so.1": False, "libaio.so.1t64": True})
        assert "libaio-t64-only" in codes(only_t64)
        nio = check_aio(str(mnt), journal_type="NIO",
                        libaio_finder=lambda: {"libaio.so.1": False, "libaio.so.1t64": False})
        assert nio.verdict == Verdict.OK  # a NIO journal does not need libaio


def test_aio_on_tmpfs_is_critical(tmp_path):
    with tmpfs_mount(tmp_path / "tmpfs") as mnt:
        report = check_aio(str(mnt), libaio_finder=LIBAIO_PRESENT)
        assert report.verdict == Verdict.CRITICAL
        assert "fs-memory" in codes(report)
        assert os.listdir(mnt) == []


def test_aio_on_overlay_warns(tmp_path):
    with overlay_mount(tmp_path) as (merged, upper):
        report = check_aio(str(merged), libaio_finder=LIBAIO_PRESENT)
        assert "fs-union" in codes(report)
        assert report.verdict in (Verdict.WARNING, Verdict.CRITICAL)
        assert report.verdict == (Verdict.CRITICAL if report.checks["ioSetup"]["ok"] is False else Verdict.WARNING)
        assert os.listdir(merged) == [] and os.listdir(upper) == []
        # The write-cache walk goes through the upper directory to the host's disk.
        stack = device_stack(str(merged))
        host = device_stack(str(upper))
        assert [d.name for d in stack.disks] == [d.name for d in host.disks]


def test_write_cache_on_tmpfs_is_memory_backed(tmp_path):
    with tmpfs_mount(tmp_path / "tmpfs") as mnt:
        report = check_write_cache([Target("path", str(mnt))])
        assert codes(report) == ["memory-backed"] and report.verdict == Verdict.CRITICAL


def test_filling_a_size_limited_filesystem_flips_the_verdict(tmp_path):
    with tmpfs_mount(tmp_path / "tmpfs", size="8m") as mnt:
        journal = mnt / "journal"
        journal.mkdir()
        targets = [Target("journal", str(journal)), Target("paging", str(mnt))]
        limit = ArtemisLimit(max_disk_usage=50)
        before = check_disk_space(targets, limit)
        assert before.verdict == Verdict.OK
        assert "shared-filesystem" in codes(before)
        [fs] = before.checks["filesystems"]
        assert fs["withinLimit"] and fs["headroom"] > 3 * 1024 * 1024
        with open(journal / "activemq-data-1.amq", "wb") as fh:
            fh.write(b"\0" * (5 * 1024 * 1024))
        after = check_disk_space(targets, limit)
        assert after.verdict == Verdict.CRITICAL
        assert "disk-limit-breached" in codes(after)
        assert after.checks["filesystems"][0]["headroom"] < 0
        # min-disk-free wins over max-disk-usage: 2 MiB free is enough for a 1 MiB floor...
        assert check_disk_space(targets, ArtemisLimit(50, 1024 * 1024)).verdict != Verdict.CRITICAL
        # ...and not for a 4 MiB one.
        assert check_disk_space(targets, ArtemisLimit(99, 4 * 1024 * 1024)).verdict == Verdict.CRITICAL


def test_filling_an_ext4_loop_past_min_disk_free(tmp_path):
    with loop_filesystem(tmp_path, "ext4", size_mb=32) as (mnt, _loop):
        limit = ArtemisLimit(max_disk_usage=-1, min_disk_free=16 * 1024 * 1024)
        assert check_disk_space([Target("journal", str(mnt))], limit).verdict != Verdict.CRITICAL
        with open(mnt / "fill", "wb") as fh:
            fh.write(b"\1" * (16 * 1024 * 1024))
            fh.flush()
            os.fsync(fh.fileno())
        report = check_disk_space([Target("journal", str(mnt))], limit)
        assert report.verdict == Verdict.CRITICAL and "disk-limit-breached" in codes(report)
