"""Live messages acknowledged on a queue that hold no reference anywhere (issue 25).

The broker writes a durable message's references right after its ADD (``PostOfficeImpl.processRoute``:
``storeMessage``, then ``storeReference`` per queue) and acknowledges a reference later, with an ACKNOWLEDGE_REF
update of the message (``storeAcknowledge``): a queue acknowledges only a reference it holds, so every
acknowledgement stands after the reference it consumed. When the last reference is acknowledged, the broker
deletes the message: a DELETE from the same call (``QueueImpl.postAcknowledge``, after the COMMIT for a
transaction's), or, if it stopped before, from the next start's load, which deletes a message no reference holds
before anything new is written.

So a message the load holds (no DELETE) that a queue acknowledged, with no reference left anywhere, lost its
references to damage (zeros laid over whole records, at an older file's end, read as that file's fill; or bytes
the load skips). And as the acknowledgements stand after those references, the DELETE would stand after the last
acknowledgement, outside one damaged run that spared it: when live records follow that acknowledgement, the
broker wrote none, so some queue still held the message. The broker loads it with no reference and deletes it at
start: that queue loses it. Left out: an acknowledgement that is the journal's last live record, where a crash may
have cut the DELETE that followed it. (A crash between the two while other threads still wrote records is the one
reading this takes for damage: the DELETE is appended by the acknowledging call itself, right after.)
"""
from __future__ import annotations

from amqtool.formats.artemis.userrecords import JournalRecordIds as R


def last_acks(result, ids) -> dict[int, tuple[int, bool]]:
    """Message id of ``ids`` -> (file index of its first live acknowledgement, whether live records follow its
    last in the load's list), for those with a live ACKNOWLEDGE_REF in the load ``result``."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    n = 0
    for n, r in enumerate(result.live, 1):
        if r.id in ids and r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF:
            first[r.id] = min(first.get(r.id, r.file_index), r.file_index)
            last[r.id] = n
    return {m: (first[m], last[m] < n) for m in first}


def acked_refless(evidence) -> list[int]:
    """The live messages acknowledged on some queue, with no reference and no DELETE anywhere, whose last
    acknowledgement live records follow (module contract: a queue still held each, and the broker deletes it at
    start)."""
    result = evidence._messages
    if result is None:
        return []
    ids = {m for m, _ in evidence.acked if m in evidence.messages and not evidence.refs.get(m)
           and m not in evidence.deleted_unknown}
    if not ids:
        return []
    return sorted(m for m, (_, followed) in last_acks(result, ids).items() if followed)
