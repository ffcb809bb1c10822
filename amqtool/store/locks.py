"""Is a broker using this store? Lock detection for Artemis and KahaDB, without touching anything.

What the brokers hold while they run (all taken with Java's ``FileChannel.tryLock()``, which on Linux is an
``fcntl`` record lock over the whole file):

* Artemis, node manager (``FileLockNodeManager``, in the node-manager lock directory, by default the
  journal directory): since 2.10 (ARTEMIS-2441) ``serverlock.1`` is locked whole by the live (primary)
  broker for as long as it runs, ``serverlock.2`` by a waiting shared-store backup, and ``server.lock``
  (19 bytes: state byte, ``00``, 16-byte node UUID) only briefly while the state byte is read or written.
  Before 2.10 all three were one-byte ranges of ``server.lock``: ``tryLock(pos, 1, false)`` at byte 0
  (state), 1 (live) and 2 (backup). A whole-file ``F_OFD_GETLK`` probe overlaps every one of those ranges,
  so one probe sees both generations.
* Artemis CLI (``LockAbstract``): ``<instance>/lock/cli.lock``, held by ``artemis run`` and by the offline
  ``artemis data`` tools.
* KahaDB (``LockFile``/``SharedFileLocker``): ``<dir>/lock``.

:func:`held_lock` opens the file read-only and asks the kernel whether a write lock could be placed
(``F_OFD_GETLK``: it sees both classic POSIX locks and open-file-description locks, including ones held by
this very process through another descriptor). It then tries and instantly drops a shared ``flock`` to
see BSD locks, which live in a separate namespace. Nothing is created, written or truncated, and a lock
is never held for longer than that probe. The holder's PID comes from ``F_OFD_GETLK`` for POSIX locks,
else from ``/proc/locks`` (matched by device and inode).
"""
from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from amqtool.errors import AmqtoolError, StoreLockedError

# struct flock on Linux (64-bit off_t): short l_type, short l_whence, off_t l_start, off_t l_len,
# pid_t l_pid, with natural alignment -> 32 bytes on LP64.
_FLOCK = struct.Struct("@hhqqi4x" if struct.calcsize("@l") == 8 else "@hhqqi")
_F_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", 36)

ARTEMIS_NODE_FILES = ("server.lock", "serverlock.1", "serverlock.2")
_ROLES = {
    "server.lock": "Artemis node manager state (server.lock)",
    "serverlock.1": "Artemis live broker (serverlock.1)",
    "serverlock.2": "Artemis shared-store backup (serverlock.2)",
    "cli.lock": "Artemis broker or CLI (lock/cli.lock)",
    "lock": "KahaDB broker (lock)",
}


@dataclass(frozen=True)
class LockInfo:
    """A lock someone holds on ``path``."""

    path: str
    kind: str  # "posix" | "ofd" | "flock"
    exclusive: bool
    pid: int | None = None
    command: str | None = None  # the holder's process name, when it can be read

    def describe(self) -> str:
        who = ""
        if self.pid is not None:
            who = f" by PID {self.pid}" + (f" ({self.command})" if self.command else "")
        mode = "exclusive" if self.exclusive else "shared"
        return f"{self.path} is locked ({mode} {self.kind} lock){who}"


def _proc_comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _proc_locks_pid(st: os.stat_result, kinds: tuple[str, ...]) -> int | None:
    """The PID /proc/locks shows for a lock of one of ``kinds`` on the file ``st`` describes."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    by_inode = []
    for line in lines:
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; blocked waiters carry "->" after the number
        if len(parts) >= 6 and parts[1] == "->":
            continue
        if len(parts) < 6 or parts[1] not in kinds:
            continue
        try:
            pid = int(parts[4])
        except ValueError:
            continue
        if parts[5] == dev:
            return pid if pid > 0 else None
        if parts[5].rsplit(":", 1)[-1] == str(st.st_ino):
            by_inode.append(pid)
    # Stacked filesystems (overlayfs) may show another device number: fall back to a unique inode match.
    if len(by_inode) == 1 and by_inode[0] > 0:
        return by_inode[0]
    return None


def _fdinfo_pid(st: os.stat_result) -> int | None:
    """The process with an open descriptor on the file ``st`` describes whose ``fdinfo`` shows a lock.

    /proc/locks shows -1 as the PID of an OFD lock; ``/proc/<pid>/fdinfo/<fd>`` of the holder carries a
    ``lock:`` line. Only processes this user may inspect are seen (all of them as root).
    """
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    me = os.getpid()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                fst = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                continue
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
                    if "\nlock:" in fh.read() and pid != me:
                        return pid
            except OSError:
                continue
    return None


def held_lock(path: str | os.PathLike) -> LockInfo | None:
    """The lock another holder has on ``path``, or None when the file is absent or unlocked.

    Read-only: opens ``path`` with O_RDONLY, never creates it. Raises AmqtoolError (exit 3) when the file
    exists but cannot be opened to check it.
    """
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return None
    except OSError as err:
        raise AmqtoolError(f"cannot open lock file to check whether a broker holds it: {err.strerror}",
                           path=p) from None
    try:
        st = os.fstat(fd)
        # 1. POSIX / OFD record locks: would a write lock over the whole file conflict?
        req = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            res = fcntl.fcntl(fd, _F_OFD_GETLK, req)
            l_type, _whence, _start, _len, l_pid = _FLOCK.unpack(res)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise
            # Kernel without OFD locks (< 3.15): classic F_GETLK (misses this process's own locks).
            res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
            l_type, _whence, _start, _len, l_pid = _FLOCK.unpack(res)
        if l_type != fcntl.F_UNLCK:
            if l_pid > 0:
                kind, pid = "posix", l_pid
            else:
                kind = "ofd"
                pid = _proc_locks_pid(st, ("OFDLCK",)) or _fdinfo_pid(st)
            return LockInfo(p, kind, l_type == fcntl.F_WRLCK, pid, _proc_comm(pid) if pid else None)
        # 2. BSD flock locks: a shared probe fails only under an exclusive flock. Held for no time at all.
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _proc_locks_pid(st, ("FLOCK",))
            return LockInfo(p, "flock", True, pid, _proc_comm(pid) if pid else None)
        except OSError:
            return None  # filesystems without flock support cannot hold one either
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def artemis_lock_files(journal_dir: str | os.PathLike | None = None,
                       instance_dir: str | os.PathLike | None = None,
                       node_manager_dir: str | os.PathLike | None = None) -> list[Path]:
    """The files a running Artemis broker locks, for a store with these directories."""
    files: list[Path] = []
    nm = node_manager_dir or journal_dir
    if nm is not None:
        files += [Path(nm) / n for n in ARTEMIS_NODE_FILES]
    if instance_dir is not None:
        files.append(Path(instance_dir) / "lock" / "cli.lock")
    return files


def find_locks(paths) -> list[LockInfo]:
    """Every lock held on ``paths`` (absent files are skipped)."""
    found = []
    seen = set()
    for path in paths:
        key = os.path.abspath(path)
        if key in seen:
            continue
        seen.add(key)
        info = held_lock(path)
        if info is not None:
            found.append(info)
    return found


def locked_error(locks: list[LockInfo]) -> StoreLockedError:
    """The one-line refusal for a store in use."""
    first = locks[0]
    role = _ROLES.get(Path(first.path).name, "a broker")
    who = f"PID {first.pid}" + (f" ({first.command})" if first.command else "") if first.pid else "another process"
    more = f" (and {len(locks) - 1} more lock file(s))" if len(locks) > 1 else ""
    return StoreLockedError(
        f"store is in use: {who} holds the {role} lock{more}; stop the broker first "
        f"(or --force, which may damage the store)",
        path=first.path,
    )


def ensure_not_locked(paths, *, force: bool = False) -> list[LockInfo]:
    """Raise StoreLockedError when any of ``paths`` is locked, unless ``force`` (then return the locks)."""
    locks = find_locks(paths)
    if locks and not force:
        raise locked_error(locks)
    return locks


def instance_above(paths) -> Path | None:
    """The broker instance holding any of ``paths``: the nearest directory at or above one of them that has
    ``lock/`` (``artemis create`` makes it; ``LockAbstract`` keeps ``cli.lock`` there) or ``etc/broker.xml``."""
    for p in paths:
        p = Path(os.path.abspath(p))
        for cand in (p, *p.parents):
            try:
                if (cand / "lock").is_dir() or (cand / "etc" / "broker.xml").is_file():
                    return cand
            except PermissionError:  # a directory this user cannot search (a journal of mode 000) is none
                continue
    return None


def artemis_node_manager_dirs(store) -> list[Path]:
    """Every directory in which a broker running on ``store`` may keep its node-manager lock files.

    ``FileBasedNodeManager.newFile`` puts them in ``ConfigurationImpl.getNodeManagerLockLocation()``: the
    ``<node-manager-lock-directory>`` when broker.xml names one (relative to the instance, like every
    directory there), else the journal directory. The journal directory as found on disk, the default
    ``data/journal`` of the instance and the data directory itself (``<journal-directory>data</...>``, or a
    lock directory an operator pointed there) are checked as well: a lock the broker holds in any of them
    means the store is in use, whatever broker.xml this run happened to read.
    """
    from amqtool.store.brokerxml import read_broker_xml

    settings = getattr(store, "settings", None)
    journal_dir = store.messages.directory if store.messages is not None else None
    known = [Path(store.root)] + [j.directory for j in (store.messages, store.bindings) if j is not None]
    instance = settings.instance_dir if settings is not None else None
    if instance is None:
        instance = instance_above(known)
        xml = instance / "etc" / "broker.xml" if instance is not None else None
        if xml is not None and xml.is_file():
            try:
                settings = read_broker_xml(xml)
            except AmqtoolError:
                settings = None  # an unreadable broker.xml: the default places below still count
    dirs: list[Path] = []
    if settings is not None:
        if getattr(settings, "node_manager_lock_dir", None) is not None:
            dirs.append(Path(settings.node_manager_lock_dir))
        if settings.journal_dir is not None:
            dirs += [Path(settings.journal_dir), Path(settings.journal_dir).parent]
    if journal_dir is not None:
        dirs += [Path(journal_dir), Path(journal_dir).parent]
    if instance is not None:
        dirs += [instance / "data" / "journal", instance / "data"]
    if store.bindings is not None:
        dirs.append(store.bindings.directory)
    dirs.append(Path(store.root))
    out: list[Path] = []
    for d in dirs:
        d = Path(os.path.abspath(d))
        if d not in out:
            out.append(d)
    return out


def artemis_store_lock_files(store) -> list[Path]:
    """The lock files of an :class:`~amqtool.store.layout.ArtemisStore`, whatever path named it.

    Node-manager files (``FileLockNodeManager``) in every directory :func:`artemis_node_manager_dirs` names;
    the instance's ``lock/cli.lock`` (``LockAbstract``). The instance is found from any path inside it
    (instance, data directory, journal or bindings directory), and its ``etc/broker.xml`` then names the
    journal and node-manager directories even when PATH was only the bindings journal: a store named by its
    journal directory is the same store, and the broker holds it all the same.
    """
    files: list[Path] = []
    for d in artemis_node_manager_dirs(store):
        files += artemis_lock_files(d)
    settings = getattr(store, "settings", None)
    known = [Path(store.root)] + [j.directory for j in (store.messages, store.bindings) if j is not None]
    instance = (settings.instance_dir if settings is not None else None) or instance_above(known)
    if instance is not None:
        files.append(instance / "lock" / "cli.lock")
    return files


# --- amqtool's own writer lock --------------------------------------------------------------------------
#
# Two amqtool writers on one store (two cron compactions, a compaction and an in-place recovery) must exclude
# each other, and readers must be able to tell that a writer is switching files under them. The lock is a BSD
# flock(2) on a read-only descriptor of each directory the writer changes (the journal and bindings
# directories, a KahaDB directory):
#
# * it writes nothing: no lock file appears in a broker's directory (Artemis' cleanup and `artemis data`
#   tools list those directories, and KahaDB treats unknown files as its own), and nothing is left behind
#   after a crash, because the kernel drops the lock with the last descriptor of the dying process;
# * it cannot collide with the brokers' own locks: Java's FileChannel.tryLock is an fcntl record lock on a
#   regular file (server.lock, serverlock.N, cli.lock, KahaDB's lock), which lives in another namespace and
#   cannot be taken on a directory opened read-only at all;
# * every path naming the store (instance, data directory, journal directory, a symlink or bind mount to it)
#   reaches the same inode, so the same lock.
#
# On a filesystem without flock (some FUSE and NFS setups answer ENOLCK, EBADF or EOPNOTSUPP) the lock is
# skipped: amqtool cannot make one there, and the brokers' locks are still checked.

_NO_FLOCK = (errno.ENOLCK, errno.EBADF, errno.EINVAL, errno.EOPNOTSUPP)


def _unique_dirs(directories) -> list[str]:
    out, seen = [], set()
    for d in directories:
        if d is None:
            continue
        try:
            st = os.stat(d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append(os.fspath(d))
    return out


def _holder_text(fd: int) -> str:
    pid = _proc_locks_pid(os.fstat(fd), ("FLOCK",))
    if pid is None:
        return "another amqtool"
    comm = _proc_comm(pid)
    return f"another amqtool (PID {pid}" + (f", {comm})" if comm else ")")


class WriterLock:
    """amqtool's exclusive writer lock on a store's directories; a context manager.

    ``WriterLock(dirs)`` takes ``flock(LOCK_EX | LOCK_NB)`` on each directory (deduplicated by device and
    inode) and raises StoreLockedError (exit 3) at once, naming the directory and the holder, when another
    amqtool writer holds one. The locks go with :meth:`release`, the ``with`` block, or the process.
    """

    def __init__(self, directories):
        self.fds: list[int] = []
        try:
            for d in _unique_dirs(directories):
                self.add(d)
        except BaseException:
            self.release()
            raise

    def add(self, directory) -> None:
        """Lock one more directory (a staging directory about to be switched into the store's place)."""
        d = os.fspath(directory)
        for _ in range(8):
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _holder_text(fd)
                os.close(fd)
                raise StoreLockedError(f"{who} holds {d}: it is writing this store; wait for it to finish",
                                       path=d) from None
            except OSError as err:
                os.close(fd)
                if err.errno not in _NO_FLOCK:
                    raise
                return
            # A writer that switched a new directory into this path (KahaDB's exchange) holds the new one:
            # a lock on the inode that was here before proves nothing, so look again.
            try:
                st = os.stat(d)
            except OSError:
                st = None
            fst = os.fstat(fd)
            if st is not None and (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino):
                self.fds.append(fd)
                return
            os.close(fd)
        raise StoreLockedError(f"{d} keeps being replaced while amqtool tries to lock it: another writer is "
                               "switching this store; try again", path=d)

    def release(self) -> None:
        while self.fds:
            os.close(self.fds.pop())

    def __enter__(self) -> "WriterLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def writer_holding(directories) -> str | None:
    """The directory of ``directories`` that an amqtool writer holds right now, else None (a probe: a shared
    flock tried and dropped at once, so it never delays a writer)."""
    for d in _unique_dirs(directories):
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return d
        except OSError:
            continue
        finally:
            os.close(fd)  # closing drops the probe's shared lock
    return None


def wait_for_writers(directories, timeout: float) -> str | None:
    """Wait until no amqtool writer holds any of ``directories`` (at most ``timeout`` seconds). Returns the
    directory still held when the time ran out, else None."""
    import time

    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        held = writer_holding(directories)
        if held is None or time.monotonic() >= deadline:
            return held
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


# --- readers and a writer's switch ----------------------------------------------------------------------

def directory_state(directories) -> tuple:
    """What a writer's switch changes, for a reader to compare before and after its read: every entry of
    ``directories`` by name, inode, size and modification time. Reads metadata only."""
    out = []
    for d in _unique_dirs(directories):
        try:
            with os.scandir(d) as it:
                entries = []
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    entries.append((e.name, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            continue
        out.append((d, tuple(sorted(entries))))
    return tuple(out)
