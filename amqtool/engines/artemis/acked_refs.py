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
* **An open transaction.** The record type byte damaged from UPDATE (12) to UPDATE_TX (14) or ADD_TX (13)
  (one bit each) makes the record one of a transaction whose id is the message id and which never ends: the
  broker discards it at start (``JournalImpl.load``: a transaction with no COMMIT). The 31-byte reference
  then reads exactly as such a record, with the fields after its id shifted (its id holds the body size, user
  record type and the first bytes of the queue id; its user record type is the queue id's last byte). Read
  with its type byte set back, it is the reference, judged by what losing it costs
  (``Evidence.effect_of_loss``: nothing when the message was acknowledged there).
"""
from __future__ import annotations

from amqtool.engines.artemis.evidence import (
    _USER_TYPES, HARMLESS, LOSS, Rebuilt, _byte_neighbours, _parse, _plausible)
from amqtool.formats.artemis.records import fixed_size

def _near(a: int, b: int) -> bool:
    return bool(_byte_neighbours(a, (b,)))


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
                      if am == m and _near(aq, q) or aq == q and _near(am, m)]
            if len(owners) == 1:
                out[(m, q)] = owners[0]
        ev.explained.update(out.values())
    ev._acked_pair_refs = out
    return out


def retyped_open_updates(result, ev) -> list[tuple[object, object, str]]:
    """(incomplete transaction, the record it is once its type byte is set back, what losing that costs) for
    the transactions the load leaves open whose one record is not one the broker writes (a user record type
    it has no such, or an id past every id issued) and reads as an UPDATE or ADD with only its type damaged.
    Judging it records an acknowledged reference in ``ev.explained`` (see the module docstring)."""
    out = []
    bound = (result.max_id + 1) * 2 + 1_000_000
    for tx in result.failed:
        recs = tx.records + tx.records_to_delete
        if tx.prepared or len(recs) != 1 or tx.records_to_delete:
            continue
        r = recs[0]
        if r.user_record_type in _USER_TYPES and 0 <= r.id <= bound:
            continue  # a record the broker could have written: a transaction left open, judged as such
        jf = result.opened.files[r.file_index]
        t = 14 if r.is_update else 13
        start = r.body_offset - (fixed_size(t, jf.version) - 4)
        size = fixed_size(t, jf.version) + r.body_len
        buf = result.opened.pread(r.file_index, start, size)
        readings = []
        for t in (11, 12):  # the record read with its type byte set back: no other field wrong
            x, wrong = _parse(buf, 0, t, jf.tag, jf.version, len(buf))
            if x is not None and wrong == 1 and x.wrong == "type" and x.id == tx.tx_id and _plausible(x, result.max_id):
                readings.append(Rebuilt(x.type, start, x.total, -1, x.id, x.user_type, x.body, "type"))
        if len(readings) != 1:
            continue
        rec = readings[0]
        out.append((tx, rec, ev.effect_of_loss("messages", rec)))
    return out


def retyped_findings(result, ev) -> list:
    """``damaged-record`` findings for :func:`retyped_open_updates`: a warning when the record's loss changes
    nothing the broker delivers, CRITICAL otherwise."""
    from amqtool.errors import Finding, Severity

    findings = []
    for tx, rec, effect in retyped_open_updates(result, ev):
        harmless = effect == HARMLESS
        what = {11: "an add", 12: "an update"}[rec.type] + f" of record {rec.id} (user record type {rec.user_type})"
        findings.append(Finding(
            Severity.WARNING if harmless else Severity.CRITICAL, "damaged-record",
            f"the record read as open transaction {tx.tx_id}'s, which the broker discards at start, is {what} with "
            f"its record type byte damaged: " + ("its loss changes nothing the broker delivers" if harmless else
                                                 "the broker will lose what it held" if effect == LOSS else
                                                 "what losing it costs cannot be told"),
            str(result.files[tx.records[0].file_index].path) if tx.records else None, rec.offset,
            {"txId": tx.tx_id, "recordId": rec.id}))
    return findings


def refs_before_their_add(ev, pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Of the acknowledged (message, queue) ``pairs`` lacking their reference, those whose reference survives
    under a damaged message id: an ADD_REF of (id, queue) written before any ADD of that id -- which no broker
    writes (a reference follows its message: ``storeMessage``, then ``storeReference``), so its id was
    damaged -- where the pair's message, added before it, is the one message one flipped bit away that could
    own it (routed to that queue's address, no reference there). A rescan of
    the messages journal's files, done only for acknowledgements without their reference (damage)."""
    from amqtool import native

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
