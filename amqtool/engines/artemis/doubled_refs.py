"""An acknowledgement read as a second reference (``verify``'s ``ack-retyped``).

The broker routes a message to a queue once (``PostOfficeImpl.route`` adds one reference per queue; the
journal gets one ADD_REF update of the message per durable queue, ``storeReference``), and acknowledges that
reference once (one ACKNOWLEDGE_REF, ``storeAcknowledge``, whose body is the same 8-byte queue id as the
reference's). The user record types differ in one bit (32, 33) and there is no checksum, so a damaged type
byte turns an acknowledgement into a second reference of the same (message, queue): the load then finds the
message referenced there and not acknowledged (``loadMessageJournal`` keeps one reference per queue and
message), and the broker delivers the acknowledged message again.

A second reference of (message, queue) has other readings, each of which the store's records show, and which
are judged first or left alone:

* another message's reference whose message id was damaged: that message is live and lacks the reference
  (``Evidence.moved_refs``: CRITICAL ``ref-moved``), or it was deleted since (its DELETE no longer takes the
  damaged copy: nothing changes) -- so a deleted message one damaged byte from the message leaves the
  reading unproven, unless its own records show it cannot have written that reference: its ADD written after
  the second reference, or its DELETE before it (``write_order.not_owners_at``; not in a compacted journal), or
  its references left in the files name that queue already or only queues its address is never routed with
  (``deleted_refs.never_on``);
* the message's reference of another queue whose queue id was damaged (``Evidence.requeued_refs``);
* a delivery count (UPDATE_DELIVERY_COUNT, 34, one bit from 32) read as a reference: its body is 12 bytes
  (queue id and count), a reference's 8, and only the count is lost -- so every reference of the pair must be
  8 bytes long.

What is left is the acknowledgement, retyped: CRITICAL, the acknowledged message comes back on that queue.
"""
from __future__ import annotations


def acks_read_as_refs(ev) -> list[tuple[int, int]]:
    """(message, queue) pairs of the :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev`` whose second
    reference is an acknowledgement with its user record type damaged (see the module docstring). Reads the
    references' bodies, and the journal's deletes, only when a pair is doubled (damage)."""
    from amqtool.engines.artemis.evidence import _byte_neighbours, ref_records
    from amqtool.engines.artemis.deleted_refs import never_on
    from amqtool.engines.artemis.write_order import not_owners_at
    from amqtool.formats.damage import bit_flips

    if not ev.double_refs:
        return []
    pairs = [(m, q) for m, q in ev.double_refs if m in ev.messages and (m, q) not in ev.acked]
    if not pairs:
        return []
    from amqtool.engines.artemis.acked_refs import acked_pair_refs

    explained = ({(m, q) for m, q, _ in ev.moved_refs()} | {(m, q) for m, q, _ in ev.requeued_refs()}
                 | set(acked_pair_refs(ev)))
    pairs = [p for p in pairs if p not in explained]
    if not pairs:
        return []
    if ev._messages is None:
        return []
    # the references' body lengths, and where the pair's last reference was written
    sizes, second = ref_records(ev._messages, {m for m, _ in pairs})
    out = []
    for m, q in pairs:
        if sizes.get((m, q)) != {8}:
            continue  # a delivery count read as a reference (12 bytes): only the count is lost
        # a deleted message one damaged byte away could own it (its DELETE no longer takes the damaged copy:
        # nothing changes) -- unless its own records show it wrote nothing there (write_order.not_owners_at)
        gone = {x for x in bit_flips(m) if ev._deleted_later(x)}
        gone.update(_byte_neighbours(m, (ev._deleted or set()) | ev.deleted_unknown))
        if gone and (m, q) in second:
            gone -= not_owners_at(ev, second[(m, q)], gone)
        if gone:
            gone -= never_on(ev, q, gone)
        if gone:
            continue
        out.append((m, q))
    return out


def ack_retyped_finding(ev, where: str, listed: int = 20):
    """CRITICAL ``ack-retyped`` naming the pairs of :func:`acks_read_as_refs`, or None."""
    from amqtool.errors import Finding, Severity

    pairs = acks_read_as_refs(ev)
    if not pairs:
        return None
    shown = ", ".join(f"message {m} on queue {q}" for m, q in pairs[:listed])
    return Finding(
        Severity.CRITICAL, "ack-retyped",
        f"{len(pairs)} (message, queue) pair(s) have two reference records and no acknowledgement, and no other "
        f"message or queue one damaged byte away explains the second: the broker routes a message to a queue "
        f"once, so it is the acknowledgement with its user record type damaged (33 read as 32), and the broker "
        f"delivers the acknowledged message there again: {shown}", where, None,
        {"count": len(pairs), "messageIds": [m for m, _ in pairs[:100]]})
