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

A record whose batch fails its checksum is skipped, as the broker's ``Journal`` skips corrupted blocks
(``checkForCorruptJournalFiles``); :func:`after_checkpoint` walks exactly the records amqtool's journal
reader yields (the same walk ``rebuilt`` replays), so a record the rebuild loses is lost here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class After:
    """What the records after ``lastUpdate`` do: ids ADDed per destination key, and the REMOVEs that take
    effect (``(message id, subscription key or None)`` per destination key)."""

    adds: dict = field(default_factory=dict)
    removes: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.adds or self.removes)


def after_checkpoint(directory, files, last_update: tuple) -> After:
    """The effect of the records located after ``last_update`` ((file id, offset)) in ``directory``'s journal;
    ``files(id)`` gives a file's bytes or None."""
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.commands import EntryType, decode_command

    from amqtool.engines.kahadb.scan import journal_files

    out = After()
    pending: dict = {}  # tx key -> its ops, applied at COMMIT
    for jf in journal_files(directory):
        if jf.id < last_update[0]:
            continue
        buf = files(jf.id)
        if not buf:
            continue
        for ev in jr.scan_file(buf):
            if not isinstance(ev, jr.Batch):
                continue
            try:
                records = list(jr.iter_batch_records(buf, ev))
            except FormatError:
                continue
            for rec in records:
                if (jf.id, rec.offset) <= last_update:
                    continue
                try:
                    cmd = decode_command(bytes(rec.payload))
                except FormatError:
                    continue
                t = cmd.type
                if t is EntryType.ADD_MESSAGE or t is EntryType.REMOVE_MESSAGE:
                    op = (t, cmd.destination.key, cmd.message_id,
                          getattr(cmd, "subscription_key", None) or None)
                    if cmd.transaction is not None:
                        pending.setdefault(cmd.transaction.key, []).append(op)
                    else:
                        _apply(out, op)
                elif t is EntryType.COMMIT:
                    for op in pending.pop(cmd.transaction.key, []):
                        _apply(out, op)
                elif t is EntryType.ROLLBACK:
                    pending.pop(cmd.transaction.key, None)
    return out


def _apply(out: After, op) -> None:
    from amqtool.formats.kahadb.commands import EntryType

    t, key, mid, sub = op
    if t is EntryType.ADD_MESSAGE:
        out.adds.setdefault(key, set()).add(mid)
    else:
        out.removes.setdefault(key, set()).add((mid, sub))


def replayed(index_state: dict, rebuilt_state: dict, after: After, id_of) -> dict:
    """The index state (``{"dests", "subs"}`` of entries ``"<id> <digest>"``) with the records after the
    checkpoint replayed onto it: REMOVEs taken out, and every message ADDed after it that the full replay
    (``rebuilt_state``) still holds put in (with its digest there), for its destination and for each
    subscription it is pending for."""
    if not after:
        return index_state
    dests = {}
    for key in set(index_state["dests"]) | set(rebuilt_state["dests"]):
        gone = {mid for mid, sub in after.removes.get(key, ()) if sub is None}
        added = after.adds.get(key, set())
        have = [x for x in index_state["dests"].get(key, ()) if id_of(x) not in gone]
        ids = {id_of(x) for x in have}
        have += [x for x in rebuilt_state["dests"].get(key, ()) if id_of(x) in added and id_of(x) not in ids]
        if have:
            dests[key] = tuple(have)
    subs = {}
    for k in set(index_state["subs"]) | set(rebuilt_state["subs"]):
        key, sk = k
        gone = {mid for mid, sub in after.removes.get(key, ()) if sub in (None, sk)}
        added = after.adds.get(key, set())
        have = [x for x in index_state["subs"].get(k, ()) if id_of(x) not in gone]
        ids = {id_of(x) for x in have}
        have += [x for x in rebuilt_state["subs"].get(k, ()) if id_of(x) in added and id_of(x) not in ids]
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
