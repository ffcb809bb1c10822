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

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

_SIZE_AT = 16  # the control record: int32 length, byte type, 'WRITE BATCH', int32 batch size, int64 checksum


def superseded(buf, first: int, last: int, acked: dict, open_txs: set, subscriptions: dict | None = None) -> bool:
    """True when ``[first, last]`` of a journal file is exactly one batch (its control record intact) whose
    records are all sends the replay undoes: queue messages ``acked`` (``after_acks.acked_after``) after the
    checkpoint, topic messages acked there by every durable subscription of ``subscriptions`` (destination
    key -> subscription keys), or sends of the still-open local transactions ``open_txs`` (transaction keys)."""
    if bytes(buf[first:first + len(jr.BATCH_CONTROL_RECORD_HEADER)]) != jr.BATCH_CONTROL_RECORD_HEADER:
        return False
    try:
        size = struct.unpack_from(">i", buf, first + _SIZE_AT)[0]
        batch = jr.Batch(first, size, 0)
        if size <= 0 or batch.end > len(buf) or batch.end - 1 < last:
            return False
        records = list(jr.iter_batch_records(buf, batch))
        for rec in records:
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
