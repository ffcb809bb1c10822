"""A damaged end that took exactly one record, whose header survives (issue 25).

The records lost at the damaged end of a file the broker moved on from are weighed by the window of new ids
issued while they were written (:mod:`~amqtool.engines.artemis.tails`): an id of that window no surviving record
carries may have been a live message lost there, and the odds decide. That reading is needed when the damage may
have taken several records. It is not when the damage provably took one:

* the first damaged record's header survives: its type, this file's tag, its ids and, for a record with a body,
  the body's size, which gives where the record ends;
* its last byte (the low byte of its checksize) survives as something other than a zero: a zeroed range that
  reached past the record would have zeroed it;
* its checksize is the record's size but for one byte (the damage is that byte, and what follows is as the
  broker wrote it), or what follows it to the end of the file is zeros or begins with a record of an earlier
  use of the file (a tag below this file's: Artemis reuses a file without clearing it). A record this use wrote
  after it would carry this file's tag, and still whole it would end the damaged end there (``JournalImpl``
  scans a damaged file on to its next valid record).

Then that one record is all the broker loses there, and only what it carried can be lost; the window's other
ids were never stored in this file, whatever the odds say. Its loss is judged by what it was:

* an ADD (or ADD_TX) of a message (ADD_MESSAGE, ADD_MESSAGE_PROTOCOL, ADD_LARGE_MESSAGE): the message was live,
  and is lost, when a reference of it (ADD_REF) survives on a queue with no acknowledgement, outside a
  transaction or in one that committed, and no DELETE of it survives. A message of a transaction that never
  committed (a ROLLBACK, or no end record anywhere: ``JournalImpl.load`` rolls such a transaction back) was never
  delivered, and the load discards its references with it. A PREPAREd transaction's is held by the broker:
  not judged here;
* a reference, an acknowledgement (ADD_REF, ACKNOWLEDGE_REF updates) or a DELETE: :mod:`.lost_ref` and
  :mod:`.lost_ack` name the loss when there is one; when neither does, the message is no longer live, the queue
  holds it otherwise, or the transaction never committed, and nothing the broker delivers changes.
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_ADD, _UPDATE, _ADD_TX, _UPDATE_TX, _DELETE_TX, _DELETE = 11, 12, 13, 14, 15, 16
_PREPARE, _COMMIT, _ROLLBACK = 17, 18, 19
_TYPES = (_ADD, _UPDATE, _ADD_TX, _UPDATE_TX, _DELETE_TX, _DELETE)


@dataclass(frozen=True)
class LoneRecord:
    """The one record a damaged end took: its type, transaction (-1: none), id and user record type (None for a
    DELETE); for a message's ADD, the queues the message is still referenced on without an acknowledgement
    (empty: it was not live) and, when empty, why not."""

    record_type: int
    tx_id: int
    id: int
    user_type: int | None
    queues: tuple[int, ...] = ()
    why_not: str = ""

    def describe(self) -> str:
        if self.record_type in (_ADD, _ADD_TX):
            what = f"the ADD of message {self.id}"
        elif self.record_type in (_DELETE, _DELETE_TX):
            what = f"the DELETE of message {self.id}"
        else:
            what = {R.ADD_REF: "a reference", R.ACKNOWLEDGE_REF: "an acknowledgement"}.get(
                self.user_type, f"an update (user record type {self.user_type})") + f" of message {self.id}"
        return what + (f" in transaction {self.tx_id}" if self.tx_id >= 0 else "")


def _nothing_after(rest: bytes, tag: int) -> bool:
    """``rest`` (the bytes after the record to the end of the file) holds no record of this use of the file."""
    if not any(rest):
        return True
    if len(rest) >= 5 and rest[0] in _TYPES + (_PREPARE, _COMMIT, _ROLLBACK):
        old = int.from_bytes(rest[1:5], "big", signed=True)
        return 0 < old < tag  # an earlier use's record, left by the reuse of the file
    return False


def read_lone(opened, index: int, first: int) -> LoneRecord | None:
    """The record at ``first`` of file ``index`` when it is provably the only record its damaged end took
    (module contract), without its judgement; else None."""
    jf = opened.files[index]
    if jf.version < 2:
        return None
    try:
        head = opened.pread(index, first, 40)
    except OSError:
        return None
    if len(head) < 18 or head[0] not in _TYPES or int.from_bytes(head[1:5], "big", signed=True) != jf.tag:
        return None
    t, p, tx = head[0], 6, -1
    if t in (_ADD_TX, _UPDATE_TX, _DELETE_TX):
        tx = int.from_bytes(head[p:p + 8], "big", signed=True)
        p += 8
    rid = int.from_bytes(head[p:p + 8], "big", signed=True)
    p += 8
    utype = None
    if t == _DELETE:
        end = first + p + 4
    elif len(head) < p + 5:
        return None
    else:
        size = int.from_bytes(head[p:p + 4], "big", signed=True)
        if t == _DELETE_TX:
            end = first + p + 4 + size + 4
        else:
            utype = head[p + 4]
            end = first + p + 5 + size + 4
        if size < 0:
            return None
    if rid < 0 or end > jf.size:
        return None
    try:
        rest = opened.pread(index, end - 4, jf.size - end + 4)
    except OSError:
        return None
    if len(rest) != jf.size - end + 4 or rest[3] == 0:
        return None
    # a checksize one byte off the record's size: the damage is that byte, and what follows is as written
    off_by_one = sum(a != b for a, b in zip(rest[:4], (end - first).to_bytes(4, "big"))) == 1
    if not off_by_one and not _nothing_after(rest[4:], jf.tag):
        return None
    return LoneRecord(t, tx, rid, utype)


def _tx_fate(opened, tx_id: int) -> str:
    """'committed', 'prepared', or 'dead' (a ROLLBACK, or no end record anywhere) of transaction ``tx_id``."""
    from amqtool.engines.artemis.tails import _records

    fate = "dead"
    for fi in range(len(opened.files)):
        for t, _off, _rid, tx, _u in _records(opened, fi):
            if tx == tx_id:
                if t == _COMMIT:
                    return "committed"
                if t == _ROLLBACK:
                    return "dead"
                if t == _PREPARE:
                    fate = "prepared"
    return fate


def lone_record(opened, index: int, first: int, evidence) -> LoneRecord | None:
    """The only record lost at ``first``, the start of the damaged end of message-journal file ``index``, judged
    (module contract), when it is a message's ADD, a reference, an acknowledgement or a DELETE; else None. Call
    it after :func:`.lost_ack` and :func:`.lost_ref`: a reference, acknowledgement or DELETE returned here is
    one whose loss they did not prove, so nothing is lost (``queues`` empty)."""
    if evidence is None or opened.journal.kind != "messages" or not evidence.have_bindings:
        return None
    lone = read_lone(opened, index, first)
    if lone is None:
        return None
    if lone.record_type in (_UPDATE, _UPDATE_TX):
        if lone.user_type not in (R.ADD_REF, R.ACKNOWLEDGE_REF):
            return None
        return lone
    if lone.record_type in (_DELETE, _DELETE_TX):
        return lone
    mid, tx = lone.id, lone.tx_id
    if lone.user_type not in _MESSAGES or mid in evidence.messages:
        return None  # not a message's, or the load holds a record of that id elsewhere: not judged here
    if tx >= 0:
        fate = _tx_fate(opened, tx)
        if fate == "prepared":
            return None
        if fate == "dead":
            return LoneRecord(lone.record_type, tx, mid, lone.user_type, (),
                              f"transaction {tx} never committed (the broker discards it)")
    if mid in evidence.deleted_unknown:
        return LoneRecord(lone.record_type, tx, mid, lone.user_type, (), "its DELETE survives")
    held = tuple(sorted(q for q in evidence.refs.get(mid, ()) if (mid, q) not in evidence.acked))
    why = "" if held else ("every reference it has left is acknowledged" if evidence.refs.get(mid) else
                           "no reference of it survives (the broker deletes a message no queue holds)")
    return LoneRecord(lone.record_type, tx, mid, lone.user_type, held, why)
