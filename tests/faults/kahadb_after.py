"""The truth's model of the records after the index checkpoint: what the broker replays at start.

``MessageDatabase.recover()`` (ActiveMQ 5.17) walks the journal from ``getRecoveryPosition()`` -- the
index's ``lastUpdate`` (or the first in-progress transaction before it) -- with ``Journal.getNextLocation``
and ``process``-es every record after it into the index ("Recovering from the journal @N:M", "Recovery
replayed K operations"): an ADD puts the message in its destination's order index, a REMOVE takes it out
(for a topic: out of that subscription's pending set), a transaction's operations take effect at its COMMIT
and are dropped at its ROLLBACK (and an open one is rolled back). A store the broker did not close (SIGKILL,
power loss) always holds such records, and so can a cleanly stopped one (the ack compaction of
``checkpointUpdate`` writes after the location it records). Without this the truth would take the index
alone as what the broker delivers, and call a damaged record after the checkpoint harmless when the broker
in fact loses (or keeps) what it said.

The records are those the broker's own walk returns (``Journal.getNextLocation``, followed by
amqtool/engines/kahadb/replay_walk.py): with the 5.17 defaults (``checkForCorruptJournalFiles`` off) only the
newest file is ``recoveryCheck``ed at start (``Journal.start``: ``lastAppendLocation`` is null, so
``recoveryCheck(dataFiles.getTail())``), and only its corrupted blocks are stepped over; an older file's
records are read header by header and ``load``ed whatever their batch's checksum says. So a damaged message id
in an older file's batch after the checkpoint is a live message of the damaged id (and the REMOVE of the
right id finds nothing), not a skipped batch; a record the walk returns that does not load, or a walk that
throws, stops the broker at start (``recover``: "Failed to recover data at position"). An index without a
``lastUpdate`` (no checkpoint yet) is replayed from the journal's first record (``getNextLocation(null)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class After:
    """What the records after ``lastUpdate`` do: the messages ADDed and still there at the end of the walk
    (``{message id: (file id, offset, size)}`` per destination key), the REMOVEs that take effect
    (``(message id, subscription key or None)`` per destination key), and why the replay stops the broker
    ('' when it does not)."""

    adds: dict = field(default_factory=dict)
    removes: dict = field(default_factory=dict)
    refused: str = ""
    # (destination key, subscription key) -> the message ids of that subscription's acknowledgements the walk
    # applies (not the UNMATCHED marker), in walk order: the last of them the index holds is its LastAck from
    # then on, the last in time, as updateIndex(KahaRemoveMessageCommand) puts it (subscriptionAcks.put(new
    # LastAck(sequence, priority)) for a message the messageIdIndex finds)
    last_acks: dict = field(default_factory=dict)
    # (destination key, subscription key) of the durable subscriptions a SUBSCRIPTION record without its info
    # removes (an UNSUBSCRIBE: updateIndex(KahaSubscriptionCommand) deletes its ack positions and LastAck), and
    # no later one writes again
    unsubscribed: set = field(default_factory=set)
    # (destination key, subscription key) of the durable subscriptions a SUBSCRIPTION record with its info
    # writes (updateIndex(KahaSubscriptionCommand) puts it in the index's subscriptions B-tree)
    subscribed: set = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.adds or self.removes or self.refused or self.unsubscribed)


def after_checkpoint(directory, files, last_update: tuple | None, held: dict | None = None) -> After:
    """The effect of the records the broker replays after ``last_update`` ((file id, offset); None: from the
    journal's start) in ``directory``'s journal; ``files(id)`` gives a file's bytes or None.

    ``held``: destination key -> ``{(file id, offset): message id}`` of the entries the index on disk holds
    (its locationIndex: index pages are written between checkpoints, so it can hold sends written after
    ``lastUpdate``). A send replayed at a Location its destination's locationIndex holds is "a redo of a
    previously added message" (``MessageDatabase.updateIndex(KahaAddMessageCommand)``: ``locationIndex.put``
    returns the previous sequence, which is put back, and nothing else is indexed), whatever message id the
    record now reads: it adds nothing. A REMOVE the walk applies takes its message's Location out of the
    locationIndex (``removeAckLocation`` / the queue's remove), so a send replayed there later is a new one."""
    from amqtool.engines.kahadb.replay_walk import WalkStop, load, walk
    from amqtool.engines.kahadb.scan import journal_files
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb.commands import EntryType

    out = After()
    ids = [jf.id for jf in journal_files(directory) if files(jf.id)]  # (Journal.start ignores empty files)
    if last_update is not None and last_update[0] not in ids:
        return out  # the broker cannot start there: delivered() refuses such a store already (needed files)
    pending: dict = {}  # tx key -> its ops, applied at COMMIT
    held = {key: dict(locs) for key, locs in (held or {}).items()}
    try:
        for fid, off, size in walk(ids, files, last_update):
            try:
                cmd = load(files(fid), off, size)
            except FormatError as err:
                out.refused = f"{fid}:{off}: the record does not load ({err.message})"
                return out
            t = cmd.type
            if t is EntryType.ADD_MESSAGE or t is EntryType.REMOVE_MESSAGE:
                ack = getattr(cmd, "ack", None)
                op = (t, cmd.destination.key, cmd.message_id,
                      getattr(cmd, "subscription_key", None) or None, (fid, off, size),
                      ack is not None and len(ack) == 0)
                if cmd.transaction is not None:
                    pending.setdefault(cmd.transaction.key, []).append(op)
                else:
                    _apply(out, op, held)
            elif t is EntryType.COMMIT:
                for op in pending.pop(cmd.transaction.key, []):
                    _apply(out, op, held)
            elif t is EntryType.ROLLBACK:
                pending.pop(cmd.transaction.key, None)
            elif t is EntryType.SUBSCRIPTION and cmd.destination is not None:
                k = (cmd.destination.key, cmd.subscription_key)
                (out.unsubscribed.add if cmd.subscription_info is None else out.unsubscribed.discard)(k)
                (out.subscribed.discard if cmd.subscription_info is None else out.subscribed.add)(k)
    except WalkStop as stop:
        out.refused = str(stop)
    return out


def _apply(out: After, op, held: dict) -> None:
    from amqtool.formats.kahadb.commands import EntryType

    t, key, mid, sub, loc, unmatched = op
    if t is EntryType.ADD_MESSAGE and loc[:2] in held.get(key, {}):
        return  # (a redo: the index holds this Location already; see after_checkpoint)
    if t is EntryType.ADD_MESSAGE:
        out.adds.setdefault(key, {})[mid] = loc
        # an ack of it the walk replayed before its send found no such message (updateIndex(
        # KahaRemoveMessageCommand): messageIdIndex gives no sequence, nothing happens), and the send puts it in
        # every subscription's ack positions (updateIndex(KahaAddMessageCommand): addAckLocationForNewMessage):
        # those acks take nothing (journal files swapped or renamed leave acks before their sends)
        earlier = out.removes.get(key)
        if earlier:
            earlier -= {x for x in earlier if x[0] == mid}
    else:
        out.removes.setdefault(key, set()).add((mid, sub))
        if sub is not None and not unmatched:
            out.last_acks.setdefault((key, sub), []).append(mid)
        if sub is None:
            out.adds.get(key, {}).pop(mid, None)
            mine = held.get(key)
            if mine:
                for at in [at for at, m in mine.items() if m == mid]:
                    del mine[at]


def replayed(index_state: dict, rebuilt_state: dict, after: After, id_of, entry) -> dict:
    """The index state (``{"dests", "subs"}`` of entries ``"<id> <digest>"``) with the records after the
    checkpoint replayed onto it: REMOVEs taken out, and every message the walk ADDed and left put in
    (``entry(message id, location)`` gives its entry, read where the walk found it), for its destination and
    for each subscription it is pending for: of those the full replay (``rebuilt_state``) says (every one, for
    a message the rebuild does not hold: its batch skipped, its id damaged), those the walk did not
    acknowledge it for (the rebuild skips a damaged batch of an older file, the walk replays its acks)."""
    if not after:
        return index_state
    dests = {}
    for key in set(index_state["dests"]) | set(rebuilt_state["dests"]) | set(after.adds):
        gone = {mid for mid, sub in after.removes.get(key, ()) if sub is None}
        have = [x for x in index_state["dests"].get(key, ()) if id_of(x) not in gone]
        ids = {id_of(x) for x in have}
        have += [entry(mid, loc) for mid, loc in after.adds.get(key, {}).items() if mid not in ids]
        if have:
            dests[key] = tuple(have)
    subs = {}
    for k in set(index_state["subs"]) | set(rebuilt_state["subs"]):
        key, sk = k
        gone = {mid for mid, sub in after.removes.get(key, ()) if sub in (None, sk)}
        known = {id_of(x) for (kk, _s), v in rebuilt_state["subs"].items() if kk == key for x in v}
        pending = {id_of(x) for x in rebuilt_state["subs"].get(k, ())}
        have = [x for x in index_state["subs"].get(k, ()) if id_of(x) not in gone]
        ids = {id_of(x) for x in have}
        # (a subscription the rebuild does not hold, its record damaged, still gets what the walk adds: the
        # broker's index holds it, and updateIndex(KahaAddMessageCommand) puts a new topic message in every
        # subscription's ack positions, addAckLocationForNewMessage)
        mine = k in rebuilt_state["subs"]
        have += [entry(mid, loc) for mid, loc in after.adds.get(key, {}).items()
                 if mid not in ids and mid not in gone and (mid in pending if mine and mid in known else True)]
        subs[k] = tuple(sorted(have))
    # a topic message every subscription acknowledged after the checkpoint leaves the destination too
    for key, removed in after.removes.items():
        acked = {mid for mid, sub in removed if sub is not None}
        if acked and key in dests:
            wanted = {id_of(x) for (k, _sk), v in subs.items() if k == key for x in v}
            kept = tuple(x for x in dests[key] if id_of(x) not in acked or id_of(x) in wanted)
            if kept:
                dests[key] = kept
            else:
                del dests[key]
    return {"dests": dests, "subs": subs}


def handed_from_last_ack(state: dict, after: After, order: dict, positions: dict, id_of) -> dict:
    """``state`` (what :func:`replayed` gives) with what the broker hands a durable subscription whose LastAck
    the walk moved (:attr:`After.last_acks`): ``recoverNextMessages`` starts a subscription whose ack positions
    hold nothing below its LastAck at ``LastAck + 1`` and hands every stored message after it (the selectors,
    applied later, filter them), including those it acknowledged earlier in time but that follow in sequence
    (prioritizedMessages dispatches by priority), and nothing before it; one whose ack positions do hold one
    below it is handed what they hold, from the first on: amqtool/engines/kahadb/last_acks.py,
    shown on the real broker with tests/data/kahadb/k2-priority-subs-kill. ``order``: destination key -> the
    message ids of the index's order index by sequence (every one), which the walk's sends follow;
    ``positions``: (destination key, subscription key) -> the message ids the index's ackPositions hold for it
    (to them the walk adds its sends, addAckLocationForNewMessage, and takes its acks out)."""
    if not after.last_acks:
        return state
    subs = dict(state["subs"])
    for (key, sk), acked in after.last_acks.items():
        k = (key, sk)
        if k not in subs:
            continue
        seq = {mid: i for i, mid in enumerate(order.get(key, ()))}
        for mid in after.adds.get(key, {}):
            seq.setdefault(mid, len(seq))
        last = next((seq[mid] for mid in reversed(acked) if mid in seq), None)
        if last is None:
            continue  # no ack the walk applied found its message: the LastAck did not move
        stored = state["dests"].get(key, ())
        gone = {mid for mid, sub in after.removes.get(key, ()) if sub in (None, sk)}
        held = (set(positions.get(k, ())) | set(after.adds.get(key, {}))) - gone
        if not any(id_of(x) in held for x in stored):
            # its ack positions hold nothing stored: getMessageCount is 0 and the store cursor never asks for any
            subs[k] = ()
        elif any(id_of(x) in held and seq.get(id_of(x), last) < last for x in stored):
            # ack positions below the LastAck (individual acks): from their first on, only what they hold
            subs[k] = tuple(sorted(x for x in stored if id_of(x) in held))
        else:
            subs[k] = tuple(sorted(x for x in stored if seq.get(id_of(x), -1) > last))
    return {**state, "subs": subs}


def unsubscribed(state: dict, after: After, id_of) -> dict:
    """``state`` without the durable subscriptions the walk removed (:attr:`After.unsubscribed`): the broker
    recovers no such subscription, and a topic message no remaining subscription waits for is gone
    (updateIndex(KahaSubscriptionCommand) without a subscription info removes the subscription's ack positions,
    and with them the messages only it still referenced). Shown on the real broker with the kl52 hold-out
    r3-unsub-groups-ttl-kill: a subscription UNSUBSCRIBEd after the checkpoint with 171 messages pending is
    handed none after the SIGKILL."""
    if not after.unsubscribed:
        return state
    subs = {k: v for k, v in state["subs"].items() if k not in after.unsubscribed}
    dests = dict(state["dests"])
    for key in {key for key, _sk in after.unsubscribed} & set(dests):
        wanted = {id_of(x) for (k, _sk), v in subs.items() if k == key for x in v}
        kept = tuple(x for x in dests[key] if id_of(x) in wanted)
        if kept:
            dests[key] = kept
        else:
            del dests[key]
    return {**state, "dests": dests, "subs": subs}
