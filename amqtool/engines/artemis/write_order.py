"""Which records were written before an update: a damaged id is read back only onto a record added before it.

The broker writes a record's add before any update of it (``storeMessage`` before ``storeReference``,
``storeAcknowledge``, the delivery count), and the journal keeps records in the order they were written, files in
fileID order. So an update whose id field was damaged belonged to a record added before it: a live message whose
add comes later in the journal cannot have owned it. ``Evidence.misfiled`` narrows the owners of an orphan
update so (a rescan of the messages journal, done only for such updates: damage). A compacted journal is not
read so: the compactor rewrites live records into new files, and which comes first there is its order, not the
broker's.
"""
from __future__ import annotations

from amqtool import native

_ADDS = (11, 13)
_DELETES = (15, 16)


def added_before(ev, rid: int) -> set[int] | None:
    """The ids of every ADD or ADD_TX written before the first live update of ``rid`` in the messages journal
    of the :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev``; None when it cannot tell (no journal, no
    live update of ``rid``)."""
    result, opened = ev._messages, ev.opened
    if result is None or opened is None or compacted(result):
        return None
    at = min(((r.file_index, r.body_offset) for r in result.live if r.id == rid and r.is_update), default=None)
    if at is None:
        return None
    out: set[int] = set()
    for fi in range(at[0] + 1):
        jf = opened.files[fi]
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, r_id, utype, body_len, nrec, extra in records:
            if fi == at[0] and off >= at[1]:
                break
            if t in _ADDS:
                out.add(r_id)
    return out


def compacted(result) -> bool:
    """Whether the load ``result`` holds records the compactor rewrote (a compactCount above 0)."""
    return any(r.compact_count > 0 for r in result.live)


def not_owners_at(ev, at: tuple[int, int], ids: set[int]) -> set[int]:
    """Of ``ids``, those whose own records show they wrote nothing at ``at`` (file index, offset in the messages
    journal of the :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev``): an ADD or ADD_TX of the id
    written after ``at`` (the broker writes a message before its references and acknowledgements), or a DELETE
    or DELETE_TX of it written before ``at`` (nothing of a message is written after its delete: a delete is
    ``storeAcknowledge``'s last step, once every queue acknowledged it). Empty for a compacted journal (its
    order is the compactor's) or without the journal; a rescan of its files, done only on damage."""
    result, opened = ev._messages, ev.opened
    if not ids or result is None or opened is None or compacted(result):
        return set()
    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, r_id, utype, body_len, nrec, extra in records:
            if r_id not in ids:
                continue
            before = (fi, off) < at
            if t in _ADDS and not before or t in _DELETES and before:
                out.add(r_id)
    return out
