"""The device-stack walk and the write-cache verdicts against recorded sysfs/udev trees."""
from __future__ import annotations

from amqtool.engines.check import Target, check_write_cache
from amqtool.errors import Verdict
from amqtool.inspectors.devices import device_stack
from amqtool.inspectors.mounts import parse_mountinfo

ATA_PATH = "pci0000:00/0000:00:1f.2/ata{n}/host{h}/target{h}:0:0/{h}:0:0:0"


def sata_disk(m, name, major, minor, n, *, write_cache="write back", udev_enabled="1"):
    path = ATA_PATH.format(n=n, h=n - 1)
    return m.disk(
        path, name, major, minor,
        queue={"write_cache": write_cache, "rotational": 1, "fua": 0, "logical_block_size": 512,
               "physical_block_size": 4096},
        device={"vendor": "ATA     ", "model": "ST2000DM008-2FR1", f"scsi_disk/{n - 1}:0:0:0/cache_type":
                "write back" if write_cache == "write back" else "write through"},
        udev={"ID_BUS": "ata", "ID_ATA": "1", "ID_ATA_WRITE_CACHE": "1",
              "ID_ATA_WRITE_CACHE_ENABLED": udev_enabled, "ID_MODEL": "ST2000DM008-2FR1"},
    )


def codes(report):
    return [f.code for f in report.findings]


def test_mountinfo_parsing_and_escapes():
    text = ("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
            "30 22 0:40 / /srv/my\\040store rw - tmpfs tmpfs rw,size=8192k\n"
            "garbage line\n")
    mounts = parse_mountinfo(text)
    assert [(m.mount_point, m.fstype, m.major, m.minor) for m in mounts] == [
        ("/", "ext4", 8, 1), ("/srv/my store", "tmpfs", 0, 40)]


def test_sata_disk_with_write_cache_on_is_critical(machine):
    sda = sata_disk(machine, "sda", 8, 0, 1)
    machine.partition(sda, "sda1", 8, 1, 1)
    machine.mount("/var/lib/artemis", 8, 1, "ext4", "/dev/sda1")
    stack = device_stack("/var/lib/artemis/data/journal", root=str(machine.root))
    assert stack.mount.mount_point == "/var/lib/artemis"
    assert stack.top.kind == "partition" and stack.top.lower[0].kind == "disk"
    [disk] = stack.disks
    assert (disk.name, disk.transport, disk.virtual, disk.write_back) == ("sda", "sata", False, True)
    assert disk.scsi_cache_type == "write back" and disk.ata_write_cache_enabled is True
    assert disk.rotational is True and disk.fua is False
    assert disk.via == ["sda1", "sda"]
    report = check_write_cache([Target("journal", "/var/lib/artemis/data/journal")], root=str(machine.root))
    assert report.verdict == Verdict.CRITICAL
    [crit] = [f for f in report.findings if f.code == "write-cache-volatile"]
    assert "hdparm -W0 /dev/sda" in crit.message
    assert crit.details["fix"].startswith("hdparm -W0 /dev/sda")


def test_nvme_with_volatile_write_cache(machine):
    ctrl = "pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0"
    nvme = machine.disk(ctrl + "/nvme0n1", "nvme0n1", 259, 0, device_link=ctrl,
                        queue={"write_cache": "write back", "fua": 1, "rotational": 0},
                        device={"model": "Samsung SSD 990 PRO 2TB", "serial": "S73WNJ0W", "transport": "pcie"})
    machine.partition(nvme, "nvme0n1p1", 259, 1, 1)
    machine.mount("/data", 259, 1, "xfs", "/dev/nvme0n1p1")
    [disk] = device_stack("/data", root=str(machine.root)).disks
    assert disk.transport == "nvme" and disk.nvme_controller == "nvme0"
    assert disk.nvme_volatile_write_cache is True and disk.fua is True
    assert disk.model == "Samsung SSD 990 PRO 2TB"
    report = check_write_cache([Target("path", "/data")], root=str(machine.root))
    assert report.verdict == Verdict.CRITICAL
    [crit] = [f for f in report.findings if f.code == "write-cache-volatile"]
    assert "nvme set-feature /dev/nvme0 -f 6 -v 0" in crit.message


def _crypt_lvm_md(machine, degraded="0"):
    sda = sata_disk(machine, "sda", 8, 0, 1)
    sdb = sata_disk(machine, "sdb", 8, 16, 2)
    sda1 = machine.partition(sda, "sda1", 8, 1, 1)
    sdb1 = machine.partition(sdb, "sdb1", 8, 17, 1)
    md0 = machine.virtual("md0", 9, 0, files={"md/level": "raid1", "md/raid_disks": "2", "md/degraded": degraded,
                                              "md/array_state": "clean"}, slaves=[sda1, sdb1])
    lv = machine.virtual("dm-0", 253, 0, files={"dm/name": "vg0-artemis", "dm/uuid": "LVM-abcdefgh12345678"},
                         slaves=[md0])
    crypt = machine.virtual("dm-1", 253, 1, files={"dm/name": "artemis_crypt",
                                                   "dm/uuid": "CRYPT-LUKS2-0123456789abcdef-artemis_crypt"},
                            slaves=[lv])
    machine.mount("/srv/artemis", 253, 1, "ext4", "/dev/mapper/artemis_crypt")
    return crypt


def test_dm_crypt_on_lvm_on_md_raid1_over_two_sata_disks(machine):
    _crypt_lvm_md(machine)
    stack = device_stack("/srv/artemis", root=str(machine.root))
    assert stack.top.kind == "dm-crypt"
    assert stack.top.lower[0].kind == "lvm"
    md = stack.top.lower[0].lower[0]
    assert (md.kind, md.details["level"], md.details["degraded"]) == ("md", "raid1", 0)
    assert [p.name for p in md.lower] == ["sda1", "sdb1"]
    assert sorted(d.name for d in stack.disks) == ["sda", "sdb"]
    assert all(d.redundant for d in stack.disks)
    assert stack.disks[0].via == ["dm-1", "dm-0", "md0", "sda1", "sda"]
    report = check_write_cache([Target("path", "/srv/artemis")], root=str(machine.root))
    assert report.verdict == Verdict.WARNING
    assert codes(report).count("write-cache-volatile-redundant") == 2
    assert "write-cache-volatile" not in codes(report)


def test_degraded_mirror_is_not_redundant(machine):
    _crypt_lvm_md(machine, degraded="1")
    report = check_write_cache([Target("path", "/srv/artemis")], root=str(machine.root))
    assert report.verdict == Verdict.CRITICAL
    assert codes(report).count("write-cache-volatile") == 2


def test_loop_device_backed_by_a_file_on_tmpfs(machine):
    machine.virtual("loop0", 7, 0, files={"loop/backing_file": "/dev/shm/journal.img", "loop/dio": "0"})
    machine.mount("/dev/shm", 0, 27, "tmpfs", "tmpfs", "rw,size=1024k")
    machine.mount("/srv/journal", 7, 0, "ext4", "/dev/loop0")
    stack = device_stack("/srv/journal", root=str(machine.root))
    assert stack.top.kind == "loop"
    assert stack.top.details["backingFile"] == "/dev/shm/journal.img"
    assert stack.top.backing.mount.fstype == "tmpfs"
    assert stack.disks == [] and stack.memory_backed == ["tmpfs at /dev/shm"]
    report = check_write_cache([Target("path", "/srv/journal")], root=str(machine.root))
    assert report.verdict == Verdict.CRITICAL
    assert codes(report) == ["memory-backed"]


def test_loop_device_backed_by_a_file_on_a_disk_reaches_the_disk(machine):
    machine.disk("pci0000:00/0000:00:02.0/virtio1", "vda", 254, 0, queue={"write_cache": "write back"},
                 device={"vendor": "0x1af4"})
    machine.virtual("loop3", 7, 3, files={"loop/backing_file": "/var/tmp/store.img"})
    machine.mount("/mnt/store", 7, 3, "ext4", "/dev/loop3")
    stack = device_stack("/mnt/store", root=str(machine.root))
    [disk] = stack.disks
    assert disk.name == "vda" and disk.via == ["loop3", "vda"] and disk.virtual


def test_virtio_disk_write_back_is_a_warning_that_explains(machine):
    machine.disk("pci0000:00/0000:00:02.0/virtio1", "vda", 254, 0,
                 queue={"write_cache": "write back", "rotational": 1}, device={"vendor": "0x1af4"})
    report = check_write_cache([Target("path", "/home")], root=str(machine.root))
    assert report.verdict == Verdict.WARNING
    [warn] = [f for f in report.findings if f.code == "write-cache-virtual"]
    assert "hypervisor" in warn.message and "flush" in warn.message


def test_write_through_sas_disk_is_ok_and_stale_udev_is_noted(machine):
    machine.disk("pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0", "sda", 8, 0,
                 queue={"write_cache": "write through"}, device={"vendor": "ATA", "model": "X"},
                 udev={"ID_BUS": "ata", "ID_ATA_WRITE_CACHE": "1", "ID_ATA_WRITE_CACHE_ENABLED": "1"})
    machine.mount("/data", 8, 0, "xfs", "/dev/sda")
    report = check_write_cache([Target("path", "/data")], root=str(machine.root))
    assert report.verdict == Verdict.OK
    assert "write-cache-off" in codes(report) and "udev-ata-cache-stale" in codes(report)


def test_sas_write_back_suggests_sdparm(machine):
    machine.disk("pci0000:00/0000:00:03.0/0000:01:00.0/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0",
                 "sdc", 8, 32, queue={"write_cache": "write back"},
                 device={"vendor": "SEAGATE", "model": "ST4000NM0025", "scsi_disk/2:0:0:0/cache_type": "write back"},
                 udev={"ID_BUS": "scsi"})
    machine.mount("/data", 8, 32, "xfs", "/dev/sdc")
    report = check_write_cache([Target("path", "/data")], root=str(machine.root))
    [crit] = [f for f in report.findings if f.code == "write-cache-volatile"]
    assert "sdparm --clear=WCE --save /dev/sdc" in crit.message
    assert report.checks["paths"][0]["disks"][0]["transport"] == "sas"


def test_overlay_is_followed_through_its_upper_dir(machine):
    sata_disk(machine, "sda", 8, 0, 1, write_cache="write through", udev_enabled="0")
    machine.mount("/var/lib/docker", 8, 0, "ext4", "/dev/sda")
    machine.mount("/", 0, 55, "overlay", "overlay",
                  "rw,lowerdir=/var/lib/docker/overlay2/l/A,upperdir=/var/lib/docker/overlay2/x/diff,"
                  "workdir=/var/lib/docker/overlay2/x/work")
    stack = device_stack("/opt/artemis/data", root=str(machine.root))
    assert [d.name for d in stack.disks] == ["sda"]


def test_nfs_has_no_block_device(machine):
    machine.mount("/mnt/nfs", 0, 60, "nfs4", "filer:/export/artemis")
    report = check_write_cache([Target("path", "/mnt/nfs/journal")], root=str(machine.root))
    assert codes(report) == ["no-block-device"] and report.verdict == Verdict.WARNING


def test_unknown_device_is_unknown_not_a_crash(machine):
    machine.mount("/data", 8, 99, "ext4", "/dev/sdz9")
    report = check_write_cache([Target("path", "/data")], root=str(machine.root))
    assert report.verdict == Verdict.UNKNOWN
    assert codes(report) == ["device-unknown"]


def test_dm_without_slaves_and_a_cycle_do_not_hang(machine):
    a = machine.virtual("dm-5", 253, 5, files={"dm/uuid": "LVM-x"})
    b = machine.virtual("dm-6", 253, 6, files={"dm/uuid": "LVM-y"}, slaves=[a])
    machine._link(a / "slaves" / "dm-6", b)  # a cycle no real kernel makes; the walker must stop
    machine.mount("/data", 253, 6, "ext4", "/dev/dm-6")
    report = check_write_cache([Target("path", "/data")], root=str(machine.root))
    assert report.verdict == Verdict.UNKNOWN
    assert any("deeper than" in f.message for f in report.findings)
