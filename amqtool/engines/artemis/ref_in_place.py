"""A message's reference found where the broker wrote it, under a damaged id; and whose a damaged reference was.

``PostOfficeImpl.processRoute`` stores a message, then one ADD_REF per queue it is routed to, in one batch: the
references follow the message's ADD record in the file (``storeReference``, in or out of the sending
transaction). So when a queue acknowledged a message it has no reference for, and a reference record naming
that queue sits among the references written right after the message, with an id one damaged byte from the
message's, that record was the message's reference on that queue: its id was damaged, and what it now names
(a message deleted since takes it with its DELETE, ``JournalImpl.load``) changes nothing the acknowledgement
did not already settle.

The same order names the owner of a reference whose id was damaged (:func:`run_owner`): the message whose ADD
begins the run of references that holds it.

A scheduled message's run holds one more update a queue: ``processRoute`` writes each reference's
SET_SCHEDULED_DELIVERY_TIME update (``updateScheduledDeliveryTime``, or its transactional form) right after
that reference's ADD_REF, under the message's id. Those updates of the run's message belong to the run.
"""
from __future__ import annotations

from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.damage import one_byte_apart

_UPDATES = (12, 14)  # UPDATE, UPDATE_TX
_ADD_REF = 32
_SCHEDULED = 36  # SET_SCHEDULED_DELIVERY_TIME: written after each reference of a scheduled message
_ADDS = (11, 13)  # ADD, ADD_TX
_MESSAGES = (30, 31, 45)
_RUN = 64  # records after the message's ADD looked at: its references come first


def ref_written_in_place(result, message_id: int, queue_id: int) -> bool:
    """Whether a reference record naming ``queue_id``, with an id one byte from ``message_id`` (and not it),
    is among the references written right after ``message_id``'s live ADD record in the messages journal
    loaded as ``result`` (a rescan of that part of its file, done on damage only)."""
    add = next((r for r in result.live if r.id == message_id and not r.is_update
                and r.user_record_type in _MESSAGES), None)
    if add is None:
        return False
    opened = result.opened
    fi = add.file_index
    version = opened.files[fi].version
    head = {t: fixed_size(t, version) - 4 for t in _UPDATES}  # the header before the body (checkSize after it)
    seen = 0
    for base, data, records, _marked in opened.scan_windows(fi, start=add.body_offset + add.body_len + 4):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            seen += 1
            if seen <= _RUN and t in _UPDATES and utype == _SCHEDULED and rid == message_id:
                continue  # a reference's scheduled delivery time, written right after it
            if seen > _RUN or t not in _UPDATES or utype != _ADD_REF:
                return False  # the run of references after the message ended
            at = off + head[t]
            if body_len == 8 and rid != message_id and one_byte_apart(rid, message_id) \
                    and int.from_bytes(data[at:at + 8], "big", signed=True) == queue_id:
                return True
    return False


def run_owner(result, at: tuple[int, int]) -> int | None:
    """The id of the message whose live-or-dead ADD record begins the run of reference records (ADD_REF
    updates and that message's scheduled delivery times, nothing else between) that holds the record whose body
    starts at ``at`` (file index, body offset) in the messages journal loaded as ``result``; None when that record
    follows no such run (a rescan of its file up to it, done on damage only)."""
    fi, body_at = at
    opened = result.opened
    version = opened.files[fi].version
    owner = None
    for base, data, records, _marked in opened.scan_windows(fi):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            start = base + off
            if t in _UPDATES and utype == _ADD_REF:
                if start + fixed_size(t, version) - 4 == body_at:
                    return owner
            elif t in _ADDS and utype in _MESSAGES:
                owner = rid
            elif t in _UPDATES and utype == _SCHEDULED and rid == owner:
                pass  # the scheduled delivery time of the reference before it: the run goes on
            else:
                owner = None
            if start >= body_at:
                return None
    return None


def run_owned(result, orphans: set[int]) -> dict[int, int]:
    """Orphan id -> the message whose reference it was, for the ids of ``orphans`` (ids of live updates without
    their add in the load ``result``) whose one live update is a reference in the run written right after the
    ADD of a message one damaged byte away (:func:`run_owner`): a damaged id, not an add lost with a file."""
    from amqtool.formats.damage import one_byte_apart

    out = {}
    for x, updates in result.updates_of(orphans).items():
        if len(updates) != 1 or updates[0].user_record_type != _ADD_REF:
            continue
        owner = run_owner(result, (updates[0].file_index, updates[0].body_offset))
        if owner is not None and owner != x and one_byte_apart(owner, x):
            out[x] = owner
    return out
