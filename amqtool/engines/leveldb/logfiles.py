"""The store's log files on disk: listing them in position order and reading the record at a position,
as ``RecordLog`` does (``log_infos``: a TreeMap of file position -> file; ``log_info(pos)`` the floor entry)."""
from __future__ import annotations

import bisect
import mmap
import os
from array import array
from dataclasses import dataclass
from pathlib import Path

from amqtool import native
from amqtool.formats.leveldb.recordlog import HEADER_SIZE, LOG_NAME, FileScan, scan_file


@dataclass
class LogFile:
    position: int
    path: Path
    size: int

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def limit(self) -> int:
        return self.position + self.size


def log_files(directory: Path) -> list[LogFile]:
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for n in names:
        m = LOG_NAME.match(n)
        if m and (directory / n).is_file():
            p = directory / n
            out.append(LogFile(int(m.group(1), 16), p, p.stat().st_size))
    out.sort(key=lambda f: f.position)
    return out


class LogReader:
    """Maps each log file once (read-only) and answers ``read(pos, n)``: the bytes at log position ``pos``,
    or None where no file holds them (a GC'd or missing file, a position past a file's end)."""

    def __init__(self, files: list[LogFile]):
        self.files = files
        self._starts = [f.position for f in files]
        self._maps: dict[int, object] = {}

    def file_at(self, pos: int) -> LogFile | None:
        i = bisect.bisect_right(self._starts, pos) - 1
        return self.files[i] if i >= 0 else None

    def buffer(self, f: LogFile):
        m = self._maps.get(f.position)
        if m is None:
            if f.size == 0:
                m = b""
            else:
                with open(f.path, "rb") as fh:
                    m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self._maps[f.position] = m
        return m

    def read(self, pos: int, n: int):
        f = self.file_at(pos)
        if f is None:
            return None
        off = pos - f.position
        if off < 0 or off + n > f.size:
            return None
        return memoryview(self.buffer(f))[off:off + n]

    def close(self) -> None:
        for m in self._maps.values():
            if isinstance(m, mmap.mmap):
                try:
                    m.close()
                except BufferError:
                    pass  # a view still points into it; the map goes when the view does
        self._maps.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def scan(buf, base: int, *, use_native: bool | None = None) -> FileScan:
    """One pass over a log file's bytes (:func:`amqtool.formats.leveldb.recordlog.scan_file`): in C when the
    extension is built (``native.leveldb_scan``; ``use_native=False`` forces the Python reference, True
    requires C), giving equal results."""
    c = native.leveldb_scan if use_native is not False else None
    if use_native and c is None:
        raise RuntimeError(f"the C LevelDB scanner is not available: {native.NATIVE_REASON or 'not built'}")
    if c is None:
        return scan_file(buf, base)
    records, stop, (offs, lens, oks), events, complete = c(buf, base)
    o, n = array("q"), array("I")
    o.frombytes(offs)
    n.frombytes(lens)
    return FileScan(records, stop, o, n, oks, events, complete)


def match_data(locations, lengths, runs: list, last_position: int | None, limit: int, *,
               use_native: bool | None = None) -> list[int]:
    """Indices (ascending) of the entries whose DATA record is not there as they say: ``locations`` and
    ``lengths`` (int64 arrays) of the entries, ``runs`` one ``(base, data offsets, data lengths, data ok)``
    per log file in position order (a :class:`FileScan`'s arrays, the file's first byte at log position
    ``base``). An entry is listed when no DATA record starts at its location (the last file holding a record
    there wins, as a dict filled file by file would give), or that record's length differs from the entry's,
    or its CRC-32 failed, or it lies at or after ``last_position`` (the last file's start) and runs past
    ``limit`` (where the broker truncates the last file). This Python loop is the reference for
    ``native.leveldb_match_data``, which does one binary search per entry and builds nothing per record."""
    c = native.leveldb_match_data if use_native is not False else None
    if use_native and c is None:
        raise RuntimeError(f"the C DATA matcher is not available: {native.NATIVE_REASON or 'not built'}")
    last = -1 if last_position is None else last_position
    if c is not None:
        return memoryview(c(_int64(locations), _int64(lengths), [(b, o, n, k) for b, o, n, k in runs], last,
                            limit)).cast("q").tolist()
    found: dict = {}
    for base, offs, lens, oks in runs:
        found.update(zip(map(base.__add__, offs), zip(lens, oks)))
    out = []
    for i, (loc, n) in enumerate(zip(locations, lengths)):
        got = found.get(loc)
        if got is None or got[0] != n or not got[1] or (last >= 0 and loc >= last and loc + HEADER_SIZE + n > limit):
            out.append(i)
    return out


def data_at(runs: list, location: int) -> tuple[int, bool] | None:
    """(length, checksum ok) of the DATA record at log position ``location`` as :func:`match_data` finds it
    (the last run holding one there), or None."""
    for base, offs, lens, oks in reversed(runs):
        if base <= location:
            i = bisect.bisect_left(offs, location - base)
            if i < len(offs) and offs[i] == location - base:
                return lens[i], bool(oks[i])
    return None


def _int64(values) -> array:
    return values if isinstance(values, array) and values.typecode == "q" else array("q", values)
