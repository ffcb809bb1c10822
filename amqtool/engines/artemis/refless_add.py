"""A message whose references a damaged end took: its ADD survives just before the damage, no reference of it
does (issue 25).

The broker stores a durable message as its ADD followed by one ADD_REF update per queue it was routed to
(``JournalStorageManager.storeMessage``, then ``storeReference`` for each of its references), all from the
thread that routes it; a message routed to no queue is not stored. So a message whose ADD is the last valid
record before the damaged end of a file the broker moved on from, and which no reference names anywhere in the
journal (nor a DELETE: one acknowledged everywhere and deleted since would name it), had its references
written right after it, in the bytes the damage took. The load finds it with no reference, and the broker
deletes such a message at start (``AbstractJournalStorageManager.loadMessageJournal``: a message whose
reference count is zero is deleted): every queue it was on loses it. The window of new ids does not show it (a
reference carries its message's id, which survives). Its references in a later file would have ended the
reading here; a transaction's message counts only when its transaction committed (the load holds it).

A message some queue acknowledged is left out: one acknowledged on every queue it was routed to, whose DELETE a
crash cut off (``storeAcknowledge``, then ``deleteMessage``: two writes), loses nothing at start. Unless the
damaged bytes are zeros laid exactly over whole records (``load.file_gaps``) that count more of its references,
at a reference's length each (the broker writes them right after the ADD), than it has acknowledgements: then a
queue still held it. Nor when every surviving acknowledgement of it stands in a file loaded after the damaged one,
and live records follow the last of them: the broker deletes a message at its last acknowledgement (the DELETE
follows it from the same call, ``QueueImpl.postAcknowledge``, or comes from the next start's load, which deletes a
message no reference holds), so a DELETE written after the damage would survive. None does: some queue still held
the message, and its reference was in the damaged bytes (acknowledgements come after the references they consume).
Left out: a crash between the last acknowledgement and its DELETE, which leaves that acknowledgement the journal's
last live record (:mod:`~amqtool.engines.artemis.acked_refless`).
"""
from __future__ import annotations

from amqtool.formats.artemis.records import fixed_size

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_ADD, _UPDATE, _ADD_TX, _UPDATE_TX = 11, 12, 13, 14
_QUEUE_ID = 8  # an ADD_REF's body: the queue's id


def refless_add(opened, index: int, first: int, evidence, end: int | None = None) -> int | None:
    """The id of the message whose ADD is the last valid record before ``first``, the start of the damaged end
    of message-journal file ``index``, when the load holds it with no reference and no surviving record
    deletes or acknowledges it (module contract); else None. ``end``: where the damaged bytes end (the next
    valid record), for damage inside a file: zeros there counting more references than acknowledgements
    outweigh an acknowledgement."""
    from amqtool.engines.artemis.tails import _records

    if evidence is None or opened.journal.kind != "messages" or not evidence.have_bindings:
        return None
    last = None
    for t, off, rid, _tx, utype in _records(opened, index):
        if off >= first:
            break
        last = (t, rid, utype)
    if last is None or last[0] not in (_ADD, _ADD_TX) or last[2] not in _MESSAGES:
        return None
    mid = last[1]
    if mid not in evidence.messages or evidence.refs.get(mid) or mid in evidence.deleted_unknown:
        return None
    acked = {q for m, q in evidence.acked if m == mid}
    if acked and not _more_refs_zeroed(opened, index, first, end, last[0], len(acked)) \
            and not _acked_after(evidence, mid, index):
        return None
    return mid


def _acked_after(evidence, mid: int, index: int) -> bool:
    """Whether every live acknowledgement of message ``mid`` stands in a file loaded after file ``index``, and
    live records follow the last of them (module contract: its DELETE would then survive)."""
    from amqtool.engines.artemis.acked_refless import last_acks

    if evidence._messages is None:
        return False
    seen = last_acks(evidence._messages, {mid}).get(mid)
    return seen is not None and seen[0] > index and seen[1]


def _more_refs_zeroed(opened, index: int, first: int, end: int | None, add_type: int, acked: int) -> bool:
    """Whether ``[first, end)`` of file ``index`` is zeros only, as many whole references of an add of
    ``add_type`` (plain or transactional) as fill it, and more of them than ``acked``."""
    if end is None or end <= first:
        return False
    ref = fixed_size(_UPDATE_TX if add_type == _ADD_TX else _UPDATE, opened.files[index].version) + _QUEUE_ID
    size = end - first
    return size % ref == 0 and size // ref > acked and not any(opened.pread(index, first, size))
