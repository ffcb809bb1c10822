"""Records after the index checkpoint that the broker's replay walk steps over, and what that changes.

``MessageDatabase.recover`` (ActiveMQ 5.17) replays from ``getRecoveryPosition()``:
``getNextInitializedLocation(lastUpdate)``, i.e. ``Journal.getNextLocation`` reads a 5-byte header *at*
``lastUpdate`` whatever lies there, steps over what is not a user record by the size it reads, and skips the
first user record it meets (taken for the one at ``lastUpdate``). The broker only ever records there the
start of a record it processed, so the walk meets that record first and replays every one after it. When
``lastUpdate``'s offset is damaged it points inside a record: the walk reads sizes out of that record's
bytes, lands wherever they send it, and replays only from there (amqtool/engines/kahadb/replay_walk.py);
the sends and acknowledgements it stepped over never reach the index, and nothing else reads them (the
index, checkpointed before them, does not hold them). A walk that throws or meets a record that does not
load is ``kahadb-recovery-stops``; this is the walk that gets through but replays less.

What the rest of verify takes as replayed is every record of a batch that checks out after ``lastUpdate``
(after_acks.replayed_commands); those the walk does not return are the skipped ones. :func:`skipped_effect`
replays the walk's records, and the same with the skipped ones put back in file order, onto the index's live
messages, as ``process`` does (an ADD makes its message live, a REMOVE takes it out, or acknowledges it for its
subscription; a transaction's operations at its COMMIT, none at its ROLLBACK), and names the messages whose
state differs. Skipped records that change nothing (the ack-map record, an ADD with its REMOVE) are no
finding.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType

from amqtool.engines.kahadb.after_acks import replayed_commands
from amqtool.engines.kahadb.scan import mapped

_KINDS = (int(EntryType.ADD_MESSAGE), int(EntryType.REMOVE_MESSAGE), int(EntryType.COMMIT),
          int(EntryType.ROLLBACK))
_ANY = frozenset(range(256))


def skipped_effect(d, last_update: tuple, walked: list, anchor: tuple | None = None,
                   rejects=None) -> tuple[int, list]:
    """``(records skipped, [(destination key, message id)...] whose state the skip changes)`` for store
    directory ``d`` whose index checkpoint is ``last_update`` ((file id, offset)), given ``walked``: the
    ``(file id, offset, command)`` the broker's replay loads from there (replay_walk.replay, which got
    through). ``(0, [])`` when it replays every record the batches hold after the checkpoint.

    ``anchor``: the latest of the checkpoint's own records page 0 names (producer audit, ack map), which
    ``checkpointUpdate`` writes just before it records ``lastUpdate`` (so ``lastUpdate`` is at or after it, on
    a record). A ``lastUpdate`` after it that is no record's start (damaged: past the journal's end, say) is
    judged from the anchor instead: the records between them are replayed again onto an index that already
    holds what they did (which changes nothing), or were never in it (a damaged ``lastUpdate``: what their
    skip loses shows). A ``lastUpdate`` before the anchor is damaged as well: only the skipped records after
    the anchor count, those before it being the index's already.

    ``rejects(destination key, subscription key, message bytes)`` (unhanded.selector_rejects): a topic message a
    durable subscription's selector does not match is never handed to it (``TopicStorePrefetch.recoverMessage``),
    so a skip that only changes whether it is pending for that subscription changes nothing delivered."""
    seen = {(fid, off) for fid, off, _cmd in walked}
    start = last_update
    if anchor is not None and anchor < last_update and not _record_at(d, last_update):
        start = anchor
    # (decoding is most of the cost: only when something is skipped)
    if all((fid, off) in seen for fid, off, _ in replayed_commands(d, start, _KINDS, decode=False)):
        return 0, []
    skipped = [r for r in replayed_commands(d, start, _KINDS) if (r[0], r[1]) not in seen]
    if anchor is not None and start < anchor:
        # a lastUpdate before the checkpoint's own records is damaged too (checkpointUpdate writes them first):
        # the records up to them were in the index already, and their skip changes nothing it holds
        skipped = [r for r in skipped if (r[0], r[1]) > anchor]
    # the acks an ack compaction forwarded, in its marker's batch, which the walk jumps over while the marker's
    # source file is there: copies of acks that file holds, already the index's (MessageDatabase.forwardAllAcks)
    forwarded = _forwarded_spans(d, {r[0] for r in skipped})
    skipped = [r for r in skipped if not any(f == r[0] and a <= r[1] < b for f, a, b in forwarded)]
    walked = [r for r in walked if int(r[2].type) in _KINDS]
    live = {(k, m.message_id) for k, dest in (d.indexed or {}).items() for m in dest.messages}
    # the walk as it goes, against the same walk with the records it stepped over put back in file order (what
    # it replays of a damaged batch of an older file is another finding's: only the skip is judged here)
    a = _replay(live, [cmd for _f, _o, cmd in sorted(walked + skipped, key=lambda r: (r[0], r[1]))])
    b = _replay(live, [cmd for _f, _o, cmd in walked])
    subs = _subscriptions(d)
    changed = _handed(a, subs) ^ _handed(b, subs)
    if rejects is not None:
        sent = {(cmd.destination.key, cmd.message_id): cmd.message for _f, _o, cmd in walked + skipped
                if cmd.type is EntryType.ADD_MESSAGE and cmd.destination is not None}
        changed = {x for x in changed if x[2] is None or (x[0], x[1]) not in sent
                   or not rejects(x[0], x[2], sent[(x[0], x[1])])}
    return len(skipped), sorted({x[:2] for x in changed})


def _subscriptions(d) -> dict:
    """Destination key -> the durable subscription keys the index or the journal's replay knows of it."""
    out: dict = {}
    for key, st in d.replay.destinations.items():
        out.setdefault(key, set()).update(st.subscriptions)
    for key, dest in (d.indexed or {}).items():
        out.setdefault(key, set()).update(dest.subscriptions)
    return out


def _handed(state: set, subs: dict) -> set:
    """What :func:`_replay`'s ``state`` hands out: a queue's live messages, and for a topic (KahaDestination
    types 1, 3) each ``(key, id, subscription)`` of a live message that subscription has not acknowledged. A
    topic's stored message goes only to its durable subscriptions (one every subscription acknowledged, or one
    of a topic without any, is handed to no one, whatever else the replay recorded of it)."""
    out = set()
    acks: dict = {}
    for key, mid, sub in state:
        if sub is not None:
            acks.setdefault((key, mid), set()).add(sub)
    for key, mid, sub in state:
        if sub is not None:
            continue
        if key.split(":", 1)[0] in ("1", "3"):
            out |= {(key, mid, s) for s in subs.get(key, set()) - acks.get((key, mid), set())}
        else:
            out.add((key, mid, None))
    return out


def _forwarded_spans(d, file_ids: set) -> list[tuple[int, int, int]]:
    """``(file id, start, end)`` of each batch, in the files ``file_ids`` of store directory ``d``, that holds an
    ack compaction marker (a ``KahaRewrittenDataFileCommand``: ``forwardAllAcks`` writes it and the acks it
    forwards in one batch, at the head of the compaction file)."""
    out = []
    for f in d.files:
        if f.id not in file_ids or not f.size:
            continue
        with mapped(f.path) as buf:
            for ev in jr.scan_file(buf):
                if not isinstance(ev, jr.Batch):
                    continue
                try:
                    records = list(jr.iter_batch_records(buf, ev))
                except FormatError:
                    continue
                if any(len(r.payload) and r.payload[0] == EntryType.REWRITTEN_DATA_FILE for r in records):
                    out.append((f.id, ev.offset, ev.end))
    return out


def _record_at(d, loc: tuple) -> bool:
    """Whether a user record of a batch that checks out starts at ``loc`` ((file id, offset))."""
    fid, off = loc
    first = next(replayed_commands(d, (fid, off - 1), _ANY, decode=False), None)
    return first is not None and first[:2] == loc


def _replay(live: set, cmds: list) -> set:
    """The live (destination key, message id) pairs, with (key, id, subscription) for each acknowledgement of
    a live topic message, after ``cmds`` are processed in order onto ``live``."""
    state = {(k, mid, None) for k, mid in live}
    pending: dict = {}
    for cmd in cmds:
        t = cmd.type
        if t is EntryType.COMMIT or t is EntryType.ROLLBACK:
            ops = pending.pop(cmd.transaction.key, [])
            if t is EntryType.COMMIT:
                for op in ops:
                    _apply(state, op)
        elif cmd.transaction is not None:
            pending.setdefault(cmd.transaction.key, []).append(cmd)
        else:
            _apply(state, cmd)
    return state


def _apply(state: set, cmd) -> None:
    key, mid = cmd.destination.key, cmd.message_id
    if cmd.type is EntryType.ADD_MESSAGE:
        state.add((key, mid, None))
    elif (key, mid, None) in state:
        sub = getattr(cmd, "subscription_key", None) or None
        if sub is None:
            state -= {x for x in state if x[:2] == (key, mid)}
        else:
            state.add((key, mid, sub))
