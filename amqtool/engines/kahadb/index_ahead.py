"""A damaged batch after the index checkpoint whose records the index on disk already holds.

KahaDB writes index pages between checkpoints: ``PageFile`` flushes its write cache whenever it holds
``indexWriteBatchSize`` pages (1000 by default, far fewer on a busy broker or a store configured lower), while
page 0's ``lastUpdate`` moves only at a checkpoint (``MessageDatabase.checkpointUpdate``). So the order index a
killed broker leaves can hold sends written after ``lastUpdate``, at their journal Location. At start the
broker replays from ``lastUpdate``; ``Journal.recoveryCheck`` has marked a batch of the newest file that fails
its checksum a corrupted block, and ``getNextLocation`` skips it. A send the index already holds loses
nothing: the replay of it would only have found its Location in ``locationIndex`` ("a redo of a previously
added message", ``updateIndex``), and the broker reads the message at dispatch from the index's Location. The
COMMIT of a local transaction whose sends the index holds loses nothing either: the transaction stays in
flight and is rolled back at the end of recovery, which undoes no index entry.

With ``checkForCorruptJournalFiles=true`` the broker instead refuses to start ("Detected missing/corrupt
journal files referenced by", ``recoverIndex``): the caller does not use this then. Checked on the kl45
hold-out store h2-many-dests-tx-kill (indexWriteBatchSize=50): a real 5.17.2 broker with the default settings
delivers every message of the index with db-8.log's first batch corrupted, and refuses to start with the check on.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

from amqtool.engines.kahadb.superseded import LOCATION_ONLY, as_written


def located(indexed: dict) -> dict:
    """``(file id, offset) -> (destination key, message id)`` of every entry of the order indexes
    (``DirResult.indexed``)."""
    return {(m.file_id, m.offset): (key, m.message_id) for key, dest in indexed.items() for m in dest.messages}


def holds(where: dict, fid: int, offset: int, cmd) -> bool:
    """The index holds the send ``cmd`` written at ``offset`` of file ``fid`` at that Location (``where``:
    :func:`located`)."""
    return where.get((fid, offset)) == (cmd.destination.key, cmd.message_id)


def held(buf, first: int, last: int, fid: int, where: dict, transactions: dict) -> bool:
    """True when ``[first, last]`` of the newest file ``fid`` is one batch (as written: superseded.as_written)
    whose records are all sends the index holds at their own Location (``where``: :func:`located`), COMMITs
    of local transactions the replay leaves open whose every operation is such a send (``transactions``:
    ``Replay.transactions``), or records whose ``process`` only moves ``lastUpdate``."""
    written = as_written(buf, first, last)
    if written is None:
        return False
    base = 0 if written[0] is buf else first  # (a rebuilt copy starts at the batch)
    n = 0
    try:
        for rec in jr.iter_batch_records(*written):
            cmd = decode_command(bytes(rec.payload))
            n += 1
            if cmd.type in LOCATION_ONLY and not cmd.unknown:
                continue
            if cmd.type is EntryType.ADD_MESSAGE and holds(where, fid, base + rec.offset, cmd):
                continue
            if cmd.type is EntryType.COMMIT and cmd.transaction is not None and cmd.transaction.local:
                tx = transactions.get(cmd.transaction.key)
                if tx is not None and tx.ops and all(op[0] == "add" and where.get(op[3]) == (op[1].key,
                                                                                            op[2].message_id)
                                                     for op in tx.ops):
                    continue
            return False
    except (FormatError, AttributeError, ValueError):
        return False
    return n > 0


def held_commits(d, last_update: tuple, where: dict, taken_back=None):
    """A predicate over a journal command: a COMMIT of a local transaction of store directory ``d``, begun after
    ``last_update`` ((file id, offset)), whose every operation the replay reads is a send the index on disk holds
    at its own Location (``where``: :func:`located`) or one acknowledgements after it take back
    (``taken_back(cmd)``). Lost to the replay (stepped over by its walk), it leaves the transaction in flight:
    ``MessageDatabase.recover`` rolls it back at its end, which undoes no index entry, so the broker delivers what
    its index holds, those sends included; an acknowledgement of a send never added finds nothing, as it would
    have taken it."""
    from amqtool.engines.kahadb.after_acks import replayed_commands

    ops: dict = {}
    kinds = (int(EntryType.ADD_MESSAGE), int(EntryType.REMOVE_MESSAGE), int(EntryType.PREPARE))
    for fid, off, cmd in replayed_commands(d, last_update, kinds):
        if cmd.transaction is not None:
            ops.setdefault(cmd.transaction.key, []).append((fid, off, cmd))

    # (a transaction begun before the checkpoint may hold operations the replay does not read: not judged)
    began = {tx.id.key: tx.first for tx in list(d.replay.finished) + list(d.replay.transactions.values())}

    def held_commit(cmd) -> bool:
        if cmd.type is not EntryType.COMMIT or cmd.transaction is None or not cmd.transaction.local \
                or not began.get(cmd.transaction.key, last_update) > last_update:
            return False
        mine = ops.get(cmd.transaction.key)
        return bool(mine) and all(c.type is EntryType.ADD_MESSAGE and (holds(where, fid, off, c) or (
            taken_back is not None and taken_back(c))) for fid, off, c in mine)

    return held_commit


def passed_subscriptions(d, last_update: tuple) -> list[tuple]:
    """The durable subscriptions the index on disk has passed over a send after ``last_update`` ((file id,
    offset)) that the journal's replay leaves waiting for them: ``(destination key, sub key, [message id])``
    per subscription.

    The index can already hold sends written after its checkpoint (pages flushed between checkpoints, above).
    Replayed at start, such a send finds its Location in ``locationIndex``: a redo, which keeps the entry's
    sequence and adds no ack position for any subscription (``MessageDatabase.updateIndex``, only a new send
    calls ``addAckLocationForNewMessage``). So a subscription whose cursor in the index (LastAck, ackPositions)
    leaves out an entry the index holds at the send's own Location, while no acknowledgement of that
    subscription in the journal took it, never gets that message: lost for it."""
    out = []
    for key, dest in (d.indexed or {}).items():
        st = d.replay.destinations.get(key)
        if not dest.subscriptions or st is None:
            continue
        at = {(m.file_id, m.offset): m for m in dest.messages}
        cursors = {sk: set(seqs) for sk, seqs in dest.subscriptions.items()}
        passed: dict = {}
        for mid, m in st.messages.items():
            entry = at.get((m.file_id, m.offset))
            if (m.file_id, m.offset) <= last_update or entry is None or entry.message_id != mid:
                continue
            for sk in m.waiting or ():
                if sk in cursors and entry.seq not in cursors[sk]:
                    passed.setdefault(sk, []).append(mid)
        out.extend((key, sk, sorted(mids)) for sk, mids in sorted(passed.items()))
    return out
