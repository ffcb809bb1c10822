"""A lone id of live updates without their add that the journal's own records show to be a damaged id, not
the trace of a removed file (issue 25).

``verify`` takes live updates whose add is gone for a lost journal file (the broker never frees a file that
holds the add of a live record). An UPDATE whose id bytes were damaged leaves the same trace: one update of an
id nothing else carries, which the broker applies to no message (``AbstractJournalStorageManager``'s load
logs ``cannotFindMessage`` and drops it). Real JournalImpl stores whose reclaimer left fileID gaps turned such
flips into a CRITICAL ``missing-journal-file`` while the broker loads the same messages: most often the
update was dead anyway (its message acknowledged and deleted since), the damaged copy merely escaping the
delete.

What tells them apart, from the bytes alone: Artemis issues ids counting up from 0 (``BatchingIDGenerator``),
so the ids a journal's records carry, dead ones included, lie together; the add of a message in a lost file
carries an id issued among them. An id is one the broker never issued when it is negative, or when it lies
farther outside the span of every other record's id than that span is wide while one damaged byte (one bit
flipped, or any value of that byte) gives an id those records carry, or when it lies more than 2^44 above them
(a restart moves the generator on by at most ``JournalStorageManager.CHECKPOINT_BATCH_SIZE``, 2^31: that is more
than 8192 restarts' worth of ids with no record left). An id inside the span, or near it, stays evidence of a lost file.
"""
from __future__ import annotations

from amqtool import native
from amqtool.formats.artemis.records import ADD, ADD_TX, DELETE, DELETE_TX, UPDATE, UPDATE_TX
from amqtool.formats.damage import byte_variants

FAR_ABOVE = 1 << 44
# the records that carry a record id (COMMIT, PREPARE and ROLLBACK carry a transaction id only)
_ID_RECORDS = frozenset((ADD, ADD_TX, DELETE, DELETE_TX, UPDATE, UPDATE_TX))


def never_issued(result, orphan: int) -> bool:
    """Whether ``orphan`` (the only id of ``result``'s live updates without their add) is an id the broker
    never issued, judged against every record of the load's files (see the module docstring). Rescans the
    files for the ids of dead records: called only for a lone orphan id."""
    return orphan in never_issued_ids(result, {orphan})


def never_issued_ids(result, orphans: set[int]) -> set[int]:
    """The ids of ``orphans`` (ids of ``result``'s live updates without their add) that the broker never
    issued, each judged as :func:`never_issued` judges one against every other record's id (one rescan of the
    files)."""
    out = {x for x in orphans if x < 0}
    rest = set(orphans) - out
    if not rest:
        return out
    ids: set[int] = set()
    for fi, jf in enumerate(result.opened.files):
        records, _ = native.scan_records(result.opened.read_file(fi), jf.tag, jf.version, True, 16)
        for rec in records:
            rid = rec[5]
            if rid not in rest and rid >= 0 and rec[0] in _ID_RECORDS:
                ids.add(rid)
    if not ids:
        return out
    lo, hi = min(ids), max(ids)
    for orphan in rest:
        outside = lo - orphan if orphan < lo else orphan - hi
        if orphan > hi + FAR_ABOVE or outside > hi - lo and any(v in ids for v in byte_variants(orphan)):
            out.add(orphan)
    return out

