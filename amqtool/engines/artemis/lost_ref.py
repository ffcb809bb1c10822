"""A reference lost at a damaged end, named by the damaged record's own header (issue 25).

The broker routes a durable message by writing its ADD_MESSAGE and then one ADD_REF update per queue
(``JournalStorageManager.storeMessage`` / ``storeReference``); a queue the load finds no reference for does
not hold the message. A reference written at the end of a file the broker moved on from, and damaged since
(its checksize flipped, a zeroed range past its header), leaves the message live but off that queue. No
window of new ids shows it: a reference carries its message's id. Its header often survives, as
:mod:`~amqtool.engines.artemis.lost_ack` reads it: record type, this file's tag, the message id, the user
record type and, in its 8-byte body, the queue id. When that header is

* an ADD_REF (or, in a transaction whose COMMIT survives in a later file, its transactional form) of a message
  the load still holds,
* naming a queue the bindings journal holds, on which the message has no reference left and no surviving
  acknowledgement (an acknowledged reference was consumed: losing it changes nothing) -- or, its queue id
  damaged (zeroed in part, or its end gone), the one queue of the message's address left so, or any queue when
  every other reference of the message was acknowledged (the broker deletes a message once its last
  reference is; a live one with none left pending lost the reference that kept it),

the broker loads the message without that queue: a proven loss ("lost").
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.engines.artemis.lost_ack import _UPDATE, _UPDATE_TX, _committed_after, consuming_head
from amqtool.formats.artemis.userrecords import JournalRecordIds as R


@dataclass(frozen=True)
class LostRef:
    """The reference whose header survives at a damaged end: the message, the queue, and the transaction
    (-1: none) whose COMMIT survives."""

    message: int
    queue: int | None  # None: its queue id damaged, and the message has no other reference left unacknowledged
    tx_id: int = -1

    def describe(self) -> str:
        what = (f"a reference of message {self.message} to queue {self.queue}" if self.queue is not None else
                f"a reference of message {self.message} to a queue its damaged body no longer names")
        if self.tx_id >= 0:
            what += f" in transaction {self.tx_id}, whose COMMIT survives"
        return what


def lost_ref(opened, index: int, first: int, evidence) -> LostRef | None:
    """The reference of a message the load still delivers, to a queue that no longer holds it, whose header
    survives at ``first``, the start of the damaged end of message-journal file ``index`` (see the module's
    contract), else None."""
    if evidence is None or opened.journal.kind != "messages" or not evidence.have_bindings:
        return None
    head = consuming_head(opened, index, first)
    if head is None:
        return None
    t, tx, mid, utype, queue = head
    if t not in (_UPDATE, _UPDATE_TX) or utype != R.ADD_REF or mid not in evidence.messages:
        return None
    if queue not in evidence.queues:
        queue = _damaged_queue(evidence, mid, queue)
        if queue is None and any((mid, q) not in evidence.acked for q in evidence.refs.get(mid, ())):
            return None  # which queue cannot be told, and the message is still on one: it may be that one
    if queue is not None and (queue in evidence.refs.get(mid, ()) or (mid, queue) in evidence.acked):
        return None
    if tx >= 0 and not _committed_after(opened, index, tx):
        return None  # an open or rolled-back transaction's: discarded with it anyway
    return LostRef(mid, queue, tx)


def _damaged_queue(evidence, mid: int, read: int | None) -> int | None:
    """The queue a reference of message ``mid`` whose queue id the damage took (``read``: what its body holds
    now, None when its end is gone) was for: the one queue of the message's address (its surviving references'
    address) with neither a reference of the message nor an acknowledgement -- whose id ``read`` still shows,
    byte for byte, where the damage did not zero it. None when no such queue, or more than one, is left."""
    addresses = {evidence.queue_address.get(q) for q in evidence.refs.get(mid, ())} - {None}
    if len(addresses) != 1:
        return None
    held = evidence.refs.get(mid, set())
    left = [q for q, a in evidence.queue_address.items()
            if a in addresses and q not in held and (mid, q) not in evidence.acked
            and (read is None or _zeroed_from(read, q))]
    return left[0] if len(left) == 1 else None


def _zeroed_from(read: int, queue: int) -> bool:
    """Whether the 8 bytes of ``read`` are those of ``queue`` with some of them zeroed."""
    a, b = read.to_bytes(8, "big", signed=True), queue.to_bytes(8, "big", signed=True)
    return a != b and all(x == y or x == 0 for x, y in zip(a, b))
