"""Live updates without their add that a restart leaves in a healthy journal (issue 25).

``verify`` takes live updates whose add is gone for the trace of a removed journal file
(``missing-journal-file``): while the journal runs, ``Reclaimer.scan`` never frees the file of an add whose
updates are still in a file it keeps. The message's DELETE holds negatives into the add's file and into each
file of its updates (``JournalRecord.delete``), and a file with negatives into a file not reclaimable stays
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

What such an id shows, and a file removed under a live message does not always: nothing of it still to
deliver, and room for its DELETE after it. Its live updates are acknowledgements and delivery counts only
(its references went with its add: the broker routes a message as it stores it), every queue it was counted
as delivered on acknowledged it, and a fileID after its last update is missing (the file D). A removed file's
live message leaves more: references written after its add's file ended, a delivery count without its
acknowledgement, and, the file holding the adds of every message stored at the time, the updates of several
ids; so only a lone such id is taken for a restart's (the verify rule for a lone orphan id's flipped bit is
the same bet).
"""
from __future__ import annotations

from typing import Callable

from amqtool.formats.artemis.userrecords import JournalRecordIds as _R

_TAG_LIMIT = 1 << 31  # a header fileID past it was damaged: its records carry the issued id as their tag


def left_by_restart(result, orphans: set[int], missing: Callable[[int | None, int | None], bool]) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) that a restart
    explains (see the module docstring): a lone id whose live updates are acknowledgements and delivery
    counts, with an acknowledgement on every queue it has an update on, and a missing fileID after the file of
    its last update (``missing``, from ``add_placement.missing_between``)."""
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
        jf = result.files[r.file_index]
        last = max(last, jf.file_id if 0 <= jf.file_id < _TAG_LIMIT else jf.tag)
    if not acked or not counted <= acked or last < 0:
        return set()
    return {x} if missing(last, None) else set()
