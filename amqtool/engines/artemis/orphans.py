"""References the broker's load cannot attach to a message: evidence of a lost message (issue 25).

``AbstractJournalStorageManager.loadMessageJournal`` walks the committed records in load order and keeps
messages in a map as their ADD records come (``ADD_MESSAGE_PROTOCOL``, ``ADD_LARGE_MESSAGE``); an
``ADD_REF`` whose message is not in that map yet is logged (``cannotFindMessage``) and dropped, and so is the
delivery count of a reference that is not there. So a reference with no message record before it, and no
acknowledgement, is a message a queue still had to consume and the broker will not deliver: its ADD record
is gone (a deleted row, a damaged id) or comes after it (a database row whose ``seq`` sorts it last).

The walk does not look at whether a record was appended as an ADD or an UPDATE: ``JDBCJournalLoaderCallback``
puts both in the committed list (``addRecord``/``updateRecord``), and the switch on the user record type
decodes a message from either.
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.engines.artemis.load import LoadResult, LiveRecord

ADD_LARGE_MESSAGE = 30
ADD_MESSAGE_PROTOCOL = 45
ADD_MESSAGE_LEGACY = 31
ADD_REF = 32
ACKNOWLEDGE_REF = 33
MESSAGE_TYPES = (ADD_MESSAGE_LEGACY, ADD_LARGE_MESSAGE, ADD_MESSAGE_PROTOCOL)


@dataclass
class OrphanRef:
    """A live ADD_REF the load cannot attach: ``later`` when its message's record comes after it."""

    message_id: int
    queue_id: int
    record: LiveRecord
    later: bool


def orphan_refs(result: LoadResult | None) -> list[OrphanRef]:
    """The live, unacknowledged ADD_REFs of ``result`` (a message journal's load) whose message has no live
    record before them, in load order (see the module docstring)."""
    if result is None:
        return []
    seen: set[int] = set()
    candidates: list[LiveRecord] = []
    for rec in result.live:
        t = rec[1]
        if t in MESSAGE_TYPES:  # an UPDATE row of a message type is a message too (see the module docstring)
            seen.add(rec[0])
        elif t == ADD_REF and rec[0] not in seen:
            candidates.append(rec)
    if not candidates:
        return []
    ids = {rec[0] for rec in candidates}
    # the acknowledgements of those messages (a consumed message lost nothing) and whether their record
    # comes later
    acked: set[tuple[int, int]] = set()
    later: set[int] = set()
    for rec in result.live:
        if rec[0] not in ids:
            continue
        if rec[1] == ACKNOWLEDGE_REF:
            acked.add((rec[0], _queue_id(result, rec)))
        elif rec[1] in MESSAGE_TYPES:
            later.add(rec[0])
    out = []
    for rec in candidates:
        q = _queue_id(result, rec)
        if (rec[0], q) not in acked:
            out.append(OrphanRef(rec[0], q, rec, rec[0] in later))
    return out


def _queue_id(result: LoadResult, rec: LiveRecord) -> int:
    body = result.body(rec)  # RefEncoding: one i64 queue id
    return int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else -1
