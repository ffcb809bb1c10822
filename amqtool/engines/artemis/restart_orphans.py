"""Live updates without their add that a restart leaves in a healthy journal (issue 25).

``verify`` takes live updates whose add is gone for the trace of a removed journal file
(``missing-journal-file``): while the journal runs, an update never outlives both its add and its DELETE.
The message's DELETE holds negatives into the add's file and into each file of its updates
(``JournalRecord.delete``), and ``Reclaimer.scan`` keeps a file with negatives into a file not reclaimable
(criterion 2). So the add's file A can go once the DELETE is written (criterion 1), while the DELETE's file D
stays as long as the file U of an update does.

A restart unties them. ``JournalImpl.load`` links an update to nothing when it read no add for its id ("It's
legal for this to be null. The file(s) with the may have been deleted just leaving some updates in this file",
``onReadUpdateRecord``), and a DELETE of such an id takes nothing (``onReadDeleteRecord``: ``records.remove``
is null). After a restart that follows A's reclaim, D is freed as soon as its own records are dead, while U,
an older file, stays for its other live records: the update reads live, its add and its DELETE both gone,
and the broker loads exactly that (it drops the update, having no message for it). A real JournalImpl store,
written with Artemis' default pool and restarted, never compacted, read CRITICAL so
(tests/data/artemis/restart-orphan).

What such an id shows, and a file removed under a live message does not always:

* nothing of it still to deliver: its live updates are acknowledgements and delivery counts only (its
  references went with its add: the broker routes a message as it stores it), and every queue it was counted
  as delivered on acknowledged it. A removed file's live message often leaves a delivery count without its
  acknowledgement, or references written after its add's file ended;
* a lone id: a removed file held the adds of every message stored at the time, and leaves the updates of
  several (the verify rule for a lone orphan id's flipped bit is the same bet);
* its add older than every add the journal still holds (no add of a lower id in any file, dead ones
  included): ids are issued counting up and files filled in fileID order (add_placement.py), and the
  reclaimer had freed the add's file before the restart, while a removed file between files still holding
  adds brackets its add between them;
* room for its DELETE, freed by the broker: a fileID after the file of its last update is missing and its
  records survive as the stale records of a reused file (``JournalFilesRepository.reinitializeFile`` writes a
  new header and leaves the earlier use's records under their old tag): the broker freed that file, where a
  removed file leaves no byte behind;
* or room for its DELETE in a file that took nothing still to deliver (:func:`_took_nothing_pending`). The
  same id is what a removed file leaves when it held the message's last acknowledgement and its DELETE
  (``QueueImpl.acknowledge``: the DELETE right after the last reference's acknowledgement), the add's file
  long freed: the broker drops the earlier acknowledgement left live (``loadMessageJournal``:
  ``cannotFindMessage``) and delivers what it delivered. Whether that file held anything else live is what
  decides. The acknowledgements it held were of messages stored before it: one whose add and reference are
  still there comes back (the broker delivers it again), pending on its queue among messages stored since and
  consumed. So when no message stored in a file before the last fileID where that file could have been (one
  missing after the orphan's last update, naming no file still there: a file named after a fileID it no longer
  carries was freed and re-initialised by the broker) is pending on a queue, the file took no acknowledgement
  of a message the broker would deliver again. (What this cannot see: a message stored in that very file and
  never consumed leaves no record. In a journal with paging records, cursor acknowledgements it held would
  bring paged messages back unseen: not taken there.)

Outside those cases the same id stays ambiguous (:func:`restart_shaped`): never-compacted JournalImpl stores
with a bounded pool, restarted every 100 to 400 operations, read CRITICAL untouched in 7 of 17 written with
fresh seeds (9702, 9707, 9713, 9714, 9731, 9732, 9734), and so did hold-out h65 (seed 9565), each with live
acknowledgements and delivery counts without their add and a freed fileID after them, their adds mostly in the
middle of the journal's ids (adds of lower ids kept by messages still pending), up to four ids a store. On
h65 the Reclaimer's trace showed the mechanism above: the add's file freed once the DELETE was written, the
DELETE's file kept while the update's stayed, then freed after a restart (tests/data/artemis/restart-shaped
is one of the seven). Messages stored before the freed fileIDs stayed pending in them, so "nothing pending"
above does not separate them from a removal. A file removed under a live message, or one holding the DELETE
and other acknowledgements (tests/data/artemis/deleted-there's fileIDs 17 and 18), leaves the same trace, so
the verdict is a warning that says both. Still evidence of a removal: a reference without its add (a
reference follows its add into the next file only across a removed one), two such ids whose adds lay between
the same two files (neighbours in a removed file), such an id in a compacted journal (the compactor drops
updates of records the journal does not hold).

On the single-file deletions of seven restarted real JournalImpl stores of the fault campaign (b06, b07, c05,
d05, e-s7141, e-n7152, e-n7153), the stale records kept every deletion that lost messages or brought some
back CRITICAL; the add's age alone let four of them read OK (and two of b02, never restarted). Every one of
those left messages stored before the removed file pending; the removal that lost nothing (e-n7153's
``activemq-data-12.amq``, fileID 13, holding the DELETE of 2147483985 whose acknowledgement on queue 11 a
committed transaction wrote in fileID 11) left none. On the 1,222 single-file deletions of 38 such stores the
pending rule changed that one verdict (same/CRITICAL to OK), and no other.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from typing import Callable

from amqtool import native
from amqtool.engines.artemis.add_placement import add_positions, bracket
from amqtool.formats.artemis.userrecords import JournalRecordIds as _R

_TAG_LIMIT = 1 << 31  # a header fileID past it was damaged: its records carry the issued id as their tag


def left_by_restart(result, orphans: set[int], missing: Callable[[int | None, int | None], bool]) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) that a restart or
    a gone DELETE explains (see the module docstring): a lone id whose live updates are acknowledgements and
    delivery counts, with an acknowledgement on every queue it has an update on, no add of a lower id in the
    journal, and a fileID after the file of its last update that is missing (``missing``, from
    ``add_placement.missing_between``) and whose records a reused file still holds, or whose loss took no
    message still to deliver (:func:`_took_nothing_pending`)."""
    if len(orphans) != 1:
        return set()
    (x,) = orphans
    acked: set[int] = set()
    counted: set[int] = set()
    last = -1
    for r in result.live:
        if r.id != x or not r.is_update:
            continue
        if r.user_record_type not in (_R.ACKNOWLEDGE_REF, _R.UPDATE_DELIVERY_COUNT) or r.body_len < 8:
            return set()
        queue = int.from_bytes(result.body(r)[:8], "big", signed=True)  # both encodings begin with the queue
        (acked if r.user_record_type == _R.ACKNOWLEDGE_REF else counted).add(queue)
        last = max(last, _file_id(result.files[r.file_index]))
    if not acked or not counted <= acked or last < 0 or not missing(last, None):
        return set()
    ids, _ = add_positions(result)
    if ids and ids[0] < x:
        return set()
    present = {_file_id(jf) for jf in result.files}
    if any(last < t < _TAG_LIMIT and t not in present for t in stale_tags(result)):
        return {x}
    return {x} if _took_nothing_pending(result, last, present) else set()


_LEFT_BY_RESTART = (_R.ACKNOWLEDGE_REF, _R.UPDATE_DELIVERY_COUNT)


def restart_shaped(result, orphans: set[int]) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) that a restart
    may have left in a healthy journal, as a removed file may (see the module docstring): every live update of
    the id is an acknowledgement or a delivery count, one at least an acknowledgement (a reference is written
    with its message: it never outlives its add but in a removed file's next one; a delivery count alone is a
    message still counted as delivered, kept as pending), and a fileID after the file of its last update, below
    the newest, is carried by no file (room for the file of its DELETE, which the broker freed since); in a
    journal never compacted (``JournalCompactor.onReadUpdateRecord`` copies only updates of records the journal
    holds, so a compaction drops such updates: no compacted store of the sweeps kept one), where no other such
    id's add lay between the same two files still holding adds (a restart leaves ids of messages deleted long
    apart; a file removed under live messages leaves neighbours: 7 of 42 removals that left only such ids)."""
    # A compaction copies every live record with its compactCount raised: one such record alone is a damaged
    # byte. (Not a file named after a fileID above its own, what compactor_outputs takes for an output: two
    # files swapped by name give one too.)
    if not orphans or sum(1 for r in result.live if r.compact_count > 0) > 1:
        return set()
    last: dict[int, int] = {}
    other: set[int] = set()
    acked: set[int] = set()
    for r in result.live:
        if r.id in orphans and r.is_update:
            if r.user_record_type not in _LEFT_BY_RESTART:
                other.add(r.id)
            elif r.user_record_type == _R.ACKNOWLEDGE_REF:
                acked.add(r.id)
            last[r.id] = max(last.get(r.id, -1), _file_id(result.files[r.file_index]))
    present = sorted({t for t in map(_file_id, result.files) if t < _TAG_LIMIT})
    if not present:
        return set()
    high = present[-1]

    def freed_after(f: int) -> bool:  # a fileID between f and the newest that no file carries
        return high - f - 1 > bisect_right(present, high - 1) - bisect_right(present, f)

    shaped = {x for x, f in last.items() if x in acked and x not in other and freed_after(f)}
    if len(shaped) < 2:
        return shaped
    ids, files = add_positions(result)
    brackets = {x: bracket(ids, files, x) for x in shaped}
    shared = Counter(b for b in brackets.values() if None not in b)
    return {x for x in shaped if shared.get(brackets[x], 0) < 2}


# the records of paging: a file gone with cursor acknowledgements or page transactions in it brings paged
# messages back, which the journal's references do not show
_PAGING_TYPES = frozenset((_R.PAGE_TRANSACTION, _R.ACKNOWLEDGE_CURSOR, _R.PAGE_CURSOR_COUNTER_VALUE,
                           _R.PAGE_CURSOR_COUNTER_INC, _R.PAGE_CURSOR_COMPLETE, _R.PAGE_CURSOR_PENDING_COUNTER))
_MESSAGE_ADDS = (_R.ADD_LARGE_MESSAGE, _R.ADD_MESSAGE_PROTOCOL)
_MAX_SPAN = 1 << 20  # fileIDs between the orphan's file and the newest: past it, a damaged header's


def _took_nothing_pending(result, last: int, present: set[int]) -> bool:
    """Whether the file that held the orphan's DELETE, gone from a fileID after ``last`` (the file of its last
    update), took nothing the broker would deliver again (see the module docstring): such fileIDs exist, none
    names a file still there, and no message stored in a file before the last of them is pending on a queue
    (a live reference without a live acknowledgement, nor one of a prepared transaction), in a journal without
    paging records."""
    from amqtool.store.journal_writer import name_number

    high = max((t for t in present if t < _TAG_LIMIT), default=0)
    if high - last > _MAX_SPAN:
        return False
    # a file named after a fileID it no longer carries was freed and re-initialised by the broker
    # (JournalFilesRepository.reinitializeFile keeps the name): that id held nothing live
    names = {name_number(jf.name, "") for jf in result.files}
    gone = [t for t in range(last + 1, high) if t not in present and t not in names]
    if not gone:
        return False
    stored: dict[int, int] = {}
    refs: set[tuple[int, int]] = set()
    acks: set[tuple[int, int]] = set()
    for r in result.live:
        t = r.user_record_type
        if t in _PAGING_TYPES:
            return False
        if t in _MESSAGE_ADDS and not r.is_update:
            stored[r.id] = _file_id(result.files[r.file_index])
        elif t in (_R.ADD_REF, _R.ACKNOWLEDGE_REF) and r.body_len >= 8:
            pair = (r.id, int.from_bytes(result.body(r)[:8], "big", signed=True))  # RefEncoding: the queue first
            (refs if t == _R.ADD_REF else acks).add(pair)
    for tx in result.prepared:
        for r in tx.records:
            if r.user_record_type == _R.ACKNOWLEDGE_REF and r.body_len >= 8:
                acks.add((r.id, int.from_bytes(result.body(r)[:8], "big", signed=True)))
    bound = max(gone)
    return not any(stored.get(m, bound) < bound for m, _q in refs - acks)


def stale_tags(result) -> set[int]:
    """The tags (fileIDs of earlier uses) of the records the files of the load ``result`` hold under another
    tag than their own: records of the earlier use of a file the broker freed and re-initialised. Rescans
    the files."""
    out: set[int] = set()
    opened = result.opened
    for fi, jf in enumerate(opened.files):
        buf = opened.read_file(fi)
        records, _ = native.scan_records(buf, jf.tag, jf.version, False, 16)
        for rec in records:
            tag = int.from_bytes(buf[rec[1] + 1:rec[1] + 5], "big", signed=True)  # after the type byte
            if tag != jf.tag:
                out.add(tag)
    return out


def _file_id(jf) -> int:
    return jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag
