"""Records lost from the end of a file that ends cleanly (``verify``'s ``damaged-tail``, ``cleanEnd``).

**Cut at a record's start.** Artemis fills every journal file to the journal's file size before it writes
to it (``JournalFilesRepository.createFile``: ``SequentialFile.fill``), so a file that ends exactly where its
last record ends, shorter than the journal's other files, was cut there: the records after the cut are lost, as
for a cut inside a record (``verify.tail_finding``), and nothing damaged shows it. (A journal-file-size lowered
between two runs leaves files of two sizes, each filled, their records followed by zeros.)

**Room left.**
A file the broker moved on from that was cut, or zeroed from a record's start to its end, ends as a file the
broker closed does: its last valid record, then zeros. No damaged byte shows. But the broker moves to a new file
only for a record that does not fit in the current one (``JournalImpl.switchFileIfNecessary``; a restart goes
on writing at the end of the newest file's last record: ``setUpCurrentFile``), so when the next file's first
record would have fit in the room this one leaves, records were written there and lost.

The reading holds only where nothing else moves the broker on early, so it is made only when:

* the next data file is the next fileID (``nextFileID``): with ids missing between, the record that did not
  fit was the first of a file since freed, whose size no one knows;
* neither file was written by the compactor (records with a compactCount above 0: its last output ends
  wherever the live data ended), nor has a compactCount no write gives (below 0: a damaged count, which
  the broker reads as it is, of a record that may be the compactor's), and no compaction was running when
  the broker stopped (``.cmp`` files left: a compaction begins by moving on,
  ``JournalImpl.getDataListToCompact``);
* the next file's first record follows its header, whole (a replication sync's ``forceMoveNextFile`` leaves
  no trace either, but syncs a backup, which writes no journal of its own here);
* the journal is of format 2 (the files of format 1 carry no compactCount).

The harness's oracle (tests/faults/artemis.py, ``broker_could_write``) reads the same rule as proof of damage,
and no store of the broker's, the demos' or Artemis' JournalImpl's (SIGKILLed, restarted, compacted, pools
from 2 to -1) shows it. What the lost records held is then weighed as a damaged end's (``tails.reweigh``).
"""
from __future__ import annotations

from amqtool import native


def cut_at_record(result, index: int, end: int) -> int | None:
    """``end`` (where the last record of file ``index`` of the load ``result`` ends: the load's ``FileGaps.end``)
    when the file ends exactly there, holds records and is shorter than the journal's largest file (see the
    module's contract); else None."""
    jf = result.files[index]
    if end <= 16 or end != jf.size or jf.size >= max(f.size for f in result.files):
        return None
    return end


def _last_record_compacted(opened, index: int, end: int) -> bool | None:
    """Whether the record ending at ``end`` of file ``index`` carries a compactCount above 0 (its trailing size
    word gives its start; format 2: the count follows the type and the tag); None when that does not read."""
    tail = opened.pread(index, end - 4, 4)
    if len(tail) < 4:
        return None
    size = int.from_bytes(tail, "big", signed=True)
    if not 16 <= size <= end - 16:
        return None
    head = opened.pread(index, end - size, 6)
    return head[5] > 0 if len(head) == 6 else None


def _first_record(opened, index: int, size: int):
    """The first record of file ``index`` as the scanner reads it (type, offset, size, compactCount, ...), from
    as few bytes as hold it; None when there is none."""
    jf = opened.files[index]
    for n in (1 << 16, 1 << 20, 1 << 24):
        head = opened.pread(index, 0, min(size, n))
        recs, _ = native.scan_records(head, jf.tag, jf.version, True, 16)
        if recs:
            return recs[0]
        if n >= size:
            return None
    return None


def room_left(result, index: int, end: int, compacting: bool) -> tuple[int, int, int] | None:
    """(``end``, free bytes, size of the next file's first record) when data file ``index`` of the load
    ``result``, whose last record ends at ``end`` (the load's ``FileGaps.end``), ends cleanly with room for the
    next file's first record under the conditions of the module's contract; else None. ``compacting``: ``.cmp``
    files were left (a compaction was running). Reads a few bytes of the two files, not the files."""
    from amqtool.engines.artemis.verify import _ROOM_ALIGNMENT

    jf = result.files[index]
    later = [s.index for s in result.scans if s.has_data and s.index > index]
    if compacting or jf.version < 2 or not later or end <= 16 or result.files[later[0]].tag != jf.tag + 1:
        return None
    opened = result.opened
    # a file whose first record follows its 16-byte header was written unaligned (NIO, MAPPED); else AIO's block
    # alignment is given (verify._room_for_next)
    first_own = _first_record(opened, index, jf.size)
    if first_own is None:
        return None
    align = 1 if first_own[1] == 16 else _ROOM_ALIGNMENT
    free = jf.size - -(-end // align) * align
    if free < 18:  # no record is shorter than a DELETE
        return None
    nxt = result.files[later[0]]
    first = _first_record(opened, later[0], nxt.size)
    if first is None or first[1] != 16 or first[3] != 0 or first[2] > free:
        return None
    if _last_record_compacted(opened, index, end) is not False:
        return None
    return end, free, first[2]
