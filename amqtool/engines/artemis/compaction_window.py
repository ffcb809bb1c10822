"""The fileIDs a journal issued while a compaction it never finished was running, and whether each is still there.

A committed compaction whose switch-over was cut short leaves ``journal-rename-control.ctr`` (Artemis rolls it
forward at its next start). From the moment ``JournalImpl.compact`` begins until it deletes that control file,
``compactorRunning`` is set, and ``checkReclaimStatus`` gives up while it is ("Giving up checkReclaimStatus as
compactor is running"): no data file is freed, so none is deleted by the pool either. The files the broker wrote
in that window are therefore all still there, whatever the pool size; only the compaction's own inputs (listed in
the control file) and the files it freed in its switch-over (``renameFiles``: ``addFreeFile``, which deletes the
input or reinitialises it under a new fileID, kept on disk as a free file) go away.

So every fileID issued after the compaction's inputs is carried by a file still in the directory: as its header
fileID (a data, current or free file), or as the number in its name (``JournalFilesRepository.createFileName``
names a new file after the id it was created with; the compactor's outputs keep that name, ``.cmp`` until the
roll-forward, under a header of the lowest old ids: compaction_marks.py). An id after the inputs' that no file
carries is a file the broker wrote and someone removed, with its records: the gap's other explanations (the
reclaimer with a bounded pool, an earlier compaction) do not reach it.

The inputs were all issued before the compaction began (it compacts the data files, the file then current
among them, after moving on to a new one), so the window starts above the highest number in their names.
"""
from __future__ import annotations

from amqtool.store.journal_writer import name_number

_SPAN = 1 << 16  # a window wider than this comes of a damaged header, not of the broker's ids: not weighed


def ids_lost_while_compacting(result) -> list[int]:
    """The fileIDs issued after the inputs of the committed, unfinished compaction of the load ``result``
    (below the highest fileID of its files holding records or named after it) that no file in the journal carries; empty without
    a control file (``OpenedJournal.control``)."""
    opened = result.opened
    control = opened.control
    if control is None or not control.old_files:
        return []
    prefix = opened.journal.spec.prefix
    inputs = [n for n in (name_number(name, prefix) for name in control.old_files) if n is not None]
    if not inputs:
        return []
    began = max(inputs)
    carried: set[int] = set()
    for f in result.files:
        carried.add(f.file_id)
        n = name_number(f.name, prefix)
        if n is not None:
            carried.add(n)
    for name in control.new_files:
        n = name_number(name, prefix)
        if n is not None:
            carried.add(n)
    # up to the newest file holding records or named after its own fileID (created new: the broker's next
    # files): the inputs the switch-over reinitialises get the newest ids under their old names, and one of
    # those deleted takes nothing with it
    high = max((s.file.file_id for s in result.scans if s.file.file_id < 1 << 31 and (
        s.has_data or name_number(s.file.name, prefix) == s.file.file_id)), default=0)
    if high - began > _SPAN:
        return []
    return [i for i in range(began + 1, high) if i not in carried]
