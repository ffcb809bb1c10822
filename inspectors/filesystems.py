"""Can the Artemis ASYNCIO journal run in a directory: filesystem type, O_DIRECT, Linux AIO, libaio.

What Artemis does, and what is mirrored here:

* ``artemis create`` opens ``validateAIO.bin`` in the data directory through ``LibaioContext.openFile``
  (``open(O_RDWR|O_CREAT|O_DIRECT)``) and deletes it; if that fails it switches the journal to NIO
  ("The filesystem used on ... doesn't support libAIO and O_DIRECT files"). ``o_direct_probe`` does the same
  open, then one aligned write and ``fdatasync`` (an open that succeeds but a write that fails with EINVAL is
  the other way O_DIRECT goes wrong), and always removes the file.
* The broker's ``LibaioContext(maxIO)`` calls ``io_setup(maxIO)``. The kernel counts ``nr_events`` as asked
  against ``/proc/sys/fs/aio-max-nr`` (``fs/aio.c`` ``ioctx_alloc``: EAGAIN when ``aio-nr + nr > aio-max-nr``).
  ``io_setup_probe`` calls ``io_setup(1)``/``io_destroy`` through ``syscall(2)``: no libaio needed.
* The native layer (``libartemis-native``) links against ``libaio.so.1``; Debian/Ubuntu's 64-bit time_t
  transition renamed the package's library ``libaio.so.1t64``. ``find_libaio`` looks for both sonames.
* Alignment: ``LibaioContext.getBlockSize`` (``st_blksize`` of the directory) unless
  ``journal-device-block-size`` is set; O_DIRECT needs buffers, offsets and sizes aligned to the device's
  logical block size.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
from dataclasses import dataclass

from amqtool.inspectors.mounts import find_mount, read_mounts

TEST_FILE = "validateAIO.bin"  # the name Artemis' create command uses

# syscall numbers of io_setup/io_destroy (arch/*/syscall tables)
_AIO_SYSCALLS = {
    "x86_64": (206, 207),
    "amd64": (206, 207),
    "aarch64": (0, 1),
    "arm64": (0, 1),
    "riscv64": (0, 1),
    "ppc64le": (227, 228),
    "s390x": (243, 244),
    "i686": (245, 246),
    "i386": (245, 246),
}

LIBAIO_SONAMES = ("libaio.so.1", "libaio.so.1t64")


@dataclass
class ProbeResult:
    ok: bool | None           # None: could not run
    detail: str
    errno: int | None = None

    def to_json(self) -> dict:
        return {"ok": self.ok, "detail": self.detail,
                "errno": errno.errorcode.get(self.errno, self.errno) if self.errno else None}


def o_direct_probe(directory: str, size: int = 4096) -> ProbeResult:
    """Open a test file in ``directory`` with O_DIRECT, write ``size`` aligned bytes, fdatasync, remove it.

    ``size`` must be a multiple of the alignment to test (a page-aligned mmap buffer is used, so any
    alignment up to the page size is met). Never leaves the file behind; never touches an existing file.
    """
    if not hasattr(os, "O_DIRECT"):
        return ProbeResult(None, "this platform has no O_DIRECT")
    name = os.path.join(directory, TEST_FILE)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_DIRECT
    try:
        fd = os.open(name, flags, 0o600)
    except FileExistsError:
        name = os.path.join(directory, f"{TEST_FILE}.{os.getpid()}")
        try:
            fd = os.open(name, flags, 0o600)
        except OSError as err:
            return _open_failure(err)
    except OSError as err:
        return _open_failure(err)
    try:
        buf = mmap.mmap(-1, size)  # anonymous mapping: page-aligned, as O_DIRECT needs
        try:
            buf.write(b"t" * size)  # Artemis' perf-journal fills its block with 't'
            try:
                written = os.pwritev(fd, [buf], 0) if hasattr(os, "pwritev") else os.pwrite(fd, bytes(buf), 0)
                os.fdatasync(fd)
            except OSError as err:
                return ProbeResult(False, f"O_DIRECT open succeeded but an aligned {size}-byte write failed: "
                                          f"{err.strerror}", err.errno)
        finally:
            buf.close()
        if written != size:
            return ProbeResult(False, f"O_DIRECT write wrote {written} of {size} bytes")
        return ProbeResult(True, f"O_DIRECT open, aligned {size}-byte write and fdatasync succeeded")
    finally:
        os.close(fd)
        try:
            os.unlink(name)
        except OSError:
            pass


def _open_failure(err: OSError) -> ProbeResult:
    if err.errno == errno.EINVAL:
        return ProbeResult(False, "the filesystem refuses O_DIRECT (open: EINVAL)", err.errno)
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ProbeResult(None, f"cannot create a test file here: {err.strerror}", err.errno)
    if err.errno == errno.ENOSPC:
        return ProbeResult(None, "no space left for a test file", err.errno)
    return ProbeResult(False, f"O_DIRECT open failed: {err.strerror}", err.errno)


def io_setup_probe(nr_events: int = 1) -> ProbeResult:
    """Create and destroy one kernel AIO context (``io_setup``/``io_destroy`` via ``syscall(2)``)."""
    numbers = _AIO_SYSCALLS.get(platform.machine().lower())
    if numbers is None:
        return ProbeResult(None, f"io_setup syscall number unknown on {platform.machine()}")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return ProbeResult(None, "libc syscall() not available")
    syscall.restype = ctypes.c_long
    ctx = ctypes.c_ulong(0)
    rc = syscall(ctypes.c_long(numbers[0]), ctypes.c_uint(nr_events), ctypes.byref(ctx))
    if rc != 0:
        err = ctypes.get_errno()
        reason = {
            errno.ENOSYS: "the kernel has no AIO (CONFIG_AIO off) or a seccomp filter blocks it",
            errno.EPERM: "a seccomp filter or security policy forbids io_setup",
            errno.EAGAIN: "aio-max-nr is exhausted",
        }.get(err, os.strerror(err))
        return ProbeResult(False, f"io_setup({nr_events}) failed: {reason}", err)
    syscall(ctypes.c_long(numbers[1]), ctx)
    return ProbeResult(True, f"io_setup({nr_events})/io_destroy succeeded")


def aio_limits(root: str = "/") -> dict:
    """``/proc/sys/fs/aio-max-nr`` and ``aio-nr`` (None where unreadable)."""
    def read(name):
        try:
            with open(os.path.join(root, "proc/sys/fs", name), encoding="ascii") as fh:
                return int(fh.read().strip())
        except (OSError, ValueError):
            return None

    return {"aioMaxNr": read("aio-max-nr"), "aioNr": read("aio-nr")}


def find_libaio(sonames=LIBAIO_SONAMES) -> dict[str, bool]:
    """Which libaio sonames the dynamic loader can load (``dlopen``, as the JVM's native loader would)."""
    found = {}
    for soname in sonames:
        try:
            ctypes.CDLL(soname)
            found[soname] = True
        except OSError:
            found[soname] = False
    return found


def filesystem_facts(path: str, root: str = "/") -> dict:
    """fs type and class of the mount holding ``path``, and ``st_blksize`` of the path (live machine)."""
    mount = find_mount(path, root, read_mounts(root))
    facts = {
        "fstype": mount.fstype if mount else None,
        "fsClass": mount.fs_class if mount else None,
        "mount": mount.to_json() if mount else None,
        "readOnly": mount.read_only if mount else None,
        "stBlksize": None,
    }
    if root in ("/", ""):
        try:
            facts["stBlksize"] = os.stat(path).st_blksize
        except OSError:
            pass
    if mount and mount.fstype in ("ext3", "ext4") and "data=journal" in (mount.super_options + "," + mount.options):
        facts["ext4DataJournal"] = True  # O_DIRECT silently falls back to buffered I/O in this mode
    return facts
