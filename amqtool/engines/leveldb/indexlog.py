"""The index against the record log: what a damaged index snapshot loses of what the broker delivers.

The record log is what the index is built from: ``LevelDBClient`` appends every ADD/REMOVE_COLLECTION and
ADD/UPDATE/REMOVE_ENTRY to the log and writes the same change to the index, and a snapshot is a copy of
the index taken under the write lock at the log's append position (``snapshotIndex``: ``suspend``, then
``copyDirtyIndexToSnapshot(wal_append_position)``). So where every log file from position 0 is present, the
log replayed from its start up to the end the broker truncates to (:func:`.load._replay`, the broker's own
replay) gives the index the broker should recover, and any difference with the index it will recover
(snapshot + replay from the snapshot's position) is the damage. Only the differences the broker delivers
are loss:

- queue entries, transaction entries, a subscription's ack position (``p``), collection records;
- topic entries above the lowest ack position of the topic's durable subscriptions. Entries at or below it
  are delivered to no one, and the index drops them without a log record (``gc``: "Delete message refs for
  topics who's consumers have advanced");
- differences in entries of collections the log does not hold (garbage keys) or in the store's own
  counters (``:``-keys, rebuilt) are never delivered; nor is an entry's meta (redelivery count), which the
  replay does not carry.

Where the broker's GC deleted the first logs (``gc`` deletes unreferenced logs before the last snapshot),
what remains is the snapshot's counters (``:collection-meta``, ``storeCounters`` at ``suspend``), which the
replay keeps up to date as the broker does: each queue's entry count, each topic's last sequence. Topic
sequences are consecutive (one per message sent, ``queueSeq``), so every sequence above the lowest ack
position up to the last one is a message some subscription is owed; a queue holding fewer entries than its
count has lost some; a collection the counters hold but the index does not is lost.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.errors import FormatError
from amqtool.engines.leveldb.load import qualified_name
from amqtool.formats.leveldb import records as R


@dataclass
class IndexEvidence:
    """What the record log (or, without its start, the counters) proves about the recovered index."""

    source: str  # "log" (replayed from position 0) | "counters" (``:collection-meta``)
    lost: list = field(default_factory=list)  # (what, detail): differences the broker delivers
    undelivered: int = 0  # differences no consumer sees (acked topic entries, garbage keys)
    collections: set = field(default_factory=set)  # the keys of the collections the evidence says are live


def _entry_value(v) -> tuple:
    """(location, length) of an index entry value: what the broker reads of it (its meta aside)."""
    try:
        loc, length, _meta = R.decode_index_entry(v)
        return loc, length
    except FormatError:
        return ("undecodable", bytes(v))


def _collections(index: dict, live) -> dict:
    """collection key -> (CollectionRecord or None) of the ``c`` keys of ``index`` whose key is in ``live``."""
    out = {}
    for k, v in index.items():
        if k[:1] == R.COLLECTION_PREFIX and len(k) == 9:
            ck = R._Q.unpack_from(k, 1)[0]
            if live is None or ck in live:
                try:
                    out[ck] = R.decode_collection(v)
                except FormatError:
                    out[ck] = None
    return out


def _name(rec) -> str:
    if rec is None:
        return "an undecodable collection"
    if rec.type in (R.QUEUE, R.TOPIC):
        name = (rec.meta or b"").decode("utf-8", "replace")
        try:
            return qualified_name(name, "queue" if rec.type == R.QUEUE else "topic")
        except FormatError:
            return repr(name)
    if rec.type == R.SUBSCRIPTION:
        try:
            s = R.decode_subscription(rec.meta or b"")
            return f"subscription {s.client_id}:{s.subscription_name}"
        except FormatError:
            return "a subscription"
    return rec.type_name


def _low_acks(index: dict, colls: dict) -> dict:
    """topic key -> the lowest ack position of its durable subscriptions (topics without one are absent)."""
    low: dict[int, int] = {}
    for ck, rec in colls.items():
        if rec is None or rec.type != R.SUBSCRIPTION:
            continue
        try:
            topic = R.decode_subscription(rec.meta or b"").topic_key
            ack = index.get(R.entry_index_key(ck, R.ACK_POSITION))
            pos = (R.decode_entry(ack).value_location or 0) if ack is not None else 0
        except FormatError:
            continue
        low[topic] = min(low.get(topic, pos), pos)
    return low


def _ack(value) -> int:
    """A subscription's ack position from its ``p`` entry (0 without one, as the broker loads it)."""
    if value is None:
        return 0
    try:
        return R.decode_entry(value).value_location or 0
    except FormatError:
        return 0


def _ack_moved(rec, logged, held, have: dict) -> str | None:
    """What a subscription's changed ack position changes of its deliveries: the messages the index holds
    between the log's position and the index's come back (index lower) or are skipped (index higher); None
    when there are none (the topic's entries there are collected: nothing changes)."""
    try:
        topic = R.decode_subscription(rec.meta or b"").topic_key
    except FormatError:
        return "its record cannot be read"
    a, b = _ack(logged), _ack(held)
    lo, hi = min(a, b), max(a, b)
    prefix = R.ENTRY_PREFIX + R._Q.pack(topic)
    seqs = sorted(R._Q.unpack_from(k, 9)[0] for k in have if len(k) == 17 and k[:9] == prefix)
    moved = [q for q in seqs if lo < q <= hi]
    if not moved:
        return None
    return (f"the ack position is {b} in the index, {a} by the log: {len(moved)} message(s) "
            + ("the subscription acknowledged come back" if b < a else "it is owed are skipped")
            + f" (seq {', '.join(map(str, moved[:10]))}{' ...' if len(moved) > 10 else ''})")


def from_log(st, replay) -> IndexEvidence | None:
    """Compare the recovered index with the log replayed from position 0 (None when the log files do not
    cover every position from 0 to the log's end, or the replay from the start stops before the snapshot's
    position: then the log is no complete evidence). ``replay``: :func:`.load._replay`."""
    logs = st.logs
    if st.snapshot is None or not logs or logs[0].position != 0:
        return None
    for a, b in zip(logs, logs[1:]):
        if b.position != a.limit:
            return None
    truth: dict = {}
    meta: dict = {}
    rep = replay(truth, st.reader, 0, st.replay.limit, meta, remove_key=R.decode_vlong)
    if rep.stopped is not None and rep.stopped != st.replay.stopped:
        return None
    colls = _collections(truth, meta)  # a removed collection's record stays in a replayed index
    ev = IndexEvidence("log", collections=set(colls))
    low = _low_acks(truth, colls)
    have = st.index
    entries: dict = {}  # (destination, how) -> [(seq, what)]
    for ck, rec in colls.items():
        k = R.collection_index_key(ck)
        if loaded_as(have.get(k)) != loaded_as(truth.get(k)):
            ev.lost.append((_name(rec), f"its collection record (key {ck}) is "
                            + ("missing" if k not in have else "changed")))
    for k in set(have).union(truth):
        if k[:1] != R.ENTRY_PREFIX or len(k) < 9:
            continue
        a, b = truth.get(k), have.get(k)
        if a is None and b is None:
            continue
        if a is not None and b is not None and _entry_value(a) == _entry_value(b):
            continue
        ck, ek = R._Q.unpack_from(k, 1)[0], k[9:]
        rec = colls.get(ck, False)
        if rec is False:
            ev.undelivered += 1  # no collection holds it: never read
            continue
        seq = R.seq_of(ek)
        if rec is not None and rec.type == R.TOPIC and seq is not None and (ck not in low or seq <= low[ck]):
            ev.undelivered += 1  # acknowledged by every subscription (or none left): delivered to no one
            continue
        if ek != R.ACK_POSITION and rec is not None and rec.type == R.SUBSCRIPTION:
            ev.undelivered += 1  # a subscription holds its ack position alone (getAckPosition): never read
            continue
        if ek == R.ACK_POSITION and rec is not None and rec.type == R.SUBSCRIPTION:
            moved = _ack_moved(rec, a, b, have)
            if moved is None:
                ev.undelivered += 1  # no message the index holds lies between the two positions
                continue
            ev.lost.append((_name(rec), moved))
            continue
        what = "the ack position" if ek == R.ACK_POSITION else (str(seq) if seq is not None else
                                                                 f"entry {ek[:16].hex()}")
        how = "missing from the index" if b is None else \
            "in the index, but removed by the log (they come back)" if a is None else "changed in the index"
        entries.setdefault((_name(rec), how), []).append((seq if seq is not None else -1, what))
    for (name, how), got in entries.items():
        got.sort()
        shown = ", ".join(w for _s, w in got[:10]) + (f" and {len(got) - 10} more" if len(got) > 10 else "")
        ev.lost.append((name, f"{len(got)} entr{'y' if len(got) == 1 else 'ies'} {how} (seq {shown})"))
    ev.lost.sort()
    return ev


def loaded_as(value):
    """What the broker takes from a collection record: its type and meta. ``DBManager.loadCollections`` keys a
    collection by its index key (``listCollections``: ``decodeLongKey(key)``), never by the record's own key
    field, so a record differing only there loads the same. A durable subscription's meta is its topic key,
    client id, name and selector, without its destination names (fields 5 and 6): the store attaches it to its
    topic by ``topic_key`` (``LevelDBStore``: ``topic.subscriptions.put``); the broker copies the subscribed
    destination into the inactive consumer it recovers (``TopicRegion.createInactiveConsumerInfo``) and adds it
    to the topic whose store holds it (``addSubscriptionsForDestination``), a reconnecting subscriber is changed
    by its selector or noLocal alone (``Topic.hasDurableSubChanged``), and only JMX views read the destination:
    damaged names deliver the same (lane lv51's m4-kill-snappy, seed 5909145: the real broker recovers the same
    subscriptions and pending messages). The raw value when it does not decode."""
    if value is None:
        return None
    try:
        rec = R.decode_collection(value)
        if rec.type == R.SUBSCRIPTION and rec.meta is not None:
            sub = R.decode_subscription(rec.meta)
            return rec.type, (sub.topic_key, sub.client_id, sub.subscription_name, sub.selector)
    except FormatError:
        return bytes(value)
    return rec.type, bytes(rec.meta) if rec.meta is not None else None


def _counter_key_damaged(st, ck: int, have: dict) -> bool:
    """Whether the counters' collection ``ck``, which the index does not hold, is the damage's: counters read from
    a table block whose checksum fails, and ``ck`` one bit from a collection the index holds and the counters
    lack. The damage changed a key of the serialized map, not the index (lane lv51's m9-kill-tiny-snappy, seed
    5505100: the real broker recovers the same); what the other collection's missing counter does (a queue
    counted 0 strands its messages: ``LevelDBClient.collectionSize``) is judged with the queues' counts."""
    db = st.snapshot_db
    if db is None or b":collection-meta" not in db.suspect_keys:
        return False
    return any(k not in st.meta and bin((k ^ ck) & 0xFFFFFFFFFFFFFFFF).count("1") == 1 for k in have)


def from_counters(st) -> IndexEvidence | None:
    """What the counters (``:collection-meta``, kept up to date by the replay) prove, without the log's
    start (None when the index holds no readable counters, or an older version of them: a dropped write-ahead
    log record held the newest, and a queue's count read from the older one exceeds its entries with nothing
    lost, f-subs seed 9865057)."""
    if st.meta_error is not None or b":collection-meta" not in st.index or not st.meta:
        return None
    if st.snapshot_db is not None and st.snapshot_db.counters_dropped:
        return None
    have = _collections(st.index, None)
    ev = IndexEvidence("counters", collections=set(st.meta) | set(have))
    counts: dict[int, int] = {}
    seqs: dict[int, set] = {}
    for k in st.index:
        if k[:1] == R.ENTRY_PREFIX and len(k) == 17:
            ck = R._Q.unpack_from(k, 1)[0]
            if ck not in have:
                if ck not in st.meta:
                    ev.undelivered += 1  # in no collection the index or the counters know: never read
                continue
            counts[ck] = counts.get(ck, 0) + 1
            seqs.setdefault(ck, set()).add(R._Q.unpack_from(k, 9)[0])
    low = _low_acks(st.index, have)
    db = st.snapshot_db
    for ck, rec in sorted(have.items()):
        k = R.collection_index_key(ck)
        if rec is None or rec.type not in (R.QUEUE, R.TOPIC) or k not in db.suspect_keys or \
                st.index.get(k) != db.data.get(k):
            continue
        # createCollection(utf8(destination.getQualifiedName)): a record read from a damaged block whose name
        # is not its kind's qualified name was changed by the damage (the broker loads it renamed)
        name = (rec.meta or b"").decode("utf-8", "replace")
        kind = "queue://" if rec.type == R.QUEUE else "topic://"
        if not name.startswith(kind) or len(name) == len(kind):
            ev.lost.append((f"collection {ck}", f"its record, read from a damaged table block, names {name!r}, "
                            f"not a {kind} name: the broker loads the destination renamed"))
    for ck, cm in sorted(st.meta.items()):
        rec = have.get(ck, False)
        if rec is False:
            if not _counter_key_damaged(st, ck, have):
                ev.lost.append((f"collection {ck}", f"the counters hold it ({cm.size} entries), the index does not"))
            continue
        if rec is None:
            continue  # reported as a collection the broker cannot load
        if rec.type == R.QUEUE and counts.get(ck, 0) < cm.size:
            ev.lost.append((_name(rec), f"the index holds {counts.get(ck, 0)} entries, its counter "
                            f"{cm.size}: {cm.size - counts.get(ck, 0)} lost"))
        elif rec.type == R.TOPIC and ck in low:
            held = seqs.get(ck, set())
            gone = [s for s in range(low[ck] + 1, cm.last_seq + 1) if s not in held]
            if gone:
                # the broker's topic GC (LevelDBClient.gc) deletes a prefix of the topic's entries, up to the
                # lowest gcPosition of its subscriptions in memory, which may run ahead of the ack positions the
                # index holds (tests/data/leveldb/subs, undamaged: subRed's ack position 214, entries 215..350
                # collected); the ack position read may also be damaged (too low). So the entries below the
                # first one held may be what the GC collected; only a gap after it is proven loss
                first = min((s for s in held if s > low[ck]), default=None)
                gone = [] if first is None else [s for s in gone if s > first]
            if gone:
                ev.lost.append((_name(rec), f"seq {', '.join(map(str, gone[:10]))}"
                                + (f" (and {len(gone) - 10} more)" if len(gone) > 10 else "")
                                + f" missing from the index, below its last sequence {cm.last_seq} and above "
                                f"the lowest ack position {low[ck]}"))
    return ev


def _counters_newer(db, inside) -> bool:
    """Whether every counter key the broker reads that a skipped block's range may hold has its newest version
    in a write-ahead log not yet in a table: newer than any table's copy, so the block's copy, lost or not, is
    not what the broker's ``get`` returns."""
    floor = db.log_sequence_floor
    keys = [k for k in R.COUNTER_KEYS if inside(k)]
    return floor is not None and all(db.counter_sequences.get(k, -1) >= floor for k in keys)


def judges(st, ev: IndexEvidence, path: str, offset) -> bool:
    """Whether ``ev`` judges the index damage at ``(path, offset)``, so that what it loses of what the broker
    delivers is named by ``ev.lost`` and the damage itself is a WARNING: a write-ahead log record LevelDB
    drops, or a table block that does not parse (its iterators skip it), whose keys the evidence covers. The
    log covers every entry and collection; the counters cover queue and topic entries and collections, not a
    subscription's ack position (a key that may be one leaves the damage CRITICAL). A block that may hold the
    store's counters (``:``-keys, which the broker reads with ``get`` at start) is never judged harmless."""
    db = st.snapshot_db
    rng = db.unread_ranges.get((path, offset))
    if rng is not None:
        lo, hi = rng
        from_smallest = (path, offset) in db.unread_from_smallest

        def inside(k: bytes) -> bool:
            # a key equal to a lower bound read before the break has its newest version read (killed-gc seed
            # 9865018: a subscription's ack position ending the block before, CRITICAL with nothing lost)
            return (lo is None or k > lo or k == lo and from_smallest) and k <= hi

        if hi is None or ((lo is None or lo[:1] <= b":") and hi[:1] >= b":" and not _counters_newer(db, inside)):
            return False
        subs = [ck for ck, rec in _collections(st.index, None).items() if rec is not None and
                rec.type == R.SUBSCRIPTION] + list(st.meta)
        return not any(inside(R.entry_index_key(ck, R.ACK_POSITION)) for ck in subs)
    if (path, offset) not in db.dropped_keys:
        return False
    if ev.source == "log":
        return True
    keys = db.dropped_keys[(path, offset)]
    return keys is not None and not any(k[:1] == R.ENTRY_PREFIX and k[9:] == R.ACK_POSITION for k in keys)
