"""An acknowledgement whose message id is a transaction's id (``verify``'s ``ack-id-damaged``).

Artemis issues message ids and transaction ids from one counter (``BatchingIDGenerator``), so no message has a
transaction's id, and an ACKNOWLEDGE_REF update naming one acknowledges nothing. The load keeps it as an update
whose record is gone, the routine trace of a reclaimed ADD (``update-unknown-id``); but a transaction id cannot
be a reclaimed message's: the acknowledgement's own id was damaged, one byte of it (a flip or a damaged byte).
The message it acknowledged lost that acknowledgement. Whether the broker delivers it again depends on whether
that message was deleted since: the broker deletes a message right after the acknowledgement of its last
reference (``storeAcknowledge`` then ``deleteMessage``), which may be this one or a later one on another queue.
So the loss is proven when, of the messages one damaged byte from the acknowledgement's id:

* none was deleted after the acknowledgement (in load order: no message is acknowledged once deleted) whose
  references could include the acknowledgement's queue (a reference there, or none left to tell: its ADD
  reclaimed) while no other acknowledgement of it on that queue is left (the acknowledged one lost its only
  acknowledgement there), and
* at least one still holds a reference on that queue with no acknowledgement there: the acknowledged one is
  among them, live again, and the broker delivers it a second time (brought back).
"""
from __future__ import annotations

from amqtool import native
from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.formats.damage import one_byte_apart

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_TX = (13, 14, 15, 17, 18, 19)
_UPDATES = (12, 14)
_DELETES = (15, 16)


def findings(result, evidence, max_candidates: int = 8) -> list[Finding]:
    """One CRITICAL ``ack-id-damaged`` finding per acknowledgement of the messages journal's load ``result``
    whose id is a transaction's and whose message the store proves live again (see the module). Rescans the
    files only when the load leaves acknowledgements without their message (at most ``max_candidates`` ids)."""
    from amqtool.formats.damage import ByteNeighbours

    if result is None or evidence.bare:
        return []
    messages = {r.id for r in result.live if not r.is_update and r.user_record_type in _MESSAGES}
    candidates = {r.id for r in result.live if r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF} - messages
    if not candidates or len(candidates) > max_candidates:
        return []
    opened = result.opened
    near = ByteNeighbours(candidates)
    tx_ids: set[int] = set()
    acks: list[tuple[int, int, int, int]] = []  # (id, queue, file, offset) of each acknowledgement of a candidate
    refs: dict[int, set] = {}  # id one byte from a candidate -> queues of its references (live or dead)
    acked: dict[int, set] = {}  # ... -> queues of its acknowledgements
    deleted: dict[int, tuple[int, int]] = {}  # ... that a DELETE names -> where its last DELETE stands
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if t in _TX:
                tx_ids.add(tx)
            if t in _UPDATES and utype in (R.ADD_REF, R.ACKNOWLEDGE_REF) and body_len >= 8:
                if rid in candidates or near.of(rid):
                    at = off + fixed_size(t, jf.version) - 4
                    queue = int.from_bytes(data[at:at + 8], "big", signed=True)
                    if rid in candidates and utype == R.ACKNOWLEDGE_REF:
                        acks.append((rid, queue, fi, off))
                    elif rid not in candidates:
                        (refs if utype == R.ADD_REF else acked).setdefault(rid, set()).add(queue)
            elif t in _DELETES and near.of(rid):
                deleted[rid] = (fi, off)
        del data
    out = []
    for rid, queue, fi, off in acks:
        if rid not in tx_ids:
            continue
        around = [m for m in set(refs) | set(deleted) if one_byte_apart(m, rid)]
        if any(deleted.get(m, (-1, -1)) > (fi, off) and (queue in refs.get(m, ()) or not refs.get(m))
               and queue not in acked.get(m, ()) for m in around):
            continue  # the acknowledged message may be one deleted since: nothing comes back
        back = sorted(m for m in around if m in messages and queue in refs.get(m, ())
                      and queue not in acked.get(m, ()))
        if not back:
            continue
        named = (f"message {back[0]}, one damaged byte away, is" if len(back) == 1 else
                 f"of messages {', '.join(map(str, back[:5]))}{' ...' if len(back) > 5 else ''}, one damaged byte "
                 f"away, the one it acknowledged is")
        out.append(Finding(
            Severity.CRITICAL, "ack-id-damaged",
            f"an acknowledgement on queue {queue} names {rid}, a transaction's id, which no message has (one "
            f"counter issues both): its id was damaged, and {named} left on that queue with no acknowledgement "
            f"there and no DELETE: the broker delivers it again", str(opened.files[fi].path), off,
            {"id": rid, "queue": queue, "messageIds": back}))
    return out
