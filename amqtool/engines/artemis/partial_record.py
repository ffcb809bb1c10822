"""A damaged record whose head and trailing size survive: what ``verify`` can still tell of it.

:func:`~amqtool.engines.artemis.evidence.reconstruct` reads damaged bytes between records as one record when
at most one field is wrong. A zeroed run inside a record usually takes more (a body size and the user record
type, say), and then nothing is rebuilt: the region is "at least one record lost", CRITICAL. But when the
record's head is intact -- its record type, the file's tag, its id (and transaction id) -- and its trailing
size word counts exactly the damaged region, the region is that one record (``JournalImpl.readJournalFile``
checks the same word: the size at the end of a record is its whole length), and its id still says whose
record it was.

A message's ADD tells its id twice: in its head and first in its body (every persister writes the message id
first, and ``storeMessage`` adds the record under that id). When the head is damaged but the body, where the
record's layout puts it, still decodes as a message, the body names the record; when both are readable they
must agree, unless the bytes tell which one was damaged: a core message's body holds its id twice (the
``CoreMessagePersister`` prefix and ``CoreMessage``'s own encoded headers), and when those two copies agree
the body names the record over a head that says otherwise; a body whose id bytes are all zero (a wiped range)
is no evidence against the head's id.

That is enough when the id is one the journal deleted and holds no live record of: an ADD or UPDATE of a
record deleted since changes nothing the broker delivers, whatever its body held (the DELETE removes the
record and every update with it: ``JournalImpl.load``). Otherwise what it held is unknown. The id is trusted
only so: an id that a damaged byte changed would have to land on another deleted id to be read as harmless.
"""
from __future__ import annotations

import struct

from amqtool.engines.artemis.evidence import Rebuilt
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import decode_persisted_message
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_WITH_ID = (11, 12, 13, 14, 15, 16)  # ADD, UPDATE, their transactional forms, DELETE_TX, DELETE
_TX = (13, 14, 15)


def partial_record(buf: bytes, base: int, first: int, end: int, tag: int, version: int) -> Rebuilt | None:
    """The record the damaged bytes ``[first, end)`` held (``buf`` holds the file's bytes from ``base``), read
    from its intact head when its trailing size word counts exactly ``end - first``: a :class:`Rebuilt` with
    type, ids and the user record type byte as they read (``wrong``: what could not be read), or None."""
    s, e = first - base, end - base
    if s < 0 or e > len(buf) or e - s < 4:
        return None
    t = buf[s]
    if t not in _WITH_ID or e - s < fixed_size(t, version):
        return None
    if struct.unpack_from(">i", buf, e - 4)[0] != e - s:
        return None
    if struct.unpack_from(">i", buf, s + 1)[0] != tag:
        return _message_by_body(buf, s, e, t, version, first, end)
    p = s + 5 + (1 if version >= 2 else 0)
    tx_id = -1
    if t in _TX:
        tx_id = struct.unpack_from(">q", buf, p)[0]
        p += 8
    rid = struct.unpack_from(">q", buf, p)[0]
    utype = buf[p + 12] if t in (11, 12, 13, 14) and p + 12 < e - 4 else 0
    by_body = _message_by_body(buf, s, e, t, version, first, end)
    if by_body is not None and by_body.id != rid:
        # the head and the body disagree on whose record this was: one of them was damaged
        if _body_names_itself(buf, s, e, t, version):
            # the body's two copies of the id agree: the head's id is the damaged one
            return Rebuilt(t, first, end - first, tx_id, by_body.id, by_body.user_type, b"", "head id")
        if not _id_bytes_zero(buf, s, t, version):
            return None  # nothing tells which: nothing is told
        # the body's id bytes are all zero (wiped): no evidence against the head's id
    return Rebuilt(t, first, end - first, tx_id, rid, utype, b"", "fields after its id")


def _message_by_body(buf: bytes, s: int, e: int, t: int, version: int, first: int, end: int) -> Rebuilt | None:
    """An ADD (or ADD_TX) whose head is damaged but whose body, where the record's layout puts it, decodes as a
    persisted message: every persister writes the message's id first, and ``storeMessage`` adds the record
    under that id, so the body names the record."""
    if t not in (11, 13):
        return None
    at = s + fixed_size(t, version) - 4
    body = bytearray(buf[at:e - 4])
    if not body:
        return None
    # the persister byte may be the last one a damaged head took: then the one persister it decodes under
    ids = set()
    for p in ([body[0]] if body[0] in _PERSISTERS else _PERSISTERS):
        body[0] = p
        try:
            mid = getattr(decode_persisted_message(bytes(body)), "message_id", None)
        except FormatError:
            continue
        if mid is not None:
            ids.add(mid)
    if len(ids) != 1:
        return None
    return Rebuilt(t, first, end - first, -1, ids.pop(), R.ADD_MESSAGE_PROTOCOL, b"", "head")


def _body_names_itself(buf: bytes, s: int, e: int, t: int, version: int) -> bool:
    """Whether the body of the ADD at ``s`` is a core message whose two copies of its id agree: the
    ``CoreMessagePersister`` prefix and the message's own encoded headers (``CoreMessage`` writes its messageID
    again there). Two intact copies that agree name the record whatever its head says."""
    at = s + fixed_size(t, version) - 4
    body = bytearray(buf[at:e - 4])
    if not body or body[0] in _PERSISTERS and body[0] != _CORE:
        return False
    body[0] = _CORE  # the persister byte may be the last one a damaged head took (as in _message_by_body)
    try:
        m = decode_persisted_message(bytes(body))
    except FormatError:
        return False
    headers = getattr(m, "headers", None)
    return headers is not None and getattr(headers, "message_id", None) == m.message_id


def _id_bytes_zero(buf: bytes, s: int, t: int, version: int) -> bool:
    """Whether the 8 bytes where the body of the ADD at ``s`` holds its message id (after the persister byte)
    are all zero: a wiped range, which says nothing of whose record it was."""
    at = s + fixed_size(t, version) - 4 + 1
    return len(buf) >= at + 8 and not any(buf[at:at + 8])


_CORE = 1  # CoreMessagePersister's id
_PERSISTERS = (1, 2, 3, 5)  # core, AMQP (and its v2, v3): the persisters whose body starts with the message id


def of_deleted_record(rec: Rebuilt, deleted: set, live: set) -> bool:
    """Whether ``rec`` (a :func:`partial_record`) is an ADD or UPDATE of an id the journal deleted (``deleted``:
    ids of its DELETE records) and holds no live record of (``live``): its loss changes nothing."""
    return rec.type in (11, 12, 13, 14) and rec.id in deleted and rec.id not in live
