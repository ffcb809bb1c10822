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
among them, after moving on to a new one), so the window starts above the highest number in their names. An input
can carry a fileID above its name, though: a file freed earlier is reinitialised under the next id and keeps its
name (``JournalFilesRepository.reinitializeFile``), and may then be the file current when the compaction began.
Such an id is carried by that input while it is on disk. The switch-over frees the inputs one by one in the
order of their header fileIDs (``renameFiles`` over ``dataFilesToProcess``, sorted by ``JOURNAL_FILE_COMPARATOR``),
so an input gone carried a lower fileID than every input still there: an id below the compaction's first output
and below every remaining input's, while some input is gone, may be a freed input's and is not weighed.
"""
from __future__ import annotations

from pathlib import Path

from amqtool.errors import FormatError
from amqtool.formats.artemis.records import HEADER_SIZE, decode_header
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
    outputs = [n for n in (name_number(name, prefix) for name in control.new_files) if n is not None]
    carried.update(outputs)
    remaining, gone = _input_ids(opened.journal.directory, control.old_files)
    carried.update(remaining)
    lowest_remaining = min(remaining, default=None)
    first_output = min(outputs, default=None)

    def maybe_freed_input(i: int) -> bool:
        return gone and (first_output is None or i < first_output) and (
            lowest_remaining is None or i < lowest_remaining)
    # up to the newest file holding records or named after its own fileID (created new: the broker's next
    # files): the inputs the switch-over reinitialises get the newest ids under their old names, and one of
    # those deleted takes nothing with it
    high = max((s.file.file_id for s in result.scans if s.file.file_id < 1 << 31 and (
        s.has_data or name_number(s.file.name, prefix) == s.file.file_id)), default=0)
    if high - began > _SPAN:
        return []
    return [i for i in range(began + 1, high) if i not in carried and not maybe_freed_input(i)]


def _input_ids(directory: Path, names: list[str]) -> tuple[list[int], int]:
    """The header fileIDs of the compaction's inputs still in ``directory`` (the load leaves them out: the roll
    forward deletes them), and how many are gone or unreadable."""
    ids: list[int] = []
    gone = 0
    for name in names:
        try:
            with open(directory / name, "rb") as fh:
                ids.append(decode_header(fh.read(HEADER_SIZE)).file_id)
        except (OSError, FormatError):
            gone += 1
    return ids, gone
