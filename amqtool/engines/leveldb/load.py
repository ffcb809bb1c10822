"""Loading a LevelDB store as the broker recovers it (``LevelDBClient.start``, ``DBManager.loadCollections``,
``LevelDBStore.doStart``):

1. the index is the last snapshot ``%016x.index/`` (highest position; ``replay_init`` deletes ``dirty.index``
   and copies the snapshot over it, whatever dirty.index holds, newer than the snapshot or not; a ``temp.index``
   left by a snapshot cut mid-copy is deleted), or empty when there is none; ``dirty.index`` is read apart
   (``dirty_db``), as evidence for verify and for its ``:dirty`` flag;
2. the last log file ends at its last complete unit of work (``RecordLog.open``: ``verifyAndGetEndOffset``
   checks CRCs and the UOW_END chain and truncates the rest; here nothing is truncated, the rest is reported
   as cut);
3. the log is replayed from the snapshot's position (from the first log file when no file holds that
   position) up to there (``replay_from``): ADD_COLLECTION puts the collection record, ADD/UPDATE_ENTRY puts
   the entry with only its value location and length (no meta: a replayed entry loses its redelivery count
   and a prepared ack its details), REMOVE_ENTRY deletes it; operations are buffered and written at each
   UOW_END; a REMOVE_COLLECTION deletes the entries of the key its bare-varint payload parses to as a
   ``CollectionKey`` (see :func:`amqtool.formats.leveldb.records.collection_key_of_remove`) and leaves the
   collection record; DATA records are decoded (a failure stops the replay). The replay stops at the first
   record it cannot read or decode (the broker catches the exception and goes on with what it has) and the
   buffered operations of an unfinished unit are dropped;
4. collections load in key order: queues, topics, durable subscriptions (ack position from the entry
   ``'p'``; a subscription whose topic is gone is dropped), XA transactions (prepared: their sends are held,
   their queue acks hide the acked messages, their subscription acks move the ack position); an entry whose
   DATA record lies before the first log file is one the broker's cursors skip (:meth:`LevelDBState.skips`):
   it is kept apart (``skipped``), out of the messages every command lists, counts, exports and migrates,
   and a subscription's pending messages are taken from what is left;
5. topics without subscriptions are dropped (``doStart``: "Remove topics that don't have subs").

Checksums are not checked by the replay or by message reads (``verifyChecksums`` is off by default); what the
broker would read from a damaged record is what it gets. :mod:`.verify` checks them.
"""
from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import attrgetter, itemgetter
from pathlib import Path

from amqtool.errors import FormatError
from amqtool.gcpause import gc_paused
from amqtool.formats.kahadb.openwire import decode_message
from amqtool.formats.leveldb import records as R
from amqtool.formats.leveldb import recordlog as L
from amqtool.formats.leveldb.codecs import snappy_uncompress
from amqtool.engines.leveldb.index import IndexDB, read_index
from amqtool import native
from amqtool.engines.leveldb.logfiles import LogFile, LogReader, log_files, scan

_Q_unpack = __import__("struct").Struct(">q").unpack_from
_location = attrgetter("location")
OPENWIRE_VERSION = 11  # BrokerService.getStoreOpenWireVersion (LevelDBStore.doStart sets the wire format's)


@dataclass
class Message:
    """An entry of a queue or topic: where its DATA record is (log position and length), its sequence."""

    collection: int
    seq: int
    location: int
    length: int
    redelivery: int = 0


@dataclass
class Subscription:
    key: int
    topic_key: int
    client_id: str | None
    name: str | None
    selector: str | None
    ack_position: int
    prepared_ack: bool = False
    pending: list = field(default_factory=list)  # Message: the cursor from ack_position + 1
    last_seq: int = 0  # the topic's last sequence (its CollectionMeta.last_key)

    @property
    def pending_count(self) -> int:
        """``getMessageCount(clientId, subscriptionName)``: the topic's last sequence minus the ack position."""
        return self.last_seq - self.ack_position


@dataclass
class Destination:
    key: int
    kind: str  # queue | topic
    qualified: str  # queue://NAME
    messages: list = field(default_factory=list)  # Message, in sequence order (prepared-acked left out)
    skipped: list = field(default_factory=list)  # Message: entries the broker's cursor skips (see skips())
    entries: int = 0  # the broker's getMessageCount: its CollectionMeta size (GC'd topic entries included)
    subscriptions: list = field(default_factory=list)
    created_by_prepared: bool = False

    @property
    def name(self) -> str:
        return self.qualified.split("://", 1)[1] if "://" in self.qualified else self.qualified


@dataclass
class PreparedTransaction:
    key: int
    xid: str
    parts: object = None  # records.Xid
    sends: list = field(default_factory=list)  # (Message with collection = tx key, destination qualified)
    skipped: list = field(default_factory=list)  # Message: sends the broker's cursor skips (see skips())
    acks: list = field(default_factory=list)  # XaAck


@dataclass
class ReplayResult:
    start: int
    limit: int
    end: int  # where the replay stopped (== limit when it reached it)
    records: int = 0
    units: int = 0
    stopped: tuple | None = None  # (position, reason) when it stopped before limit
    dropped_ops: int = 0  # buffered operations of an unfinished unit at the stop


@dataclass
class LevelDBState:
    directory: Path
    log_directory: Path
    logs: list
    snapshot: tuple | None  # (position, path)
    snapshots: list
    index: dict  # the recovered index: key -> value
    snapshot_db: IndexDB | None
    dirty_db: IndexDB | None
    last_file_end: int | None  # offset of the end of the last complete unit in the last file
    last_file_scan_end: int | None
    cut_records: int
    replay: ReplayResult
    destinations: dict = field(default_factory=dict)  # collection key -> Destination
    transactions: list = field(default_factory=list)
    dropped_subscriptions: list = field(default_factory=list)
    dropped_topics: list = field(default_factory=list)
    load_problems: list = field(default_factory=list)  # (key, message): collections the broker cannot load
    meta: dict = field(default_factory=dict)  # collection key -> records.CollectionMeta after the replay
    meta_error: str | None = None
    reader: LogReader | None = None
    store_version: str | None = None
    last_scan: L.FileScan | None = None  # the last file's pass (logfiles.scan), when the load made it
    entries: dict = field(default_factory=dict)  # collection key -> [(entry key, value)] of the index, in key order
    collection_keys: set = field(default_factory=set)  # the keys of the index's collection records

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def queue_and_topics(self) -> list[Destination]:
        return sorted(self.destinations.values(), key=lambda d: d.qualified)

    def past_end(self, location: int, length: int) -> bool:
        """Whether the record lies past the end of the last complete unit of work in the last log file: the
        broker truncates the file there on start (``RecordLog.open``), so it can no longer read it."""
        if not self.logs or location < self.logs[-1].position:
            return False
        return location + L.HEADER_SIZE + length > self.replay.limit

    def skips(self, location: int) -> bool:
        """Whether the broker's cursors skip an entry whose DATA record is at ``location``: it lies before the
        first log file, so ``RecordLog.log_info`` (the file at or below the position) finds none and
        ``getMessage`` gives null, which ``queueCursor`` and ``transactionCursor`` pass over ("Could not load
        message seq"), going on with the next entry. (A position inside or past the log files' range is
        read from a file, and a record that cannot be read or decoded there fails the store instead.) With no
        log file at all the broker starts one at position 0."""
        return bool(self.logs) and location < self.logs[0].position

    def skip_reason(self, m) -> str:
        return (f"log position {m.location:#x} lies before the first log file ({self.logs[0].name}): the "
                "broker skips the entry (\"Could not load message\"); it delivers nothing for it")

    def data(self, location: int, length: int) -> bytes | None:
        """The stored (maybe snappy-compressed) bytes of the DATA record at ``location`` (None where the broker
        cannot read it: no file holds it, or it lies past the end it truncates the last file to)."""
        if self.past_end(location, length):
            return None
        mv = self.reader.read(location + L.HEADER_SIZE, length)
        return None if mv is None else bytes(mv)

    def decode(self, m) -> tuple[object | None, str | None]:
        """(OpenWireMessage, None) or (None, why) for a Message."""
        raw = self.data(m.location, m.length)
        if raw is None and self.past_end(m.location, m.length):
            return None, (f"log position {m.location:#x} lies past {self.replay.limit:#x}, the end of the last "
                          "complete unit of work: the broker truncates the last log file there on start")
        if raw is None:
            f = self.reader.file_at(m.location)
            return None, (f"log position {m.location:#x}: no log file holds it (missing or collected)"
                          if f is None or m.location + L.HEADER_SIZE + m.length > f.limit
                          else f"log position {m.location:#x} is outside {f.name}")
        try:
            return decode_data(raw), None
        except FormatError as err:
            return None, f"DATA at log position {m.location:#x}: {err.message}"


def decode_data(raw: bytes):
    """A DATA record's message: OpenWire (version 11), or snappy-compressed OpenWire
    (``logCompression=snappy``: ``Snappy.compress`` of the marshalled message)."""
    try:
        return decode_message(raw, OPENWIRE_VERSION)
    except FormatError as first:
        try:
            inflated = snappy_uncompress(raw)
        except FormatError:
            raise first from None
        return decode_message(inflated, OPENWIRE_VERSION)


# the files of a LevelDB directory that are no part of its database: the lock, and the info log the C++
# library writes (leveldbjni's LOG differs between a snapshot and the index it copies, with the same data)
_NOT_DATA = frozenset({"LOCK", "LOG", "LOG.old"})


def same_database(a: Path, b: Path) -> bool:
    """Whether index directories ``a`` and ``b`` hold the same database, byte for byte: the same file names
    (the lock and the info log aside) and each file the same bytes, a hard link being its own copy (the
    snapshot's tables are hard links of dirty.index's, ``LevelDBClient.copyIndex``). Names and sizes do not
    decide it: iq80 maps its write-ahead log and MANIFEST at a fixed 1 MiB, so the live index goes on writing
    inside files of the snapshot's names and sizes after the snapshot (a SIGKILL keeps them so)."""
    try:
        names = {n for n in os.listdir(a) if n not in _NOT_DATA}
        if names != {n for n in os.listdir(b) if n not in _NOT_DATA}:
            return False
        for n in names:
            sa, sb = os.stat(a / n), os.stat(b / n)
            if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
                continue
            if sa.st_size != sb.st_size:
                return False
            with open(a / n, "rb") as fa, open(b / n, "rb") as fb:
                while True:
                    x = fa.read(1 << 20)
                    if x != fb.read(1 << 20):
                        return False
                    if not x:
                        break
    except OSError:
        return False
    return True


def _snapshots(directory: Path) -> list[tuple[int, Path]]:
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for n in names:
        m = L.INDEX_NAME.match(n)
        if m and (directory / n).is_dir():
            out.append((int(m.group(1), 16), directory / n))
    return sorted(out)


def _replay(index: dict, reader: LogReader, start: int, limit: int, meta: dict,
            remove_key=R.collection_key_of_remove, undecoded=()) -> ReplayResult:
    """Replay the log from ``start`` to ``limit`` over ``index`` and ``meta`` as ``replay_from`` does.
    ``remove_key`` reads a REMOVE_COLLECTION's key: the broker's way by default; :mod:`.indexlog` passes the
    bare varint ``removeCollection`` wrote, to rebuild the index the live broker kept. ``undecoded``: positions
    of DATA records whose message is not decoded (:mod:`.mended_tail`: data whose content is unknown)."""
    res = ReplayResult(start, limit, start)
    batch: list = []
    pos = start
    while pos < limit:
        head = reader.read(pos, L.HEADER_SIZE)
        if head is None:
            res.stopped = (pos, "no log file holds this position (missing or collected)")
            break
        try:
            kind, _cs, length = L.parse_header(head, 0)
        except FormatError as err:
            res.stopped = (pos, err.message)
            break
        data = reader.read(pos + L.HEADER_SIZE, length)
        if data is None:
            res.stopped = (pos, f"a {length}-byte record runs past the end of its log file")
            break
        try:
            if kind == L.DATA:
                if pos not in undecoded:
                    decode_data(bytes(data))
            elif kind == L.ADD_COLLECTION:
                rec = R.decode_collection(data)
                batch.append((R.collection_index_key(rec.key), bytes(data)))
                meta[rec.key] = R.CollectionMeta(0, None)
            elif kind == L.REMOVE_COLLECTION:
                key = remove_key(data)
                _flush(index, batch)
                prefix = R.ENTRY_PREFIX + R._Q.pack(key)
                for k in [k for k in index if k.startswith(prefix)]:
                    del index[k]
                index.pop(bytes(data), None)
                meta.pop(key, None)
            elif kind in (L.ADD_ENTRY, L.UPDATE_ENTRY):
                rec = R.decode_entry(data)
                if rec.entry_key is None or rec.collection_key is None:
                    raise FormatError("entry record without its collection or entry key")
                value = R.encode_entry_value(rec.value_location or 0, rec.value_length)
                batch.append((R.entry_index_key(rec.collection_key, rec.entry_key), value))
                # collectionIncrementSize: at once, not with the batch (so a cut unit still counts)
                cm = meta.get(rec.collection_key) if kind == L.ADD_ENTRY else None
                if cm is not None:
                    cm.size += 1
                    cm.last_key = bytes(rec.entry_key)
            elif kind == L.REMOVE_ENTRY:
                rec = R.decode_entry(data)
                if rec.entry_key is None or rec.collection_key is None:
                    raise FormatError("entry record without its collection or entry key")
                batch.append((R.entry_index_key(rec.collection_key, rec.entry_key), None))
                cm = meta.get(rec.collection_key)
                if cm is not None:
                    cm.size -= 1
            elif kind == L.UOW_END:
                _flush(index, batch)
                res.units += 1
        except FormatError as err:
            res.stopped = (pos, f"{L.kind_name(kind)}: {err.message}")
            break
        res.records += 1
        pos += L.HEADER_SIZE + length
    res.end = pos
    res.dropped_ops = len(batch)
    return res


def _flush(index: dict, batch: list) -> None:
    for k, v in batch:
        if v is None:
            index.pop(k, None)
        else:
            index[k] = v
    batch.clear()


def load(store, *, node=None) -> LevelDBState:
    """Recover one LevelDB store (``store``: :class:`amqtool.store.leveldb_layout.LevelDBStore`, or one of
    its replica ``nodes``). Close the result (or use it as a context manager): it maps the log files."""
    # the index, its entries and messages are tens of thousands of acyclic objects that live on: the cyclic
    # collector's passes over them cost a third of the load (amqtool.gcpause)
    with gc_paused():
        return _load(store, node)


def _load(store, node) -> LevelDBState:
    s = node or store
    directory = Path(s.directory)
    log_dir = Path(s.log_dir())
    logs = log_files(log_dir)
    reader = LogReader(logs)
    snaps = _snapshots(directory)
    snapshot = snaps[-1] if snaps else None
    snap_db = read_index(snapshot[1]) if snapshot else None
    dirty_dir = directory / "dirty.index"
    dirty_db = None
    if dirty_dir.is_dir():
        # the broker never reads dirty.index on start (replay_init deletes it and copies the last snapshot over
        # it); it is verify's evidence of what the live broker had written. Right after a snapshot or a clean
        # stop the snapshot is a copy of it (copyIndex): the same bytes need not be read twice
        same = snap_db is not None and snap_db.error is None and same_database(dirty_dir, snapshot[1])
        dirty_db = snap_db if same else read_index(dirty_dir)
    index = dict(snap_db.data) if snap_db is not None and snap_db.error is None else {}
    last_end = scan_end = last_scan = None
    cut = 0
    limit = 0
    if logs:
        last = logs[-1]
        if native.leveldb_scan is not None:  # the same walk in C, kept for verify's pass over the file
            last_scan = scan(reader.buffer(last), last.position)
            last_end, scan_end, cut = last_scan.complete
        else:
            last_end, scan_end, cut = L.complete_end(reader.buffer(last), last.position)
        limit = last.position + last_end
    start = snapshot[0] if snapshot else 0
    if logs and reader.file_at(start) is None:
        start = logs[0].position
    meta: dict = {}
    meta_error = None
    raw_meta = index.get(b":collection-meta")
    if raw_meta is not None:
        try:
            meta = R.decode_collection_meta(raw_meta)  # loadCounters
        except FormatError as err:
            meta_error = err.message
    rep = _replay(index, reader, start, limit, meta) if logs else ReplayResult(start, limit, start)
    version = None
    try:
        with open(directory / "store-version.txt", "rb") as fh:
            version = fh.read(100).decode("ascii", "replace").strip()
    except OSError:
        pass
    st = LevelDBState(directory, log_dir, logs, snapshot, [p for _, p in snaps], index, snap_db, dirty_db,
                      last_end, scan_end, cut, rep, reader=reader, store_version=version, meta=meta,
                      meta_error=meta_error, last_scan=last_scan)
    _load_collections(st)
    return st


_PREFIXES = ("queue://", "topic://", "temp-queue://", "temp-topic://")


def qualified_name(name: str, kind: str) -> str:
    """The destination a queue or topic collection record names, as ``DBManager.loadCollections`` gets it:
    the meta is the qualified name (``createCollection(utf8(dest.getQualifiedName))``), which
    ``ActiveMQDestination.createDestination(meta, QUEUE_TYPE or TOPIC_TYPE)`` parses by its prefix; without a
    known prefix the whole string is the name of a destination of the collection's kind (a damaged
    "queuu://Q.A" names queue "queuu://Q.A", not Q.A). Another kind's prefix fails the cast to the
    collection's kind (``asInstanceOf[ActiveMQQueue]``): FormatError, the broker cannot load it."""
    own = f"{kind}://"
    if name.startswith(own):
        return name
    other = next((p for p in _PREFIXES if name.startswith(p)), None)
    if other is not None:
        raise FormatError(f"a {kind} collection names {name!r}, a {other[:-3]}: the broker cannot load it "
                          f"(its cast to a {kind} fails)")
    return own + name


def _entry_rows(items: list):
    """:func:`amqtool.formats.leveldb.records.entry_rows` of a collection's entries, in C when built."""
    if native.leveldb_entry_rows is not None:
        try:
            seqs, locs, lens, status = native.leveldb_entry_rows(items)
        except TypeError:  # not (bytes, bytes) pairs: the reference reads them
            return R.entry_rows(items)
        return (memoryview(seqs).cast("q"), memoryview(locs).cast("q"), memoryview(lens).cast("i"), status)
    return R.entry_rows(items)


def index_groups(index: dict, *, use_native: bool | None = None) -> tuple[dict, list]:
    """(entries, collections) of an index (key -> value): ``entries`` collection key -> ``[(entry key, value)]``
    of its keys ``'e' + collection key (8 bytes) + entry key``, ``collections`` its 9-byte ``'c'`` keys, each
    in key order (``DBManager.loadCollections`` iterates the index in key order). In C when built
    (``native.leveldb_index_groups``: no sort of the whole index, no Python step per key); this is the
    reference, which gives equal results."""
    c = native.leveldb_index_groups if use_native is not False else None
    if c is not None:
        try:
            return c(index)
        except TypeError:  # a key that is not bytes: the reference reads it
            pass
    keys = sorted(index)
    entries: dict[int, list] = {}
    # 'c' keys sort before 'e' keys: each prefix is one run of the sorted keys, an entry key's first 9 bytes
    # ('e' + collection) group a collection's entries, in entry key order
    lo, hi = bisect_left(keys, R.ENTRY_PREFIX), bisect_left(keys, b"f")
    for prefix, group in groupby(keys[lo:hi], key=itemgetter(slice(0, 9))):
        if len(prefix) == 9:
            entries[_Q_unpack(prefix, 1)[0]] = [(k[9:], index[k]) for k in group]
    lo, hi = bisect_left(keys, R.COLLECTION_PREFIX), bisect_left(keys, b"d")
    return entries, [k for k in keys[lo:hi] if len(k) == 9]


def _load_collections(st: LevelDBState) -> None:
    index = st.index
    grouped, collections = index_groups(index)
    entries: dict[int, list] = st.entries
    entries.update(grouped)
    subs_by_topic: dict[int, list] = {}
    txs = []
    for k in collections:
        ckey = R._Q.unpack_from(k, 1)[0]
        st.collection_keys.add(ckey)
        try:
            rec = R.decode_collection(index[k])
            if rec.type in (R.QUEUE, R.TOPIC):
                name = (rec.meta or b"").decode("utf-8")
                kind = "queue" if rec.type == R.QUEUE else "topic"
                d = Destination(ckey, kind, qualified_name(name, kind))
                items = entries.get(ckey, [])
                seqs, locs, lens, status = _entry_rows(items)
                msgs = d.messages
                if status.count(0) == len(status):  # the common case: every entry a plain message entry
                    msgs.extend(map(Message, repeat(ckey), seqs, locs, lens))
                    status = b""
                for i, s in enumerate(status):
                    if s == 0:
                        msgs.append(Message(ckey, seqs[i], locs[i], lens[i]))
                    elif s == 2:
                        loc, length, meta = R.decode_index_entry(items[i][1])
                        msgs.append(Message(ckey, seqs[i], loc, length, R.decode_delivery_count(meta) if meta else 0))
                cm = st.meta.get(ckey)
                d.entries = cm.size if cm is not None else 0
                st.destinations[ckey] = d
            elif rec.type == R.SUBSCRIPTION:
                sr = R.decode_subscription(rec.meta or b"")
                ack = index.get(R.entry_index_key(ckey, R.ACK_POSITION))
                pos = (R.decode_entry(ack).value_location or 0) if ack is not None else 0
                sub = Subscription(ckey, sr.topic_key, sr.client_id, sr.subscription_name, sr.selector, pos)
                topic = st.destinations.get(sr.topic_key)
                if topic is None or topic.kind != "topic":
                    st.dropped_subscriptions.append(sub)  # createSubscription: the topic does not exist
                else:
                    topic.subscriptions.append(sub)
                    subs_by_topic.setdefault(sr.topic_key, []).append(sub)
            elif rec.type == R.TRANSACTION:
                txs.append((ckey, rec))
        except (FormatError, UnicodeDecodeError) as err:
            st.load_problems.append((ckey, getattr(err, "message", str(err))))
    by_qualified = {d.qualified: d for d in st.destinations.values()}
    prepared_acks: set[tuple[int, int]] = set()
    for ckey, rec in txs:
        try:
            parts = R.decode_xid_parts(rec.meta or b"")
            tx = PreparedTransaction(ckey, parts.key, parts)
        except FormatError as err:
            st.load_problems.append((ckey, f"transaction id: {err.message}"))
            continue
        for ekey, value in entries.get(ckey, ()):
            seq = R.seq_of(ekey)
            e = R.decode_entry(value)
            if e.meta is not None:
                try:
                    ack = R.decode_xa_ack(e.meta)
                except FormatError as err:
                    st.load_problems.append((ckey, f"prepared ack {seq}: {err.message}"))
                    continue
                tx.acks.append(ack)
                if ack.sub == -1:
                    prepared_acks.add((ack.collection, ack.seq))
                else:
                    for sub in subs_by_topic.get(ack.collection, ()):
                        if sub.key == ack.sub:
                            sub.ack_position = ack.seq
                            sub.prepared_ack = True
            else:
                m = Message(ckey, seq or 0, e.value_location or 0, e.value_length or 0)
                if st.skips(m.location):  # transactionCursor: "Could not load XA message seq", and goes on
                    tx.skipped.append(m)
                    continue
                msg, err = st.decode(m)
                if msg is None:
                    # transactionCursor -> getMessage throws (a replayed prepared ack lost its meta and reads
                    # as a message at position 0): the broker cannot start (checked with the real broker)
                    st.load_problems.append((ckey, f"prepared transaction {tx.xid} entry {seq}: {err}; the "
                                             "broker fails to load it"))
                dest = None
                if msg is not None and msg.destination:
                    kind, name = msg.destination
                    dest = f"{kind}://{name}"
                    if dest not in by_qualified and kind == "queue":
                        # LevelDBStore.doStart: transaction.add(createMessageStore(msg.getDestination))
                        d = Destination(-len(by_qualified) - 1, "queue", dest, created_by_prepared=True)
                        st.destinations[d.key] = by_qualified[dest] = d
                tx.sends.append((m, dest))
        st.transactions.append(tx)
    first = st.logs[0].position if st.logs else 0
    for d in st.destinations.values():
        if prepared_acks:
            d.messages = [m for m in d.messages if (d.key, m.seq) not in prepared_acks]
        if first and d.messages and min(map(_location, d.messages)) < first:
            d.skipped = [m for m in d.messages if m.location < first]
            d.messages = [m for m in d.messages if m.location >= first]
        cm = st.meta.get(d.key)
        for sub in d.subscriptions:
            sub.pending = [m for m in d.messages if m.seq > sub.ack_position]
            sub.last_seq = cm.last_seq if cm is not None else 0
    for key in [k for k, d in st.destinations.items() if d.kind == "topic" and not d.subscriptions]:
        st.dropped_topics.append(st.destinations.pop(key))
