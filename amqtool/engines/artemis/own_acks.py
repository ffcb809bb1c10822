"""Which deleted messages could have written a damaged acknowledgement: those whose own is not found.

The broker acknowledges a reference once: ``storeAcknowledge(queueID, messageID)`` writes one ACKNOWLEDGE_REF
per (message, queue), after that queue's ADD_REF (``PostOfficeImpl.processRoute`` stores the references with
the message). So an acknowledgement whose id was damaged (it now names no message) was not the acknowledgement
of a deleted message whose own acknowledgement on that queue still stands, whole, elsewhere in the journal, nor
of one whose references (the journal still holds some) name other queues only. The scan sees a deleted
message's records until the reclaimer frees their files; ``JournalImpl.load`` drops them, so only a rescan
shows them. Done on damage only (an acknowledgement without its message).

When the acknowledgement was a message's last, the broker deletes the message right after it
(``storeAcknowledge``, then ``deleteMessage`` once no queue holds a reference): a DELETE of a deleted candidate
written right after the damaged acknowledgement says whose it was.

An acknowledgement in a transaction that was rolled back is written again when the message is acknowledged
later: only a non-transactional one, or one whose transaction's COMMIT is in the files, counts as the
message's own.
"""
from __future__ import annotations

from amqtool import native
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.damage import one_byte_apart
from amqtool.engines.artemis.pins import MESSAGE_TYPES

_ADDS = (11, 13)
_UPDATE, _UPDATE_TX, _COMMIT = 12, 14, 18
_DELETE, _DELETE_TX = 16, 15
_ADD_REF, _ACK = 32, 33


def acked_elsewhere(result, queue_id: int, ids: set[int]) -> set[int]:
    """Of ``ids`` (deleted records that a damaged acknowledgement of ``queue_id`` in the messages journal
    loaded as ``result`` could have been read from: its id is none of theirs now), those that did not write
    it: their own acknowledgement of ``queue_id`` stands, or the journal holds references of theirs and none
    names ``queue_id``, or their ADD stands and adds no message (a page cursor's acknowledgement, a page
    transaction: the broker deletes those too, and acknowledges only messages; hold-out sweep seed 7791, d21)."""
    opened = result.opened if result is not None else None
    if not ids or opened is None:
        return set()
    refs, acks, other = _references(opened, ids)
    return ({m for m in ids if queue_id in acks.get(m, ())} | {m for m, qs in refs.items() if queue_id not in qs}
            | other)


def _references(opened, ids: set[int]) -> tuple[dict[int, set[int]], dict[int, set[int]], set[int]]:
    """For each of ``ids``, the queues its ADD_REF records in the files of ``opened`` name, and those its
    acknowledgements name (non-transactional ones, or ones whose transaction's COMMIT is in the files); and the
    ids among them whose ADD or ADD_TX stands with a user record type no message has: a rescan, done on damage
    only."""
    refs: dict[int, set[int]] = {}
    acks: dict[int, set[int]] = {}
    other: set[int] = set()
    tx_acks: list[tuple[int, int, int]] = []
    committed: set[int] = set()
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if t == _COMMIT:
                committed.add(tx)
                continue
            if t in _ADDS and rid in ids and utype not in MESSAGE_TYPES:
                other.add(rid)
                continue
            if rid not in ids or t not in (_UPDATE, _UPDATE_TX) or utype not in (_ADD_REF, _ACK) \
                    or body_len < 8:
                continue
            at = off + fixed_size(t, jf.version) - 4
            q = int.from_bytes(data[at:at + 8], "big", signed=True)
            if utype == _ADD_REF:
                refs.setdefault(rid, set()).add(q)
            elif t == _UPDATE:
                acks.setdefault(rid, set()).add(q)
            else:
                tx_acks.append((tx, rid, q))
    for tx, rid, q in tx_acks:
        if tx in committed:
            acks.setdefault(rid, set()).add(q)
    return refs, acks, other


def own_ack_wanted(result, queue_id: int, ids: set[int], at: tuple[int, int]) -> set[int]:
    """Of ``ids`` (deleted messages that could have written the damaged acknowledgement of ``queue_id`` standing
    at ``at``, file index and offset in the messages journal loaded as ``result``), those whose ADD_REF of
    ``queue_id`` and DELETE both stand in that file, before and after it, with no acknowledgement of that queue
    of theirs: the broker wrote that acknowledgement between them (``storeAcknowledge`` before ``deleteMessage``),
    and the reclaimer frees a file whole, so the one it lacks is the damaged record. A rescan of that file, done
    on damage only."""
    opened = result.opened if result is not None else None
    if not ids or opened is None:
        return set()
    fi, pos = at
    jf = opened.files[fi]
    data = opened.read_file(fi)
    records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
    ref_before: set[int] = set()
    acked: set[int] = set()
    deleted_after: set[int] = set()
    for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
        if rid not in ids:
            continue
        if t in (_UPDATE, _UPDATE_TX) and utype in (_ADD_REF, _ACK) and body_len >= 8:
            start = off + fixed_size(t, jf.version) - 4
            if int.from_bytes(data[start:start + 8], "big", signed=True) != queue_id:
                continue
            if utype == _ADD_REF and off < pos:
                ref_before.add(rid)
            elif utype == _ACK:
                acked.add(rid)
        elif t in (_DELETE, _DELETE_TX) and off > pos:
            deleted_after.add(rid)
    return (ref_before & deleted_after) - acked


def delete_right_after(result, ack) -> int | None:
    """The id that the record written right after the live acknowledgement ``ack`` (a record of the messages
    journal loaded as ``result``) deletes, when it is a DELETE or DELETE_TX; else None (a rescan of that record
    only)."""
    opened = result.opened if result is not None else None
    if opened is None:
        return None
    start = ack.body_offset + ack.body_len + 4  # after its checkSize
    for _base, _data, records, _marked in opened.scan_windows(ack.file_index, start=start):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            return rid if t in (_DELETE, _DELETE_TX) else None
        return None  # the file ends with the acknowledgement
    return None


def deleted_after_own_ack(result, orphans: set[int]) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) whose one live update
    is an acknowledgement followed right away by the DELETE of an id one damaged byte from theirs: that
    message's last acknowledgement, its id damaged (see the module docstring), which the broker drops to no
    effect -- no add lost with a file."""
    out = set()
    for x, updates in result.updates_of(orphans).items():
        if len(updates) == 1 and updates[0].user_record_type == _ACK:
            gone = delete_right_after(result, updates[0])
            if gone is not None and gone != x and one_byte_apart(gone, x):
                out.add(x)
    return out



def ack_before_delete(opened, index: int, first: int, end: int) -> tuple[int, int] | None:
    """``(message, queue)`` when the damaged bytes ``[first, end)`` of messages-journal file ``index`` are one
    plain update of an acknowledgement's size (its type byte survives, or zeros wiped it whole) written right
    before the DELETE of a message whose surviving records reference one queue more than they acknowledge: that
    message's last acknowledgement (``storeAcknowledge``, then ``deleteMessage`` once no queue holds a reference;
    see the module docstring), whose loss changes nothing -- the DELETE removes the message all the same. Else
    None (a rescan, done on damage only)."""
    jf = opened.files[index]
    if end - first != fixed_size(_UPDATE, jf.version) + 8:
        return None
    held = opened.pread(index, first, end - first)
    if held[0] != _UPDATE and any(held):  # zeros laid over the whole record (load.file_gaps) keep its size only
        return None
    gone = None
    for base, _data, records, _marked in opened.scan_windows(index, start=end):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            gone = rid if t == _DELETE and base + off == end else None
            break
        break
    if gone is None:
        return None
    refs, acks, _ = _references(opened, {gone})
    left = refs.get(gone, set()) - acks.get(gone, set())
    return (gone, left.pop()) if len(left) == 1 else None
