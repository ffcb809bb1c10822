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
  wherever the live data ended) and no compaction was running when the broker stopped (``.cmp`` files left:
  a compaction begins by moving on, ``JournalImpl.getDataListToCompact``);
* the next file's first record follows its header, whole (a replication sync's ``forceMoveNextFile`` leaves
  no trace either, but syncs a backup, which writes no journal of its own here);
* the journal is of format 2 (the files of format 1 carry no compactCount).

The harness's oracle (tests/faults/artemis.py, ``broker_could_write``) reads the same rule as proof of damage,
and no store of the broker's, the demos' or Artemis' JournalImpl's (SIGKILLed, restarted, compacted, pools
from 2 to -1) shows it. What the lost records held is then weighed as a damaged end's (``tails.reweigh``).
"""
from __future__ import annotations

from amqtool import native


def cut_at_record(result, index: int) -> int | None:
    """The end of the last record of file ``index`` of the load ``result`` when the file ends exactly there and
    is shorter than the journal's largest file (see the module's contract); else None."""
    jf = result.files[index]
    if len(result.files) < 2 or jf.size >= max(f.size for f in result.files):
        return None
    own, _ = native.scan_records(result.opened.read_file(index), jf.tag, jf.version, True, 16)
    if not own:
        return None
    end = own[-1][1] + own[-1][2]
    return end if end == jf.size else None


def room_left(result, index: int, compacting: bool) -> tuple[int, int, int] | None:
    """(end of the last record, free bytes, size of the next file's first record) when data file ``index`` of
    the load ``result`` ends cleanly with room for the next file's first record under the conditions of the
    module's contract; else None. ``compacting``: ``.cmp`` files were left (a compaction was running)."""
    from amqtool.engines.artemis.verify import _ROOM_ALIGNMENT

    if compacting:
        return None
    jf = result.files[index]
    later = [s.index for s in result.scans if s.has_data and s.index > index]
    if jf.version < 2 or not later:
        return None
    nxt = result.files[later[0]]
    if nxt.tag != jf.tag + 1:
        return None
    opened = result.opened
    head = opened.pread(later[0], 0, min(nxt.size, 1 << 20))
    first, _ = native.scan_records(head, nxt.tag, nxt.version, True, 16)
    if not first or first[0][1] != 16 or first[0][3] > 0:
        return None
    own, _ = native.scan_records(opened.read_file(index), jf.tag, jf.version, True, 16)
    if not own or own[-1][3] > 0:
        return None
    end = own[-1][1] + own[-1][2]
    # a file whose first record follows its 16-byte header was written unaligned (NIO, MAPPED); else AIO's
    # block alignment is given (verify._room_for_next)
    align = 1 if own[0][1] == 16 else _ROOM_ALIGNMENT
    free = jf.size - -(-end // align) * align
    return (end, free, first[0][2]) if first[0][2] <= free else None
