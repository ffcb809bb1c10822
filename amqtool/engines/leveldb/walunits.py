"""Units of work as the live index's write-ahead log records them: evidence that the last log file's unit of
work that the broker will drop was complete, when its own end is no longer readable (zeroed, say).

``LevelDBClient.store`` writes one log unit of work inside ``log.appender { ... }``: the records, then the
index's one ``WriteBatch`` for them (``index.write``), then the UOW_END record naming the unit's start, then
the append buffer's flush (``RecordLog.appender``). So each unit's entries are one batch of
``dirty.index``'s LevelDB write-ahead log, in order, and a unit's records are on disk before a later unit's.
DATA records of a *later* batch lying whole (good CRC-32, the entry's length) past the point where the last
file's scan stopped prove the stopped unit ended: the broker truncates the file at the stop and drops a
complete unit. A crash cannot leave that: it cuts only the last unit, whose own batch is the last.

Without ``dirty.index``'s write-ahead log (compacted into tables, or no such index) there is no evidence and
nothing is claimed."""
from __future__ import annotations

from pathlib import Path

from amqtool.errors import FormatError
from amqtool.formats.leveldb import dblog
from amqtool.formats.leveldb import records as R


def _batches(index_dir: Path) -> list[list[tuple[int, int]]]:
    """Per write batch of the index's write-ahead logs, in order: the (log position, length) of the DATA
    records its entries point at."""
    out = []
    logs = sorted(index_dir.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    for p in logs:
        try:
            lr = dblog.read_log(p.read_bytes())
        except OSError:
            continue
        for _off, data in lr.records:
            locs = []
            try:
                for op in dblog.iter_batch(data):
                    k = op.key
                    if op.value is None or len(k) != 17 or k[:1] != R.ENTRY_PREFIX:
                        continue
                    loc, length, _meta = R.decode_index_entry(bytes(op.value))
                    if length:
                        locs.append((loc, length))
            except FormatError:
                continue
            if locs:
                out.append(locs)
    return out


def later_unit_on_disk(st, read_data) -> bool:
    """Whether the unit of work that starts at the last complete end of the last file was followed by a later
    unit whose DATA records are on disk past the scan's stop (see the module's docstring). ``read_data(st,
    position)`` gives a DATA record's (length, checksum ok) at a log position, or None."""
    if not st.logs or st.last_file_end is None or st.last_file_scan_end is None:
        return False
    index_dir = Path(st.directory) / "dirty.index"
    if not index_dir.is_dir():
        return False
    base = st.logs[-1].position
    start, stop = base + st.last_file_end, base + st.last_file_scan_end
    if stop <= start:
        return False
    batches = _batches(index_dir)
    first = next((i for i, b in enumerate(batches) if any(start <= loc < stop for loc, _n in b)), None)
    if first is None:
        return False
    high = max(loc for loc, _n in batches[first])
    for b in batches[first + 1:]:
        for loc, length in b:
            if loc > high and loc >= stop:
                got = read_data(st, loc)
                if got is not None and got == (length, True):
                    return True
    return False


def complete_units_past_the_logs(st) -> tuple[int, int]:
    """(units, entries) of the write batches of ``dirty.index``'s write-ahead log whose entries point past the
    end of the last log file, but the last such batch (it may be the unit a crash cut before its records
    reached the disk), when the file the index snapshot was taken at is missing: the broker snapshots its
    index at each rotation, at the new log file's position (``RecordLog.rotate``, ``on_log_rotate``), so a
    snapshot at or past the end of the last file names a file that existed. Each of those units was written
    whole before the next one's batch (see the module's docstring): the missing file held complete units. (A
    last file cut short, by contrast, is what a crash of an unsynced write can leave.)"""
    if not st.logs or st.snapshot is None or st.snapshot[0] < st.logs[-1].limit:
        return 0, 0
    index_dir = Path(st.directory) / "dirty.index"
    if not index_dir.is_dir():
        return 0, 0
    limit = st.logs[-1].limit
    past = [b for b in _batches(index_dir) if any(loc >= limit for loc, _n in b)]
    return len(past[:-1]), sum(len(b) for b in past[:-1])
