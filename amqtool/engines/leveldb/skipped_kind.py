"""A replayed record whose kind byte the store never writes: what the broker's skipping it changes.

``LevelDBClient.replay_from`` applies each record by its kind and skips every other kind (``case kind => //
Skip other records, they don't modify the index``); the kind byte is outside the record's CRC-32, so a
damaged kind byte is read as it is. The record is then lost to the index, which matters only by what it did:
a queue entry added again (``LOG_UPDATE_ENTRY`` of a redelivered message, ``deliveries > 0``) or a durable
subscription's ack position moved again changes nothing when the index holds that key with that value anyway;
an entry added or removed for the first time is a message lost or brought back.

When the kind byte is one bit from exactly one entry kind (ADD_ENTRY, REMOVE_ENTRY, UPDATE_ENTRY) and the data
decodes as an entry record, that is the record the store wrote: the replay is run with it restored and
without it (the broker's), from the same snapshot, and the recovered indexes and collection sizes compared.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.leveldb import records as R
from amqtool.formats.leveldb import recordlog as L

ENTRY_KINDS = (L.ADD_ENTRY, L.REMOVE_ENTRY, L.UPDATE_ENTRY)
_KNOWN = {L.ADD_COLLECTION, L.REMOVE_COLLECTION, L.ADD_ENTRY, L.REMOVE_ENTRY, L.DATA, L.TRACE, L.UPDATE_ENTRY,
          L.UOW_END & 0xFF}


def intended_kind(kind: int, data) -> int | None:
    """The entry kind a record of unknown ``kind`` (the signed header byte) was written as, when its byte is one
    bit from exactly one entry kind and ``data`` decodes as an entry record with its keys; else None."""
    k = kind & 0xFF
    if k in _KNOWN:
        return None
    near = [c for c in ENTRY_KINDS if bin(k ^ c).count("1") == 1]
    if len(near) != 1:
        return None
    try:
        rec = R.decode_entry(data)
    except FormatError:
        return None
    return near[0] if rec.collection_key is not None and rec.entry_key is not None else None


class Patched:
    """A log reader whose byte at log position ``at`` reads ``value``: a record as the store wrote it."""

    def __init__(self, reader, at: int, value: int):
        self._reader, self._at, self._value = reader, at, value

    def read(self, pos: int, n: int):
        data = self._reader.read(pos, n)
        at = self._at - pos
        if data is None or not 0 <= at < len(data):
            return data
        out = bytearray(data)
        out[at] = self._value
        return bytes(out)


def replayed(st, reader) -> tuple[dict, dict]:
    """(index, collection meta) the broker's replay recovers reading the log through ``reader``, from the
    same snapshot as the load."""
    from amqtool.engines.leveldb.load import _replay

    db = st.snapshot_db
    index = dict(db.data) if db is not None and db.error is None else {}
    meta: dict = {}
    raw = index.get(b":collection-meta")
    if raw is not None:
        try:
            meta = R.decode_collection_meta(raw)
        except FormatError:
            meta = {}
    _replay(index, reader, st.replay.start, st.replay.limit, meta)
    # a subscription's ack position at 0 reads as none (the broker's getOrElse(0), load._load_collections)
    for key in [k for k in index if k.endswith(R.ACK_POSITION) and len(k) == 10]:
        try:
            if not R.decode_entry(index[key]).value_location:
                del index[key]
        except FormatError:
            pass
    return index, meta


def skipping_changes(st, pos: int, kind: int) -> bool:
    """Whether the broker's skipping the record at log position ``pos`` (``kind``: the entry kind it was written
    as, :func:`intended_kind`) changes the index its replay recovers: its entries and collection sizes, but for
    what is delivered to no one: a topic entry every durable subscription has acknowledged, and a topic's size
    (its ``getMessageCount``, which no cursor reads: a durable subscription's counts from the topic's last
    sequence, kept). The real broker on lane lv51's mix-killed with an acknowledged topic entry's ADD_ENTRY
    skipped (seed 5909021) recovers every subscription's pending messages and counts as before."""
    from amqtool.engines.leveldb.verify import _acked_topic_entry

    topics = {d.key for d in st.destinations.values() if d.kind == "topic"} | {d.key for d in st.dropped_topics}

    def state(reader):
        index, meta = replayed(st, reader)
        return ({k: v for k, v in index.items() if not _acked_topic_entry(st, k)},
                {key: (None if key in topics else m.size, m.last_key) for key, m in meta.items()})

    return state(st.reader) != state(Patched(st.reader, pos + 1, kind))  # the kind byte follows the magic


def retyped_traces(st) -> list:
    """``(log file, offset in it, [entry kinds])`` of each TRACE record the replay reads (from the snapshot's
    position to its limit) whose data decodes as an entry record with its keys, and whose skipping (the replay
    applies no TRACE) changes the index it recovers when restored as an entry kind one bit from TRACE: an entry
    record whose kind byte took the damage into a kind the replay passes over. No store amqtool has seen holds a
    TRACE at all (none in the 27 broker-written stores of tests/data/leveldb and /work/leveldb-fresh). Of the
    two kinds one bit away, REMOVE_ENTRY and UPDATE_ENTRY, a subscription's ack position (entry key ``p``) is
    only ever updated; any other entry may have been either, and either that changes the index counts."""
    out = []
    for f in st.logs:
        if f.limit <= st.replay.start or f.position >= st.replay.limit:
            continue
        for r in L.iter_records(st.reader.buffer(f), verify=False):
            if isinstance(r, L.Stop):
                break
            pos = f.position + r.offset
            if r.kind != L.TRACE or pos < st.replay.start or pos >= st.replay.limit:
                continue
            data = st.reader.read(pos + L.HEADER_SIZE, r.length)
            try:
                rec = R.decode_entry(data) if data else None
            except FormatError:
                continue
            if rec is None or rec.collection_key is None or rec.entry_key is None:
                continue
            near = [L.UPDATE_ENTRY] if rec.entry_key == R.ACK_POSITION else \
                [c for c in ENTRY_KINDS if bin(L.TRACE ^ c).count("1") == 1]
            changed = [c for c in near if skipping_changes(st, pos, c)]
            if changed:
                out.append((f, r.offset, changed))
    return out
