"""An acknowledgement or delete lost at a damaged end, named by the damaged record's own header (issue 25).

The records lost at the damaged end of a file the broker moved on from carry no trace a window of new ids can
show when they are acknowledgements (ACKNOWLEDGE_REF updates) or DELETEs of older messages: the message they
consumed is then live again at load, and the broker delivers it a second time (``tails.py`` can only say
that such records "cannot be seen"). But the first of them is often only partly damaged -- a cut inside it,
a zeroed range starting past its header -- and its header survives: record type, this file's tag, the
message id and, for an update, its user record type and the queue id of its body.

Such a header is a record this use of the file wrote whole: the tag is the file's, and a file the broker
moved on from holds no torn record (a restart goes on writing at the end of the last valid record of the
newest file, ``JournalImpl.setUpCurrentFile``, over any torn one). So when it is

* a DELETE of a message the load still holds (``JournalImpl`` deletes a record only once: the broker's
  ``deleteMessage`` after its last reference was acknowledged), or
* an ACKNOWLEDGE_REF update of such a message on a queue it still has a reference on (its queue id read,
  when the damage left it -- an id no binding has is the damage's --; else any of its references), or
* either of them in a transaction whose COMMIT survives in a later file (``JournalImpl.load`` applies a
  committed transaction's surviving records and ignores its lost ones),

the broker consumed that message before the damage, and loads it again: a proven loss ("back"). A delivery
count update proves nothing (the broker writes one when a delivery is cancelled, and the message stays).
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.formats.damage import one_byte_apart

_UPDATE, _UPDATE_TX, _DELETE_TX, _DELETE, _COMMIT = 12, 14, 15, 16, 18
_QUEUE_BODIES = (R.ADD_REF, R.ACKNOWLEDGE_REF)


@dataclass(frozen=True)
class LostAck:
    """The consuming record whose header survives at a damaged end: its type, the message, the queue (None when
    the damage took it, or for a DELETE), and the transaction (-1: none) whose COMMIT survives."""

    record_type: int
    message: int
    queue: int | None
    tx_id: int = -1

    def describe(self) -> str:
        what = (f"an acknowledgement of message {self.message}"
                + (f" on queue {self.queue}" if self.queue is not None else "")
                if self.record_type in (_UPDATE, _UPDATE_TX) else f"the DELETE of message {self.message}")
        if self.tx_id >= 0:
            what += f" in transaction {self.tx_id}, whose COMMIT survives"
        return what


def _header(buf: bytes, tag: int, version: int, top_tag: int | None = None):
    """(type, tx id or -1, id, user record type or None, queue id or None) of a consuming record's header that
    ``buf`` (the damaged bytes from the record's start) still holds whole, else None. Its tag is ``tag`` (the
    file's), or, given ``top_tag`` (the highest fileID of the journal's files), one damaged byte away from it
    and above ``top_tag``: no use of any file ever had that id, so the record is not an earlier use's left
    behind (those carry lower ids: ``JournalFilesRepository`` numbers files counting up) but this use's, the
    damage in its tag -- which is what made the broker stop reading there (``JournalImpl.readJournalFile``
    skips a record whose fileID is not the file's)."""
    if len(buf) < 5 or buf[0] not in (_UPDATE, _UPDATE_TX, _DELETE_TX, _DELETE):
        return None
    read = int.from_bytes(buf[1:5], "big", signed=True)
    if read != tag and (top_tag is None or read <= top_tag or not one_byte_apart(read, tag)):
        return None
    t, p = buf[0], 5 + (version >= 2)
    tx = -1
    if t in (_UPDATE_TX, _DELETE_TX):
        if len(buf) < p + 8:
            return None
        tx = int.from_bytes(buf[p:p + 8], "big", signed=True)
        p += 8
    if len(buf) < p + 8:
        return None
    rid = int.from_bytes(buf[p:p + 8], "big", signed=True)
    p += 8
    if t in (_DELETE, _DELETE_TX):
        return t, tx, rid, None, None
    if len(buf) < p + 5:
        return None  # the user record type is gone: what the update was cannot be told
    size = int.from_bytes(buf[p:p + 4], "big", signed=True)
    utype = buf[p + 4]
    p += 5
    queue = None
    if len(buf) >= p + 8 and (size == 8 or (utype in _QUEUE_BODIES and len(buf) >= p + 12
                                            and int.from_bytes(buf[p + 8:p + 12], "big") == p + 12)):
        # a body size damaged alone: a reference's or an acknowledgement's body is its 8-byte queue id
        # (RefEncoding), and the record's closing size word, where such a body ends it, says it does
        queue = int.from_bytes(buf[p:p + 8], "big", signed=True)
    return t, tx, rid, utype, queue


def consuming_head(opened, index: int, first: int):
    """:func:`_header` of the damaged record at ``first`` of file ``index`` (an update or a DELETE carrying the
    file's tag, or that tag damaged in one byte into an id no file of the journal has), else None."""
    jf = opened.files[index]
    try:
        buf = opened.pread(index, first, 40)
    except OSError:
        return None
    return _header(buf, jf.tag, jf.version, max(f.tag for f in opened.files))


def _committed_after(opened, index: int, tx_id: int) -> bool:
    from amqtool.engines.artemis.tails import _records

    return any(t == _COMMIT and tx == tx_id for fi in range(index + 1, len(opened.files))
               for t, _off, _rid, tx, _u in _records(opened, fi))


def lost_ack(opened, index: int, first: int, evidence) -> LostAck | None:
    """The acknowledgement or DELETE of a message the load still delivers whose header survives at ``first``,
    the start of the damaged end of message-journal file ``index`` (see the module's contract), else None."""
    if evidence is None or opened.journal.kind != "messages":
        return None
    head = consuming_head(opened, index, first)
    if head is None:
        return None
    t, tx, mid, utype, queue = head
    if mid not in evidence.messages:
        return None
    if queue is not None and evidence.unbound(queue):
        queue = None  # the damage took the body (zeros over it read queue 0)
    held = evidence.live_queues(mid)
    if t in (_UPDATE, _UPDATE_TX):
        if utype != R.ACKNOWLEDGE_REF or not held or (queue is not None and queue not in held):
            return None
    elif not held:
        return None
    if tx >= 0 and not _committed_after(opened, index, tx):
        return None  # an open or rolled-back transaction's: discarded with it anyway
    return LostAck(t, mid, queue if t in (_UPDATE, _UPDATE_TX) else None, tx)
