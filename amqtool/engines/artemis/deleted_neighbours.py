"""An unreadable update between two records of one message that a later DELETE removes (``damaged-record``).

The broker writes a message's records from the thread that handles it, back to back: its ADD, then one ADD_REF
per queue it was routed to (``JournalStorageManager.storeMessage``, then ``storeReference``), a scheduled
delivery time beside a reference (``updateScheduledDeliveryTime``), and when it is consumed an acknowledgement
per queue and then its DELETE (``storeAcknowledge``, ``deleteMessage``). A plain update whose head was damaged
(zeros over its tag, id and body size: nothing reads it back) between a record of message ``m`` and another of
``m`` was, by that order, one of ``m``'s own. When a DELETE of ``m`` survives after it, the broker loads no
record of ``m`` whatever that update was: its loss changes nothing. (What this cannot see: another thread's
acknowledgement of an older message written between two records of ``m``; the odds of that are those of a
write from another session landing between two writes of one routing.)
"""
from __future__ import annotations

from amqtool import native

_ADD, _UPDATE, _DELETE = 11, 12, 16


def update_of_deleted(opened, index: int, first: int, end: int) -> int | None:
    """The message whose plain records lie right before ``first`` and at ``end`` (the next valid record) in
    messages-journal file ``index``, when the damaged bytes between them start with a plain update's type byte
    and a DELETE of that message survives after them; else None (a rescan, done on damage only)."""
    if opened.pread(index, first, 1) != bytes([_UPDATE]):
        return None
    before = after = None
    for base, _data, records, _marked in opened.scan_windows(index):
        for t, off, _size, _cc, tx, rid, *_rest in records:
            if base + off < first:
                before = (t, rid, tx)
            elif base + off >= end:
                after = (t, rid, tx)
                break
        if after is not None:
            break
    if before is None or after is None or before[1] != after[1]:
        return None
    if before[0] not in (_ADD, _UPDATE) or after[0] != _UPDATE or before[2] != -1 or after[2] != -1:
        return None
    message = before[1]
    # its DELETE after the damaged bytes, in this file or a later one
    for fi in range(index, len(opened.files)):
        jf = opened.files[fi]
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        if any(t == _DELETE and rid == message and (fi > index or off >= end)
               for t, off, _size, _cc, _tx, rid, *_rest in records):
            return message
    return None
