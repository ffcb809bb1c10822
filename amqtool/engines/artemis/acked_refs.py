"""An acknowledged message's reference that one damaged byte turned into something else (issue 25).

The broker routes a message to a queue once and writes one ADD_REF for it (``PostOfficeImpl.route``,
``storeReference``), then one ACKNOWLEDGE_REF when a consumer acknowledges it there. Artemis keeps no checksum,
so one damaged byte in that reference leaves a record the broker still reads, to no effect when the message
was acknowledged there anyway (``AbstractJournalStorageManager.loadMessageJournal`` drops an acknowledgement
whose reference it does not find, and keeps one reference per message and queue):

* **A doubled reference.** The reference's queue id damaged onto another queue the message is routed to, or
  its message id onto another message routed to that queue: that (message, queue) then has two references,
  and the acknowledged pair none. One damaged field explains both traces -- the second reference and the
  acknowledgement without its reference -- where reading the second reference as another live message's
  (``Evidence.moved_refs``), another queue's (``requeued_refs``) or a retyped acknowledgement
  (``doubled_refs``) leaves the acknowledgement unexplained; so this reading is taken when exactly one
  acknowledged pair one damaged byte away lacks its reference.

A reference whose type byte made it an open transaction's is retyped_tx.py's.
"""
from __future__ import annotations

from amqtool.engines.artemis.ref_order import refs_after_ack
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.damage import one_byte_apart


def acked_pair_refs(ev) -> dict[tuple[int, int], tuple[int, int]]:
    """Doubled (message, queue) -> the acknowledged (message, queue) lacking its reference whose reference it
    is, when exactly one such pair is one damaged byte away (same message and a queue one byte off, or same
    queue and a message one byte off). Computed once per :class:`~amqtool.engines.artemis.evidence.Evidence`."""
    cached = getattr(ev, "_acked_pair_refs", None)
    if cached is not None:
        return cached
    out: dict = {}
    if ev.double_refs:
        bare = [(m, q) for m, q in ev.acked if m in ev.messages and q not in ev.refs.get(m, ())]
        for m, q in ev.double_refs:
            owners = [(am, aq) for am, aq in bare
                      if am == m and one_byte_apart(aq, q) or aq == q and one_byte_apart(am, m)]
            if len(owners) == 1:
                out[(m, q)] = owners[0]
        ev.explained.update(out.values())
    ev._acked_pair_refs = out
    return out


def readded_refs(ev) -> list[tuple[int, int, int]]:
    """(message, queue, the acknowledged message whose reference it was) for the doubled pairs
    :func:`acked_pair_refs` explains whose message was acknowledged on that queue *before* the second reference
    in the load's list: ``loadMessageJournal`` applies the records in that order, so the moved reference puts the
    acknowledged message back on the queue, and the broker delivers it again (demo hold-out d35, field sweep seed
    9628: message 4847's reference on queue 19 damaged to 751, acknowledged there long before: loss, read OK)."""
    pairs = acked_pair_refs(ev)
    if not pairs or ev._messages is None:
        return []
    after = refs_after_ack(ev._messages, {p for p in pairs if p in ev.acked})
    return [(m, q, pairs[m, q][0]) for m, q in sorted(pairs) if (m, q) in after]


def refs_before_their_add(ev, pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Of the acknowledged (message, queue) ``pairs`` lacking their reference, those whose reference survives
    under a damaged message id: an ADD_REF of (id, queue) written before any ADD of that id -- which no broker
    writes (a reference follows its message: ``storeMessage``, then ``storeReference``), so its id was
    damaged -- where the pair's message, added before it, is the one message one flipped bit away that could
    own it (routed to that queue's address, no reference there); with none one bit away, the one such message
    one damaged byte away (several bits of one byte: a random byte). A rescan of
    the messages journal's files, done only for acknowledgements without their reference (damage)."""
    from amqtool import native
    from amqtool.formats.damage import byte_variants

    from amqtool.engines.artemis.write_order import compacted

    opened = ev.opened
    if not pairs or opened is None or ev._messages is None or compacted(ev._messages):
        return set()  # a compacted journal's order is the compactor's (write_order.py)
    added: set[int] = set()
    early: list[tuple[int, int, set[int]]] = []  # (id, queue, ids added before it)
    wanted = {m for m, _ in pairs}
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if t in (11, 13):
                added.add(rid)
            elif t in (12, 14) and utype == 32 and body_len == 8 and rid not in added:
                near = {rid ^ (1 << k) for k in range(63)} & added
                if not near & wanted:
                    near = {c for c in byte_variants(rid) if c in added}
                if near & wanted:
                    start = off + fixed_size(t, jf.version) - 4
                    early.append((rid, int.from_bytes(data[start:start + 8], "big", signed=True), near))
    out = set()
    doubled = set(ev.double_refs)
    for rid, q, near in early:
        if rid in ev.messages and q in ev.live_queues(rid) and (rid, q) not in doubled:
            continue  # the damaged copy routes a live message to q: that message comes back there
        # the messages that could own it: routed to q's address and without a reference there (the broker
        # routes a message to a queue once)
        owners = [m for m in near & ev._routable_to(q) if q not in ev.refs.get(m, ())]
        if len(owners) == 1 and (owners[0], q) in pairs:
            out.add((owners[0], q))
    return out
