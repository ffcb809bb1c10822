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

:func:`replayed_unchanged`: in a file that is not the newest the broker's replay does not skip batches at all
(only the newest is checked at start): a batch whose records read to the same effect as written (the damage
in its control record, or in bytes the replay does not act on) is replayed as written, whatever its records
are.
"""
from __future__ import annotations

import struct
import zlib

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import AddMessageCommand, EntryType, decode_command, transaction_head

from amqtool.engines.kahadb.forwarded import is_marker

_SIZE_AT = 16  # the control record: int32 length, byte type, 'WRITE BATCH', int32 batch size, int64 checksum
_DEFAULT_PRIORITY = 4  # javax.jms.Message.DEFAULT_PRIORITY: a send's index priority when prioritySupported is false


def superseded(buf, first: int, last: int, acked: dict, open_txs: set, subscriptions: dict | None = None, *,
               newest: bool = False, inert=None, ended=None, unmatched=None, rolled_back=None, spent=None,
               held_commit=None) -> bool:
    """True when ``[first, last]`` of a journal file is exactly one batch (what follows it up to ``last``
    only the end marker and zeros) whose records are all sends the replay undoes: queue messages ``acked``
    (``after_acks.acked_after``) after the checkpoint (a trace, producer audit or ack map record beside them
    does nothing), topic messages acked there by every durable subscription of ``subscriptions`` (destination key -> subscription keys), or sends of the still-open local
    transactions ``open_txs`` (transaction keys); a transaction's send so acked counts when ``ended()`` has it. In a file that opens with the ack compaction's marker, the
    marker and the forwarded acks ``inert(payload)`` accepts (forwarded.inert_ack) count as undone too.
    ``newest``: the file is the journal's newest (its records as written, :func:`as_written`; else as the
    replay reads them, :func:`_as_read`). ``ended()``: the transactions whose outcome the replay reads intact
    after it: a PREPARE of one of them changes nothing when dropped (``process(KahaCommitCommand)`` takes the
    operations from the in-flight transactions when no PREPARE moved them to the prepared ones; a ROLLBACK
    drops them either way): the cross-store transactions of mKahaDB child stores write one. ``unmatched(cmd)``:
    a subscription's ack of a message its selector does not match (unhanded.unmatched_ack), which changes
    nothing when dropped. ``rolled_back()``: the transactions whose ROLLBACK the replay reads intact after the
    batch: their sends and acks change nothing when dropped (:func:`_undone`). ``spent(cmd)``: a queue ack of a
    message the index on disk no longer holds and no replayed send puts back (after_acks.spent_acks), which
    finds nothing either way. ``held_commit(cmd)`` (index_ahead.held_commits): a local transaction's COMMIT
    whose sends the index holds or later acks take back; in a file that is not the newest, a COMMIT the replay
    reads as another command (its type byte damaged: the restored batch says what was written) passes only so."""
    try:
        if newest:
            written = as_written(buf, first, last)
            if written is None:
                return False
            records = [(rec.payload, None) for rec in jr.iter_batch_records(*written)]
        else:
            records = _as_read(buf, first, last)
            if records is None:
                records = _stepped_over(buf, first, last)
            if records is None:
                return False
        compaction = inert is not None and first == 0 and bool(records) and is_marker(records[0][0])
        written: list | None = None
        for i, (payload, cmd) in enumerate(records):
            if compaction and (i == 0 or inert(payload)):
                continue
            cmd = _decoded_or_rolled_back(payload, cmd, newest, rolled_back)
            if cmd is None:
                continue
            if cmd.unknown and not newest:
                # fields no command of its type has: the damage changed the record's type byte, and the replay
                # acts on what it reads, not on what was written (the batch as written, from its Adler-32: one
                # changed byte). That is harmless only when what it reads does nothing and what was written
                # is a record the replay undoes anyway
                if written is None:
                    written = _written_commands(buf, first, last) or []
                if i >= len(written) or not _inert_misread(cmd, written[i], ended, lambda: (
                        (rolled_back() if rolled_back is not None else set()) | set(open_txs))):
                    return False
                cmd = written[i]
            if cmd.type is not EntryType.COMMIT and not newest:
                # a COMMIT written, read as a ROLLBACK (4 ^ 1) or a trace (4 ^ 4): the transaction's operations are
                # dropped, which changes nothing only when they were sends the index holds or later acks take back
                if written is None:
                    written = _written_commands(buf, first, last) or []
                if i < len(written) and written[i].type is EntryType.COMMIT:
                    if held_commit is None or not held_commit()(written[i]):
                        return False
                    continue
            if cmd.type in LOCATION_ONLY and not cmd.unknown:
                continue  # process() of these only moves lastUpdate: a start's "LOADED" trace, say
            if cmd.type is EntryType.PREPARE and ended is not None and cmd.transaction is not None \
                    and cmd.transaction.key in ended():
                continue
            if cmd.type is EntryType.REMOVE_MESSAGE and cmd.transaction is None and unmatched is not None \
                    and unmatched()(cmd):
                continue
            if cmd.type is EntryType.REMOVE_MESSAGE and spent is not None and _spent(cmd, i, newest, spent(), lambda: (
                    written if written is not None else _written_commands(buf, first, last) or [])):
                continue
            if not _undone(cmd, acked, open_txs, subscriptions, ended, rolled_back):
                return False
    except (FormatError, struct.error, AttributeError):
        return False
    return bool(records)


def _decoded_or_rolled_back(payload, cmd, newest: bool, rolled_back):
    """``cmd`` (or the record decoded), or None for a record of the newest file that no longer decodes whose head
    names a transaction the replay reads a ROLLBACK of after it (commands.transaction_head): whatever the rest
    of a send or an ack of it held, ``process(KahaRollbackCommand)`` drops it, and ``Journal.recoveryCheck`` has
    the broker skip the corrupted batch anyway."""
    try:
        return cmd or decode_command(bytes(payload))
    except FormatError:
        head = transaction_head(payload) if newest and rolled_back is not None else None
        if head is not None and head[1].key in rolled_back():
            return None
        raise


def _spent(cmd, i: int, newest: bool, spent, written) -> bool:
    """The ack ``cmd``, record ``i`` of a damaged batch, takes nothing whether replayed as it reads or lost:
    ``spent`` (after_acks.spent_acks) accepts it as written -- in the newest file the batch's records are read as
    written (:func:`as_written`) and the broker skips the corrupted batch whole; in an older one the written
    record (``written()``: the batch restored from its Adler-32) must be such an ack too, and what the replay
    reads one that takes nothing (a damaged message id names no message either)."""
    if newest:
        return spent(cmd)
    mine = written()
    return i < len(mine) and mine[i].type is EntryType.REMOVE_MESSAGE and spent(mine[i]) and spent(cmd)


def _inert_misread(read, written, ended, dropped=None) -> bool:
    """``read``, the command the replay makes of a record written as ``written`` whose type byte the damage
    changed, does nothing: ``process`` of a trace, the producer audit or the ack map only moves ``lastUpdate``;
    a PREPARE of a transaction whose COMMIT or ROLLBACK the replay reads intact after it (``ended()``) is
    overtaken by that outcome; a ROLLBACK of a local transaction that never commits (``dropped()``: its ROLLBACK
    read intact after the batch, or none: the start rolls it back) drops early what is dropped anyway; an ack of
    the very message the written send carried finds nothing to take (the send itself is gone). Anything else --
    an ack of a committed transaction read as its PREPARE, say -- may change what the broker delivers."""
    if read.type in LOCATION_ONLY:
        return True
    if read.type is EntryType.ROLLBACK:
        return dropped is not None and read.transaction is not None and read.transaction.local \
            and read.transaction.key in dropped()
    if read.type is EntryType.PREPARE:
        return ended is not None and read.transaction is not None and read.transaction.key in ended()
    if read.type is EntryType.REMOVE_MESSAGE and written.type is EntryType.ADD_MESSAGE:
        return read.message_id == written.message_id and read.destination == written.destination
    return False


# MessageDatabase.process visits these with processLocation(location) alone: nothing else changes
LOCATION_ONLY = (EntryType.TRACE, EntryType.PRODUCER_AUDIT, EntryType.ACK_MESSAGE_FILE_MAP)


def _undone(cmd, acked: dict, open_txs: set, subscriptions: dict | None, ended=None, rolled_back=None) -> bool:
    """``cmd`` is a send the replay takes back: a queue message acked after the checkpoint, a topic message acked by
    every durable subscription, or a send of a still-open local transaction; or an ack of a still-open local
    transaction (``MessageDatabase.recover`` rolls it back at the end of recovery: it acks nothing). A send of a
    transaction whose outcome the replay reads after it (``ended()``) is taken back by such acks too: its COMMIT
    adds the message (``process(KahaCommitCommand)`` runs the transaction's operations), the acks after it remove
    it.

    A send or an ack of a transaction whose ROLLBACK the replay reads after it (``rolled_back()``) does nothing
    either way: ``process(KahaRollbackCommand)`` drops the operations in flight or prepared. And a ROLLBACK of a
    transaction the replay leaves open without it (never prepared: ``open_txs``) does what the start does anyway:
    ``MessageDatabase.recover`` rolls back the local transactions still in flight and discards the XA ones (the
    cross-store transactions of mKahaDB child stores are XA there). Found on a hold-out mKahaDB store of the real
    5.17.2 broker (a transaction of sends, then one of acks, aborted)."""
    if cmd.type in (EntryType.ADD_MESSAGE, EntryType.REMOVE_MESSAGE) and cmd.transaction is not None \
            and rolled_back is not None and cmd.transaction.key in rolled_back():
        return True
    if cmd.type is EntryType.ROLLBACK and cmd.transaction is not None and cmd.transaction.key in open_txs:
        return True
    if cmd.type is EntryType.REMOVE_MESSAGE and cmd.transaction is not None and cmd.transaction.local \
            and cmd.transaction.key in open_txs:
        return True  # an ack of a transaction left open: the broker rolls it back at start, nothing acked
    if cmd.type is not EntryType.ADD_MESSAGE:
        return False
    if cmd.transaction is not None and cmd.transaction.key in open_txs:
        return True
    if cmd.transaction is not None and (ended is None or cmd.transaction.key not in ended()):
        return False
    by = acked.get(cmd.destination.key, {}).get(cmd.message_id, set())
    subs = (subscriptions or {}).get(cmd.destination.key) if cmd.destination.type in (1, 3) else None
    return None in by or bool(subs and set(subs) <= by)


def _written_commands(buf, first: int, last: int) -> list | None:
    """The commands of the batch at ``first`` as written, when its body is found from the stored Adler-32
    (:func:`_restored`) and tiles as the damaged one does, else None."""
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    span = _tiled(buf, start, last)
    stored = struct.unpack_from(">q", buf, first + _SIZE_AT + 4)[0]
    original = _restored(bytes(buf[start:start + span]), stored) if span and stored > 0 else None
    if original is None:
        return None
    out, pos = [], 0
    while pos < len(original):
        size = struct.unpack_from(">i", original, pos)[0]
        if size < jr.RECORD_HEAD_SPACE:
            return None
        out.append(decode_command(original[pos + 5:pos + size]))
        pos += size
    return out


def _as_read(buf, first: int, last: int) -> list | None:
    """``(payload, command)`` of each record of the batch at ``first`` of a file that is not the newest as the
    broker's replay reads them, or None: ``Journal.getNextLocation`` steps over the control record by its own 5-byte header (a
    28-byte record of another type than a user record), then reads record header after record header up to
    ``last`` (or the end marker and zeros before it). A user record is what ``MessageDatabase.load`` makes of
    it (the framed command; replay_walk.load); a record of another type is stepped over unread, so what it
    held is judged as it stands (it is lost to the replay: it passes only as a send the replay undoes)."""
    from amqtool.engines.kahadb.replay_walk import load

    n = len(buf)
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n:
        return None
    rsize, rtype = struct.unpack_from(">ib", buf, first)
    if rsize != jr.BATCH_CONTROL_RECORD_SIZE or rtype == jr.USER_RECORD_TYPE:
        return None
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    span = _tiled(buf, start, last)
    if not span:
        return None
    out, pos = [], start
    try:
        while pos < start + span:
            size, rtype = struct.unpack_from(">ib", buf, pos)
            payload = bytes(buf[pos + 5:pos + size])
            out.append((payload, load(buf, pos, size) if rtype == jr.USER_RECORD_TYPE else decode_command(payload)))
            pos += size
    except (FormatError, struct.error):
        return None
    return out


def _stepped_over(buf, first: int, last: int) -> list | None:
    """``(payload, None)`` of each record the broker's replay steps over when a damaged length in the header of
    the control record at ``first`` (a file that is not the newest) makes it skip the batch, or None.
    ``Journal.getNextLocation`` reads that header (``readLocationDetails``), finds no user record and moves on
    by the length it reads: past the batch's end, over whole batches, the end marker and zeros, to a header of
    zeros or the end marker (or past the file's end), which take it to the next file; or into the batch, onto
    bytes whose header it steps over in turn (no user record's, a positive length) until it gets there. Every
    batch it steps over is lost to the replay: its records count as written when each body matches its stored
    Adler-32, and the damaged batch must be all there is up to ``last``. A landing anywhere else is not judged
    (None)."""
    n = len(buf)
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n:
        return None
    rsize, rtype = struct.unpack_from(">ib", buf, first)
    if rtype == jr.USER_RECORD_TYPE or bytes(buf[first + 5:first + _SIZE_AT]) != jr.BATCH_CONTROL_RECORD_MAGIC:
        return None
    if rsize <= 0:
        return None  # (the walk reads the same header again, or goes back over records it replayed)
    landing = first + rsize  # (where the walk reads the next header)
    while 0 <= landing and landing + jr.RECORD_HEAD_SPACE <= n and any(buf[landing:landing + 5]) \
            and bytes(buf[landing:landing + 5]) != jr.EOF_RECORD:
        # a length damaged by a few bytes lands inside the batch: a header read there that is no user record
        # (nor the end marker or zeros) is stepped over by its own length in turn
        lsize, ltype = struct.unpack_from(">ib", buf, landing)
        if ltype == jr.USER_RECORD_TYPE or lsize <= 0:
            return None
        landing += lsize
    out, pos = [], first
    while pos < min(landing, n):
        if bytes(buf[pos:pos + len(jr.BATCH_CONTROL_RECORD_HEADER)]) != jr.BATCH_CONTROL_RECORD_HEADER \
                and pos != first:
            # the end marker and zeros after the last batch stepped over, up to the landing
            if not _end_only(buf, pos, min(landing, n) - 1):
                return None
            break
        size, stored = struct.unpack_from(">iq", buf, pos + _SIZE_AT)
        start = pos + jr.BATCH_CONTROL_RECORD_SIZE
        end = start + size
        if size <= 0 or end > min(landing, n) or zlib.adler32(bytes(buf[start:end])) != stored:
            return None
        if pos == first and not (last < end or _end_only(buf, end, last)):
            return None
        out += [(rec.payload, None) for rec in jr.iter_batch_records(buf, jr.Batch(pos, size, stored))]
        pos = end
        if bytes(buf[pos:pos + len(jr.EOF_RECORD)]) == jr.EOF_RECORD:
            pos += len(jr.EOF_RECORD)
    if landing < n and (landing + jr.RECORD_HEAD_SPACE > n or bytes(buf[landing:landing + 5]) != jr.EOF_RECORD
                        and any(buf[landing:landing + 5])):
        return None
    return out or None


def as_written(buf, first: int, last: int):
    """``(buffer, batch)``: the batch at ``first`` of the newest file with its records as the broker wrote
    them (``buffer`` a rebuilt copy of it when the damage could be undone), or None.

    Its control record intact and its body unchanged or not restorable: the batch it declares, read as it is
    (a record the damage made unreadable or unrecognisable fails the caller's test). Otherwise the body --
    the declared size, or the records that tile from the control record to the next batch or the end marker
    when the size itself is damaged -- is matched against the stored Adler-32, as it is, with every record
    header's type put back to a user record's, or with the one byte a single-byte change of the checksum's
    sums points at put back: a match gives the records exactly as written.

    That counts because the broker does not read the damaged bytes either: in the newest file
    ``Journal.recoveryCheck`` checks every batch at start and ``getNextLocation`` skips a corrupted block
    whole. (An older file is not checked with 5.17's default ``checkForCorruptJournalFiles=false``: its
    records are replayed as they read, :func:`_as_read`.)"""
    n = len(buf)
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n:
        return None
    header_ok = bytes(buf[first:first + len(jr.BATCH_CONTROL_RECORD_HEADER)]) == jr.BATCH_CONTROL_RECORD_HEADER
    size, stored = struct.unpack_from(">iq", buf, first + _SIZE_AT)
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    spans = []
    if 0 < size and start + size <= n:
        spans.append(size)
    tiled = _tiled(buf, start, last)
    if tiled and tiled not in spans:
        spans.append(tiled)
    covers = [span for span in spans if start + span - 1 >= last or _end_only(buf, start + span, last)]
    for span in covers if stored > 0 else ():
        original = _restored(bytes(buf[start:start + span]), stored)
        if original is not None:
            rebuilt = jr.BATCH_CONTROL_RECORD_HEADER + struct.pack(">iq", span, stored) + original
            return rebuilt, jr.Batch(0, span, stored)
    if header_ok and size in covers:
        return buf, jr.Batch(first, size, stored)
    return None


def replayed_unchanged(buf, first: int, last: int, acked: dict | None = None, unmatched=None, idle=None,
                       rejects=None, subscribed=None, held=None, spent=None) -> bool:
    """``[first, last]`` of a journal file that is not the newest is one damaged batch whose records the
    broker's replay reads to the same effect as the records written: it delivers what it would have.

    ActiveMQ 5.17 (``checkForCorruptJournalFiles`` off) ``recoveryCheck``s only the newest file; in an older one
    ``Journal.getNextLocation`` reads record headers, not batches: the control record is stepped over by its
    own 5-byte header (still a 28-byte record of another type than a user record), and the records after it
    are ``load``ed as they read. Their bytes are as written when the body matches the stored Adler-32 (the
    damage hit the magic or the declared size), or when the stored checksum differs from the body's in one
    byte of its eight (the damage hit the checksum field: one changed body byte changes both of Adler-32's
    sums). Else the body as written is found from the checksum (:func:`_restored`: one changed byte), and
    each record as the replay loads it must do what the written one did (:func:`_effect`), but for a send's
    own message id when nothing ``acked`` (after_acks.acked_after) acknowledges the message after the
    checkpoint: the broker indexes the message under the damaged id and delivers the same OpenWire message,
    which carries its own. Acks of it (after the checkpoint or in the batch itself) that find nothing under the
    damaged id leave it pending for their subscriptions, which changes nothing when ``rejects(destination key,
    subscription key, message)`` (unhanded.selector_rejects) says each one's selector does not match it: the
    broker never hands it to them. A topic send read under another topic that no durable subscription holds
    (``subscribed(destination key)``: the subscription keys the index or the journal knows of it) is handed to
    no one there; that changes nothing when each durable subscription of the topic written either acknowledges
    it (as above) or rejects it. A written record whose type byte no longer reads as a user record's is stepped over
    by the walk (``getNextLocation`` returns only ``USER_RECORD_TYPE`` records): that changes nothing when it
    was an ack ``unmatched(cmd)`` accepts (unhanded.unmatched_ack: a subscription's ack of a message its
    selector does not match, which ``TopicStorePrefetch.recoverMessage`` never hands it), or a record whose
    ``process`` only moves ``lastUpdate`` (a trace, the producer audit, the ack map). Such an ack that reads
    as another one that ``idle(cmd)`` accepts (after_acks.acks_nothing: its destination holds no message of its
    id) changes nothing either. A send written where ``held(offset, cmd)`` says the index already holds it
    (index_ahead.py: index pages written after the checkpoint) changes nothing when the walk steps over it or
    reads it as a send to the same destination: ``updateIndex`` finds its Location in ``locationIndex`` and
    takes it for "a redo of a previously added message". A written queue ack of a message the index no longer
    holds and no replayed send puts back (``spent(cmd, sends)``: after_acks.spent_acks) takes nothing: the walk
    may step over it or read it as an ack that takes nothing."""
    n = len(buf)
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n:
        return False
    rsize, rtype = struct.unpack_from(">ib", buf, first)
    if rsize != jr.BATCH_CONTROL_RECORD_SIZE or rtype == jr.USER_RECORD_TYPE:
        return False
    stored = struct.unpack_from(">q", buf, first + _SIZE_AT + 4)[0]
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    span = _tiled(buf, start, last)  # (the walk does not read the declared size)
    if not span:
        return False
    body = bytes(buf[start:start + span])
    diff = (stored ^ zlib.adler32(body)) & 0xFFFFFFFFFFFFFFFF
    if any(not diff & ~(0xFF << (8 * i)) for i in range(8)):
        return True
    original = _restored(body, stored) if stored > 0 else None
    if original is None:
        return False
    try:
        now, then = _records(body), _records(original)
        acked = _with_batch_acks(acked or {}, [c for _p, c in then])
        if [pos for pos, _c in now] == [pos for pos, _c in then]:
            # (the same records: one may have lost its user record type, the walk steps over it). The batch's own
            # sends are no message of the store yet (a rebuild skips the batch): an ack that names one takes it
            sent = {(c.destination.key, c.message_id) for _p, c in then if c.type is EntryType.ADD_MESSAGE}
            quiet = (lambda cmd: idle(cmd, sent)) if idle else None
            taken = (lambda cmd: spent(cmd, sent)) if spent else None
            at = first + jr.BATCH_CONTROL_RECORD_SIZE
            return all(_same_effect(a, b, acked, unmatched, quiet, rejects, subscribed, taken)
                       or _redone(a, b, held, at + q, subscribed) for (_p, a), (q, b) in zip(now, then))
        now, then = [_effect(c) for _p, c in now if c], [_effect(c) for _p, c in then if c]
    except (FormatError, struct.error, AttributeError):
        return False
    return len(now) == len(then) and all(a == b or _renamed(a, b, acked, rejects)
                                         or _moved(a, b, acked, rejects, subscribed) for a, b in zip(now, then))


def _with_batch_acks(acked: dict, commands: list) -> dict:
    """``acked`` (after_acks.acked_after: the acks replayed after the checkpoint, those of intact batches) with
    the acks outside a transaction among ``commands`` (the damaged batch's, as written) added."""
    out = acked
    for cmd in commands:
        if cmd is not None and cmd.type is EntryType.REMOVE_MESSAGE and cmd.transaction is None:
            if out is acked:
                out = {k: {m: set(s) for m, s in v.items()} for k, v in acked.items()}
            out.setdefault(cmd.destination.key, {}).setdefault(cmd.message_id, set()).add(
                cmd.subscription_key or None)
    return out


def _same_effect(now, then, acked: dict, unmatched, idle, rejects=None, subscribed=None, spent=None) -> bool:
    """The record the walk reads (``now``: its command, None when stepped over) does what the record written
    (``then``) did: the same effect, a send renamed (:func:`_renamed`), or a written record whose loss changes
    nothing the broker delivers (``spent``: a queue ack that finds nothing), read as nothing or as an ack that
    takes nothing (``idle``, or ``spent``: a transaction's queue ack whose damaged id no message has finds nothing
    at its COMMIT either)."""
    if then is None:
        return now is None
    if now is not None:
        a, b = _effect(now), _effect(then)
        if a == b or _renamed(a, b, acked, rejects) or _moved(a, b, acked, rejects, subscribed) \
                or _taken_back(now, then, acked, subscribed):
            return True
        # (read as an ack that takes nothing: outside a transaction, idle; in one too, a queue ack of an id no
        # message has, spent, which takes nothing at its COMMIT either)
        if (idle is None or not idle(now)) and (spent is None or not spent(now)):
            return False
    return then.type in LOCATION_ONLY or (then.type is EntryType.REMOVE_MESSAGE and then.transaction is None
                                           and unmatched is not None and unmatched(then)) \
        or (spent is not None and spent(then))


def _taken_back(now, then, acked: dict, subscribed=None) -> bool:
    """``now`` is the send ``then`` (outside a transaction) with its message id and destination as written but
    other bytes (its message's), and acknowledgements after the checkpoint (``acked``: after_acks.acked_after,
    with those of its own batch) take it back: a queue ack, or one by every durable subscription of its topic
    (``subscribed(destination key)``). The replay indexes the damaged send (``updateIndex(KahaAddMessageCommand)``
    keeps its Location and id, it does not read the message), then the ack finds it by its id and removes it:
    the broker never reads those bytes (found on a hold-out store of the real 5.17.2 broker: a body byte of an
    acknowledged send in an older file after the checkpoint, CRITICAL before)."""
    if not (isinstance(now, AddMessageCommand) and isinstance(then, AddMessageCommand)
            and now.transaction is None and then.transaction is None
            and now.message_id == then.message_id and now.destination == then.destination):
        return False
    by = acked.get(then.destination.key, {}).get(then.message_id, set())
    if then.destination.type in (1, 3):
        subs = subscribed(then.destination.key) if subscribed is not None else set()
        return bool(subs) and set(subs) <= by
    return None in by


def _redone(now, then, held, offset: int, subscribed=None) -> bool:
    """The written send ``then`` at ``offset`` is one the index holds (``held``), and the walk steps over it
    (``now`` None: its header's type byte is what changed) or reads a send to the same destination there with
    the message bytes as written (the broker reads them from that Location at dispatch): nothing changes
    (``replayed_unchanged``). Nor when it reads a send to a topic no durable subscription holds
    (``subscribed(destination key)`` empty: a damaged topic name): ``updateIndex(KahaAddMessageCommand)`` skips
    a topic without subscriptions, and the index keeps the entry as written."""
    if held is None or then is None or then.type is not EntryType.ADD_MESSAGE or not held(offset, then):
        return False
    if now is None:
        return True
    if now.type is not EntryType.ADD_MESSAGE:
        return False
    if now.destination == then.destination:
        return bytes(now.message) == bytes(then.message)
    return subscribed is not None and now.destination is not None and now.destination.type in (1, 3) \
        and not subscribed(now.destination.key)


def _renamed(now, then, acked: dict, rejects=None) -> bool:
    """``now`` is the send ``then`` under another message id, and nothing acknowledges ``then`` after the
    checkpoint (its ack would find nothing to remove: the message would come back), but subscriptions whose
    selector ``rejects`` it (they are never handed it, acknowledged or not)."""
    from dataclasses import replace

    if not (isinstance(now, AddMessageCommand) and isinstance(then, AddMessageCommand)
            and replace(now, message_id=then.message_id) == then
            and now.message_id not in acked.get(now.destination.key, {})):
        return False
    key = then.destination.key
    return all(sub is not None and rejects is not None and rejects(key, sub, then.message)
               for sub in acked.get(key, {}).get(then.message_id, ()))


def _moved(now, then, acked: dict, rejects, subscribed) -> bool:
    """``now`` is the topic send ``then`` under another topic, which no durable subscription holds (a topic's
    stored messages go only to its durable subscriptions: no one is handed it there), and no durable
    subscription of ``then``'s topic would have been handed ``then``: each acknowledges it (``acked``: after
    the checkpoint or in its own batch; that ack now finds nothing) or its selector ``rejects`` it."""
    from dataclasses import replace

    if subscribed is None or not (isinstance(now, AddMessageCommand) and isinstance(then, AddMessageCommand)):
        return False
    if now.destination.type not in (1, 3) or then.destination.type not in (1, 3) \
            or replace(now, destination=then.destination) != then or subscribed(now.destination.key):
        return False
    key = then.destination.key
    by = acked.get(key, {}).get(then.message_id, set())
    return all(sk in by or (rejects is not None and rejects(key, sk, then.message)) for sk in subscribed(key))


def _records(body: bytes) -> list:
    """``(offset, command)`` of each record tiling ``body``: a user record as ``MessageDatabase.load`` makes
    it, None for a record of another type (the replay steps over it)."""
    from amqtool.engines.kahadb.replay_walk import load

    out, pos = [], 0
    while pos < len(body):
        size, rtype = struct.unpack_from(">ib", body, pos)
        if size < jr.RECORD_HEAD_SPACE:
            raise FormatError(f"record size {size}")
        out.append((pos, load(body, pos, size) if rtype == jr.USER_RECORD_TYPE else None))
        pos += size
    return out


def _effect(cmd):
    """What ``process`` reads of a command: all of it but a REMOVE's ack (``updateIndex`` only compares it,
    by reference, with UNMATCHED), and of a send's priority fields only the priority its index entry takes:
    ``updateIndex(KahaAddMessageCommand)`` takes ``getPrioritySupported() ? getPriority() :
    DEFAULT_PRIORITY`` (4), and the message dispatched is the ``message`` bytes, which carry their own. For a
    queue's send not even that: the priority only picks the band of the order index the entry is filed in
    (``MessageOrderIndex``: one B-tree per band, all recovered for the queue's cursor), so it orders dispatch
    and delivers the same messages (the fault harness compares what is delivered as a multiset)."""
    if cmd.type is EntryType.REMOVE_MESSAGE:
        return cmd.type, cmd.transaction, cmd.destination, cmd.message_id, cmd.subscription_key
    if cmd.type is EntryType.ADD_MESSAGE:
        from dataclasses import replace

        if cmd.destination is not None and cmd.destination.type in (0, 2):  # QUEUE, TEMP_QUEUE
            return replace(cmd, priority=_DEFAULT_PRIORITY, priority_supported=True)
        return replace(cmd, priority=cmd.priority if cmd.priority_supported else _DEFAULT_PRIORITY,
                       priority_supported=True)
    return cmd


def _tiled(buf, start: int, last: int) -> int:
    """The length of the run of record headers (length >= 5, any type) that tiles from ``start`` to ``last``
    + 1 exactly, or to an end marker or zeros before it; 0 when none does."""
    pos = start
    end = last + 1
    while pos + jr.RECORD_HEAD_SPACE <= end:
        if bytes(buf[pos:pos + len(jr.EOF_RECORD)]) == jr.EOF_RECORD or not any(buf[pos:pos + 5]):
            break
        length = struct.unpack_from(">i", buf, pos)[0]
        if length < jr.RECORD_HEAD_SPACE or pos + length > end:
            return 0
        pos += length
    return pos - start if pos > start and (pos == end or _end_only(buf, pos, last)) else 0


def _restored(body: bytes, stored: int) -> bytes | None:
    """``body`` as it was when its Adler-32 was ``stored``: as it is, with its record types put back to 1, or
    with the one byte whose change explains the difference put back; None when none of these matches."""
    if zlib.adler32(body) == stored:
        return body
    fixed = bytearray(body)
    pos = 0
    while pos + jr.RECORD_HEAD_SPACE <= len(fixed):
        length = struct.unpack_from(">i", fixed, pos)[0]
        if length < jr.RECORD_HEAD_SPACE:
            break
        fixed[pos + 4] = jr.USER_RECORD_TYPE
        pos += length
    if pos == len(fixed) and bytes(fixed) != body and zlib.adler32(bytes(fixed)) == stored:
        return bytes(fixed)
    # Adler-32 (RFC 1950) is A = 1 + sum(b), B = sum of the running A's, both mod 65521: changing byte i of n
    # by d changes A by d and B by d * (n - i), so one changed byte is found, and undone, from the two sums.
    m = 65521
    now = zlib.adler32(body)
    da = ((stored & 0xFFFF) - (now & 0xFFFF)) % m
    db = ((stored >> 16) - (now >> 16)) % m
    n = len(body)
    if not da:
        return None
    k = db * pow(da, -1, m) % m  # n - i, modulo m
    found = []
    # The sums give n - i modulo 65521 only: in a body that long or longer (a message of 64 KiB or more) every
    # byte 65521 apart gives the same checksum when changed by d, so each such candidate is a body that matches
    # the stored Adler-32, and only one of them is the body the broker wrote (_as_written_by_broker).
    for i in range(n - (k or m), -1, -m):
        for d in (da, da - m):
            if -255 <= d <= 255 and 0 <= body[i] + d <= 255:
                fixed = bytearray(body)
                fixed[i] += d
                if zlib.adler32(bytes(fixed)) == stored:
                    found.append(bytes(fixed))
    if len(found) > 1:
        found = [x for x in found if _as_written_by_broker(x)]
    if len(found) > 1:
        # (the changed byte in a send's destination, not its message: the one body whose every send names the
        # destination its OpenWire message carries; none when a store files messages elsewhere than they name)
        named = [x for x in found if _as_written_by_broker(x, destinations=True)]
        if len(named) == 1:
            found = named
    return found[0] if len(found) == 1 else None


def _as_written_by_broker(body: bytes, destinations: bool = False) -> bool:
    """The records of a batch body tile it and decode, and each send's message id is its OpenWire message's own:
    ``KahaDBStore.addMessage`` sets the command's ``messageId`` from ``message.getMessageId()`` of the message it
    marshals beside it. Of the bodies one changed byte could have been (:func:`_restored`, a body of 64 KiB or
    more), the one whose changed byte is in a message id, not in the message's body, is found so.
    ``destinations``: and each send's destination name is its OpenWire message's (``addMessage`` files it under
    ``message.getDestination()``; a virtual topic's consumer queue holds a copy sent to that queue): the one
    whose changed byte is in a destination is found so, when only one body agrees; and no record holds fields
    its command type does not declare (the one whose changed byte is an entry type, which makes a send's
    fields another command's unknown ones)."""
    from amqtool.formats.kahadb.openwire import decode_message

    try:
        pos = 0
        while pos < len(body):
            size = struct.unpack_from(">i", body, pos)[0]
            if size < jr.RECORD_HEAD_SPACE or pos + size > len(body):
                return False
            cmd = decode_command(body[pos + 5:pos + size])
            if destinations and cmd.unknown:
                return False  # (fields its type does not declare: another command's, its entry type changed)
            if isinstance(cmd, AddMessageCommand) and cmd.message:
                msg = decode_message(cmd.message)
                if msg.message_id != cmd.message_id:
                    return False
                if destinations and (msg.destination is None or cmd.destination is None
                                     or msg.destination[1] != cmd.destination.name):
                    return False
            pos += size
    except (FormatError, struct.error, ValueError, IndexError):
        return False
    return True


def _end_only(buf, start: int, last: int) -> bool:
    """``[start, last]`` holds nothing but the end-of-data marker and zeros (a file's end after its last
    batch), up to the marker preallocation writes in a file's last five bytes."""
    tail = bytes(buf[start:last + 1])
    if tail.startswith(jr.EOF_RECORD):
        tail = tail[len(jr.EOF_RECORD):]
    if last + 1 == len(buf) and tail.endswith(jr.EOF_RECORD):
        tail = tail[:-len(jr.EOF_RECORD)]
    return not tail.strip(b"\0")
