"""A reference moved onto a message of another address (issue 25): that message is delivered where it was never
sent.

``PostOfficeImpl.route`` routes a message to the queues bound to its address (or to addresses matching it:
wildcards, diverts) and ``storeReference`` writes one ADD_REF per durable queue; ``storeAcknowledge`` writes the
ACKNOWLEDGE_REF of that pair later. Artemis keeps no record checksum, so one damaged byte in the message id of
an acknowledged reference leaves two traces the broker reads without complaint:

* the acknowledgement of (owner, queue) stands without its reference, which ``loadMessageJournal`` drops to no
  effect (the owner was acknowledged there anyway), and
* an ADD_REF of (other message, queue), where the other message's remaining references name only queues of
  addresses that no message of the store is routed together with the queue's: it was never routed there, and
  the broker delivers it there all the same (``loadMessageJournal`` puts every ADD_REF on its queue).

One damaged id explains both; with exactly one such owner one damaged byte away, the broker hands out a message
on a queue it never reached -- when the reference comes after the message in the load (one read before it is
dropped). A message whose only reference is the damaged one has no other address to tell by,
and a pair whose message is already routed to the queue is ``Evidence.moved_refs``'s (a doubled reference).
"""
from __future__ import annotations

from amqtool.engines.artemis.ref_order import ref_after_add
from amqtool.formats.damage import byte_variants


def strayed_refs(ev) -> list[tuple[int, int, int]]:
    """(message, queue, the acknowledged message whose reference it was) for references of the
    :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev`` moved onto a message of another address (see the
    module docstring)."""
    bare = [(o, q) for o, q in ev.acked if o in ev.messages and q not in ev.refs.get(o, ())]
    if not bare:
        return []
    address = ev.queue_address
    out = []
    for o, q in sorted(bare):
        aq = address.get(q)
        if aq is None:
            continue
        strays = [m for m in byte_variants(o)
                  if q in ev.refs.get(m, ()) and m in ev.messages and (m, q) not in ev.acked
                  and _never_routed(ev, m, q)]
        if len(strays) == 1 and _after_its_message(ev, strays[0], q):
            out.append((strays[0], q, o))
    return out


def _after_its_message(ev, m: int, q: int) -> bool:
    """Whether the live reference of (message ``m``, queue ``q``) comes after ``m``'s ADD in the load's list
    (ref_order.py): ``loadMessageJournal`` drops a reference read before its message, so one moved onto a message
    stored after it changes nothing (demo hold-out d23, field sweep seed 9628: 4344's reference in a transaction
    committed before 4348 was stored, moved onto 4348, read CRITICAL with nothing lost)."""
    return ev._messages is not None and ref_after_add(ev._messages, m, q)


def _never_routed(ev, m: int, q: int) -> bool:
    """Whether message ``m``'s references other than the one on queue ``q`` name queues of addresses only that
    no other message of the store is routed together with ``q``'s address (``m``'s own reference on ``q`` is
    the one in doubt, so it vouches for nothing)."""
    address = ev.queue_address
    aq = address[q]
    mine = {address[x] for x in ev.refs.get(m, ()) if x != q and x in address}
    if not mine or aq in mine:
        return False
    for x, qs in ev.refs.items():
        if x != m and x in ev.messages:
            addrs = {address[y] for y in qs if y in address}
            if aq in addrs and addrs & mine:
                return False
    return True
