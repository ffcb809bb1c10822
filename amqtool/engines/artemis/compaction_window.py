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

The files are taken in the order their ids were issued (the pool is a queue, and a new file is created only
when it is empty), so the file current when the compaction began, one of its inputs, carries the highest id of
the inputs, and every file taken since, or left in the pool, a higher one. The window starts above the inputs'
ids: the numbers in their names and their header fileIDs (a file freed earlier is reinitialised under the next
id and keeps its name, ``JournalFilesRepository.reinitializeFile``), but not the ids the switch-over gave
the inputs it reinitialised, which are above every other file's.

The switch-over frees the inputs one by one in the order of their header fileIDs (``renameFiles`` over
``dataFilesToProcess``, sorted by ``JOURNAL_FILE_COMPARATOR``), so an input gone carried a lower fileID than
every input still there: an id below the compaction's first output and below every remaining input's, while
some input is gone, may be a freed input's and is not weighed.

Under a pool (``journal-pool-files`` other than 0) the compactor may take its outputs from the free files
(``openFileCMP`` takes the next opened file, ``takeFile`` polls ``freeFiles`` first): an output named at or
below the inputs' ids is such a file. Each was reinitialised under a new id when it was freed, before the
compaction, and that id goes when the compactor writes its own header. Those ids lie below the first output
the compactor created new (named after a fresh id). So below it, as many ids as such outputs may be carried by
no file; more than that is a file removed.
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
    remaining, gone = _input_ids(opened.journal.directory, control.old_files)
    outputs = [n for n in (name_number(name, prefix) for name in control.new_files) if n is not None]
    # the ids the switch-over gave inputs are above every file taken since the compaction began
    others = [f.file_id for f in result.files if name_number(f.name, prefix) not in outputs]
    taken_since = min(others, default=None)
    began = max(inputs + [i for i in remaining if taken_since is None or i < taken_since])
    reused = sum(n <= began for n in outputs)  # free files the compactor took: their ids went with their headers
    first_fresh = min((n for n in outputs if n > began), default=None)
    carried: set[int] = set(outputs) | set(remaining)
    for f in result.files:
        carried.add(f.file_id)
        n = name_number(f.name, prefix)
        if n is not None:
            carried.add(n)
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
    missing = [i for i in range(began + 1, high) if i not in carried and not maybe_freed_input(i)]
    pooled = [i for i in missing if first_fresh is None or i < first_fresh]
    if len(pooled) <= reused:
        missing = [i for i in missing if i not in pooled]
    return missing


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
