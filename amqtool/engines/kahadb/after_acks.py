"""The acknowledgements the broker replays after the index checkpoint: index entries it never dispatches.

``MessageDatabase.recover`` (ActiveMQ 5.17) replays every journal record after ``lastUpdate`` onto the index
before anything is dispatched ("Recovering from the journal @N:M"); a ``KahaRemoveMessageCommand`` there
takes its message out of the order and location indexes (``updateIndex``: by ``messageIdIndex``, without
reading the message's record), and a transactional one does so at its ``KahaCommitCommand``. Only then does
``recoverIndex`` check the locationIndex against corrupt journal ranges. So an index entry acknowledged after
the checkpoint -- every store a broker did not close has them -- is never read: damage to its record is
latent, as for any record no live entry points at.

A REMOVE that is itself damaged is not replayed (the broker skips a batch that fails its checksum), so only
the records of batches that check out count here.
"""
from __future__ import annotations

from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

from amqtool.engines.kahadb.scan import mapped

_REMOVE, _COMMIT, _ROLLBACK = int(EntryType.REMOVE_MESSAGE), int(EntryType.COMMIT), int(EntryType.ROLLBACK)


def replayed_commands(d, last_update: tuple, kinds: tuple, *, decode: bool = True) -> Iterator[tuple]:
    """``(file id, offset, command)`` of each record of a type in ``kinds`` (``EntryType`` ints) that the replay
    after ``last_update`` ((file id, offset)) in store directory ``d`` reads, in file order: the records of batches
    that check out, decoded (one that does not decode is left out, as the broker's load fails on it).
    ``decode=False``: every such record's ``(file id, offset, None)``, none decoded (and none left out)."""
    for f in d.files:
        if f.id < last_update[0] or not f.size:
            continue
        with mapped(f.path) as buf:
            for ev in jr.scan_file(buf):
                if not isinstance(ev, jr.Batch) or (f.id, ev.end) <= last_update:
                    continue
                try:
                    records = list(jr.iter_batch_records(buf, ev))
                except FormatError:
                    continue
                for rec in records:
                    if (f.id, rec.offset) <= last_update or not len(rec.payload) or rec.payload[0] not in kinds:
                        continue
                    if not decode:
                        yield f.id, rec.offset, None
                        continue
                    try:
                        yield f.id, rec.offset, decode_command(bytes(rec.payload))
                    except FormatError:
                        continue


def acked_after(d, last_update: tuple) -> dict:
    """Destination key -> {message id: set of subscription keys acknowledging it, None for a queue ack} of the
    REMOVEs the broker replays after ``last_update`` ((file id, offset)) in store directory ``d``."""
    out: dict = {}
    pending: dict = {}  # transaction key -> its acks, applied at COMMIT
    for _fid, _off, cmd in replayed_commands(d, last_update, (_REMOVE, _COMMIT, _ROLLBACK)):
        if cmd.type is EntryType.REMOVE_MESSAGE:
            ack = (cmd.destination.key, cmd.message_id, cmd.subscription_key or None)
            if cmd.transaction is not None:
                pending.setdefault(cmd.transaction.key, []).append(ack)
            else:
                _ack(out, ack)
        elif cmd.type is EntryType.COMMIT:
            for ack in pending.pop(cmd.transaction.key, []):
                _ack(out, ack)
        else:
            pending.pop(cmd.transaction.key, None)
    return out


def unsubscribed_after(d, last_update: tuple) -> dict:
    """Destination key -> the subscription keys whose durable subscription a SUBSCRIPTION record without its
    info removes in the replay after ``last_update`` ((file id, offset)) in store directory ``d`` (batches that
    check out; one a later record of its key writes again is not removed). ``updateIndex(
    KahaSubscriptionCommand)`` deletes such a subscription's ack positions and LastAck: a message the index
    holds only for removed subscriptions leaves it before anything is dispatched (an UNSUBSCRIBE a kill left
    after the checkpoint; the real broker hands it nothing, the kl52 hold-out r3-unsub-groups-ttl-kill)."""
    out: dict = {}
    for _fid, _off, cmd in replayed_commands(d, last_update, (int(EntryType.SUBSCRIPTION),)):
        if cmd.destination is None:
            continue
        subs = out.setdefault(cmd.destination.key, set())
        (subs.add if cmd.subscription_info is None else subs.discard)(cmd.subscription_key)
    return {key: subs for key, subs in out.items() if subs}


def _ack(out: dict, ack: tuple) -> None:
    key, mid, sub = ack
    out.setdefault(key, {}).setdefault(mid, set()).add(sub)


def gone_after(acked: dict, key: str, message_id: str, subscriptions, removed: set = frozenset()) -> bool:
    """The index entry ``message_id`` of destination ``key`` leaves the index in the replay: acknowledged by
    a queue ack, or (a topic's: ``subscriptions`` the index still has it pending for) by all of them, each
    by an ack or by its removal (``removed``: unsubscribed_after's keys for ``key``)."""
    subs = acked.get(key, {}).get(message_id) or set()
    if not subs and not (subscriptions and removed):
        return False
    return None in subs or (bool(subscriptions) and set(subscriptions) <= subs | set(removed))


def ended_transactions(d, last_update: tuple) -> set:
    """The keys of the transactions whose COMMIT or ROLLBACK the replay after ``last_update`` ((file id,
    offset)) in store directory ``d`` reads (batches that check out)."""
    return {cmd.transaction.key for _fid, _off, cmd in replayed_commands(d, last_update, (_COMMIT, _ROLLBACK))
            if cmd.transaction is not None}


def rolled_back_transactions(d, last_update: tuple) -> dict:
    """Transaction key -> (file id, offset) of the ROLLBACK the replay after ``last_update`` in store directory
    ``d`` reads (batches that check out). ``process(KahaRollbackCommand)`` drops the transaction's operations,
    in flight or prepared: what its sends and acks did is undone whether or not they are replayed."""
    return {cmd.transaction.key: (fid, off) for fid, off, cmd in replayed_commands(d, last_update, (_ROLLBACK,))
            if cmd.transaction is not None}


def acks_nothing(d):
    """A predicate over a journal command (and the ``(destination key, message id)`` of messages to count as held
    besides: sends the replay reads elsewhere): a REMOVE outside a transaction whose destination holds no message of
    its id, in the index or in the journal's replay (store directory ``d``), or that names a subscription key no
    durable subscription of its destination has there: replayed, it takes nothing any consumer is handed.
    ``updateIndex(KahaRemoveMessageCommand)`` finds the message by ``messageIdIndex`` of the destination the
    command names (``getStoredDestination`` makes an empty one for a name it does not know) and does nothing
    when the id is not there; a REMOVE of a message acknowledged already, or sent only later in the replay,
    finds nothing either. Under a subscription key no subscription has, ``removeAckLocation`` finds no
    ``ackPositions`` entry for it and removes nothing, and the LastAck it may put under that key in
    ``subscriptionAcks`` is no subscription's (a subscription is recovered from ``subscriptions``, its cursor
    read under its own key). So a damaged destination name, message id or subscription key in an ack that was
    harmless to drop (unhanded.unmatched_ack) changes nothing delivered."""
    held: dict = {}
    subscribed: dict = {}
    for key, st in d.replay.destinations.items():
        held.setdefault(key, set()).update(st.messages)
        subscribed.setdefault(key, set()).update(st.subscriptions)
    for key, dest in (d.indexed or {}).items():
        held.setdefault(key, set()).update(m.message_id for m in dest.messages)
        subscribed.setdefault(key, set()).update(dest.subscriptions)

    def idle(cmd, sent: set = frozenset()) -> bool:
        # sent: (destination key, message id) of more messages to count as held
        if cmd.type is not EntryType.REMOVE_MESSAGE or cmd.transaction is not None or cmd.destination is None:
            return False
        key = cmd.destination.key
        return cmd.message_id not in held.get(key, ()) and (key, cmd.message_id) not in sent \
            or bool(cmd.subscription_key) and cmd.subscription_key not in subscribed.get(key, ())

    return idle


def spent_acks(d, last_update: tuple):
    """A predicate over a journal command (and the ``(destination key, message id)`` of more sends to count as
    replayed: the damaged batch's own, as written): a queue acknowledgement (a REMOVE without a subscription
    key, in a transaction or not) of a message that the index on disk does not hold, under its MessageKeys id or
    a messageIdIndex key, and that no send read after ``last_update`` ((file id, offset)) in store directory
    ``d`` puts back. Its replay finds nothing: ``updateIndex(KahaRemoveMessageCommand)`` removes the id from
    ``messageIdIndex`` and stops when that gives no sequence. A killed broker leaves such acks after its
    checkpoint whenever index pages were written after it (``PageFile`` flushes every ``indexWriteBatchSize``
    pages, index_ahead.py): the index already took the message out. Losing the ack, or reading it as one that
    takes nothing, then changes nothing delivered. Always False without a readable index."""
    import struct

    from amqtool.formats.kahadb import pagefile as pf

    if d.indexed is None:
        return lambda cmd, sent=frozenset(): False
    held = {(key, m.message_id) for key, dest in d.indexed.items() for m in dest.messages}
    try:
        with mapped(d.directory / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            for key, sd in list(pf._iter_destinations(buf, ps, meta.destinations_page, meta.version)):
                by_id, _by_location = pf.sequences(buf, ps, sd, meta.version)
                held.update((key, mid) for mid in by_id)
    except (FormatError, OSError, struct.error):
        return lambda cmd, sent=frozenset(): False  # (a messageIdIndex that does not read may hold any id)
    held.update((cmd.destination.key, cmd.message_id)
                for _fid, _off, cmd in replayed_commands(d, last_update, (int(EntryType.ADD_MESSAGE),))
                if cmd.destination is not None)

    def spent(cmd, sent: set = frozenset()) -> bool:
        if cmd is None or cmd.type is not EntryType.REMOVE_MESSAGE or cmd.subscription_key \
                or cmd.destination is None:
            return False
        at = (cmd.destination.key, cmd.message_id)
        return at not in held and at not in sent

    return spent
