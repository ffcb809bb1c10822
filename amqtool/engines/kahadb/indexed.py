"""What the broker delivers from an intact index: the order index of every destination and the cursors of
every durable subscription, read from db.data, and the journal records they point at.

With an index that loads (MessageDatabase.loadPageFile succeeds) and nothing to replay after ``lastUpdate``,
ActiveMQ 5.17 never walks the journal again: a queue's consumers get the messages of the order index, in
sequence order (``KahaDBStore.recoverNextMessages``), and a durable subscription gets those after its
``LastAck`` that are still in its ``ackPositions`` (``recoverSubscription``). Each message is read at the
Location the index holds, with the size the index holds (``DataFileAccessor.readRecord`` seeks to
``offset + 5`` and reads ``size - 5`` bytes: the record's own header is not read), decoded as an ADD or
UPDATE command (``MessageDatabase.load``) and unmarshalled as OpenWire (``KahaDBStore.loadMessage``); any
failure there stops the broker (``handleIOException``).

So damage to a record that no index entry names is latent while the index is intact: only a rebuild of the
index from the journal (db.data lost or corrupt, ``forceRecoverIndex``) reads it. Damage to a record an
entry names is what consumers get.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import FormatError
from amqtool.formats.kahadb import pagefile as pf
from amqtool.formats.kahadb.commands import AddMessageCommand, EntryType
from amqtool.engines.kahadb.scan import mapped


@dataclass(frozen=True)
class IndexedMessage:
    seq: int
    message_id: str
    file_id: int
    offset: int
    size: int  # the record's length incl. its 5-byte header, as the index holds it


@dataclass
class IndexedDestination:
    key: str
    messages: list = field(default_factory=list)  # IndexedMessage, by sequence
    subscriptions: dict = field(default_factory=dict)  # sub key -> [seq] pending, in delivery order
    # sub key -> (its LastAck's sequence, its ackPositions as [(first, last)] sequence ranges or None): what
    # ``pending`` is computed from
    cursors: dict = field(default_factory=dict)

    def pending(self, sub_key: str) -> list:
        by_seq = {m.seq: m for m in self.messages}
        return [by_seq[s] for s in self.subscriptions.get(sub_key, ()) if s in by_seq]


def read_indexed(directory: Path) -> tuple[dict | None, str | None]:
    """``({destination key: IndexedDestination}, None)`` from ``directory/db.data``, or ``(None, why)`` when
    it is absent or does not read whole (the broker then rebuilds the index from the journal, or fails)."""
    p = Path(directory) / "db.data"
    if not p.exists():
        return None, "no db.data"
    try:
        with mapped(p) as buf:
            return _read(buf), None
    except FormatError as err:
        return None, str(err)
    except OSError as err:
        return None, f"cannot read db.data: {err.strerror}"


def _read(buf) -> dict:
    header = pf.decode_header(buf)
    ps = header.page_size
    if pf.page_count(buf, ps) < 1:
        raise FormatError("db.data has no page 0")
    meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
    out = {}
    for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
        dest = IndexedDestination(key)
        dest.messages = sorted((IndexedMessage(*e) for e in pf.iter_order_index(buf, ps, sd)), key=lambda m: m.seq)
        if sd.is_topic:
            seqs = [m.seq for m in dest.messages]
            for sub, (last, positions) in pf.subscription_cursors(buf, ps, sd, meta.version).items():
                dest.subscriptions[sub] = _pending(seqs, last, positions)
                dest.cursors[sub] = (last, positions)
        out[key] = dest
    return out


def _pending(seqs: list, last_acked: int, positions) -> list:
    """KahaDBStore.recoverSubscription: when ackPositions starts before LastAck (individual acks), the
    messages from its first id on that it still contains; otherwise every message after LastAck."""
    if positions and positions[0][0] < last_acked:
        start = positions[0][0] - 1
        return [s for s in seqs if s > start and any(a <= s <= b for a, b in positions)]
    return [s for s in seqs if s > last_acked]


def read_at(buf, m: IndexedMessage):
    """The ADD command the broker reads for ``m`` (MessageDatabase.load at the index's Location and size:
    the framed command, what follows it ignored, replay_walk.load). Raises FormatError where the broker's
    read fails."""
    from amqtool.engines.kahadb.replay_walk import load

    if m.size < 6 or m.offset < 0 or m.offset + m.size > len(buf):
        raise FormatError(f"index location {m.file_id}:{m.offset} size {m.size} is outside the "
                          f"{len(buf)}-byte file", offset=m.offset)
    cmd = load(buf, m.offset, m.size)
    add = cmd.add if cmd.type is EntryType.UPDATE_MESSAGE else cmd
    if not isinstance(add, AddMessageCommand):
        raise FormatError(f"the record at {m.file_id}:{m.offset} is {cmd.type.name}, not a message",
                          offset=m.offset)
    if not add.message:
        raise FormatError(f"the record at {m.file_id}:{m.offset} holds no message content", offset=m.offset)
    return add


def reconcile(d, dests: dict, last_update: tuple | None, moved: dict | None = None) -> list[tuple]:
    """Take out of ``d.replay`` what the index knows was acknowledged, and return it.

    A message the replay keeps whose ADD is at or before the index checkpoint ``last_update`` but that the
    index no longer holds (for a topic: that a subscription's cursor has passed) was acknowledged: its ack
    record is gone or damaged, or its file was lost. The broker with this index never delivers it again;
    only a rebuild of the index from the journal would. Returns ``(destination key, sub key | None,
    message id, (file id, offset))`` per message (or subscription) taken out: what a rebuild brings back.
    Messages after the checkpoint are the replay's alone (the broker replays them at start). ``moved``: journal file
    id -> the id the index knew its data under (damage.checkpoint_moved: files swapped), for the replay's
    locations."""
    if last_update is None:
        return []
    out = []
    for key, st in d.replay.destinations.items():
        idx = dests.get(key)
        # held by id or by location: an order-index entry whose id string is damaged still names the record
        held = {m.message_id for m in idx.messages} | {(m.file_id, m.offset) for m in idx.messages} if idx else set()
        pending = {s: {x for m in idx.pending(s) for x in (m.message_id, (m.file_id, m.offset))}
                   for s in idx.subscriptions} if idx else {}
        for mid in list(st.messages):
            m = st.messages[mid]
            loc = ((moved or {}).get(m.file_id, m.file_id), m.offset)
            if loc > last_update:
                continue
            if m.waiting is None:
                if mid not in held and loc not in held:
                    out.append((key, None, mid, (m.file_id, m.offset)))
                    del st.messages[mid]
                continue
            for sub in sorted(m.waiting):
                if sub in pending and mid not in pending[sub] and loc not in pending[sub] \
                        or mid not in held and loc not in held:
                    out.append((key, sub, mid, (m.file_id, m.offset)))
                    m.waiting.discard(sub)
            if not m.waiting:
                del st.messages[mid]
    return out


def acked_names(directory: Path) -> dict:
    """``{destination key: {sequence: message id}}``: the id under which an acknowledgement finds each
    order-index entry, from the index's messageIdIndex B-trees. ``updateIndex(KahaRemoveMessageCommand)``
    (ActiveMQ 5.17) looks the acked id up there for the entry's sequence, not in the order index's own
    MessageKeys, so an entry whose MessageKeys id is damaged is still taken by the ack of its message, and one
    whose messageIdIndex key is damaged is taken by none. Only the sequences exactly one id names; empty for a
    destination (or all) whose messageIdIndex does not read."""
    import struct

    out = {}
    try:
        with mapped(Path(directory) / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            for key, sd in list(pf._iter_destinations(buf, ps, meta.destinations_page, meta.version)):
                try:
                    by_id, _by_location = pf.sequences(buf, ps, sd, meta.version)
                except (FormatError, struct.error):
                    continue
                seen: dict = {}
                for mid, seq in by_id.items():
                    seen.setdefault(seq, []).append(mid)
                out[key] = {seq: ids[0] for seq, ids in seen.items() if len(ids) == 1}
    except (FormatError, OSError, struct.error):
        return {}
    return out
