"""The message journal's live records as the broker's start walks them (issue 25).

``JournalImpl.load`` hands its user the committed records in the order it reaches them, and
``AbstractJournalStorageManager.loadMessageJournal`` walks that list once: a reference or acknowledgement read
before its message's record applies to nothing. A broker never writes them in that order, but damage can put
them so (a file's header fileID that sorts it first, an id moved onto a message written later), and then what
the broker holds is not what the records say regardless of their order. The fault harness's truth and
``verify``'s comparisons of two loads read the load through :func:`as_walked`.
"""
from __future__ import annotations

import dataclasses

from amqtool.engines.artemis.load import LiveList
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_MESSAGE_ADDS = (R.ADD_LARGE_MESSAGE, R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL)
_ADD_REF, _ACK_REF = R.ADD_REF, R.ACKNOWLEDGE_REF
_PAIR_UPDATES = (R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME)


def as_walked(messages):
    """The message journal's load ``messages`` with the live records the broker's load walks past without
    effect left out, so that the export's rule (a message stays on a queue it has an ADD_REF for and no
    ACKNOWLEDGE_REF, whatever their order) gives what the broker holds. ``messages`` itself when nothing is.

    ``JournalImpl.load`` lists the committed records in the order it reaches them: a record outside a
    transaction where it is read, a transaction's records where its COMMIT is read (``onReadCommitRecord``
    hands each to ``loadManager.addRecord``/``updateRecord``); the loader's live list is that list
    (amqtool/engines/artemis/load.py). ``AbstractJournalStorageManager.loadMessageJournal`` walks it once, in
    that order: a message record puts the message in ``messages``; an ADD_REF puts its (message, queue) pair in
    ``queueMap`` only when ``messages`` already holds the message (else ``cannotFindMessage``: dropped); an
    ACKNOWLEDGE_REF removes the pair only when it is there (else logged, nothing happens); a delivery count or
    scheduled time lands on the pair's ``AddMessageRecord`` only when it is there, and a later ADD_REF of the
    pair puts a new one (the earlier values gone). A broker writes every reference after its message and
    every acknowledgement after its reference, so a pristine store loses nothing here; a damaged id or
    transaction id can move a record before the one it needs (a reference onto a message whose transaction
    commits later), where the broker drops it.

    So, per pair in list order: references before their message and acknowledgements, counts and schedules
    with no pair there are left out; when the walk ends with the pair held after an acknowledgement took it
    once (ADD_REF, ACK, ADD_REF) or after a second reference, its acknowledgements are left out too, and its
    counts and schedules before its last reference. A record whose body is too short to name a queue is kept
    (the broker's decode throws on it: the fault harness's ``_refused`` judges that load as it is)."""
    live = messages.live
    find = getattr(live, "indexes_of_types", None)
    wanted = _MESSAGE_ADDS + (_ADD_REF, _ACK_REF) + _PAIR_UPDATES
    where = find(wanted) if find is not None else [i for i, r in enumerate(live) if r.user_record_type in wanted]
    known: set = set()  # messages, as the walk has put them
    held: dict = {}  # (message, queue) -> held now
    events: dict = {}  # (message, queue) -> [(live index, user record type)] of the records kept so far
    drop: set = set()
    for i in where:
        r = live[i]
        t = r.user_record_type
        if t in _MESSAGE_ADDS:
            known.add(r.id)
            continue
        body = messages.body(r)
        if len(body) < 8:
            continue
        q = int.from_bytes(body[:8], "big", signed=True)  # QueueEncoding: every one of these starts so
        pair = (r.id, q)
        if t == _ADD_REF:
            if r.id not in known:
                drop.add(i)
                continue
            held[pair] = True
        elif not held.get(pair):
            drop.add(i)
            continue
        elif t == _ACK_REF:
            held[pair] = False
        events.setdefault(pair, []).append((i, t))
    for pair, evs in events.items():
        refs = [i for i, t in evs if t == _ADD_REF]
        if held.get(pair) and (len(refs) > 1 or any(t == _ACK_REF for _, t in evs)):
            drop.update(i for i, t in evs if t == _ACK_REF or (t in _PAIR_UPDATES and i < refs[-1]))
    if not drop:
        return messages
    keep = [i for i in range(len(live)) if i not in drop]
    if isinstance(live, LiveList):
        buf, size = live.buffer, _live_entry_size()
        walked = LiveList(b"".join(bytes(buf[i * size:(i + 1) * size]) for i in keep))
    else:
        walked = [live[i] for i in keep]
    return dataclasses.replace(messages, live=walked, live_sources=None)


def _live_entry_size() -> int:
    import struct

    from amqtool import native

    return struct.calcsize(native.LIVE_FORMAT)
