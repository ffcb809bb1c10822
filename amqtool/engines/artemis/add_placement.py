"""Where the ADD of a live update without its add would have lain: in a fileID the journal is missing, or in
a file still there (issue 25).

``verify`` takes live updates whose add is gone for the trace of a removed journal file
(``missing-journal-file``): the broker never frees a file that holds the add of a live record
(``JournalImpl.checkReclaimStatus`` / ``Reclaimer.scan``, criterion 1: every addition of the file has its
matching delete), nor one whose deletes reach a file it keeps (criterion 2), so in a store no one touched an
update is never left without its add. But fileIDs also go missing with no file removed: under a bounded
``journal-pool-files`` the reclaimer deletes freed files its pool does not keep
(``JournalFilesRepository.addFreeFile``: once free files, data files and opened files reach the pool size), a
reinitialised free file takes a new id under its old name (``reinitializeFile``), and a compaction renumbers
its outputs. So such a gap holds no live add,
and an update left without its add for another reason (its id bytes damaged, its DELETE lost to a damaged
region while its add was reclaimed long ago) is no evidence of a removal unless its add could have been in one
of the missing ids.

Where an add lay follows from its id: ``BatchingIDGenerator`` issues record ids counting up, the broker writes
a message's ADD as it stores the message, and JournalImpl fills one file after the other, each new or reused
file under the next fileID (``JournalFilesRepository.openFile``/``takeFile``; the load orders files by
fileID). So the ADD of id X lay between the add of the highest id below X and that of the lowest id above X
that the journal still holds (dead adds included: they stay in their file until it is freed), in a file whose
fileID lies between theirs. A compaction copies live records in their order into outputs under the lowest
old fileIDs, which keeps the order among them; the bracket is taken between the two files whichever comes
first. When every fileID of that bracket is a file present, the add was in a file still there, not in a
missing one: what left the update without its add is not a removed file.

A reference (``ADD_REF``) bounds its add from the other side too: the broker routes a message as it stores it
(``PostOfficeImpl.processRoute``: ``storeMessage``, then ``storeReference`` for each durable queue, in one
call), so the add lay in the file of its earliest reference or in the one written just before it: between the
present file with the next lower fileID and that file. An update of a reference whose id was damaged onto an
old id (its add's bracket far before the reference's file) had no add in a missing fileID (real JournalImpl
stores whose reclaimer left fileIDs missing below the oldest file read such flips as a CRITICAL
``missing-journal-file``: campaign seeds 8311031933021008, 8341065023120012). A removed file whose last add's
reference went to the next file leaves its fileID there, between the two.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable, Iterable

from amqtool import native
from amqtool.formats.artemis.records import ADD, ADD_TX

_ADDS = (ADD, ADD_TX)
_TAG_LIMIT = 1 << 31  # a header fileID past it was damaged: its records carry the issued id as their tag
_ADD_REF = 32  # JournalRecordIds.ADD_REF: a message's reference to a queue, an update of the message's id


def add_positions(result) -> tuple[list[int], list[int]]:
    """(ids, fileIDs): the ids of every ADD and ADD_TX record the files of the load ``result`` hold, live or
    dead, sorted, and the fileID of the file holding each (the tag its records carry). Rescans the files."""
    pairs: list[tuple[int, int]] = []
    opened = result.opened
    for fi, jf in enumerate(opened.files):
        fid = jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        pairs.extend((rec[5], fid) for rec in records if rec[0] in _ADDS)
    pairs.sort()
    return [p[0] for p in pairs], [p[1] for p in pairs]


def bracket(ids: list[int], files: list[int], orphan: int) -> tuple[int | None, int | None]:
    """The fileIDs between which the add of ``orphan`` lay (``add_positions``' lists): those of the adds of
    the nearest ids below and above it, lower first; None for a side with no add."""
    below = bisect_left(ids, orphan) - 1
    above = bisect_right(ids, orphan)
    lo = files[below] if below >= 0 else None
    hi = files[above] if above < len(ids) else None
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return lo, hi


def missing_between(present: Iterable[int], high: int) -> Callable[[int | None, int | None], bool]:
    """A test ``(lo, hi) -> bool``: whether a fileID from 1 to below ``high`` (the newest data file) that no
    file of ``present`` carries lies within lo..hi (None: unbounded on that side). The ids of the bracket's
    own files are present, so what counts is strictly between them."""
    have = sorted({p for p in present if 0 < p < high})

    def test(lo: int | None, hi: int | None) -> bool:
        a = 1 if lo is None else lo + 1
        b = high - 1 if hi is None else min(hi - 1, high - 1)
        if a > b:
            return False
        inside = bisect_right(have, b) - bisect_left(have, a)
        return inside < b - a + 1
    return test


def placed_in_gaps(result, orphans: set[int], missing: Callable[[int | None, int | None], bool]) -> set[int]:
    """The ids of ``orphans`` (live updates without their add in the load ``result``) whose add could have
    lain in a missing fileID, as ``missing`` (from :func:`missing_between`) tells for the bracket of each."""
    if not orphans:
        return set()
    ids, files = add_positions(result)
    refs = _first_reference_files(result, orphans)
    present = sorted({jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag for jf in result.files})
    out = set()
    for x in orphans:
        lo, hi = bracket(ids, files, x) if ids else (None, None)
        if x in refs:
            # written just before its first reference: in that file, or after the present file before it
            at = bisect_left(present, refs[x])
            before = present[at - 1] if at > 0 else None
            lo = before if lo is None else lo if before is None else max(lo, before)
            hi = refs[x] if hi is None else min(hi, refs[x])
        if missing(lo, hi):
            out.add(x)
    return out


def in_present_files(result, orphans: set[int]) -> set[int]:
    """The ids of ``orphans`` with a live reference whose add, written just before its first reference (see the
    module docstring), lay in a file still there: no fileID is missing between that reference's file and the
    present file before it. Its add is not there, so its id (or the add's bytes, judged where they lie) was
    damaged: no file holding it was lost."""
    refs = _first_reference_files(result, orphans)
    if not refs:
        return set()
    present = sorted({jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag for jf in result.files})
    out = set()
    for x, fid in refs.items():
        at = bisect_left(present, fid)
        if at > 0 and present[at - 1] == fid - 1:
            out.add(x)
    return out


def _first_reference_files(result, orphans: set[int]) -> dict[int, int]:
    """Orphan id -> the lowest fileID among the files holding its live references (``ADD_REF`` updates)."""
    out: dict[int, int] = {}
    for r in result.live:
        if r.is_update and r.user_record_type == _ADD_REF and r.id in orphans:
            jf = result.files[r.file_index]
            fid = jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag
            out[r.id] = min(out.get(r.id, fid), fid)
    return out
