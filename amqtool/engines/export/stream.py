"""``spark.readStream.format("amqtool")``: the references a running Artemis broker commits to its messages
journal, as a stream of ``messages`` rows. Read-only: files are opened ``O_RDONLY`` and nothing is written.

::

    from amqtool.spark import register
    register(spark)
    q = (spark.readStream.format("amqtool").load("/var/lib/artemis/data")
         .writeStream.format("parquet").option("checkpointLocation", "/ckpt").start("/out"))

**What a micro-batch holds.** The stream is the log of *references added*: one row per ADD_REF (32) the
journal commits, with the columns ``export``'s messages table gives (:data:`~.schema.MESSAGE_COLUMNS`), its
message decoded from the message record (45, 30 large, 31 legacy) by the same column decoder. A reference is
*committed* when its record is a non-transactional UPDATE (at the record's position), or when it is an
UPDATE_TX whose transaction's COMMIT is on disk and passes the broker's health check (``numberOfRecords``
matches the transaction's records in the COMMIT's file, as ``JournalImpl.load`` checks: §3.2), at the
COMMIT's position. A prepared (XA) transaction's references are emitted when it commits; a rolled-back or
broken one's never. Acknowledgements, deletes and updates are not emitted: a reference acknowledged since it
was added is still emitted (when its batch is read and its message record is still on disk). A row is as the
reference was added: ``delivery_count`` 0, ``scheduled_time`` the last committed SET_SCHEDULED_DELIVERY_TIME
(36) of the pair up to the batch's end, ``transaction_state`` ``committed``. Paged messages are not in the
journal and are not streamed. Options: ``safe``, ``queue`` (as the batch source), ``startingOffsets``
``earliest`` (default: every reference still on disk) or ``latest`` (what is committed from now on).

**Offsets** (JSON, in Spark's checkpoint): ``fileId`` and ``position`` -- the header fileID of a journal file
and the end of the last whole record read in it (the order of the journal is (fileID, position): files are
appended in fileID order, §1.4); ``files``: the ``[fileID, name, digest]`` of every file up to ``fileId``
(``digest``: BLAKE2b of the first bytes of its records, up to the offset in the offset's own file);
``highMessageId`` / ``highQueues``: the largest message id of a reference committed up to the offset and
the queues of that message committed so far; ``pending``: the ``[message id, queue id]`` of the references
of transactions still open at the offset. A record that is not whole at the end of the file being written
(a torn tail: the broker is writing it) is not accepted by the scanner (§1.5) and is not consumed until it is
whole: the offset stops before it.

**File reuse and compaction.** The broker frees files and reinitialises them with a new, higher fileID under
their old name, leaving their old records behind (§1.3): records are read only under their file's current
tag, and a reused file is a new file after the offset, so nothing is read twice. A freed file's records
were all dead; those the stream had not read (references added and acknowledged while the stream was
behind, in a file reclaimed before it caught up) are not emitted. Compaction rewrites the live records into
files with *lower* fileIDs (§4.2); so when a file with a fileID at or below an offset's ``fileId`` is not one
of the offset's ``files`` (a fileID that goes back, or a digest that changed), the offset's coordinates are
gone. While a compaction is under way (``journal-rename-control.ctr``, ``*.cmp`` or ``*.tmp`` files),
:meth:`AmqtoolStreamReader.latestOffset` offers no new data. After one, the batch restarts from a consistent
load of the compacted journal: a reference is in the batch when it is after the start offset and not after
the end offset, where "after" an offset whose coordinates are gone is decided by message id -- the message
id is above ``highMessageId``, or equal to it on a queue not in ``highQueues``, or the pair is in
``pending``. Artemis message ids come from one ``BatchingIDGenerator`` per broker (an ``AtomicLong``,
checkpointed ahead in the bindings journal, so ids only grow, across restarts too): every reference emitted
before the offset has a message id at most ``highMessageId`` and is not pending, so **nothing is emitted
twice**. What this rule can miss, and why it is not exact: the id is given in the producer's session thread
(``ServerSessionImpl.send``) before the message is routed and stored, so two producers' messages can reach
the journal out of id order, and a transaction commits later than its ids were given. A non-transactional
reference whose message id is below ``highMessageId`` and that was appended after the offset, then moved by a
compaction before the stream read it, is not emitted; nor are references added and acknowledged before a
compaction the stream had not read (the compactor drops dead records). Without a compaction the stream is
exact: every committed reference once, in journal order.

**Consistency of one read.** A read lists the files, scans them, and lists them again; if the listing changed
(a compaction or a reuse under it), it reads again (:data:`READ_ATTEMPTS`), then fails with one line.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from amqtool.errors import AmqtoolError, UsageError

DIGEST_SPAN = 4096  # bytes of a file's records hashed into an offset (cheap; a compaction rewrites them)
READ_ATTEMPTS = 5
ADD_REF = 32
SET_SCHEDULED = 36
MESSAGE_TYPES = frozenset({30, 31, 45})


# --- offsets -----------------------------------------------------------------------------------------------


@dataclass
class Offset:
    """A stream offset (see the module docstring)."""

    file_id: int = -1
    position: int = 0
    files: list = field(default_factory=list)  # [file id, name, digest], files with id <= file_id
    high_message_id: int = -1
    high_queues: list = field(default_factory=list)
    pending: list = field(default_factory=list)  # [message id, queue id]

    def to_json(self) -> dict:
        return {"fileId": self.file_id, "position": self.position, "files": [list(f) for f in self.files],
                "highMessageId": self.high_message_id, "highQueues": list(self.high_queues),
                "pending": [list(p) for p in self.pending]}

    @classmethod
    def from_json(cls, d) -> "Offset":
        if isinstance(d, str):
            import json

            d = json.loads(d)
        try:
            return cls(int(d["fileId"]), int(d["position"]), [tuple(f) for f in d.get("files", [])],
                       int(d.get("highMessageId", -1)), [int(q) for q in d.get("highQueues", [])],
                       [tuple(p) for p in d.get("pending", [])])
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"not an amqtool stream offset: {d!r} ({err})") from None

    @property
    def key(self) -> tuple[int, int]:
        return (self.file_id, self.position)

    def moved(self, files) -> bool:
        """Whether this offset's coordinates are gone from the journal files ``files`` (JournalFile list):
        a file with a fileID at or below ``file_id`` that is not one of :attr:`files`, or whose first
        records changed (a compaction's output; a reused file takes a higher fileID)."""
        known = {(int(i), n): d for i, n, d in self.files}
        for f in files:
            if f.file_id > self.file_id:
                continue
            d = known.get((f.file_id, f.name))
            if d is None:
                return True
            limit = self.position if f.file_id == self.file_id else None
            if _digest(f.path, limit) != d:
                return True
        return False

    def after(self, files_moved: bool, pos: tuple[int, int], mid: int, qid: int) -> bool:
        """Whether the reference ``(mid, qid)`` committed at ``pos`` comes after this offset: by position
        while the offset's coordinates hold, else by message id (the module docstring)."""
        if not files_moved:
            return pos > self.key
        if mid > self.high_message_id:
            return True
        if mid == self.high_message_id and qid not in self.high_queues:
            return True
        return (mid, qid) in self._pending_set

    @property
    def _pending_set(self) -> set:
        s = getattr(self, "_ps", None)
        if s is None:
            s = self._ps = {(int(m), int(q)) for m, q in self.pending}
        return s


def _digest(path, limit: int | None) -> str:
    """BLAKE2b (8 bytes, hex) of a journal file's bytes from 16 up to ``16 + DIGEST_SPAN``, or ``limit``."""
    end = 16 + DIGEST_SPAN if limit is None else min(16 + DIGEST_SPAN, max(16, limit))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return "gone"
    try:
        data = os.pread(fd, end - 16, 16)
    finally:
        os.close(fd)
    return hashlib.blake2b(data, digest_size=8).hexdigest()


# --- the walk: one consistent read of the messages journal --------------------------------------------------


@dataclass
class Ref:
    """A committed reference: ``pos`` is (fileID, end of its record, or of its transaction's COMMIT)."""

    pos: tuple[int, int]
    message_id: int
    queue_id: int


@dataclass
class Walk:
    """What a scan of the messages journal up to a stop gave."""

    files: list  # the JournalFiles read (OpenedJournal order)
    end: Offset  # the offset after the last whole record read
    refs: list[Ref]  # committed references, in commit order
    messages: dict  # message id -> (file index, body offset, body length, user record type), last committed
    scheduled: dict  # (message id, queue id) -> scheduled time, last committed


class _Tx:
    __slots__ = ("last_file", "counter", "records")

    def __init__(self):
        self.last_file = None
        self.counter = 0
        self.records = []  # (kind, message id, queue id or location)

    def count(self, file_id: int) -> int:  # JournalTransaction.getCounter: resets in another file
        if self.last_file != file_id:
            self.last_file, self.counter = file_id, 0
        return self.counter

    def inc(self, file_id: int) -> None:
        self.count(file_id)
        self.counter += 1


def _queue_id(body) -> int | None:
    return int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else None


def walk(opened, stop: Offset | None = None) -> Walk:
    """Scan the ordered files of ``opened`` (an :class:`~amqtool.store.journal_files.OpenedJournal` of a
    messages journal) as ``JournalImpl.load`` scans them (§1.5, §3.2), up to ``stop`` (None: to the last
    whole record), collecting the committed references, the message records and the scheduled times."""
    from amqtool.formats.artemis.records import ADD, ADD_TX, COMMIT, DELETE_TX, PREPARE, ROLLBACK, UPDATE, \
        UPDATE_TX, body_offset

    refs: list[Ref] = []
    messages: dict = {}
    scheduled: dict = {}
    txs: dict[int, _Tx] = {}
    last = (-1, 0)
    files = list(opened.files)
    read_files = []

    def apply(kind, mid, qid_or_loc, pos, body=None):
        if kind == "msg":
            messages[mid] = qid_or_loc
        elif kind == "ref":
            refs.append(Ref(pos, mid, qid_or_loc))
        elif kind == "sched":
            scheduled[(mid, qid_or_loc[0])] = qid_or_loc[1]

    done = False
    for index, f in enumerate(files):
        if stop is not None and f.file_id > stop.file_id:
            break
        fid = f.file_id
        read_files.append(f)
        version = f.version
        for base, data, records, _marked in opened.scan_windows(index):
            for rec in records:
                t, off, size, _cc, tx_id, rid, utype, blen, nrec, _x = rec
                pos = (fid, base + off + size)
                if stop is not None and pos > stop.key:
                    done = True
                    break
                last = pos
                item = None
                if t in (ADD, UPDATE, ADD_TX, UPDATE_TX):
                    b = body_offset(rec, version)  # relative to this window
                    if utype in MESSAGE_TYPES:
                        item = ("msg", rid, (index, base + b, blen, utype))
                    elif utype == ADD_REF:
                        q = _queue_id(data[b:b + 8])
                        if q is not None:
                            item = ("ref", rid, q)
                    elif utype == SET_SCHEDULED and blen >= 16:
                        q = _queue_id(data[b:b + 8])
                        item = ("sched", rid, (q, int.from_bytes(data[b + 8:b + 16], "big", signed=True)))
                if t in (ADD, UPDATE):
                    if item is not None:
                        apply(*item, pos)
                elif t in (ADD_TX, UPDATE_TX, DELETE_TX):
                    tx = txs.get(tx_id)
                    if tx is None:
                        tx = txs[tx_id] = _Tx()
                    tx.inc(fid)
                    if item is not None:
                        tx.records.append(item)
                elif t == PREPARE:
                    if tx_id not in txs:
                        txs[tx_id] = _Tx()
                elif t == COMMIT:
                    tx = txs.pop(tx_id, None)
                    if tx is not None and tx.count(fid) == nrec:  # else: the broker discards it
                        for item in tx.records:
                            apply(*item, pos)
                elif t == ROLLBACK:
                    txs.pop(tx_id, None)
            if done:
                break
        if done:
            break
    end = _offset_at(last, read_files, refs, txs)
    return Walk(read_files, end, refs, messages, scheduled)


def _records_after(opened, offset: Offset) -> bool:
    """Whether a whole record lies after ``offset`` (whose coordinates hold): the scan of the offset's file
    goes on from ``position``, the files after it are scanned from their start."""
    for index, f in enumerate(opened.files):
        if f.file_id < offset.file_id:
            continue
        start = offset.position if f.file_id == offset.file_id else 16
        for _base, _data, records, _marked in opened.scan_windows(index, start=start):
            if records:
                return True
    return False


def _offset_at(last: tuple[int, int], files, refs: list[Ref], txs: dict) -> Offset:
    high = max((r.message_id for r in refs), default=-1)
    high_queues = sorted({r.queue_id for r in refs if r.message_id == high})
    pending = sorted({(m, q) for tx in txs.values() for kind, m, q in tx.records if kind == "ref"})
    fid, position = last
    listed = [[f.file_id, f.name, _digest(f.path, position if f.file_id == fid else None)]
              for f in files if f.file_id <= fid]
    return Offset(fid, position, listed, high, high_queues, [list(p) for p in pending])


# --- reading the store consistently ------------------------------------------------------------------------


def _messages_journal(path: str):
    from amqtool.store.layout import detect

    if not os.path.isdir(path):
        raise AmqtoolError(f"{path}: the store is gone")
    store = detect(path)
    if store.kind != "artemis" or store.messages is None:
        raise UsageError(f"{path}: readStream reads an Artemis messages journal; this is a {store.kind} store"
                         + ("" if store.kind != "artemis" else " without one"))
    return store


def _listing(journal) -> tuple:
    """What must not change while a read runs: the journal's names with their sizes' presence and headers."""
    from amqtool.store.journal_files import open_journal

    with open_journal(journal) as o:
        return tuple((f.name, f.file_id) for f in o.files), _busy(journal)


def _busy(journal) -> bool:
    """A compaction (or a file creation) under way: control file, ``.cmp`` or ``.tmp`` files."""
    from amqtool.store.layout import CONTROL_FILE

    ext = "." + journal.spec.extension
    try:
        names = os.listdir(journal.directory)
    except OSError:
        return True
    return any(n == CONTROL_FILE or n.endswith(ext + ".cmp") or n.endswith(ext + ".tmp") for n in names)


def consistent(journal, use):
    """``use(opened)`` on the journal opened read-only, retried until the listing is the same before and
    after (a broker compacting or reusing files meanwhile); raises after :data:`READ_ATTEMPTS`."""
    from amqtool.store.journal_files import open_journal

    for _ in range(READ_ATTEMPTS):
        before = _listing(journal)
        if before[1]:
            continue
        with open_journal(journal) as opened:
            if opened.skipped:
                s = opened.skipped[0]
                raise AmqtoolError(f"{s.path}: {s.message}")
            got = use(opened)
        if _listing(journal) == before:
            return got
    raise AmqtoolError(f"{journal.directory}: the journal kept changing while it was read (a compaction or "
                       f"file reuse under way); the batch is read again at the next trigger")


# --- Spark -------------------------------------------------------------------------------------------------


def stream_settings(options) -> dict:
    """The checked options of a stream (see the module docstring)."""
    from amqtool.engines.export.datasource import _flag

    opts = {str(k).lower(): v for k, v in dict(options).items()}
    path = opts.get("path")
    if not path or opts.get("paths") and len(__import__("json").loads(opts["paths"])) > 1:
        raise UsageError("readStream reads one Artemis store: spark.readStream.format('amqtool').load(PATH)")
    if str(opts.get("table", "messages")).lower() != "messages":
        raise UsageError("readStream gives the messages table only")
    start = str(opts.get("startingoffsets", "earliest")).lower()
    if start not in ("earliest", "latest"):
        raise UsageError(f"option startingOffsets must be earliest or latest, not {start!r}")
    queues = tuple(q.strip() for q in str(opts["queue"]).split(",") if q.strip()) if opts.get("queue") else None
    return {"path": os.path.abspath(path), "safe": _flag(opts, "safe", False), "queues": queues or None,
            "start": start}




class BatchPartition(InputPartition):
    """One micro-batch's work: the store and the two offsets (one task reads the whole batch: a batch is
    the journal's new records, and the walk that finds them is sequential)."""

    def __init__(self, path: str, start: dict, end: dict):
        super().__init__(None)
        self.path = path
        self.start = start
        self.end = end


class AmqtoolStreamReader(DataSourceStreamReader):
    """The micro-batch reader (see the module docstring)."""

    def __init__(self, settings: dict):
        self.settings = settings

    def initialOffset(self) -> dict:
        if self.settings["start"] == "earliest":
            return Offset().to_json()
        return self._latest(Offset()).to_json()

    def latestOffset(self, start=None, limit=None) -> dict:
        begin = Offset() if start is None else Offset.from_json(start)
        got = self._latest(begin)
        if got.key == begin.key and got.high_message_id == begin.high_message_id \
                and got.to_json()["pending"] == begin.to_json()["pending"]:
            return begin.to_json()  # nothing committed since: no batch
        return got.to_json()

    def _latest(self, begin: Offset) -> Offset:
        store = _messages_journal(self.settings["path"])
        if _busy(store.messages):
            return begin  # the broker is compacting: nothing new until it has switched over

        def use(opened):
            if begin.file_id >= 0 and not begin.moved(opened.files) and not _records_after(opened, begin):
                return begin  # an idle trigger reads only the bytes after the offset, not the whole journal
            return walk(opened).end

        try:
            end = consistent(store.messages, use)
        except AmqtoolError:
            return begin
        if end.file_id < 0:
            return begin
        return end

    def partitions(self, start: dict, end: dict):
        if Offset.from_json(start).to_json() == Offset.from_json(end).to_json():
            return []
        return [BatchPartition(self.settings["path"], start, end)]

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the journal is the broker's, read-only

    def read(self, partition: BatchPartition) -> Iterator:
        yield from read_batch(partition.path, Offset.from_json(partition.start), Offset.from_json(partition.end),
                              self.settings)


def read_batch(path: str, start: Offset, end: Offset, settings: dict) -> Iterator:
    """The Arrow batches of the references after ``start`` and not after ``end`` (module docstring)."""
    from amqtool.engines.export.columns import row
    from amqtool.engines.export.local import message_batches
    from amqtool.engines.export.model import ExportOptions, ExportSummary
    from amqtool.engines.export.parse import LargeBodies
    from amqtool.store.journal_files import BodyWindows

    store = _messages_journal(path)
    bindings = _bindings(store)
    options = ExportOptions(safe=settings["safe"], queues=settings["queues"])

    def use(opened):
        start_moved = start.moved(opened.files)
        end_moved = end.moved(opened.files)
        w = walk(opened, None if end_moved else end)
        chosen: dict[int, list] = {}
        for r in w.refs:
            if start.after(start_moved, r.pos, r.message_id, r.queue_id) and \
                    not end.after(end_moved, r.pos, r.message_id, r.queue_id):
                name = bindings.queue_name(r.queue_id)
                if options.wants(name):
                    chosen.setdefault(r.message_id, []).append(
                        row(name, r.queue_id, bindings.routing_type(r.queue_id),
                            scheduled_time=w.scheduled.get((r.message_id, r.queue_id))))
        body = BodyWindows(opened).body
        out = []  # (utype, body, mid, rows, where): a message whose record is gone (reclaimed) gives none
        for mid, rows in chosen.items():
            loc = w.messages.get(mid)
            if loc is not None:
                out.append((loc[3], body(loc[0], loc[1], loc[2]), mid, rows, ""))
        return out

    messages = consistent(store.messages, use)
    summary = ExportSummary("spark", "artemis")
    yield from message_batches(messages, safe=settings["safe"], large=LargeBodies(store.large_messages_dir),
                               summary=summary)


def _bindings(store):
    """The store's queues (names, routing types) from its bindings journal, as the export names them."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.engines.export.parse import Bindings

    if store.bindings is None:
        return Bindings([])

    def use(opened):
        result = load_journal(opened)
        return [(rec.id, rec.user_record_type, result.body(rec)) for rec in result.live
                if rec.user_record_type in (21, 44)]

    return Bindings(consistent(store.bindings, use))
