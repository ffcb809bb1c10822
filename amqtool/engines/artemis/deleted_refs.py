"""The references deleted messages left in the journal's files: which queues a deleted message was routed to.

A DELETE makes a message's records dead, but JournalImpl reclaims a file only once every record in it is dead,
so the ADD_REF updates (``storeReference``: one per queue the message was routed to, body the 8-byte queue id)
of a message deleted since often still stand in the files. They say where the message went, which rules it out
as the owner of a damaged record: the broker routes a message to a queue once (``PostOfficeImpl.route``), so a
deleted message whose own reference to queue ``q`` still stands elsewhere did not write another one, and one
routed only to queues of addresses no message of the store is routed with ``q``'s address never reached ``q``.
"""
from __future__ import annotations

from amqtool import native
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_UPDATES = (12, 14)


def ref_queues(opened, ids: set[int]) -> dict[int, set[int]]:
    """id -> the queue ids of every ADD_REF (or ADD_REF in a transaction) of that id in the files of ``opened``
    (a messages journal), live or dead. A rescan of the files, done only on damage."""
    out: dict[int, set[int]] = {}
    if not ids or opened is None:
        return out
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if rid in ids and t in _UPDATES and utype == R.ADD_REF and body_len == 8:
                start = off + fixed_size(t, jf.version) - 4
                out.setdefault(rid, set()).add(int.from_bytes(data[start:start + 8], "big", signed=True))
    return out


def never_on(ev, q: int, ids: set[int]) -> set[int]:
    """Of the deleted message ids ``ids``, those whose own references in the files (:func:`ref_queues`) show they wrote
    no other reference to queue ``q``: one of them names ``q`` itself (routed there once), or they name only
    queues of addresses that no live message is routed to together with ``q``'s address
    (:meth:`Evidence._routable_to`'s rule). A message with no reference left in the files is kept."""
    found = ref_queues(ev.opened, ids)
    aq = ev.queue_address.get(q)
    if aq is not None:
        ev._routable_to(q)  # builds ev._routed_with
        near = (ev._routed_with or {}).get(aq, set()) | {aq}
    out = set()
    for m, qs in found.items():
        if q in qs:
            out.add(m)
        elif aq is not None:
            addrs = {ev.queue_address.get(x) for x in qs}
            if None not in addrs and not addrs & near:
                out.add(m)
    return out


def deleted_owners(ev, q: int, at: tuple[int, int]) -> set[int]:
    """The deleted messages that could have written a reference to queue ``q`` found at ``at`` (file index,
    offset in the messages journal) whose id was damaged, however many bytes: every id a DELETE (or DELETE_TX)
    of the journal names, bar those whose own records show otherwise (:func:`never_on`,
    ``write_order.not_owners_at``). A deleted message's DELETE outlives its references' files (``JournalImpl``
    keeps the file of a DELETE while a file holding a record it deletes survives), so a reference in a file the
    journal still holds, of a message deleted since, has its DELETE in the journal too: with none left here, the
    reference was a live message's, or its message's record is gone."""
    from amqtool.engines.artemis.write_order import not_owners_at

    ev._deleted_later(-1)  # reads the journal's DELETE records once
    ids = ((ev._deleted or set()) | ev.deleted_unknown) - ev.messages
    if ids:
        ids = ids - never_on(ev, q, ids)
    if ids:
        ids = ids - not_owners_at(ev, at, ids)
    return ids
