"""Message records whose user record type byte was damaged (``verify``'s ``message-record-retyped``).

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
body still decodes as a message under a type one damaged bit away. A reference whose id was damaged onto the
id of another record leaves that record's body as it was (a counter's 20 bytes do not decode as a message),
so it is not read so.
"""
from __future__ import annotations

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
    that carry live message updates, and whose body decodes as the message type one bit away, with the queues
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
        for was in MESSAGE_TYPES:
            x = was ^ r.user_record_type
            if x & (x - 1):
                continue  # more than one bit away
            try:
                decode_user_record(was, result.body(r), record_id=r.id)
            except FormatError:
                continue
            out.append(Retyped(r, was, queues))
            break
    return out
