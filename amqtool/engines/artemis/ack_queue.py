"""Acknowledgements that name a queue no binding holds, while their message is still on a queue one damaged
byte away: the acknowledgement's queue id was damaged, and the message comes back there.

The broker writes an ACKNOWLEDGE_REF of (message, queue) only for a reference it holds, after that
reference's ADD_REF (``AbstractJournalStorageManager.storeAcknowledge``), and keeps both while the message
lives (the compactor copies every update of a live record). An acknowledgement of a live message for a queue
the message has no reference for, and that the bindings do not hold either, is therefore a changed record.
At load the broker finds no reference to remove for it (``JournalStorageManager.loadMessageJournal``) and
drops it, so the reference it acknowledged stays: the message is delivered again on that queue.

:meth:`Evidence.acks_without_ref <amqtool.engines.artemis.evidence.Evidence.acks_without_ref>` already weighs
such acknowledgements against the queue one byte away when only one candidate is; with small queue ids a
byte has several (queues 9 and 11 of one address both one byte from 216), which proves nothing there for a
queue that exists. For a queue id that names no queue at all, it does: the record was damaged, and whichever
of the message's live queues it acknowledged, one of them gets the message back.
"""
from __future__ import annotations

from amqtool.formats.damage import one_byte_apart


def acks_of_unknown_queues(ev) -> list[tuple[int, int]]:
    """(message, queue) of live acknowledgements naming a queue id the bindings journal does not hold and the
    message has no reference for, of a live message still on a bound queue one byte from that id. Empty
    without a bindings journal (nothing tells which queues exist)."""
    if not ev.have_bindings:
        return []
    out = []
    for m, q in ev.acked:
        if m not in ev.messages or q in ev.queues or q in ev.refs.get(m, ()) or (m, q) in ev.explained:
            continue
        if any(x in ev.queues and one_byte_apart(x, q) for x in ev.live_queues(m)):
            out.append((m, q))
    return sorted(out)
