"""A DUPLICATE_ID record whose user record type byte was damaged (``verify``'s ``duplicate-id-retyped``).

``AbstractJournalStorageManager.storeDuplicateID`` writes a duplicate-detection entry as an ADD (ADD_TX in a
transaction) of user record type DUPLICATE_ID (37) whose body is ``DuplicateIDEncoding``: the address as a
SimpleString (an i32 byte length, then the bytes) and the id (an i32 length, then the bytes), nothing after.
``loadMessageJournal`` loads each live one into its address's duplicate-id cache. There is no checksum: one
flipped bit of the type byte makes it another type -- SET_SCHEDULED_DELIVERY_TIME (36) or ACKNOWLEDGE_REF (33),
which the broker writes only as updates, ACKNOWLEDGE_CURSOR (39), ADD_MESSAGE_PROTOCOL (45), ADD_LARGE_MESSAGE
... -- which the load then reads as that type and drops (no message of that id to update, no queue of the
cursor) or refuses: the cache entry is lost, and the broker accepts again a message it would have rejected as
a duplicate. A damaged byte of any value reaches ADD_REF (32) and UPDATE_DELIVERY_COUNT (34) too, updates the
broker never writes as an ADD, which the load drops likewise (no message of that id).

A live add of one of those types whose body is exactly a DuplicateIDEncoding (both lengths positive, the
address's even as a SimpleString's UTF-16 is, and they add up to the body's size: what a body of another type
matches only by chance) is read so.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.body_reads import duplicate_id_value
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

# the types one bit from DUPLICATE_ID that loadMessageJournal's switch knows (the others make it throw "Invalid
# record type": judged as unknown types), and two a damaged byte of any value reaches, which the load drops for
# want of a message of the record's id: ADD_REF ("Cannot find message") and UPDATE_DELIVERY_COUNT (its 12-byte
# decode names no queue holding one; campaign sweep seed 9546: 37 -> 32 and 37 -> 34 were false OKs)
_NEIGHBOURS = frozenset({R.DUPLICATE_ID ^ (1 << k) for k in range(8)}) & frozenset(
    {R.ACKNOWLEDGE_REF, R.SET_SCHEDULED_DELIVERY_TIME, R.ACKNOWLEDGE_CURSOR, R.ADD_MESSAGE_PROTOCOL, 53}) | frozenset(
    {R.ADD_REF, R.UPDATE_DELIVERY_COUNT})


def _whole(body: bytes) -> bool:
    value = duplicate_id_value(body)
    if value is None:
        return False
    address, dup = value
    return bool(address) and bool(dup) and len(address) % 2 == 0 and 8 + len(address) + len(dup) == len(body)


def retyped_duplicate_ids(result) -> list:
    """The live adds of the message journal load ``result`` that are DUPLICATE_ID records with their type byte
    damaged (module docstring)."""
    if result is None:
        return []
    live = result.live
    find = getattr(live, "indexes_of_types", None)
    found = ([live[i] for i in find(_NEIGHBOURS, adds_only=True)] if find is not None
             else [r for r in live if r.user_record_type in _NEIGHBOURS])
    return [r for r in found if not r.is_update and r.body_len >= 10 and _whole(result.body(r))]


def retyped_duplicate_id_finding(result, have_bindings: bool) -> Finding | None:
    """CRITICAL ``duplicate-id-retyped`` for :func:`retyped_duplicate_ids`, in a broker's store (its bindings
    journal beside), or None."""
    found = retyped_duplicate_ids(result) if have_bindings else []
    if not found:
        return None
    r = found[0]
    shown = ", ".join(f"record {x.id} (type {x.user_record_type})" for x in found[:20])
    return Finding(
        Severity.CRITICAL, "duplicate-id-retyped",
        f"{len(found)} live record(s) whose body is a duplicate-detection entry (DuplicateIDEncoding) carry a user "
        f"record type other than DUPLICATE_ID (37): the type byte was damaged, the broker does not load the entry "
        f"into its duplicate-id cache and accepts again a message it would have rejected as a duplicate: {shown}",
        str(result.files[r.file_index].path), r.body_offset,
        {"count": len(found), "recordIds": [x.id for x in found[:100]]})
