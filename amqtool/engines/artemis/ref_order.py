"""Where a message's records stand in the load's list, with the queue its references and acknowledgements name.

``loadMessageJournal`` applies the records of the load's list in order (a transaction's take its COMMIT's place
there): a reference read before its message is dropped, and one read after the message's acknowledgement on that
queue puts it back. The rules that weigh a reference moved by a damaged id read that order here, in one pass over
the live list (on damage only).
"""
from __future__ import annotations

from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_QUEUED = (R.ADD_REF, R.ACKNOWLEDGE_REF)


def queue_records(result, ids) -> dict[int, list[tuple[int, object, int | None]]]:
    """Record id -> ``(index in the live list, live record, queue)`` for every live record of ``ids`` in the load
    ``result``, in list order; ``queue`` is the queue id an ADD_REF or ACKNOWLEDGE_REF update names (its first 8
    body bytes), None for any other record."""
    out: dict[int, list] = {}
    for i, r in enumerate(result.live):
        if r.id in ids:
            queue = (int.from_bytes(result.body(r)[:8], "big", signed=True)
                     if r.is_update and r.user_record_type in _QUEUED and r.body_len >= 8 else None)
            out.setdefault(r.id, []).append((i, r, queue))
    return out


def ref_after_add(result, m: int, q: int) -> bool:
    """Whether the live reference of (message ``m``, queue ``q``) comes after ``m``'s ADD in the load's list."""
    added = False
    for _i, r, queue in queue_records(result, {m}).get(m, ()):
        if not r.is_update:
            added = True
        elif r.user_record_type == R.ADD_REF and queue == q:
            return added
    return False


def refs_after_ack(result, pairs) -> set[tuple[int, int]]:
    """The (message, queue) ``pairs`` with a live reference after a live acknowledgement of that pair."""
    acked, out = set(), set()
    for m, records in queue_records(result, {m for m, _ in pairs}).items():
        for _i, r, q in records:
            if q is None or (m, q) not in pairs:
                continue
            if r.user_record_type == R.ACKNOWLEDGE_REF:
                acked.add((m, q))
            elif (m, q) in acked:
                out.add((m, q))
    return out
