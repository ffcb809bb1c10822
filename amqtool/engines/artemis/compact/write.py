"""Writing the planned output files: encoded in C (``compact_fill``) or by the Python reference, written
whole and fsynced together (``_Syncer``), into new files or into the free files the switch-over takes."""
from __future__ import annotations

import errno
import os
from array import array
from pathlib import Path

from amqtool import native
from amqtool.errors import AmqtoolError, UnknownStoreError
from amqtool.formats.artemis.records import (
    FORMAT_VERSION,
    HEADER_SIZE,
    FileHeader,
    file_tag,
)
from amqtool.store import atomic
from amqtool.engines.artemis.compact.plan import _Layout, _Prepared, _items

class _Syncer:
    """fsync(2) of many files at once: each fsync's checkpoint is passed in the caller's order when it is
    queued, the fsyncs themselves run on a few threads (``os.fsync`` releases the GIL), so the device gets
    them together instead of one round trip each. :meth:`wait` returns once every queued file is durable
    (and closed) and raises the first error. Use as a context manager; leaving it waits for every fsync."""

    THREADS = 4
    BATCH = 64  # files open at once at most

    def __init__(self):
        self._pool = None
        self._pending: list = []

    def __enter__(self) -> "_Syncer":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._drain(raise_first=False)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def submit(self, fd: int, path: Path) -> None:
        """Queue ``fd`` (owned from now on: closed once synced) for fsync."""
        try:
            atomic.checkpoint("fsync", path)
        except BaseException:
            os.close(fd)
            raise
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="amqtool-fsync")
        self._pending.append(atomic.signal_safe_submit(self._pool, _fsync_close, fd, path))
        if len(self._pending) >= self.BATCH:
            self.wait()

    def wait(self) -> None:
        self._drain(raise_first=True)

    def _drain(self, raise_first: bool) -> None:
        pending, self._pending = self._pending, []
        first = None
        for fut in pending:
            try:
                fut.result()
            except OSError as err:
                first = first or err
        if first is not None and raise_first:
            raise first


def _fsync_close(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(fd)


class _CmpSink:
    """Writes each finished output buffer whole to its ``.cmp`` file and queues its fsync (``syncer``)."""

    def __init__(self, directory: Path, names: list[str], file_size: int, reference: Path | None,
                 created: list[Path], warnings: list[str], syncer: _Syncer, reused: int = 0):
        self.syncer = syncer
        self.reused = reused  # outputs [0, reused) overwrite free files already renamed to their .cmp name
        self.directory = directory
        self.names = names
        self.file_size = file_size
        self.reference = reference
        self.created = created
        self.warnings = warnings
        self.buffer = bytearray(file_size)

    def open_file(self, k: int, file_id: int) -> bytearray:
        # One buffer reused and zeroed (Artemis reuses it without zeroing; zeros are tidier, §1.3).
        self.buffer[:] = bytes(self.file_size)
        return self.buffer

    def close_file(self, k: int, buf: bytearray, used: int) -> None:
        self.syncer.submit(self.write_file(k, buf), self.directory / self.names[k])  # durable before wait()

    def write_file(self, k: int, buf: bytearray) -> int:
        """Create output ``k`` (``O_EXCL``), or overwrite the free file taken for it (of the same size, so
        every byte is rewritten), and write ``buf`` whole; returns the open fd, not yet synced.
        Thread-safe: the native write pass calls it from its workers."""
        path = self.directory / self.names[k]
        if k < self.reused:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        else:
            mode = 0o644
            if self.reference is not None:
                mode = os.stat(self.reference).st_mode & 0o7777
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            self.created.append(path)
        try:
            view = memoryview(buf)
            pos = 0
            chunk = 1 << 20
            while pos < len(view):
                atomic.checkpoint("write", path)
                n = os.pwrite(fd, view[pos:pos + chunk], pos)
                if n <= 0:  # pragma: no cover
                    raise OSError(errno.EIO, "short write", str(path))
                pos += n
            if self.reference is not None:
                self.warnings.extend(atomic.copy_owner_and_mode(self.reference, path))
        except BaseException:
            os.close(fd)
            raise
        return fd


def _write_outputs(prep: _Prepared, directory: Path, names: list[str], reference: Path | None,
                   created: list[Path], *, reused: int = 0) -> None:
    """Second pass: encode every record into its output buffer (bodies read from the source now), write
    each buffer whole and fsync it. The first ``reused`` names are free files to overwrite."""
    with _Syncer() as syncer:
        _write_outputs_synced(prep, directory, names, reference, created, syncer, reused)
        syncer.wait()


def _write_outputs_synced(prep: _Prepared, directory: Path, names: list[str], reference: Path | None,
                          created: list[Path], syncer: _Syncer, reused: int = 0) -> None:
    s = prep.report.settings
    sink = _CmpSink(directory, names, s.file_size, reference, created, prep.report.warnings, syncer, reused)
    if prep.plan is not None:
        _fill_native(prep, sink)
        return
    layout = _Layout(s.file_size, prep.first_id, sink)
    opened = prep.opened
    for item in _items(prep.load, prep.sources, prep.marker):
        body = None
        if item.src is not None and item.src[2]:
            fi, off, ln = item.src
            body = opened.pread(fi, off, ln)
            if len(body) != ln:
                raise AmqtoolError(f"journal file shrank while compacting (expected {ln} bytes at {off})",
                                   path=str(opened.files[fi].path), offset=off)
        layout.add(item, body)
    files = layout.finish()
    if [(f.file_id, f.records, f.used) for f in files] != [(f.file_id, f.records, f.used) for f in prep.report.outputs]:
        raise AmqtoolError("internal error: write pass disagrees with the plan")  # pragma: no cover


FILL_THREADS = 2  # output files encoded and written at once (each holds one file-size buffer)


def _fill_native(prep: _Prepared, sink: "_CmpSink") -> None:
    """The write pass of a native plan: ``compact_fill`` encodes each output file's records into one
    buffer (version-2 records copied whole, neighbours in one pread, tag and compactCount rewritten).

    Output files are independent once planned, and both ``compact_fill`` and ``pwrite`` run without the
    GIL, so up to :data:`FILL_THREADS` files are filled and written at once (the copy of the live bytes
    is the pass's whole cost). Their fsyncs are queued in file order; on any error the files in flight
    are finished or abandoned and closed before it is raised, and the caller removes every ``.cmp``."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    opened = prep.opened
    files = opened.files
    outputs = prep.report.outputs
    versions = bytes(min(max(f.version, 0), 255) for f in files)
    starts = [0]
    for out in outputs:
        starts.append(starts[-1] + out.records)

    def one(k: int, buf: bytearray) -> int:
        out = outputs[k]
        buf[0:HEADER_SIZE] = FileHeader(FORMAT_VERSION, 0, out.file_id).encode()
        fds = array("i", [-1]) * len(files)
        try:
            for fi in native.compact_sources(prep.plan, starts[k], starts[k + 1], len(files)):
                try:
                    fds[fi] = os.open(files[fi].path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError as err:
                    raise UnknownStoreError(f"cannot open journal file: {err.strerror}",
                                            path=str(files[fi].path)) from None
            try:
                bad = native.compact_fill(prep.plan, starts[k], starts[k + 1], buf, file_tag(out.file_id), fds,
                                          versions, prep.extras, out.used)
            except OSError as err:
                raise AmqtoolError(f"reading a journal file failed while compacting: {err.strerror or err}",
                                   path=str(opened.journal.directory)) from None
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
        if bad is not None:
            fi, off = bad
            raise AmqtoolError("journal file changed or shrank while compacting: the record the load found "
                               "there is gone", path=str(files[fi].path), offset=off)
        return sink.write_file(k, buf)

    threads = min(FILL_THREADS, len(outputs))
    if threads <= 1:
        for k in range(len(outputs)):
            sink.syncer.submit(one(k, sink.buffer), sink.directory / sink.names[k])
        return
    free = [sink.buffer] + [bytearray(len(sink.buffer)) for _ in range(threads - 1)]
    in_flight: deque = deque()  # (k, buffer, future) in file order
    with ThreadPoolExecutor(threads, thread_name_prefix="amqtool-compact-fill") as pool:
        try:
            for k in range(len(outputs)):
                if not free:
                    done_k, buf, fut = in_flight.popleft()
                    sink.syncer.submit(fut.result(), sink.directory / sink.names[done_k])
                    free.append(buf)
                buf = free.pop()
                in_flight.append((k, buf, atomic.signal_safe_submit(pool, one, k, buf)))
            while in_flight:
                done_k, _buf, fut = in_flight.popleft()
                sink.syncer.submit(fut.result(), sink.directory / sink.names[done_k])
        except BaseException:
            for _k, _buf, fut in in_flight:
                fut.cancel()
            for _k, _buf, fut in in_flight:
                if not fut.cancelled() and fut.exception() is None:
                    os.close(fut.result())
            raise


def _reference_file(prep: _Prepared) -> Path | None:
    files = prep.opened.files
    return files[0].path if files else None


def _check_space(directory: Path, needed: int) -> None:
    try:
        atomic.ensure_free_space(directory, needed)
    except AmqtoolError as err:
        raise AmqtoolError(f"{err.message}; nothing written, store unchanged", path=err.path) from None
