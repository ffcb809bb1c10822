"""A reference read as an acknowledgement (``verify``'s ``ref-retyped``), the mirror of ``ack-retyped``
(:mod:`~amqtool.engines.artemis.doubled_refs`).

Where the broker writes a message's references: ``PostOfficeImpl.processRoute`` stores a durable message
(``storeMessage``: an ADD of ADD_MESSAGE_PROTOCOL, or ADD_TX in a transaction) and then, for each durable
queue it was routed to, ``storeReference`` (``AbstractJournalStorageManager``: an UPDATE of the message id with
user record type ADD_REF, 32, and the queue id as its 8-byte body; UPDATE_TX in the same transaction). An
acknowledgement (``storeAcknowledge``, ACKNOWLEDGE_REF, 33, the same 8-byte body) comes later, once a consumer
took the message, and only for a reference the broker holds. The two user types differ in one bit and there is
no checksum.

So a live message with one ACKNOWLEDGE_REF of a queue and no ADD_REF of that queue anywhere, whose
acknowledgement follows the message's own record (or one of its references) with no byte between them, sits
where the broker wrote that reference: it is the ADD_REF with its type byte damaged. The load
(``loadMessageJournal``) finds no reference to remove ("cannot find message"), and the message is never
delivered on that queue (with no other queue left, the broker deletes it as unreferenced).

Other readings, judged first or left alone:

* a real acknowledgement whose reference was lost in damaged bytes: its reference would lie between the
  message's record and the acknowledgement, which are adjacent here;
* an acknowledgement of a deleted message whose id was damaged onto this one: its message record lies
  elsewhere, not right before it (and ``Evidence.acks_without_ref`` judges acknowledgements one damaged byte
  from a message or queue still live);
* two acknowledgements and no reference: the first is the reference retyped, and the message was acknowledged
  there anyway (``Evidence.acks_without_ref``), so only a lone acknowledgement counts;
* a reference whose message id was damaged while its acknowledgement survived (an orphan ADD_REF of that
  queue one damaged byte from the message): the message was acknowledged there anyway.
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.errors import AmqtoolError, Finding, Severity
from amqtool.formats.artemis.records import ADD, ADD_TX, UPDATE, UPDATE_TX
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_MESSAGE_TYPES = frozenset({R.ADD_LARGE_MESSAGE, R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL})
_WITH_TX = frozenset({ADD_TX, UPDATE_TX})


@dataclass(frozen=True)
class RetypedRef:
    message_id: int
    queue_id: int
    file_index: int
    offset: int  # of the acknowledgement record in its file


def refs_read_as_acks(ev) -> list[RetypedRef]:
    """The (message, queue) pairs of the :class:`~amqtool.engines.artemis.evidence.Evidence` ``ev`` whose lone
    acknowledgement is their reference with its user record type damaged (see the module docstring). Rescans
    only the files holding such acknowledgements (none in a healthy store)."""
    result = ev._messages
    if result is None:
        return []
    pairs = {(m, q) for m, q in ev.acked if m in ev.messages and q not in ev.refs.get(m, ())}
    if not pairs:
        return []
    acks: dict[tuple[int, int], list] = {}
    mids = {m for m, _ in pairs}
    for r in result.live:
        if r.id in mids and r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF:
            q = int.from_bytes(result.body(r)[:8], "big", signed=True) if r.body_len >= 8 else None
            if (r.id, q) in pairs:
                acks.setdefault((r.id, q), []).append(r)
    lone = {p: rs[0] for p, rs in acks.items() if len(rs) == 1 and rs[0].body_len == 8 and not _misfiled(ev, *p)}
    if not lone:
        return []
    by_file: dict[int, dict[int, tuple[int, int]]] = {}
    for p, r in lone.items():
        by_file.setdefault(r.file_index, {})[r.body_offset] = p
    out = []
    opened = result.opened
    for index, wanted in sorted(by_file.items()):
        try:
            out += _after_own_record(opened, index, wanted)
        except (AmqtoolError, OSError):  # an unreadable file is reported as such
            continue
    return sorted(out, key=lambda x: (x.message_id, x.queue_id))


def _misfiled(ev, m: int, q: int) -> bool:
    """Whether an orphan reference of ``q`` one damaged byte from ``m`` is ``m``'s own (its id damaged)."""
    return any((R.ADD_REF, q) in updates and m in ev._one_byte_neighbours(orphan, ev.messages)
               for orphan, updates in ev.orphan_updates.items())


def _after_own_record(opened, index: int, wanted: dict[int, tuple[int, int]]) -> list[RetypedRef]:
    """Of the acknowledgements of file ``index`` (body offset -> (message, queue)), those that follow their
    message's record or one of its references with no byte between (in the same transaction, if any)."""
    from amqtool.formats.artemis.records import fixed_size

    version = opened.files[index].version
    out = []
    prev = None
    for base, _, records, _ in opened.scan_windows(index):
        for rec in records:
            t, off, size, _, tx, rid, utype = rec[:7]
            body = base + off + fixed_size(t, version) - 4  # records with a body: it ends before checkSize
            pair = wanted.get(body) if t in (UPDATE, UPDATE_TX) else None
            if pair is not None and utype == R.ACKNOWLEDGE_REF and prev is not None:
                pt, pend, ptx, prid, putype = prev
                if (pend == base + off and prid == pair[0] and pt in (ADD, ADD_TX, UPDATE, UPDATE_TX)
                        and (putype in _MESSAGE_TYPES or putype == R.ADD_REF)
                        and (t in _WITH_TX) == (pt in _WITH_TX) and (t not in _WITH_TX or tx == ptx)):
                    out.append(RetypedRef(pair[0], pair[1], index, base + off))
            prev = (t, base + off + size, tx, rid, utype)
    return out


def ref_retyped_finding(ev, where: str, listed: int = 20) -> Finding | None:
    """CRITICAL ``ref-retyped`` naming the pairs of :func:`refs_read_as_acks`, or None."""
    found = refs_read_as_acks(ev)
    if not found:
        return None
    first = found[0]
    shown = ", ".join(f"message {x.message_id} on queue {x.queue_id}" for x in found[:listed])
    return Finding(
        Severity.CRITICAL, "ref-retyped",
        f"{len(found)} acknowledgement record(s) sit where the broker writes a message's reference (right after "
        f"its message record or another of its references: storeMessage, then storeReference per queue) while "
        f"no reference of that (message, queue) exists: the reference's user record type was damaged (32 read "
        f"as 33), and the broker never delivers the message there: {shown}",
        str(ev._messages.files[first.file_index].path), first.offset,
        {"count": len(found), "messageIds": [x.message_id for x in found[:100]]})
