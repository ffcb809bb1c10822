"""Message records whose header was damaged, so that the broker no longer loads them as the message they hold.

**Their user record type** (``verify``'s ``message-record-retyped``).

A message record (ADD of ADD_MESSAGE_PROTOCOL 45, ADD_MESSAGE 31 or ADD_LARGE_MESSAGE 30) whose user record
type byte was changed still loads as a live ADD of the same id, so the journal shows no damage: the message's
references, acknowledgements and delivery counts are updates of that id, and an update of an id with a live
add is what the broker writes. But ``AbstractJournalStorageManager.loadMessageJournal`` dispatches on the user
record type: read as (say) a page-counter increment, the record is never a message, and every ADD_REF of its
id then finds no message ("Cannot find message", the reference is dropped): the message is lost on every
queue it was still on.

The evidence is the pair, which the broker never writes otherwise: the message-journal updates the broker
writes only for a message (``storeReference``, ``storeAcknowledge``, ``updateDeliveryCount``,
``updateScheduledDeliveryTime``) hang on an ADD whose user record type is no message type -- and the ADD's
body still decodes as a message under a type one damaged bit away, or as a protocol message naming the record's
own id (the damaged byte may hold any value). A reference whose id was damaged onto the
id of another record leaves that record's body as it was (a counter's 20 bytes do not decode as a message),
so it is not read so.

**Their record type or id** (``message-header-damaged``). A message record's body keeps the message's own id
(every persister writes ``getMessageID()`` first, and ``storeMessage`` adds the record under that same id), so
a message whose references are live but which has no live record of its own may still be found: a record whose
body is that message, read under another record type (an EVENT, 10, which ``JournalImpl.load`` skips) or under
another id (whose DELETE, or nothing, then decides its fate). The broker drops the references ("Cannot find
message"): the message is lost on every queue still holding it.
"""
from __future__ import annotations

from amqtool.formats.artemis.message import decode_persisted_message
from amqtool.formats.artemis.records import fixed_size

from dataclasses import dataclass

from amqtool.errors import FormatError
from amqtool.formats.artemis.userrecords import JournalRecordIds as R, decode_user_record

MESSAGE_TYPES = (R.ADD_MESSAGE_PROTOCOL, R.ADD_MESSAGE, R.ADD_LARGE_MESSAGE)
# the updates the broker writes of a message id only (AbstractJournalStorageManager)
_MESSAGE_UPDATES = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME})


@dataclass(frozen=True)
class Retyped:
    record: object  # the live ADD (load.LiveRecord) whose type was damaged
    was: int  # the message type its body decodes as, one bit from its type
    queues: tuple[int, ...]  # the queues still holding the message (references without an acknowledgement)


def retyped_messages(result, live_queues) -> list[Retyped]:
    """The live ADDs of the messages journal loaded as ``result`` whose user record type is no message type,
    that carry live message updates, and whose body decodes as the message type one bit away (or as a protocol
    message of their own id, whatever the type byte now holds), with the queues
    ``live_queues(id)`` says still hold them (only those with one: a message every queue acknowledged is lost to
    no one)."""
    if result is None:
        return []
    updated = {r.id for r in result.live if r.is_update and r.user_record_type in _MESSAGE_UPDATES}
    if not updated:
        return []
    out = []
    for r in result.live:
        if r.is_update or r.id not in updated or r.user_record_type in MESSAGE_TYPES:
            continue
        queues = tuple(sorted(live_queues(r.id)))
        if not queues:
            continue
        body = None
        for was in MESSAGE_TYPES:
            x = was ^ r.user_record_type
            if x & (x - 1):
                # more than one bit away (the byte damaged to another value: ADD_MESSAGE_PROTOCOL 45 read as
                # ACK_RETRY 53, campaign sweep seed 9144): only a protocol message whose body names this record's
                # id, as storeMessage writes it (other bodies, a page transaction's, may decode as a legacy one)
                body = result.body(r) if body is None else body
                if was != R.ADD_MESSAGE_PROTOCOL or len(body) < 9 or \
                        int.from_bytes(body[1:9], "big", signed=True) != r.id:
                    continue
            try:
                decode_user_record(was, result.body(r), record_id=r.id)
            except FormatError:
                continue
            out.append(Retyped(r, was, queues))
            break
    return out


@dataclass(frozen=True)
class Misread:
    message_id: int  # the id the record's body gives, whose references are live
    record_type: int  # as the record now reads
    record_id: int
    file_index: int
    offset: int
    queues: tuple[int, ...]


# the record types whose layout carries an id, a user record type and a body as an ADD's does
_ADD_LIKE = (10, 11, 13)


def misread_messages(opened, orphans: dict[int, set[int]]) -> list[Misread]:
    """The records of the journal ``opened`` (a rescan in bounded windows, done only when ``orphans`` is not
    empty) that hold the message of an id in ``orphans`` (message id -> queues still holding it, for ids with
    references and no live message record) under another record type or id."""
    if not orphans:
        return []
    out = []
    for fi, jf in enumerate(opened.files):
        fixed = {t: fixed_size(t, jf.version) - 4 for t in _ADD_LIKE}
        for base, data, records, _ in opened.scan_windows(fi):
            for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
                if t not in _ADD_LIKE or utype != R.ADD_MESSAGE_PROTOCOL or body_len < 9:
                    continue
                at = off + fixed[t]
                mid = int.from_bytes(data[at + 1:at + 9], "big", signed=True)
                if mid not in orphans or (t != 10 and rid == mid):
                    continue
                try:
                    if getattr(decode_persisted_message(bytes(data[at:at + body_len])), "message_id", None) != mid:
                        continue
                except FormatError:
                    continue
                out.append(Misread(mid, t, rid, fi, base + off, tuple(sorted(orphans[mid]))))
    return out
