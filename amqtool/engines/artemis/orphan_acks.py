"""Acknowledgements the load leaves without their message, read as damaged ids (``verify``'s ``delete-moved`` and
``ack-id-damaged``).

A live ACKNOWLEDGE_REF update whose message has no ADD and no DELETE is most often the routine trace of a
reclaimed file. Two shapes of the records around it show instead that one damaged byte moved an id, and that
the broker loses or brings back a message:

* **A DELETE moved onto a message stored before it** (``delete-moved``). The broker writes a message's DELETE
  right after the acknowledgement of its last reference (``storeAcknowledge`` then ``deleteMessage``, in the
  acknowledging transaction when there is one). A DELETE right after an acknowledgement of an id one damaged
  byte away, which the load leaves without its message (its own ADD reclaimed long ago, as a deleted message's
  is), had its id moved: the load deletes the message it names, as the broker does. When that message has
  references no acknowledgement covers, none on the acknowledgement's queue, the broker loses it from those
  queues: CRITICAL. (An acknowledgement whose own id was damaged leaves the same records, with the DELETE's
  message lacking that one acknowledgement: its queue then is among the uncovered ones, and nothing is lost.)
  The acknowledged message may also keep its ADD, acknowledged on every queue and never deleted, which the broker
  never leaves so; and the DELETE may land on a page transaction's PAGE_TRANSACTION record, which the broker
  deletes only once every paged message it committed is consumed: while some are still to be, it drops them.
* **An acknowledgement moved onto a transaction's id** (``ack-id-damaged``). Artemis issues message ids and
  transaction ids from one counter (``BatchingIDGenerator``), so no message has a transaction's id: the
  acknowledgement's own id was damaged, and the message it acknowledged lost it. The broker deletes a message
  right after its last acknowledgement, which may be this one or a later one on another queue, so the loss is
  proven when, of the messages one damaged byte away, none was deleted after the acknowledgement (no message is
  acknowledged once deleted) whose references could include its queue (a reference there, or none left to
  tell: its ADD reclaimed) while no other acknowledgement there is left, and at least one still holds a
  reference on that queue with no acknowledgement there and no DELETE: the acknowledged one is among them, live
  again, and the broker delivers it a second time (brought back).

Both are read from one rescan of the files, made only when the load leaves such acknowledgements (at most
``MAX_CANDIDATES`` ids: a removed file leaves many).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool import native
from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.formats.damage import ByteNeighbours, one_byte_apart

MAX_CANDIDATES = 8
_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_ADDS, _UPDATES, _DELETES = (11, 13), (12, 14), (15, 16)
_TX = (13, 14, 15, 17, 18, 19)


@dataclass
class _Around:
    """What the files hold around the candidate ids: their acknowledgements, and the records of the ids one
    damaged byte from them (live or dead)."""

    tx_ids: set[int] = field(default_factory=set)
    acks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (candidate, queue, file, offset)
    # (DELETE id, acknowledged candidate, its queue, file, offset of the DELETE) for a DELETE right after one
    moved: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    messages: set[int] = field(default_factory=set)  # neighbours a message ADD carries
    page_txs: dict[int, int] = field(default_factory=dict)  # neighbour -> transaction of its PAGE_TRANSACTION ADD
    added_in: dict[int, int] = field(default_factory=dict)  # neighbour -> the journal transaction of its ADD_TX
    committed: set[int] = field(default_factory=set)  # transactions a COMMIT ends
    refs: dict[int, set] = field(default_factory=dict)  # neighbour -> queues of its references
    acked: dict[int, set] = field(default_factory=dict)  # neighbour -> queues of its acknowledgements
    deletes: dict[int, list] = field(default_factory=dict)  # neighbour -> where each DELETE of it stands


def _queue(data, rec, version: int) -> int:
    at = rec[1] + fixed_size(rec[0], version) - 4
    return int.from_bytes(data[at:at + 8], "big", signed=True)


def _scan(opened, candidates: set[int]) -> _Around:
    near = ByteNeighbours(candidates)
    out = _Around()
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        prev = None
        for rec in records:
            t, off, rid, utype = rec[0], rec[1], rec[5], rec[6]
            if t in _TX:
                out.tx_ids.add(rec[4])
                if t == 18:
                    out.committed.add(rec[4])
            queued = t in _UPDATES and utype in (R.ADD_REF, R.ACKNOWLEDGE_REF) and rec[7] >= 8
            if rid in candidates:
                if queued and utype == R.ACKNOWLEDGE_REF:
                    out.acks.append((rid, _queue(data, rec, jf.version), fi, off))
            elif near.of(rid):
                if t in _ADDS and utype in _MESSAGES:
                    out.messages.add(rid)
                elif t in _ADDS and utype == R.PAGE_TRANSACTION and rec[7] >= 8:
                    out.page_txs[rid] = _queue(data, rec, jf.version)  # PageTransactionInfoImpl: its tx id first
                    if t == 13:
                        out.added_in[rid] = rec[4]
                elif queued:
                    (out.refs if utype == R.ADD_REF else out.acked).setdefault(rid, set()).add(
                        _queue(data, rec, jf.version))
                elif t in _DELETES:
                    out.deletes.setdefault(rid, []).append((fi, off))
                    if (prev is not None and prev[0] in _UPDATES and prev[6] == R.ACKNOWLEDGE_REF
                            and prev[5] in candidates and prev[7] >= 8 and one_byte_apart(rid, prev[5])):
                        out.moved.append((rid, prev[5], _queue(data, prev, jf.version), fi, off))
            prev = rec
        del data
    return out


def findings(result, evidence) -> list[Finding]:
    """The ``delete-moved`` and ``ack-id-damaged`` findings of the messages journal's load ``result`` (see the
    module), weighed with the ``evidence`` built from it."""
    if result is None or evidence.bare:
        return []
    candidates = {m for m, ups in evidence.orphan_updates.items() if any(t == R.ACKNOWLEDGE_REF for t, _ in ups)}
    if len(candidates) > MAX_CANDIDATES:
        return []
    # a live message acknowledged on every queue it holds a reference on, and never deleted: the broker deletes
    # a message right after its last acknowledgement, so the DELETE it lacks may be the one moved (its ADD need
    # not be reclaimed; hold-out sweep seed 7798, d25). Taken only while few, as a healthy store has almost none.
    done = {m for m in evidence.messages
            if evidence.refs.get(m) and all((m, q) in evidence.acked for q in evidence.refs[m])}
    if len(done) <= MAX_CANDIDATES:
        candidates |= done
    if not candidates:
        return []
    around = _scan(result.opened, candidates)
    paths = [str(f.path) for f in result.opened.files]
    return _moved_deletes(around, paths, evidence.paged_pending) + _moved_acks(around, paths, evidence.messages)


def _moved_deletes(a: _Around, paths: list[str], paged_pending=None) -> list[Finding]:
    out = []
    for rid, acked_id, acked_queue, fi, off in a.moved:
        if rid in a.page_txs and len(a.deletes.get(rid, ())) == 1 and paged_pending is not None:
            # a page transaction's record, deleted while paged messages it committed are still to be consumed:
            # the broker deletes it only once they all are (PageTransactionInfoImpl), so this DELETE was the
            # acknowledged message's, and the broker drops those paged messages (hold-out sweep seed 7798, d25).
            # A record of a transaction not committed (prepared XA) is no record the DELETE finds: no effect.
            if rid in a.added_in and a.added_in[rid] not in a.committed:
                continue
            pending = paged_pending(a.page_txs[rid])
            if pending:
                out.append(Finding(
                    Severity.CRITICAL, "delete-moved",
                    f"the DELETE of page transaction {a.page_txs[rid]}'s record {rid} follows the acknowledgement of "
                    f"message {acked_id}, one damaged byte away, which is left without its DELETE: the broker "
                    f"deletes a message right after its last acknowledgement, so this DELETE's id was damaged, and "
                    f"the broker drops the {pending} paged message(s) of that transaction still to be consumed",
                    paths[fi], off, {"id": rid, "acknowledgedId": acked_id, "pagedMessages": pending}))
            continue
        if rid not in a.messages or len(a.deletes.get(rid, ())) != 1:
            continue
        queues = sorted(a.refs.get(rid, set()) - a.acked.get(rid, set()))
        if not queues or acked_queue in queues:
            continue  # an acknowledgement whose own id was damaged leaves this very trace: nothing is lost
        out.append(Finding(
            Severity.CRITICAL, "delete-moved",
            f"the DELETE of message {rid} follows the acknowledgement of message {acked_id}, one damaged byte away, "
            f"which is left without its DELETE: the broker deletes a message right after its last acknowledgement, "
            f"so this DELETE's id was damaged, and the broker drops message {rid}, still on queue(s) "
            f"{', '.join(map(str, queues))}", paths[fi], off,
            {"id": rid, "acknowledgedId": acked_id, "queues": queues}))
    return out


def _moved_acks(a: _Around, paths: list[str], live_messages: set[int]) -> list[Finding]:
    out = []
    for rid, queue, fi, off in a.acks:
        if rid not in a.tx_ids:
            continue
        around = [m for m in set(a.refs) | set(a.deletes) if one_byte_apart(m, rid)]
        if any(max(a.deletes.get(m, [(-1, -1)])) > (fi, off) and (queue in a.refs.get(m, ()) or not a.refs.get(m))
               and queue not in a.acked.get(m, ()) for m in around):
            continue  # the acknowledged message may be one deleted since: nothing comes back
        back = sorted(m for m in around if m in live_messages and queue in a.refs.get(m, ())
                      and queue not in a.acked.get(m, ()))
        if not back:
            continue
        named = (f"message {back[0]}, one damaged byte away, is" if len(back) == 1 else
                 f"of messages {', '.join(map(str, back[:5]))}{' ...' if len(back) > 5 else ''}, one damaged byte "
                 f"away, the one it acknowledged is")
        out.append(Finding(
            Severity.CRITICAL, "ack-id-damaged",
            f"an acknowledgement on queue {queue} names {rid}, a transaction's id, which no message has (one "
            f"counter issues both): its id was damaged, and {named} left on that queue with no acknowledgement "
            f"there and no DELETE: the broker delivers it again", paths[fi], off,
            {"id": rid, "queue": queue, "messageIds": back}))
    return out
