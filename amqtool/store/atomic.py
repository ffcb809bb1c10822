"""Crash-safe writing primitives: tmp + fsync + rename + directory fsync, zero-filled pre-allocation,
ownership copying, and a fault-injection hook for crash tests.

Every durable step of amqtool's writers (``create``, the journal writer, compaction) goes through the
functions here, so one hook sees them all:

* :func:`fsync` / :func:`fsync_dir` / :func:`rename` / :func:`unlink` are the *checkpoints*. Each first calls
  :func:`checkpoint` with its point name (``"fsync"``, ``"fsync-dir"``, ``"rename"``, ``"unlink"``), then does
  the work. Writers may add their own named checkpoints (e.g. ``"write"``) with :func:`checkpoint`.
* :func:`atomic_write` / :func:`write_file_atomic`: write ``<name>.tmp`` (or a given temporary name),
  fsync it, rename it over the target, fsync the directory. A crash leaves either the old file or the new
  one, plus at worst a stale temporary file, never a half-written target.
* :func:`preallocate` creates a file of ``size`` zero bytes the way Artemis' NIO ``fill`` does (real zero
  writes, not a sparse hole), so the space is allocated when the file is created.
* :func:`copy_owner_and_mode` gives a new file the owner, group and mode of a reference file: a store
  rewritten by root must stay readable and writable by the broker's user.

Fault injection
---------------

Crash tests need to stop a writer at an exact durable step. Set a fault plan, either

* in the environment: ``AMQTOOL_FAULT=<point>:<n>[:<action>]``, read at the first checkpoint of the
  process (so a test can run ``amqtool compact`` in a subprocess with it), or
* in-process: :func:`set_fault` / the :func:`fault` context manager.

``point`` is a checkpoint name or ``*`` (any checkpoint); ``n`` is 1-based: the fault fires at the n-th
checkpoint matching ``point``, **before** that step is performed (the n-th fsync never happens, the n-th
rename is never done). ``action`` is

* ``raise`` (default): raise :class:`InjectedFault`. It derives from ``BaseException`` so that ordinary
  ``except Exception`` clean-up code does not swallow it; ``finally`` blocks still run, so for a faithful
  power-cut use ``kill``;
* ``kill``: ``SIGKILL`` the current process, a real crash (no clean-up, no flush of Python buffers);
* ``stop``: ``SIGSTOP`` the current process there, and go on when it gets ``SIGCONT``: a test then acts at
  that exact instant (runs a second writer or a reader, sends a signal that is delivered on ``SIGCONT``).

Besides the durable steps, compaction marks ``pre-commit`` (every ``.cmp`` file is durable, the control
file not yet written) and ``commit`` (the control file is durable: from here on the compaction rolls
forward).

To sweep every step of an operation, first count its checkpoints with :func:`record_checkpoints`, then run
it once per ``n`` with ``*:<n>:kill``. The hook costs one attribute test per checkpoint when no plan is
set.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from amqtool.errors import AmqtoolError, UsageError

FAULT_ENV = "AMQTOOL_FAULT"
POINTS = ("fsync", "fsync-dir", "rename", "unlink", "write", "pre-commit", "commit")
_ZERO_CHUNK = 1 << 20


class InjectedFault(BaseException):
    """Raised at a checkpoint chosen by the fault plan (action ``raise``)."""

    def __init__(self, point: str, n: int, where: str | None = None):
        super().__init__(f"injected fault at {point} #{n}" + (f" ({where})" if where else ""))
        self.point = point
        self.n = n
        self.where = where


@dataclass
class FaultPlan:
    """Fire ``action`` at the ``n``-th checkpoint named ``point`` (``*`` = any)."""

    point: str
    n: int
    action: str = "raise"
    seen: int = 0

    @classmethod
    def parse(cls, text: str) -> "FaultPlan":
        parts = text.strip().split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"{FAULT_ENV}={text!r}: expected <point>:<n>[:raise|kill|stop]")
        point, n_text = parts[0], parts[1]
        action = parts[2] if len(parts) == 3 else "raise"
        if point != "*" and point not in POINTS:
            raise UsageError(f"{FAULT_ENV}: unknown point {point!r} (one of *, {', '.join(POINTS)})")
        try:
            n = int(n_text)
        except ValueError:
            raise UsageError(f"{FAULT_ENV}: {n_text!r} is not a number") from None
        if n < 1:
            raise UsageError(f"{FAULT_ENV}: n must be 1 or more")
        if action not in ("raise", "kill", "stop"):
            raise UsageError(f"{FAULT_ENV}: unknown action {action!r} (raise, kill or stop)")
        return cls(point, n, action)


@dataclass
class _Recorder:
    points: list[tuple[str, str | None]] = field(default_factory=list)


_plan: FaultPlan | None = None
_env_read = False
_recorders: list[_Recorder] = []

#: Optional module-level hook called as ``hook(point, where)`` at every checkpoint, after the fault plan
#: is consulted. Tests may set it to observe or to raise their own exception.
hook: Callable[[str, str | None], None] | None = None


def set_fault(point: str, n: int, action: str = "raise") -> None:
    """Arm a fault plan in this process (replaces any plan, including one from the environment)."""
    global _plan, _env_read
    _plan = FaultPlan.parse(f"{point}:{n}:{action}")
    _env_read = True


def clear_fault() -> None:
    """Disarm fault injection (the environment variable is not read again)."""
    global _plan, _env_read
    _plan = None
    _env_read = True


@contextlib.contextmanager
def fault(point: str, n: int, action: str = "raise") -> Iterator[FaultPlan]:
    """``with fault("rename", 2): ...`` arms a plan for the block and disarms it afterwards."""
    set_fault(point, n, action)
    try:
        yield _plan  # type: ignore[misc]
    finally:
        clear_fault()


@contextlib.contextmanager
def record_checkpoints() -> Iterator[list[tuple[str, str | None]]]:
    """Collect ``(point, where)`` for every checkpoint passed inside the block (to size a fault sweep)."""
    rec = _Recorder()
    _recorders.append(rec)
    try:
        yield rec.points
    finally:
        _recorders.remove(rec)


def checkpoint(point: str, where: str | os.PathLike | None = None) -> None:
    """Mark a durable step. Fires the fault plan when this is its n-th matching checkpoint."""
    global _plan, _env_read
    if not _env_read:
        _env_read = True
        text = os.environ.get(FAULT_ENV)
        if text:
            _plan = FaultPlan.parse(text)
    w = None if where is None else os.fspath(where)
    for rec in _recorders:
        rec.points.append((point, w))
    plan = _plan
    if plan is not None and (plan.point == "*" or plan.point == point):
        plan.seen += 1
        if plan.seen == plan.n:
            if plan.action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            _plan = None  # fire once
            if plan.action == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
                if hook is not None:
                    hook(point, w)
                return
            raise InjectedFault(point, plan.n, w)
    if hook is not None:
        hook(point, w)


class deferred_signals:
    """Hold ``signals`` back from :meth:`__enter__` to :meth:`__exit__`; one that came meanwhile is raised
    again when it ends, so its own handler (SIGTERM's exception) acts then. Both ends may be called more
    than once, and ``__exit__`` without ``__enter__`` does nothing.

    For a step that must finish once begun: a compaction past its commit point is rolled forward by the
    broker at its next start anyway, so a SIGTERM there finishes the roll-forward first (leaving no ``.cmp``
    nor control file behind) and is acted on just after. The handlers are swapped, not the thread's signal
    mask: the kernel hands a process's signal to any thread that does not block it, and Python then runs the
    handler in the main thread whatever the main thread's mask. Only the main thread may swap them (Python's
    handlers run there); elsewhere this does nothing. SIGKILL cannot be held and is left to the control file.
    """

    def __init__(self, signals=(signal.SIGTERM, signal.SIGHUP, signal.SIGINT)):
        self.signals = signals
        self._saved: dict | None = None
        self._held: list[int] = []

    def _hold(self, signum, _frame) -> None:
        self._held.append(signum)

    def __enter__(self) -> "deferred_signals":
        import threading

        if self._saved is None and threading.current_thread() is threading.main_thread():
            saved: dict = {}
            try:
                for s in self.signals:
                    saved[s] = signal.signal(s, self._hold)
            except BaseException:  # a signal's handler ran while they were swapped: put them back
                _restore_handlers(saved)
                raise
            self._saved = saved
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            saved, self._saved = self._saved, None
            interrupted = _restore_handlers(saved)
            if interrupted is not None:
                raise interrupted
            held, self._held = self._held, []
            for s in dict.fromkeys(held):
                signal.raise_signal(s)  # its own handler now (SIGTERM: Terminated raised from here)


def _restore_handlers(saved: dict) -> KeyboardInterrupt | None:
    """Put every saved handler back (None, one not set from Python, as the default), even when a signal's
    own handler raises while they are put back (each is set again); that exception is returned."""
    first = None
    for s, handler in saved.items():
        while True:
            try:
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
                break
            except KeyboardInterrupt as err:  # SIGINT's, and SIGTERM's Terminated in the CLI
                first = first or err
    return first


def signal_safe_submit(pool, fn, *args):
    """``pool.submit(fn, *args)`` with SIGTERM, SIGHUP and SIGINT held back while it runs, acted on when it
    returns. CPython's ``ThreadPoolExecutor`` queues the work, then starts a worker (``Thread.start`` waits
    for it) and only then records the thread: a signal's exception raised in that wait leaves a worker
    running that ``shutdown(wait=True)`` does not wait for. A compaction's clean-up once gave a free file
    back while such a worker still wrote an output into it (two files of one fileID after a SIGTERM)."""
    with deferred_signals():
        return pool.submit(fn, *args)


# --- the checkpointed operations -----------------------------------------------------------------------

def fsync(fd_or_file, where: str | os.PathLike | None = None) -> None:
    """Flush a file's data and metadata to stable storage (``fsync(2)``)."""
    checkpoint("fsync", where)
    if hasattr(fd_or_file, "flush"):
        fd_or_file.flush()
        fd_or_file = fd_or_file.fileno()
    os.fsync(fd_or_file)


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a directory's entries (creations, renames, removals) durable."""
    checkpoint("fsync-dir", directory)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as err:
        # Some filesystems refuse fsync on directories; their renames are as durable as they get.
        if err.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """fsync every file below ``root``, then each directory (top down, after its files): a tree written aside
    is durable before it is renamed into place."""
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            fd = os.open(os.path.join(dirpath, n), os.O_RDONLY | os.O_CLOEXEC)
            try:
                fsync(fd, os.path.join(dirpath, n))
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def aside_dir(dest: str | os.PathLike, label: str) -> Path:
    """A new empty directory beside ``dest`` to write a whole tree into before :func:`switch_dir` puts it in
    place: ``.<dest name>.amqtool-<label>-<pid>`` in dest's parent (which must exist); a leftover of that name
    is removed first."""
    dest = Path(dest)
    tmp = dest.parent / f".{dest.name}.amqtool-{label}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


@contextlib.contextmanager
def tree_aside(dest: str | os.PathLike, label: str = "tmp") -> Iterator[Path]:
    """Write a whole new tree for ``dest`` (absent or an empty directory) inside the block, in the directory it
    yields (:func:`aside_dir`). When the block ends, everything in it is made durable (:func:`fsync_tree`) and
    switched into place (:func:`switch_dir`); when the block raises (anything, InjectedFault included), the
    aside tree is removed and ``dest`` is left as it was."""
    tmp = aside_dir(dest, label)
    try:
        yield tmp
        fsync_tree(tmp)
        switch_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def switch_dir(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Put the tree written in ``tmp`` (:func:`aside_dir`, made durable by the caller) in place of ``dest``, which
    is absent or an empty directory: the empty one is removed first, since rename() cannot replace a
    directory otherwise; then :func:`rename`."""
    if os.path.exists(dest):
        os.rmdir(dest)
    rename(tmp, dest)


def rename(src: str | os.PathLike, dst: str | os.PathLike, *, sync_dir: bool = True) -> None:
    """``rename(2)`` (atomically replacing ``dst``), then fsync the directories involved."""
    checkpoint("rename", dst)
    os.rename(src, dst)
    if sync_dir:
        src_dir = os.path.dirname(os.path.abspath(src))
        dst_dir = os.path.dirname(os.path.abspath(dst))
        fsync_dir(dst_dir)
        if src_dir != dst_dir:
            fsync_dir(src_dir)


def unlink(path: str | os.PathLike, *, sync_dir: bool = True, missing_ok: bool = False) -> None:
    """Remove a file, then fsync its directory."""
    checkpoint("unlink", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return
    if sync_dir:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


# --- composite helpers ---------------------------------------------------------------------------------

def write_zeros(fd: int, size: int, offset: int = 0) -> None:
    """Write ``size`` zero bytes at ``offset`` with large writes (what NIOSequentialFile.fill does)."""
    zeros = bytes(min(_ZERO_CHUNK, size)) if size else b""
    pos = offset
    end = offset + size
    while pos < end:
        n = os.pwrite(fd, zeros[: min(len(zeros), end - pos)], pos)
        if n <= 0:  # pragma: no cover - pwrite raises on error
            raise OSError(errno.EIO, "short write while filling", None)
        pos += n


_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_ZERO_RANGE = 0x10


def zero_range(fd: int, offset: int, size: int) -> None:
    """Make ``size`` bytes at ``offset`` read as zeros, keeping the file's size and allocation:
    ``fallocate(FALLOC_FL_ZERO_RANGE)`` where the filesystem has it (no data written), else zeros written.
    What a freed journal file gets, so no byte of its earlier use can parse as a record of its next one."""
    if size <= 0:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
        if libc.fallocate(fd, _FALLOC_FL_ZERO_RANGE | _FALLOC_FL_KEEP_SIZE, offset, size) == 0:
            return
    except (OSError, AttributeError):
        pass
    write_zeros(fd, size, offset)


def preallocate(path: str | os.PathLike, size: int, *, header: bytes = b"", mode: int = 0o644,
                sync: bool = True, exclusive: bool = True, write_fill: bool = True) -> None:
    """Create ``path`` holding ``size`` bytes: ``header`` at offset 0, zeros after it.

    Mirrors Artemis' file creation (JournalFilesRepository.createFile0 with NIO ``fill``): the zeros are
    really written, so the space is allocated now and a full disk fails here, not at the first append.
    Without ``write_fill`` the space is allocated by ``posix_fallocate`` instead (the same bytes, zeros,
    nothing written through the page cache; zeros are written where the filesystem cannot allocate so): for
    files of a tree written aside, whose every byte is written and fsynced before it is switched in.
    With ``exclusive`` an existing file is an error (FileExistsError). Callers wanting the tmp-then-rename
    protocol create ``<name>.tmp`` with this and :func:`rename` it.
    """
    if len(header) > size:
        raise ValueError("header larger than the file")
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, mode)
    try:
        allocated = False
        if not write_fill and size and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
                allocated = True
            except OSError as err:
                if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        if not allocated:
            write_zeros(fd, size)
        if header:
            os.pwrite(fd, header, 0)
        if sync:
            fsync(fd, path)
    except BaseException:
        os.close(fd)
        fd = -1
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, *, tmp_path: str | os.PathLike | None = None, mode: int = 0o644,
                 reference: str | os.PathLike | None = None, sync: bool = True) -> Iterator:
    """Write a file crash-safely: yields a binary file object on the temporary file; on a clean exit the
    data is fsynced, renamed over ``path`` and the directory fsynced. On an exception the temporary file
    is removed and ``path`` is untouched.

    ``tmp_path`` defaults to ``<path>.tmp``. ``reference``: copy owner, group and mode from that file.
    """
    target = Path(path)
    tmp = Path(tmp_path) if tmp_path is not None else target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    fh = os.fdopen(fd, "wb")
    try:
        yield fh
        fh.flush()
        if reference is not None:
            copy_owner_and_mode(reference, tmp)
        if sync:
            fsync(fh, tmp)
        fh.close()
        rename(tmp, target, sync_dir=sync)
    except InjectedFault:
        # a simulated crash: leave the temporary file behind exactly as a real crash would
        fh.close()
        raise
    except BaseException:
        fh.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_file_atomic(path: str | os.PathLike, data: bytes, **kwargs) -> None:
    """:func:`atomic_write` for one bytes object."""
    with atomic_write(path, **kwargs) as fh:
        fh.write(data)


def copy_owner_and_mode(reference: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """Give ``target`` the owner, group and permission bits of ``reference``.

    Compaction writes new journal files that must look like the store's existing ones to the broker's
    user. Returns a list of warnings for what could not be copied (changing the owner needs root or the
    same owner; changing only the group needs membership). The mode is always copied.
    """
    st = os.stat(reference)
    warnings: list[str] = []
    tst = os.stat(target)
    if (tst.st_uid, tst.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.chown(target, st.st_uid, st.st_gid)
        except PermissionError:
            try:
                os.chown(target, -1, st.st_gid)
                if tst.st_uid != st.st_uid:
                    warnings.append(f"{target}: owner left as uid {tst.st_uid} (uid {st.st_uid} needs root)")
            except PermissionError:
                warnings.append(f"{target}: owner and group left as {tst.st_uid}:{tst.st_gid} "
                                f"(reference has {st.st_uid}:{st.st_gid}; changing them needs root)")
    os.chmod(target, stat.S_IMODE(st.st_mode))
    return warnings


def ensure_free_space(directory: str | os.PathLike, needed: int) -> None:
    """Raise a clear error when ``directory``'s filesystem has fewer than ``needed`` free bytes."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free < needed:
        raise AmqtoolError(f"not enough free space: {needed} bytes needed, {free} available",
                           path=os.fspath(directory))
