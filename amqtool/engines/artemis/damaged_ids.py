"""References and acknowledgements whose id field was damaged, told from the records left: what the broker
loses (issue 25). Judged on :class:`~amqtool.engines.artemis.evidence.Evidence` of a loaded store.

* **A doubled reference.** ``PostOfficeImpl.route`` adds one reference of a message per queue, so two ADD_REF
  records of one (message, queue) are damage: one of them was another reference whose queue id (its body) or
  message id was changed. The broker keeps one reference per (message, queue) (``loadMessageJournal`` puts
  the message in the queue's map by id), so the reference it was is lost -- the message on another queue one
  damaged byte from that one, or another message one damaged byte away on that queue. Each reading is a loss
  unless that pair was acknowledged; when every reading is a loss, the loss is proven, whichever it was.
* **An orphan acknowledgement.** An ACKNOWLEDGE_REF of an id with no message record and no DELETE anywhere:
  the broker never frees a file holding a live record's ADD, and keeps a DELETE while a record of its id
  survives (``JournalFileImpl``'s negative counts), so only damage leaves it. When its id is one damaged byte
  from live messages only, each still on that queue (and from no deleted id: an acknowledgement of a message
  deleted since changes nothing), the acknowledgement was theirs: the broker delivers the message again.
  Two or more orphan records of one id are a lost message record (``Evidence.lost_adds``), judged there.
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.engines.artemis.paging.verify import _one_byte_apart
from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

MAX_LISTED = 20


@dataclass(frozen=True)
class DoubledRef:
    message: int
    queue: int
    other_queues: tuple  # queues one damaged byte from ``queue`` the message has no reference to
    other_messages: tuple  # messages one damaged byte from ``message`` with no reference to ``queue``


def doubled_refs(ev, moved: set) -> list[DoubledRef]:
    """The doubled references of live messages whose every reading is a loss (``moved``: the (message, queue)
    pairs already judged as a moved message id, :meth:`Evidence.moved_refs`)."""
    out = []
    for m, q in ev.double_refs:
        if m not in ev.messages or (m, q) in moved:
            continue
        mine = ev.refs.get(m, ())
        queues = tuple(sorted(c for c in ev.queues if c not in mine and _one_byte_apart(c, q)))
        messages = tuple(sorted(o for o in ev.messages
                                if o != m and q not in ev.refs.get(o, ()) and _one_byte_apart(o, m)))
        if not queues and not messages:
            continue  # no reading explains it: nothing says what was lost
        if any((m, c) in ev.acked for c in queues) or any((o, q) in ev.acked for o in messages):
            continue  # a reading where the lost reference was acknowledged anyway: nothing proven
        out.append(DoubledRef(m, q, queues, messages))
    return out


def orphan_acks(ev, reported: set) -> list[tuple[int, int, tuple]]:
    """(orphan id, queue, the live messages it may have been) of lone acknowledgements of an id never
    deleted, whose every reading brings a message back (``reported``: ids judged already)."""
    out = []
    for x, updates in sorted(ev.orphan_updates.items()):
        if x in reported or x in ev.messages or len(updates) != 1 or updates[0][0] != R.ACKNOWLEDGE_REF:
            continue
        # (the load's delete-unknown-id anomalies first; a rescan of the delete records only past them)
        if ev._deleted_later(x):
            continue
        if ev._deleted is None:
            continue  # the deleted ids are not known: an acknowledged message deleted since may explain it
        q = updates[0][1]
        deleted = ev._deleted | ev.deleted_unknown
        owners = [c for c in ev.messages if _one_byte_apart(c, x)]
        if not owners or any(_one_byte_apart(d, x) for d in deleted):
            continue
        if all(q in ev.live_queues(c) for c in owners):
            out.append((x, q, tuple(sorted(owners))))
    return out


def damaged_id_findings(ev, where: str, moved: set, reported: set) -> list[Finding]:
    """CRITICAL ``ref-doubled`` and ``ack-misfiled`` findings (see the module's docstring)."""
    out = []
    doubled = doubled_refs(ev, moved)
    if doubled:
        shown = "; ".join(
            f"message {d.message} on queue {d.queue}: it was "
            + " or ".join(([f"message {d.message} on queue(s) {', '.join(map(str, d.other_queues[:5]))}"]
                           if d.other_queues else [])
                          + ([f"message(s) {', '.join(map(str, d.other_messages[:5]))} on queue {d.queue}"]
                             if d.other_messages else []))
            for d in doubled[:MAX_LISTED])
        out.append(Finding(
            Severity.CRITICAL, "ref-doubled",
            f"{len(doubled)} message(s) have two references to one queue (the broker routes a message to a queue "
            f"once): the other reference's queue id or message id was damaged, and whichever it was, that "
            f"reference is unacknowledged and lost: {shown}", where, None,
            {"count": len(doubled), "messageIds": [d.message for d in doubled[:100]],
             "queueIds": [d.queue for d in doubled[:100]]}))
    acks = orphan_acks(ev, reported)
    if acks:
        shown = ", ".join(f"id {x} on queue {q} (one damaged byte from message(s) {', '.join(map(str, o[:5]))})"
                          for x, q, o in acks[:MAX_LISTED])
        out.append(Finding(
            Severity.CRITICAL, "ack-misfiled",
            f"{len(acks)} acknowledgement(s) name an id with no message record that was never deleted (the broker "
            f"keeps a delete while any record of its id survives): their id was damaged, and the message(s) they "
            f"acknowledged, still on that queue, are delivered again: {shown}", where, None,
            {"count": len(acks), "ids": [x for x, _, _ in acks[:100]]}))
    return out
