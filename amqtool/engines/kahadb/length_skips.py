"""A damaged record length in an older file's batch after the index checkpoint: what the replay walk skips.

ActiveMQ 5.17 (``checkForCorruptJournalFiles`` off) checks only the newest file's batches at start; an older
file's records after the checkpoint are replayed as ``Journal.getNextLocation`` reads them, header by header
(replay_walk.py). A record whose length grew still loads as written (``MessageDatabase.load``: ``mergeFramed``
reads the framed length and ignores what follows), but the walk then reads its next header where the damaged length
ends: inside a later record or batch control record, whose bytes it steps over by the size they read as (no user
record's), past the file's end or onto the end marker or zeros, which take it to the next file. Every record from
the damaged one's end to there is skipped by the replay. A batch control record whose own length was damaged (its
type and 'WRITE BATCH' as written) moves the walk the same way: it is stepped over by the length it now reads, not
the 28 bytes written.

:func:`skips_nothing_live` judges that: the batch as written is found from its stored Adler-32 (one changed byte,
superseded._restored), the walk over the damaged file is followed (replay_walk.walk), and each record it returns
must be a written record doing what that one did, each written record it skips one whose loss changes nothing
delivered: a send (in a transaction or not) acknowledged after the checkpoint (by every durable subscription, for
a topic), a send the index on disk already holds at its Location (index_ahead.py: index pages are written between
checkpoints; its replay would only be "a redo of a previously added message",
``MessageDatabase.updateIndex(KahaAddMessageCommand)``), an acknowledgement its subscription's selector never
needed, a send, an ack or the ROLLBACK of a local transaction that never commits (its ROLLBACK read intact later,
or none written: ``MessageDatabase.recover`` rolls back the local transactions still in flight when its replay
ends), the COMMIT of a local transaction whose every send the index holds already (left in flight and rolled
back, which undoes no index entry), or a record whose ``process`` only moves ``lastUpdate``.
Anything else (a landing on a user record header, a walk that throws, a committed transaction's record skipped) is
not judged here.
"""
from __future__ import annotations

import struct

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

from amqtool.engines.kahadb.replay_walk import WalkStop, load, walk


def skips_nothing_live(buf, first: int, acked: dict, subscribed, unmatched=None, held=None, uncommitted=None,
                       held_commit=None) -> bool:
    """The batch at ``first`` of ``buf`` (a journal file that is not the newest, after the checkpoint), whose
    checksum fails, makes the broker's replay deliver what the records written there and after it would:
    see the module docstring. ``acked``: after_acks.acked_after; ``subscribed(destination key)``: the durable
    subscription keys of a topic; ``unmatched(cmd)``: unhanded.unmatched_ack; ``held(offset, cmd)``: the index
    holds that send at its Location (index_ahead.holds; None with checkForCorruptJournalFiles, which refuses the
    start); ``uncommitted()``: the keys of the transactions whose ROLLBACK the replay reads intact after the batch
    or that it leaves open (a local one's skipped record, its ROLLBACK included, changes nothing: it is rolled
    back either way); ``held_commit(cmd)``: a local transaction's COMMIT whose sends the index holds already
    (index_ahead.held_commits; None with checkForCorruptJournalFiles)."""
    from amqtool.engines.kahadb.superseded import LOCATION_ONLY, _SIZE_AT, _effect, _restored

    n = len(buf)
    head = jr.BATCH_CONTROL_RECORD_HEADER
    if first + jr.BATCH_CONTROL_RECORD_SIZE > n or bytes(buf[first + 4:first + len(head)]) != head[4:]:
        return False  # (its length may read otherwise: the walk steps over it by what it reads)
    size, stored = struct.unpack_from(">iq", buf, first + _SIZE_AT)
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    if size <= 0 or start + size > n or stored <= 0:
        return False
    original = _restored(bytes(buf[start:start + size]), stored)
    if original is None:
        return False
    try:
        written = _written_from(buf, first, start, original)
        if written is None:
            return False
        data = bytes(buf)
        # (the walk over this file alone: a next file holding only the end marker takes it to its end, and keeps
        # this one from being taken for the newest, whose corrupted blocks the walk would step over)
        walked = [(off, sz) for _fid, off, sz in walk([0, 1], lambda fid: data if fid == 0 else jr.EOF_RECORD)
                  if off >= first]
        returned = {}
        for off, sz in walked:
            if off not in written:
                return False  # (a record header read where none was written)
            returned[off] = load(data, off, sz)
    except (FormatError, WalkStop, struct.error):
        return False
    for off, cmd in written.items():
        now = returned.get(off)
        if now is not None:
            if cmd is None or _effect(now) != _effect(cmd):
                return False
            continue
        if cmd is None or cmd.type in LOCATION_ONLY:
            continue
        if cmd.type is EntryType.REMOVE_MESSAGE and cmd.transaction is None and unmatched is not None \
                and unmatched(cmd):
            continue
        if cmd.type is EntryType.ADD_MESSAGE and held is not None and held(off, cmd):
            continue
        if cmd.type is EntryType.COMMIT and held_commit is not None and held_commit(cmd):
            continue
        if cmd.type in (EntryType.ADD_MESSAGE, EntryType.REMOVE_MESSAGE, EntryType.ROLLBACK) \
                and cmd.transaction is not None and cmd.transaction.local and uncommitted is not None \
                and cmd.transaction.key in uncommitted():
            continue
        # (a send of a transaction too: skipped, its COMMIT adds nothing, and the ack finds nothing)
        if not acked_send(cmd, acked, subscribed, in_transaction=True):
            return False
    return True


def _written_from(buf, first: int, start: int, original: bytes) -> dict | None:
    """``{offset: command}`` (None for a record of another type than a user record's) of the records written
    from the batch at ``first`` (its body ``original``) to the file's end: that batch's, then those of every
    later batch, each of which must check out; None when they do not read so."""
    out = {}
    pos = 0
    while pos < len(original):
        sz, rtype = struct.unpack_from(">ib", original, pos)
        if sz < jr.RECORD_HEAD_SPACE or pos + sz > len(original):
            return None
        out[start + pos] = decode_command(original[pos + 5:pos + sz]) if rtype == jr.USER_RECORD_TYPE else None
        pos += sz
    for ev in jr.scan_file(buf):
        if isinstance(ev, jr.CorruptRange) and ev.first > first:
            return None
        if isinstance(ev, jr.Batch) and ev.offset > first:
            for rec in jr.iter_batch_records(buf, ev):
                out[rec.offset] = decode_command(bytes(rec.payload))
    return out


def acked_send(cmd, acked: dict, subscribed, *, in_transaction: bool = False) -> bool:
    """``cmd`` is a send outside a transaction (or in one, ``in_transaction``) that acknowledgements after the
    checkpoint take back: a queue's acked, a topic's acked by each of its durable subscriptions."""
    if cmd.type is not EntryType.ADD_MESSAGE or cmd.transaction is not None and not in_transaction \
            or cmd.destination is None:
        return False
    key = cmd.destination.key
    by = acked.get(key, {}).get(cmd.message_id, set())
    if cmd.destination.type in (1, 3):
        subs = subscribed(key)
        return bool(subs) and set(subs) <= by
    return None in by
