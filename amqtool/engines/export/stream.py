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
the queues of that message committed so far; ``open``: the transactions still open at the offset (their
counter for the COMMIT's check and their message, reference and scheduled-time records; their references
are the offset's *pending* ones). With them the next batch reads only the bytes after the offset (and, for a
reference whose message record lies before it, looks that record up from the offset's file backwards): a
batch costs what was appended, not the journal's size. A record that is not whole at the end of the file
being written (a torn tail: the broker is writing it) is not accepted by the scanner (§1.5) and is not
consumed until it is whole: the offset stops before it.

**File reuse and compaction.** The broker frees files and reinitialises them with a new, higher fileID under
their old name, leaving their old records behind (§1.3): records are read only under their file's current
tag, and a reused file is a new file after the offset, so nothing is read twice. A freed file's records
were all dead; those the stream had not read (references added and acknowledged while the stream was
behind, in a file reclaimed before it caught up) are not emitted. Compaction rewrites the live records into
files with *lower* fileIDs (§4.2); so when a file with a fileID at or below an offset's ``fileId`` is not one
of the offset's ``files`` (a fileID that goes back, or a digest that changed), the offset's coordinates are
gone. While a compaction is under way (``journal-rename-control.ctr`` or ``*.cmp`` files),
:meth:`AmqtoolStreamReader.latestOffset` offers no new data. After one, the batch restarts from a consistent
load of the compacted journal: a reference is in the batch when it is after the start offset and not after
the end offset, where "after" an offset whose coordinates are gone is decided by message id -- the message
id is above ``highMessageId``, or equal to it on a queue not in ``highQueues``, or the pair is pending.
Artemis message ids come from one ``BatchingIDGenerator`` per broker (an ``AtomicLong``, checkpointed ahead
in the bindings journal, so ids only grow, across restarts too): every reference emitted
before the offset has a message id at most ``highMessageId`` and is not pending, so **nothing is emitted
twice**. What this rule can miss, and why it is not exact: the id is given in the producer's session thread
(``ServerSessionImpl.send``) before the message is routed and stored, so two producers' messages can reach
the journal out of id order, and a transaction commits later than its ids were given. A non-transactional
reference whose message id is below ``highMessageId`` and that was appended after the offset, then moved by a
compaction before the stream read it, is not emitted; nor are references added and acknowledged before a
compaction the stream had not read (the compactor drops dead records). Without a compaction the stream is
exact: every committed reference once, in commit order (the rows of one message together).

**Consistency of one read.** A read lists the files, scans them, and lists them again; if the listing changed
(a compaction or a reuse under it), it reads again (:data:`READ_ATTEMPTS`), then fails with one line. The
message bodies are then read one Arrow batch at a time (memory: a batch, not the micro-batch) from the same
files; if the listing changed meanwhile the task fails with one line and Spark runs it again.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from amqtool.errors import AmqtoolError, UsageError

DIGEST_SPAN = 4096  # bytes of a file's records hashed into an offset (cheap; a compaction rewrites them)
READ_ATTEMPTS = 5
RETRY_SECONDS = 0.2
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
    # the transactions open at the offset: [tx id, file id of its last record, its count there, its records
    # as _Tx items: ["msg", mid, file id, body offset, length, type] | ["ref", mid, queue] | ["sched", mid,
    # queue, time]]: what the next batch needs to go on from the offset without reading the journal again
    open: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"fileId": self.file_id, "position": self.position, "files": [list(f) for f in self.files],
                "highMessageId": self.high_message_id, "highQueues": list(self.high_queues),
                "open": [[t, f, c, [list(i) for i in recs]] for t, f, c, recs in self.open]}

    @classmethod
    def from_json(cls, d) -> "Offset":
        if isinstance(d, str):
            d = json.loads(d)
        try:
            return cls(int(d["fileId"]), int(d["position"]), [tuple(f) for f in d.get("files", [])],
                       int(d.get("highMessageId", -1)), [int(q) for q in d.get("highQueues", [])],
                       [(int(t), None if f is None else int(f), int(c), [tuple(i) for i in recs])
                        for t, f, c, recs in d.get("open", [])])
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"not an amqtool stream offset: {d!r} ({err})") from None

    @property
    def pending(self) -> list[tuple[int, int]]:
        """The ``(message id, queue id)`` of the references of the transactions open at the offset."""
        return sorted({(int(i[1]), int(i[2])) for _t, _f, _c, recs in self.open for i in recs if i[0] == "ref"})

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

    @cached_property
    def _pending_set(self) -> set:
        return set(self.pending)


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
    """What a scan of the messages journal gave, from an offset (or the start) up to a stop."""

    end: Offset  # the offset after the last whole record read
    refs: list[Ref]  # committed references, in commit order
    messages: dict  # message id -> (file id, body offset, body length, user record type), last committed
    scheduled: dict  # (message id, queue id) -> scheduled time, last committed


class _Tx:
    __slots__ = ("last_file", "counter", "records")

    def __init__(self, last_file=None, counter: int = 0, records=None):
        self.last_file = last_file
        self.counter = counter
        self.records = records if records is not None else []  # ("msg"|"ref"|"sched", message id, ...)

    def count(self, file_id: int) -> int:  # JournalTransaction.getCounter: resets in another file
        if self.last_file != file_id:
            self.last_file, self.counter = file_id, 0
        return self.counter

    def inc(self, file_id: int) -> None:
        self.count(file_id)
        self.counter += 1


def _queue_id(body) -> int | None:
    return int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else None


def walk(opened, stop: Offset | None = None, begin: Offset | None = None, floor: Offset | None = None) -> Walk:
    """Scan the ordered files of ``opened`` (an :class:`~amqtool.store.journal_files.OpenedJournal` of a
    messages journal) as ``JournalImpl.load`` scans them (§1.5, §3.2), up to ``stop`` (None: to the last
    whole record), collecting the committed references, the message records and the scheduled times.
    ``begin``: an offset whose coordinates hold in ``opened`` (not :meth:`Offset.moved`): the scan goes on
    from it, with the transactions it left open, and gives what was committed after it (the references of
    messages whose record is before it are found by :func:`find_messages`). None: from the first file.
    ``floor`` (default ``begin``): an earlier offset whose high-water message id the end's may not go below
    (a compaction drops dead references, not the ids already emitted)."""
    from amqtool.formats.artemis.records import ADD, ADD_TX, COMMIT, DELETE_TX, PREPARE, ROLLBACK, UPDATE, \
        UPDATE_TX, body_offset

    refs: list[Ref] = []
    messages: dict = {}
    scheduled: dict = {}
    txs: dict[int, _Tx] = {}
    if begin is not None:
        for tx_id, last_file, counter, recs in begin.open:
            txs[tx_id] = _Tx(last_file, counter, [_item(r) for r in recs])
    last = begin.key if begin is not None else (-1, 0)

    def apply(kind, mid, value, pos):
        if kind == "msg":
            messages[mid] = value
        elif kind == "ref":
            refs.append(Ref(pos, mid, value))
        else:
            scheduled[(mid, value[0])] = value[1]

    done = False
    for index, f in enumerate(opened.files):
        fid = f.file_id
        if stop is not None and fid > stop.file_id:
            break
        if begin is not None and fid < begin.file_id:
            continue
        version = f.version
        start = begin.position if begin is not None and fid == begin.file_id else 16
        for base, data, records, _marked in opened.scan_windows(index, start=start):
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
                        item = ("msg", rid, (fid, base + b, blen, utype))
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
    return Walk(_offset_at(last, opened.files, refs, txs, floor or begin), refs, messages, scheduled)


def _item(r) -> tuple:
    """A _Tx item from its offset form (and back: :func:`_flat`)."""
    if r[0] == "msg":
        return ("msg", int(r[1]), (int(r[2]), int(r[3]), int(r[4]), int(r[5])))
    if r[0] == "ref":
        return ("ref", int(r[1]), int(r[2]))
    return ("sched", int(r[1]), (int(r[2]), int(r[3])))


def _flat(item) -> list:
    kind, mid, value = item
    return [kind, mid, *value] if isinstance(value, tuple) else [kind, mid, value]


def _offset_at(last: tuple[int, int], files, refs: list[Ref], txs: dict, begin: Offset | None) -> Offset:
    high = max((r.message_id for r in refs), default=-1)
    high_queues = {r.queue_id for r in refs if r.message_id == high}
    if begin is not None and begin.high_message_id >= high:  # monotonic, whatever a compaction dropped
        if begin.high_message_id > high:
            high_queues = set()
        high = begin.high_message_id
        high_queues |= set(begin.high_queues)
    fid, position = last
    listed = [[f.file_id, f.name, _digest(f.path, position if f.file_id == fid else None)]
              for f in files if f.file_id <= fid]
    open_ = [[tx_id, tx.last_file, tx.counter, [_flat(i) for i in tx.records]] for tx_id, tx in sorted(txs.items())]
    return Offset(fid, position, listed, high, sorted(high_queues), open_)


def find_messages(opened, wanted: set[int], before: Offset) -> dict:
    """The records of the messages ``wanted`` that lie before ``before`` (their references were committed
    after it): ``{message id: (file id, body offset, body length, user record type)}``, the last record of
    each id, looked for from the offset's file backwards (a message's references follow its record closely)
    and no further than needed. A message whose record the broker has reclaimed is not found."""
    from amqtool.formats.artemis.records import ADD, ADD_TX, body_offset

    found: dict = {}
    wanted = set(wanted)
    for index in range(len(opened.files) - 1, -1, -1):
        if not wanted:
            break
        f = opened.files[index]
        if f.file_id > before.file_id:
            continue
        here: dict = {}
        for base, _data, records, _marked in opened.scan_windows(index):
            if f.file_id == before.file_id and base >= before.position:
                break
            for rec in records:
                t, off, size, _cc, _tx, rid, utype, blen, _n, _x = rec
                if f.file_id == before.file_id and base + off + size > before.position:
                    break  # (the records of one window are in file order; later windows are later still)
                if t in (ADD, ADD_TX) and utype in MESSAGE_TYPES and rid in wanted:
                    here[rid] = (f.file_id, base + body_offset(rec, f.version), blen, utype)
        found.update(here)
        wanted -= here.keys()
    return found


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
    """What must not change while a read runs: the journal's files (names and header fileIDs, as Artemis
    would load them) and whether a compaction is under way."""
    from amqtool.store.journal_files import open_journal

    with open_journal(journal) as o:
        return tuple((f.name, f.file_id) for f in o.files), _compacting(journal)


def _compacting(journal) -> bool:
    """A compaction under way: ``journal-rename-control.ctr`` or ``.cmp`` files (§4.3). (A ``.tmp`` file is
    a new file being created: it changes none of the others.)"""
    from amqtool.store.layout import CONTROL_FILE

    ext = "." + journal.spec.extension
    try:
        names = os.listdir(journal.directory)
    except OSError:
        return True
    return any(n == CONTROL_FILE or n.endswith(ext + ".cmp") for n in names)


class JournalChanging(AmqtoolError):
    """The journal's files changed under every attempt of a read."""


def consistent(journal, use):
    """``use(opened)`` on the journal opened read-only, retried until the listing is the same before and
    after (a broker compacting or reusing files meanwhile); raises after :data:`READ_ATTEMPTS`."""
    import time

    from amqtool.store.journal_files import open_journal

    for attempt in range(READ_ATTEMPTS):
        if attempt:
            time.sleep(RETRY_SECONDS * attempt)  # let the broker finish its renames
        before = _listing(journal)
        with open_journal(journal) as opened:
            if opened.skipped:
                s = opened.skipped[0]
                raise AmqtoolError(f"{s.path}: {s.message}")
            got = use(opened)
        if _listing(journal) == before:
            return got
    raise JournalChanging(f"{journal.directory}: the journal's files kept changing while they were read "
                       f"({READ_ATTEMPTS} attempts: a compaction or file reuse under way)")


# --- Spark -------------------------------------------------------------------------------------------------


def stream_settings(options) -> dict:
    """The checked options of a stream (see the module docstring)."""
    from amqtool.engines.export.datasource import _flag

    opts = {str(k).lower(): v for k, v in dict(options).items()}
    path = opts.get("path")
    if not path or opts.get("paths") and len(json.loads(opts["paths"])) > 1:
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
        if got.to_json() == begin.to_json():
            return begin.to_json()  # nothing since: no batch
        return got.to_json()

    def _latest(self, begin: Offset) -> Offset:
        store = _messages_journal(self.settings["path"])
        if _compacting(store.messages):
            return begin  # the broker is compacting: nothing new until it has switched over

        def use(opened):
            if begin.moved(opened.files):  # a compaction: a consistent load of the whole journal
                return walk(opened, floor=begin).end
            return walk(opened, begin=begin).end  # only the bytes after the offset

        try:
            end = consistent(store.messages, use)
        except JournalChanging:
            return begin  # a compaction or reuse under way: the next trigger looks again
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
    from amqtool.store.journal_files import BodyWindows, open_journal

    store = _messages_journal(path)
    bindings = bindings_of(store)
    options = ExportOptions(safe=settings["safe"], queues=settings["queues"])

    def use(opened):
        start_moved = start.moved(opened.files)
        end_moved = end.moved(opened.files)
        if not start_moved and not end_moved:  # the bytes between the two offsets
            w = walk(opened, end, begin=start)
            lost = {r.message_id for r in w.refs} - w.messages.keys()
            if lost:
                w.messages.update(find_messages(opened, lost, start))
        else:  # a compaction since: a consistent load of the whole journal, references chosen by message id
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
        # a message whose record is gone (its file reclaimed: the message was deleted) gives no row
        plan = [(w.messages[mid], mid, rows) for mid, rows in chosen.items() if mid in w.messages]
        return plan, _listing(store.messages)

    plan, listing = consistent(store.messages, use)
    # the bodies are read message by message as the batches are made (memory: one Arrow batch, not the
    # micro-batch), from the files the plan was made on: a change meanwhile fails the task (Spark retries it)
    with open_journal(store.messages) as opened:
        index = {f.file_id: i for i, f in enumerate(opened.files)}

        def checked():
            if _listing(store.messages) != listing:
                raise JournalChanging(f"{store.messages.directory}: the journal's files changed while the "
                                      f"batch was read (a compaction or file reuse)")

        def messages():
            checked()
            body = BodyWindows(opened).body
            for (fid, off, length, utype), mid, rows in plan:
                if fid in index:
                    yield utype, body(index[fid], off, length), mid, rows, ""
            checked()

        yield from message_batches(messages(), safe=settings["safe"], large=LargeBodies(store.large_messages_dir),
                                   summary=ExportSummary("spark", "artemis"))


def bindings_of(store):
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
