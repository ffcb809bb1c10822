"""Reading the store's index, a LevelDB database (``dirty.index/``, snapshots ``%016x.index/``), straight from
its files, never through a LevelDB library (opening one writes LOCK, a new MANIFEST and compactions).

As ``DBImpl::Recover`` does: ``CURRENT`` names the MANIFEST; its edits give the live table files and the
log number; the write-ahead logs numbered from it (or equal to the previous log number) are replayed in
number order over the tables. Every key's newest entry (highest sequence) wins; a deletion hides it.
Tables and logs that the MANIFEST does not name are listed (``orphans``) but not read, as LevelDB ignores
(then deletes) them.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.leveldb import dblog, manifest, table
from amqtool.formats.leveldb import records as R

_NUM = re.compile(r"^(\d+)\.(log|sst|ldb)$")


@dataclass
class IndexDB:
    directory: Path
    data: dict = field(default_factory=dict)  # user key -> value (live keys only)
    problems: list = field(default_factory=list)  # (path, offset, message, severity "critical"|"warning")
    # severity: "warning" for what LevelDB reads past (a write-ahead log record whose checksum fails is
    # dropped with paranoid checks off, the broker's default; a table block is read without its checksum)
    tables: list = field(default_factory=list)  # {"file", "level", "size", "entries", "blocks", "compression"}
    logs: list = field(default_factory=list)  # {"file", "records", "operations", "tornTail"}
    orphans: list = field(default_factory=list)
    manifest: str | None = None
    error: str | None = None  # nothing could be read (no CURRENT, unreadable MANIFEST)
    last_sequence: int = 0
    # (path, offset) of a write-ahead log record LevelDB drops, judged critical here -> the keys it wrote
    # (None: unknown); the store's log replay may write them all again (see the LevelDB verify)
    dropped_keys: dict = field(default_factory=dict)
    # (path, offset) of those problems that are a write-ahead log gone (removed or emptied: :func:`_lost_logs`)
    lost_logs: set = field(default_factory=set)
    # a dropped write-ahead log record held the counters (``:collection-meta``): what the index reads of them is an
    # older version, no evidence of what the index holds
    counters_dropped: bool = False
    # live keys whose newest entry was read from a table block whose checksum fails: their bytes may be damaged
    suspect_keys: set = field(default_factory=set)
    # (path, offset) of a table block that does not parse -> (lower bound exclusive or None, upper bound
    # inclusive) of the user keys it held: LevelDB's iterators skip it
    unread_ranges: dict = field(default_factory=dict)
    # (path, offset) of the table blocks of unread_ranges: iq80 LevelDB, the broker's index, throws whenever it
    # reads one (snappy-java's FAILED_TO_UNCOMPRESS, an IndexOutOfBoundsException parsing it), where C++ LevelDB's
    # iterators skip a damaged block
    unparsable: set = field(default_factory=set)
    # those of unread_ranges whose lower bound is the table's smallest key (the MANIFEST's), which the block held:
    # inclusive. Any other lower bound is a key read before the break, whose newest version was read: the block
    # can hold only older versions of it, which that version hides
    unread_from_smallest: set = field(default_factory=set)
    # (path, block offset) of a data block whose checksum fails -> its key range, as unread_ranges: its keys were
    # read, but any of them may be another's
    suspect_ranges: dict = field(default_factory=dict)
    # path of a table the MANIFEST names that is missing or cannot be read at all (its footer or index block)
    # -> (smallest, largest) user key the MANIFEST gives it, inclusive (None: unknown): none of its entries is
    # read, so older versions of its keys, in other tables, show through in what amqtool reads
    unread_tables: dict = field(default_factory=dict)
    # the lowest sequence written by the write-ahead logs not yet in a table (above every table entry's: a
    # memtable's log is retired only once its table is added), and the sequence of the newest version of
    # each counter key the broker reads at start
    log_sequence_floor: int | None = None
    # user key -> (sequence, kind) of the version an entry with a sequence no writer issued hides (None: none)
    invented: dict = field(default_factory=dict)
    counter_sequences: dict = field(default_factory=dict)

    def get(self, key: bytes):
        return self.data.get(key)

    def problem(self, path, offset, message, severity="critical"):
        self.problems.append((str(path), offset, message, severity))


def _read(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _ops_of(data: bytes | None) -> list | None:
    """The operations of a dropped record's write batch (the batch is self-delimiting: under a damaged length
    field, the batch at the start of the record's bytes), or None when they cannot be told."""
    if data is None:
        return None
    try:
        return list(dblog.iter_batch(data))
    except FormatError:
        pass
    raw = _batch_prefix(data)
    return None if raw is None else list(dblog.iter_batch(raw))


def _whole_batch(data: bytes) -> bool:
    """Whether ``data`` is one write batch exactly (its count of operations, ending at its last byte): a record
    corrected by its checksum is used only then (a wrong correction of heavier damage would not frame)."""
    try:
        ops = list(dblog.iter_batch(data))
    except FormatError:
        return False
    return _batch_prefix(data) == data and len(ops) == int.from_bytes(data[8:12], "little")


def _keys_of(data: bytes | None) -> list | None:
    ops = _ops_of(data)
    return None if ops is None else [op.key for op in ops]


def _batch_prefix(raw: bytes) -> bytes | None:
    """The write batch at the start of ``raw`` (its operations, whatever follows), or None."""
    import struct

    if len(raw) < 12:
        return None
    _seq, count = struct.unpack_from("<QI", raw, 0)
    for end in range(12, min(len(raw), 1 << 16) + 1):
        try:
            if len(list(dblog.iter_batch(raw[:end]))) == count:
                return raw[:end]
        except FormatError:
            continue
    return None


def _superseded(data: bytes | None, newest: dict) -> bool:
    """Whether dropping a write batch loses nothing: each key it wrote is the store's own counter (``:dirty``,
    ``:log-refs``, ... rebuilt by the broker) or is written again by a newer operation."""
    ops = _ops_of(data)
    if ops is None:
        return False
    for op in ops:
        if op.key[:1] == b":":
            continue
        later = newest.get(op.key)
        if later is None or later[0] <= op.sequence:
            return False
    return True


def _held(keys: list | None) -> str:
    if keys is None:
        return "; what it held cannot be told"
    return f"; it held {len(keys)} key(s), {sum(1 for k in keys if k[:1] in (b'c', b'e'))} collection or entry key(s)"


def apply_batch(rec, newest: dict, *, use_native: bool | None = None) -> tuple[int, str | None]:
    """Apply one write batch of the index's log to ``newest`` (key -> (sequence, kind, value)), each operation
    unless a newer sequence holds its key (LevelDB's last write wins): (operations applied, the error that
    stopped the batch or None). In C when built (``native.leveldb_apply_batch``), else
    :func:`amqtool.formats.leveldb.dblog.iter_batch`, the reference; both apply the same operations."""
    c = native.leveldb_apply_batch if use_native is not False else None
    if c is not None:
        done = c(rec, newest)
        if done is not None:
            return done
    ops = 0
    try:
        for op in dblog.iter_batch(rec):
            old = newest.get(op.key)
            if old is None or op.sequence >= old[0]:
                newest[op.key] = (op.sequence, op.kind, op.value)
            ops += 1
    except FormatError as err:
        return ops, err.message
    return ops, None


def apply_log(records: list, newest: dict, *, use_native: bool | None = None) -> tuple[int, list]:
    """:func:`apply_batch` of each write batch of a log's ``records`` (``[(offset, bytes)]``) in order: (the
    operations applied, ``[(offset, error)]`` of the batches an error stopped). In one C call when built
    (``native.leveldb_apply_log``; a batch it leaves, and those after it, are applied one by one); this loop
    over :func:`apply_batch` is the reference, with equal results."""
    c = native.leveldb_apply_log if use_native is not False else None
    ops, errors, done = c(records, newest) if c is not None else (0, [], 0)
    for off, rec in records[done:]:
        n, err = apply_batch(rec, newest, use_native=use_native)
        ops += n
        if err is not None:
            errors.append((off, err))
    return ops, errors


def read_log(buf, *, use_native: bool | None = None) -> dblog.LogRead:
    """:func:`amqtool.formats.leveldb.dblog.read_log` (the reference) of a write-ahead log; a log that reads
    cleanly (every checksum good, no fragment out of order, no torn tail: what a quiesced snapshot holds) is
    read in C when built (``native.leveldb_read_log``, which gives up on anything else), with equal results."""
    c = native.leveldb_read_log if use_native is not False else None
    if c is not None:
        records = c(buf)
        if records is not None:
            return dblog.LogRead(records=records)
    return dblog.read_log(buf)


def live(newest: dict, data: dict, *, use_native: bool | None = None) -> int:
    """Put in ``data`` every key of ``newest`` (key -> (sequence, kind, value)) whose newest entry is a value,
    as bytes; return the highest sequence (0 when empty). In C when built (``native.leveldb_live``, for entries
    of the shape its apply leaves: bytes); this is the reference, which gives equal results."""
    c = native.leveldb_live if use_native is not False else None
    if c is not None:
        done = c(newest, data)
        if done is not None:
            return done
    value_kind = dblog.TYPE_VALUE
    data.update({bytes(key): bytes(value) for key, (_seq, kind, value) in newest.items() if kind == value_kind})
    return max((v[0] for v in newest.values()), default=0)


def _manifest_tail(db: IndexDB, path: Path, version) -> None:
    """A MANIFEST record cut by the file's end. LevelDB's ``log::Reader`` drops it silently (1.23: "assume the
    writer died in the middle of writing the record") and opens the index without that version edit, so the
    tables it added are not read (older readers, iq80's ``LogReader`` among them, refuse the MANIFEST instead:
    the broker then has no index either). No crash leaves it in a snapshot: ``LevelDBClient.snapshotIndex``
    copies the index with writes locked out and compactions suspended (``suspend``), so no version edit is
    being written, and renames the copy into place only once it is complete; no real store's snapshot has one.
    It is damage, critical when the edit (read from the record's bytes up to the end: its length field is
    what changed) adds or deletes a table or cannot be read, a warning when it held only counters."""
    probe = manifest.Version()
    try:
        manifest.apply_edit(probe, version.tail_data)
        tables = bool({6, 7} & probe.seen)
    except FormatError:
        tables = True
    db.problem(path, version.tail, "the MANIFEST ends inside a record: LevelDB drops that version edit"
               + ("; it added or deleted tables, whose entries the index then lacks" if tables else
                  " (it held no table change)"), "critical" if tables else "warning")


def _lost_logs(db: IndexDB, d: Path, version, spans: dict, table_top: int) -> None:
    """Write-ahead logs gone from the index directory, removed or emptied. ``DBImpl::Recover`` replays the logs
    it finds (numbered from the MANIFEST's log number) and asks for none by name, so LevelDB opens the index
    without what a lost one held, silently. Two kinds of evidence, neither of which a writer leaves:

    - the log the MANIFEST's log number names is missing. ``DB::Open`` creates the new log before the version
      edit that records its number, a memtable switch creates the next log before the compaction's edit moves
      the number to it, and a log is deleted only once an edit moved past it (``DeleteObsoleteFiles``); a
      snapshot is a copy of the quiesced index (``LevelDBClient.snapshotIndex``). Every index of the
      broker-written stores holds it (an empty one included);
    - a gap in the sequences. ``DBImpl::Write`` gives each batch the sequences after the last one
      (``last_sequence + 1``) and appends it to the current log, so the logs from the log number hold
      consecutive runs, the first from at most the MANIFEST's last sequence (or the tables' highest) + 1,
      each next log going on where the one before ended (every index of the broker-written stores: the
      first log starts at or before it, the next ones exactly there). A log whose first batch starts later
      follows batches no log holds (an emptied log's, a removed one's).

    Each is critical, its keys unknown (``dropped_keys``: None), so the record log replayed from its start
    judges what the broker loses where it can (:func:`amqtool.engines.leveldb.indexlog.judges`). Logs whose
    records are already judged damaged (a dropped record, a torn tail, a batch that does not apply) are not
    weighed: their own findings say what is lost; nor is a MANIFEST whose last edit is dropped (its log number
    and last sequence are an older edit's, whose logs LevelDB may have deleted since: :func:`_manifest_tail`
    judges it)."""
    if version.tail is not None:
        return
    if version.log_number and version.log_number not in spans:
        path = d / f"{version.log_number:06d}.log"
        db.problem(path, None, f"write-ahead log {path.name}, which {db.manifest} names as the index's log, is "
                   "missing: LevelDB opens the index without what it held (what it held cannot be told)")
        db.dropped_keys[(str(path), None)] = None
        db.lost_logs.add((str(path), None))
    after = max(version.last_sequence, table_top)  # every sequence up to here is accounted for
    for num in sorted(spans):  # the logs LevelDB replays, in its order
        span = spans[num]
        if span is None:
            return
        if not span:
            continue  # an empty log: the current one before any write
        if span[0] > after + 1:
            path = d / f"{num:06d}.log"
            db.problem(path, 0, f"its first write batch has sequence {span[0]}, but the index's tables and the logs "
                       f"before it end at sequence {after}: the write batches of sequences {after + 1}..{span[0] - 1} "
                       "are in no write-ahead log (one was emptied or removed; what they held cannot be told)")
            db.dropped_keys[(str(path), 0)] = None
            db.lost_logs.add((str(path), 0))
        after = max(after, span[1])


def read_index(directory: str | os.PathLike) -> IndexDB:
    d = Path(directory)
    db = IndexDB(d)
    try:
        current = _read(d / "CURRENT").decode("ascii", "replace").strip()
    except OSError as err:
        db.error = f"no readable CURRENT ({err.strerror})"
        return db
    if not current.startswith("MANIFEST-") or "/" in current:
        db.error = f"CURRENT names {current[:40]!r}, not a MANIFEST"
        return db
    db.manifest = current
    try:
        version = manifest.read_manifest(_read(d / current))
    except OSError as err:
        db.error = f"{current} unreadable ({err.strerror})"
        return db
    for off, msg in version.problems:
        db.problem(d / current, off, msg)
    if version.problems:
        # VersionSet::Recover reads the MANIFEST with checksums and fails on corruption: LevelDB will not open
        db.error = f"{current} is damaged ({version.problems[0][1]}): LevelDB refuses to open the index"
        return db
    if version.tail is not None:
        _manifest_tail(db, d / current, version)
    try:
        names = sorted(os.listdir(d))
    except OSError as err:
        db.error = f"cannot list the index directory ({err.strerror})"
        return db
    newest: dict[bytes, tuple[int, int, bytes | None]] = {}  # key -> (sequence, kind, value)

    def put(key, seq, kind, value):
        old = newest.get(key)
        if old is None or seq >= old[0]:
            newest[key] = (seq, kind, value)

    suspect: dict = {}  # user key -> sequence of its entry read from a damaged block
    # entries of damaged blocks whose sequence is above the MANIFEST's last one, which is at least every table
    # entry's: no writer issued it. LevelDB takes the highest sequence as the newest all the same
    invented: list = []
    table_top = 0  # the highest sequence of a table entry read from an intact block
    files = {}
    for n in names:
        m = _NUM.match(n)
        if m:
            files.setdefault(m.group(2), []).append((int(m.group(1)), n))
    for num, (level, size) in sorted(version.files.items()):
        name = next((n for k, n in files.get("sst", []) + files.get("ldb", []) if k == num), None)
        if name is None:
            db.problem(d / f"{num:06d}.sst", None, f"table {num:06d} named by {current} is missing")
            db.unread_tables[str(d / f"{num:06d}.sst")] = version.bounds.get(num, (None, None))
            continue
        try:
            tr = table.read_table(_read(d / name), key_ok=R.is_store_key)
        except (OSError, FormatError) as err:
            db.problem(d / name, getattr(err, "offset", None), getattr(err, "message", None) or str(err))
            db.unread_tables[str(d / name)] = version.bounds.get(num, (None, None))
            continue
        for off, msg in tr.problems:
            # a block whose checksum fails is read anyway, as the store reads it (what changed may be nothing
            # the broker uses); one that does not parse is gone
            # a restart array pointing past the entries is read past too (every entry is read: a scan goes
            # entry by entry); the entries' keys and values are judged as a damaged block's
            db.problem(d / name, off, msg, "warning" if "checksum" in msg or msg == table.RESTART_OUTSIDE
                       else "critical")
            if off in tr.unread:
                db.unparsable.add((str(d / name), off))
            if off in tr.unread:
                lo, hi = tr.unread[off]
                small, large = version.bounds.get(num, (None, None))
                # the MANIFEST bounds the table's keys: the first block's lower bound, any block's upper one
                if lo is None and small is not None:
                    db.unread_from_smallest.add((str(d / name), off))
                lo = small if lo is None else lo
                hi = large if large is not None and (hi is None or large < hi) else hi
                db.unread_ranges[(str(d / name), off)] = (lo, hi)
        for off, (lo, hi) in tr.suspect.items():
            small, large = version.bounds.get(num, (None, None))
            db.suspect_ranges[(str(d / name), off)] = (small if lo is None else lo,
                                                       large if large is not None and (hi is None or large < hi)
                                                       else hi)
        for e in tr.entries:
            if not e.suspect:
                table_top = max(table_top, e.sequence)
            if e.suspect:
                if e.sequence > version.last_sequence:
                    invented.append(e)  # applied last, over every version the index did write
                    continue
                suspect[e.user_key] = e.sequence
            put(e.user_key, e.sequence, e.kind, e.value)
        comp = sorted({b.compression for b in tr.blocks})
        db.tables.append({"file": name, "level": level, "size": size, "entries": len(tr.entries),
                          "blocks": len(tr.blocks),
                          "compression": [{0: "none", 1: "snappy"}.get(c, str(c)) for c in comp]})
    live_tables = set(version.files)
    for k, n in files.get("sst", []) + files.get("ldb", []):
        if k not in live_tables:
            db.orphans.append(n)
    dropped: list = []
    spans: dict = {}  # log number -> its write batches' sequence span (see below)
    for num, name in sorted(files.get("log", [])):
        if num < version.log_number and num != version.prev_log_number:
            db.orphans.append(name)
            continue
        try:
            lr = read_log(_read(d / name))
        except OSError as err:
            db.problem(d / name, None, f"unreadable ({err.strerror})")
            spans[num] = None
            continue
        for p in lr.problems:
            dropped.append((d / name, p))
        if lr.tail is not None:
            # a snapshot is a copy of a quiesced index (suspend, then copyIndex): a record cut at its end is
            # damage (its length field?), not a crash; LevelDB drops it silently. Its write batch is
            # self-delimiting: read it from where its data starts, to judge what the drop loses.
            whole = _read(d / name)
            raw = whole[lr.tail + dblog.HEADER_SIZE:]
            # and every record after it, which LevelDB no longer frames: found again by their checksums
            dropped.append((d / name, dblog.LogProblem(
                lr.tail, "the write-ahead log ends inside a record", _batch_prefix(raw),
                dblog.resync(whole, lr.tail + dblog.HEADER_SIZE, len(whole)))))
        ops, errors = apply_log(lr.records, newest)
        for off, err in errors:
            db.problem(d / name, off, f"write batch: {err}")
        firsts = [int.from_bytes(rec[:8], "little") for _off, rec in lr.records if len(rec) >= 8]
        if firsts:
            db.log_sequence_floor = min(firsts + ([db.log_sequence_floor] if db.log_sequence_floor is not None
                                                  else []))
        db.logs.append({"file": name, "records": len(lr.records), "operations": ops, "tornTail": lr.tail})
        batches = [(int.from_bytes(rec[:8], "little"), int.from_bytes(rec[8:12], "little"))
                   for _off, rec in lr.records if len(rec) >= 12]
        # (first sequence, last sequence) of its write batches; None: damage already judged above breaks it
        spans[num] = None if lr.problems or lr.tail is not None or errors else \
            (batches[0][0], batches[-1][0] + batches[-1][1] - 1) if batches else ()
    _lost_logs(db, d, version, spans, table_top)
    for e in invented:
        old = newest.get(e.user_key)
        db.invented[bytes(e.user_key)] = None if old is None else old[:2]  # what it hides: (sequence, kind)
        put(e.user_key, e.sequence, e.kind, e.value)
        suspect[e.user_key] = e.sequence
    for path, p in dropped:
        first = p.data
        if p.corrected is not None and _ops_of(first) is None and _whole_batch(p.corrected):
            # the stored checksum names the one bit that changed: what the record held is known again
            first = p.corrected
            p.message += "; its checksum names the one flipped bit, so what it held is known"
        datas = [first] + [data for _off, data in p.more]
        if p.corrected is not None and first is not p.corrected and _ops_of(p.corrected) is not None:
            # the damaged bytes may still parse, as other keys: what the record held is what the corrected
            # bytes hold (a flipped byte inside a key names a key the batch never wrote)
            datas.append(p.corrected)
        harmless = all(_superseded(data, newest) for data in datas)
        db.counters_dropped = db.counters_dropped or any(
            op.key == b":collection-meta" for data in datas for op in (_ops_of(data) or ()))
        every = [_keys_of(data) for data in datas]
        keys = None if any(k is None for k in every) else [k for ks in every for k in ks]
        with_it = f", and with it the {len(p.more)} more record(s) after it in its 32 KiB block" if p.more else ""
        db.problem(path, p.offset, p.message + f" (LevelDB drops the record{with_it})" +
                   ("; every key dropped is rewritten later or a counter" if harmless else _held(keys)),
                   "warning" if harmless else "critical")
        if not harmless:
            db.dropped_keys[(str(path), p.offset)] = None if keys is None else \
                {bytes(k) for k in keys if k[:1] != b":"}
    db.last_sequence = max(db.last_sequence, live(newest, db.data))
    db.suspect_keys.update(bytes(k) for k, q in suspect.items() if k in db.data and newest[k][0] == q)
    db.counter_sequences = {k: newest[k][0] for k in R.COUNTER_KEYS
                            if k in newest and newest[k][1] == dblog.TYPE_VALUE}
    return db
