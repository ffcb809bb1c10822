"""Reading one KahaDB directory from disk: journal files in id order, mmapped read-only, records streamed.

Memory stays constant in the journal size: files are mapped (never read whole), records are yielded one
at a time as memoryview slices of the map. The index (db.data) is read once, also through a map.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.pagefile import IndexView, decode_index

_LOG_NAME = "db-{}.log"


@dataclass(frozen=True)
class JournalFile:
    id: int
    path: Path
    size: int


def journal_files(directory: Path) -> list[JournalFile]:
    """``db-N.log`` files (N a decimal int), sorted by id (Journal.start's file discovery)."""
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for n in names:
        if n.startswith("db-") and n.endswith(".log"):
            mid = n[3:-4]
            if mid.isdigit():
                p = directory / n
                try:
                    st = p.stat()
                except OSError:
                    continue
                if p.is_file():
                    out.append(JournalFile(int(mid), p, st.st_size))
    out.sort(key=lambda f: f.id)
    return out


@contextmanager
def mapped(path: Path):
    """A read-only map of ``path`` (``b""`` for an empty file). The file is opened O_RDONLY: reading never
    changes a byte."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            yield b""
            return
        m = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        try:
            try:
                m.madvise(mmap.MADV_SEQUENTIAL)
            except (AttributeError, OSError):
                pass
            yield m
        finally:
            try:
                m.close()
            except BufferError:
                pass  # a slice still alive: the map is released when the last view goes
    finally:
        os.close(fd)


def read_small(path: Path, limit: int = 1 << 20) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit)


@dataclass
class IndexState:
    """db.data as read: the view, or why it could not be read."""

    present: bool
    view: IndexView | None = None
    error: str | None = None
    redo: object | None = None
    redo_error: str | None = None


def load_index(directory: Path) -> IndexState:
    p = directory / "db.data"
    if not p.exists():
        return IndexState(False)
    try:
        with mapped(p) as buf:
            view = decode_index(buf)
    except FormatError as err:
        return IndexState(True, error=str(err))
    except OSError as err:
        return IndexState(True, error=f"cannot read: {err.strerror}")
    st = IndexState(True, view)
    r = directory / "db.redo"
    if r.exists():
        from amqtool.formats.kahadb.pagefile import decode_redo

        try:
            with mapped(r) as buf:
                st.redo = decode_redo(buf, view.header.page_size)
        except (FormatError, OSError) as err:
            st.redo_error = str(err)
    return st


def lock_holder(lock: Path) -> int | None:
    """PID of a process holding a POSIX lock on ``lock`` (Java's FileChannel.tryLock is an fcntl lock),
    0 if held by an unknown process, None if free or absent. Tested with F_GETLK: nothing is acquired and
    the file is opened read-only."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock on Linux: short type, short whence, off_t start, off_t len, pid_t pid.
        req = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        except OSError as err:
            if err.errno in (errno.EINVAL, errno.EBADF):
                return None
            raise
        ltype, _wh, _st, _ln, pid = struct.unpack("hhqqi4x", res)
        if ltype == fcntl.F_UNLCK:
            return None
        return pid or 0
    finally:
        os.close(fd)


@dataclass
class RecordEvent:
    file: JournalFile
    record: jr.UserRecord


@dataclass
class FileScan:
    """What the batch scan of one file found."""

    file: JournalFile
    batches: int = 0
    records: int = 0
    corrupt: list = field(default_factory=list)  # CorruptRange
    bad_records: list = field(default_factory=list)  # (offset, message)
    end: jr.End | None = None
    data_bytes: int = 0
    # (first, last): valid batches after a zero-size batch the scan (as the broker) took for the end of the
    # data: a damaged size field; the broker's recovery and a rebuild of the index do not read them
    hidden: tuple | None = None


def hidden_after_zero_batch(buf, end: jr.End | None) -> tuple[int, int] | None:
    """``(first, last)`` when the file's data ends at a batch header whose size is 0 (``scan_file``'s
    ``zero-batch`` end, as the broker's ``Journal.recoveryCheck`` ends it: "eof batch record") while valid
    batches follow it (``last``: where their data ends); None otherwise."""
    if end is None or end.how != "zero-batch":
        return None
    nxt = jr._find_header(buf, end.offset + 1)
    if nxt < 0:
        return None
    with memoryview(buf) as mv, mv[nxt:] as tail:
        rest = [e for e in jr.scan_file(tail) if isinstance(e, (jr.Batch, jr.End))]
    if not rest or not isinstance(rest[0], jr.Batch):
        return None
    return end.offset, nxt + rest[-1].offset - 1


def remnant_after_zero_batch(buf, end: jr.End | None) -> tuple[int, int] | None:
    """``(first, last)`` when the file's data ends at a batch header whose size is 0 while bytes that are
    neither zeros nor end-of-file markers follow it, no valid batch among them (``last``: the last such
    byte); None otherwise.

    The broker never writes a batch of size 0 (DataFileAppender sizes each batch by its records), and what
    follows its last batch is the ``-qMa4`` marker, then the zero fill (a preallocated file's last five bytes
    are a marker too): record bytes after a size-0 header are what is left of a batch whose size, and maybe
    more, was damaged. ``Journal.recoveryCheck`` and a rebuild of the index stop at the header.

    The same for a file whose data ends at an all-zero record header (``how == "zeros"``: the scan found no
    batch header after it) with record bytes after it: ``Journal.getNextLocation`` reads a header of type 0 as
    the end of the file and moves on to the next one, and no batch the broker writes is followed by zeros
    before its end marker: a zeroed range took the control record of a batch whose records follow."""
    if end is None or end.how not in ("zero-batch", "zeros"):
        return None
    start = end.offset + (jr.BATCH_CONTROL_RECORD_SIZE if end.how == "zero-batch" else 0)
    rest = bytes(buf[start:]).replace(jr.EOF_RECORD, bytes(len(jr.EOF_RECORD))).rstrip(b"\0")
    if not rest:
        return None
    return end.offset, start + len(rest) - 1


def iter_file(f: JournalFile, buf, scan: FileScan, *, checksums: bool = True) -> Iterator[jr.UserRecord]:
    """Yield the user records of one mapped file, filling ``scan`` with batches, corruption and the end."""
    for ev in jr.scan_file(buf, checksums=checksums):
        if isinstance(ev, jr.Batch):
            scan.batches += 1
            scan.data_bytes += ev.size + jr.BATCH_CONTROL_RECORD_SIZE
            try:
                for rec in jr.iter_batch_records(buf, ev):
                    scan.records += 1
                    yield rec
            except FormatError as err:
                scan.bad_records.append((err.offset if err.offset is not None else ev.offset, err.message))
        elif isinstance(ev, jr.CorruptRange):
            scan.corrupt.append(ev)
        else:
            scan.end = ev
