"""A damaged batch after the index checkpoint whose records the replay would have undone anyway.

``MessageDatabase.recover`` (ActiveMQ 5.17) replays the records after ``lastUpdate`` at start; a batch that
fails its checksum is skipped (``Journal`` marks it a corrupted block). What it held is lost -- unless it
holds only sends that intact records later in the replay take back: a queue message (or a topic message
every durable subscription) acknowledged by a ``KahaRemoveMessageCommand`` after it (that REMOVE then finds nothing, as for any message GC or an earlier
loss removed), or a send of a local transaction that never committed (the broker rolls it back at start).
Then the broker delivers exactly what it would have: the damage is latent.

The batch's records are read as the broker wrote them when its control record still holds (the damage is in
the records' bytes: a checksum mismatch); any record that does not decode, that is not such a send, or whose
message id or destination the damage may have changed into another message's, keeps the damage CRITICAL.
"""
from __future__ import annotations

import struct
import zlib

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

from amqtool.engines.kahadb.forwarded import is_marker

_SIZE_AT = 16  # the control record: int32 length, byte type, 'WRITE BATCH', int32 batch size, int64 checksum


def superseded(buf, first: int, last: int, acked: dict, open_txs: set, subscriptions: dict | None = None, *,
               newest: bool = False, inert=None) -> bool:
    """True when ``[first, last]`` of a journal file is exactly one batch (what follows it up to ``last``
    only the end marker and zeros) whose records are all sends the replay undoes: queue messages ``acked``
    (``after_acks.acked_after``) after the checkpoint, topic messages acked there by every durable
    subscription of ``subscriptions`` (destination key -> subscription keys), or sends of the still-open local
    transactions ``open_txs`` (transaction keys). In a file that opens with the ack compaction's marker, the
    marker and the forwarded acks ``inert(payload)`` accepts (forwarded.inert_ack) count as undone too.
    ``newest``: the file is the journal's newest (see :func:`_as_written`)."""
    batch = _as_written(buf, first, last, newest)
    if batch is None:
        return False
    try:
        records = list(jr.iter_batch_records(buf, batch))
        compaction = inert is not None and first == 0 and bool(records) and is_marker(records[0].payload)
        for i, rec in enumerate(records):
            if compaction and (i == 0 or inert(rec.payload)):
                continue
            cmd = decode_command(bytes(rec.payload))
            if cmd.type is not EntryType.ADD_MESSAGE:
                return False
            if cmd.transaction is not None:
                if cmd.transaction.key not in open_txs:
                    return False
            else:
                by = acked.get(cmd.destination.key, {}).get(cmd.message_id, set())
                subs = (subscriptions or {}).get(cmd.destination.key) if cmd.destination.type in (1, 3) else None
                if None not in by and not (subs and set(subs) <= by):
                    return False
    except (FormatError, struct.error, AttributeError):
        return False
    return bool(records)


def _as_written(buf, first: int, last: int, newest: bool):
    """The batch at ``first`` whose records can be read as the broker wrote them, or None.

    Its control record intact: the batch it declares (a checksum mismatch then says its records' bytes are
    damaged; they are read as they are, and a record the damage made unreadable or unrecognisable fails the
    caller's test). Its control record damaged (length, type, magic): the batch whose size and Adler-32 are
    still there and still match the bytes after the control record -- the records are exactly as written.
    That counts only where the broker does not read the damaged bytes either: in the newest file, whose
    batches ``Journal.recoveryCheck`` checks at start and whose corrupted blocks ``getNextLocation`` skips
    whole; in an older file, only while the control record's own 5-byte header still reads as a 28-byte
    record of another type than a user record (``getNextLocation`` steps over it and replays the records
    after it; a changed length would send the walk elsewhere)."""
    n = len(buf)
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n:
        return None
    size, stored = struct.unpack_from(">iq", buf, first + _SIZE_AT)
    if size <= 0:
        return None
    batch = jr.Batch(first, size, stored)
    if batch.end > n:
        return None
    if bytes(buf[first:first + len(jr.BATCH_CONTROL_RECORD_HEADER)]) != jr.BATCH_CONTROL_RECORD_HEADER:
        if stored <= 0 or zlib.adler32(buf[batch.data_offset:batch.end]) != stored:
            return None
        rsize, rtype = struct.unpack_from(">ib", buf, first)
        if not newest and (rsize != jr.BATCH_CONTROL_RECORD_SIZE or rtype == jr.USER_RECORD_TYPE):
            return None
    if batch.end - 1 < last and not _end_only(buf, batch.end, last):
        return None
    return batch


def _end_only(buf, start: int, last: int) -> bool:
    """``[start, last]`` holds nothing but the end-of-data marker and zeros (a file's end after its last
    batch)."""
    tail = bytes(buf[start:last + 1])
    if tail.startswith(jr.EOF_RECORD):
        tail = tail[len(jr.EOF_RECORD):]
    return not tail.strip(b"\0")
