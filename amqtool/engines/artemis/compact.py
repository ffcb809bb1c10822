"""Offline compaction of an Artemis journal directory, crash-safe by Artemis' own protocol (§4).

What is written (``JournalCompactor``, artemis-journal-format.md §4.2), derived from the load result so the
compacted journal loads to exactly the same state (the acceptance of ``amqtool compact``):

* every entry of the live list, in list order: non-transactional ADD/UPDATE as ADD/UPDATE; records of
  committed transactions **kept as ADD_TX/UPDATE_TX followed by a COMMIT** whose ``numberOfRecords`` is the
  count of that transaction's records in the COMMIT's output file (the compactor's ``flushTX``). The live
  list already holds committed records at their COMMIT's place, which is where ``flushTX`` writes them;
* records of transactions still open at the end of the load (Artemis' ``pendingTransactions``): copied as
  they are (ADD_TX/UPDATE_TX/DELETE_TX with its body). A valid prepared transaction gets a PREPARE with its
  extra data (the Xid) and the counter of its records in the PREPARE's output file, as
  ``producePrepareRecord`` does.
* **Open transactions that were never prepared** (or whose PREPARE failed the count check) are carried over
  unresolved, as the online compactor carries every pending transaction (fixture 04b shows exactly this:
  failed tx 2003 survives Artemis' compaction). ``artemis data compact`` instead appends a ROLLBACK to the
  *source* first (load with changeData). We do not: a compactor that may run on a copy (``-o``) or be
  interrupted must not write to the source before its commit point, and the outcome is the same either way
  because the broker rolls such a transaction back at its next start. A failed *prepared* transaction keeps
  its PREPARE (and Xid) with a ``numberOfRecords`` of -1, which can never match, so it stays failed: a
  count rewritten to match would turn an incomplete transaction into a valid in-doubt one.
* every update where the load has it, replaceable ones (message journal: 34 UPDATE_DELIVERY_COUNT, 36
  SET_SCHEDULED_DELIVERY_TIME) included: ``JournalCompactor.onReadUpdateRecord`` writes each update of a live
  record in scan order, and a real broker's compaction keeps every record in identical load order. (An earlier
  version kept only the last replaceable update per id, moved to the end: a compacted store then loaded with
  updates missing and delivery-count updates after the ack of their reference, which the broker logs as
  "cannot find message" at start-up.) Replaceable updates are still counted for ``needsCompact``'s update
  factor;
* compactCount + 1 on ADD/UPDATE/ADD_TX/UPDATE_TX, saturating at 127; 0 on DELETE_TX/PREPARE/COMMIT;
  the ``COMPACT_SPLIT_LINE`` (2) rule starts a new output file once, at the first record with an original
  compactCount below 2 that follows records at or above it;
* output header fileIDs reuse the lowest old data file's ID upwards (``nextOrderingID``); output files are
  named with fresh numbers above every header ID and name number (``nextFileID``), written whole
  (``fileSize`` bytes, zero after the last record).

Two deliberate differences from Artemis' compactor, both to keep the *loaded* state identical: liveness is
taken from the load result (so an ADD that follows a DELETE of the same id, which Artemis' load drops but
its compactor would resurrect, stays dead, and an UPDATE whose ADD was reclaimed stays in the list); and
when the highest record id (``maxID``) belongs to a record that is not kept, an ADD + DELETE pair of that id
(userRecordType 0, empty body) is appended so that load still reports the same maxID. Neither record is
ever handed to the broker (load removes deleted ids from its list).

How (performance): the load keeps each live entry's source record type and transaction id
(``load_journal(sources=True)``); the layout and the encoding of each output file run in C
(native/compact_write.c: version-2 records are copied whole, neighbours with one ``pread``, only tag and
compactCount rewritten), with :func:`_items`/:class:`_Layout` as the Python reference and fallback. Memory:
the packed live list and the plan (58 bytes a record) plus one buffer per output file in flight
(:data:`FILL_THREADS`).

Switch-over (``JournalImpl.compact`` + ``renameFiles`` + ``checkControlFile``, §4.3): the new files are
written as ``<name>.cmp`` and fsynced; ``journal-rename-control.ctr`` (old names, ``.cmp`` names) is
written to a temporary name, fsynced and renamed into place, and the directory fsynced: **that rename is
the commit point**. Then each old file goes to the attic (wrong size), is reinitialised with a new header
fileID (pool not full) or deleted; each ``.cmp`` is renamed to its final name; the reinitialised files and the
directory are fsynced (together, not one round trip per step: the control file makes each step redoable
until it is gone); the control file is deleted.
A crash before the commit leaves ``.cmp`` files that Artemis (and :func:`open_journal`) discards; a crash
after it is rolled forward by Artemis' ``checkControlFile`` at the next start. Every old file, including
the empty (free) ones, is listed in the control file, because every one of them is rewritten or removed
after the commit.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import AmqtoolError, DataAtRiskError, FormatError, UnknownStoreError, UsageError
from amqtool.engines.artemis.load import LiveList, LiveRecord, LoadResult, load_journal
from amqtool.formats.artemis.control import CONTROL_FILE_NAME, ControlFile
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    FORMAT_VERSION,
    HEADER_SIZE,
    PREPARE,
    UPDATE,
    UPDATE_TX,
    FileHeader,
    file_tag,
    fixed_size,
)
from amqtool.store import atomic
from amqtool.store.journal_files import OpenedJournal, open_journal
from amqtool.store.layout import MESSAGES, JournalDir

COMPACT_SPLIT_LINE = 2  # JournalImpl.COMPACT_SPLIT_LINE
MAX_COMPACT_COUNT = 127  # the byte saturates (JournalInternalRecord.setCompactCount)
UPDATE_FACTOR = 10  # JournalImpl.UPDATE_FACTOR
REPLACEABLE_MESSAGE_TYPES = (34, 36)  # UPDATE_DELIVERY_COUNT, SET_SCHEDULED_DELIVERY_TIME
DEFAULT_MAX_ATTIC_FILES = 10  # journal-max-attic-files
INVALID_PREPARE_COUNT = -1  # a numberOfRecords no counter can equal: the transaction stays failed
CONTROL_TMP_NAME = CONTROL_FILE_NAME + ".amqtool-tmp"

_NAME_NUMBER = re.compile(r"-(\d+)\.")
_I32 = struct.Struct(">i")
_HDR_NOTX = struct.Struct(">BibqiB")  # type, tag, cc, id, bodyLen, userRecordType
_HDR_TX = struct.Struct(">BibqqiB")  # type, tag, cc, txID, id, bodyLen, userRecordType
_HDR_DELTX = struct.Struct(">Bibqqi")  # type, tag, cc(0), txID, id, bodyLen
_REC_PREPARE = struct.Struct(">Bibqii")  # type, tag, cc, txID, numberOfRecords, extraLen
_REC_COMMIT = struct.Struct(">Bibqii")  # type, tag, cc, txID, numberOfRecords, checkSize
_REC_DELETE = struct.Struct(">Bibqi")  # type, tag, cc, id, checkSize
_TX_TYPES = (ADD_TX, UPDATE_TX)
_LIVE = struct.Struct(native.LIVE_FORMAT)
_SOURCE = struct.Struct(native.SOURCE_FORMAT)  # LoadResult.live_sources: tx id, record type
_PLAN = struct.Struct(native.PLAN_FORMAT)  # compact_layout's items (native/compact_write.c)


@dataclass
class CompactSettings:
    """The journal settings compaction follows (broker.xml names)."""

    file_size: int
    min_files: int = 2  # journal-min-files (bindings: 2)
    pool_files: int = -1  # journal-pool-files
    compact_min_files: int = 10  # journal-compact-min-files
    compact_percentage: int = 30  # journal-compact-percentage
    max_attic_files: int = DEFAULT_MAX_ATTIC_FILES
    replaceable_types: tuple[int, ...] = ()


@dataclass
class OutputFile:
    name: str  # final name (without .cmp)
    file_id: int  # header fileID
    records: int = 0
    used: int = HEADER_SIZE  # bytes up to the end of the last record


@dataclass
class OldFileFate:
    name: str
    file_id: int
    size: int
    had_data: bool
    fate: str = ""  # reinitialised | deleted | attic
    new_file_id: int | None = None


@dataclass
class JournalCompaction:
    """What compaction of one journal found, planned and did (the JSON figures)."""

    kind: str
    directory: str
    settings: CompactSettings
    files_before: int = 0
    bytes_before: int = 0
    data_files: int = 0
    live_records: int = 0
    live_bytes: int = 0
    prepared: int = 0
    failed: int = 0
    max_id: int = -1
    outputs: list[OutputFile] = field(default_factory=list)
    old_files: list[OldFileFate] = field(default_factory=list)
    files_after: int = 0
    bytes_after: int = 0
    needed: bool = False
    reasons: list[str] = field(default_factory=list)
    action: str = "planned"  # planned | compacted | copied | skipped | nothing-to-do
    pending: list[dict] = field(default_factory=list)  # interrupted-compaction leftovers found first
    recovered: list[str] = field(default_factory=list)  # what finishing an interrupted compaction did
    warnings: list[str] = field(default_factory=list)
    max_id_marker: bool = False
    carried_over: object | None = None  # -o of a whole store: store_copy.CarriedOver (pages, large messages)

    @property
    def live_ratio(self) -> float:
        capacity = self.data_files * self.settings.file_size
        return (self.live_bytes / capacity) if capacity else 1.0

    @property
    def reclaimed_bytes(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    def to_json(self) -> dict:
        s = self.settings
        return {
            "journal": self.kind,
            "directory": self.directory,
            "action": self.action,
            "needed": self.needed,
            "reasons": self.reasons,
            "settings": {
                "fileSize": s.file_size, "minFiles": s.min_files, "poolFiles": s.pool_files,
                "compactMinFiles": s.compact_min_files, "compactPercentage": s.compact_percentage,
            },
            "before": {"files": self.files_before, "bytes": self.bytes_before, "dataFiles": self.data_files},
            "after": {"files": self.files_after, "bytes": self.bytes_after, "dataFiles": len(self.outputs)},
            "liveRecords": self.live_records,
            "liveBytes": self.live_bytes,
            "liveRatio": round(self.live_ratio, 6),
            "reclaimedBytes": self.reclaimed_bytes,
            "preparedTransactions": self.prepared,
            "failedTransactions": self.failed,
            "maxID": self.max_id,
            "maxIdMarker": self.max_id_marker,
            "outputFiles": [{"name": o.name, "fileID": o.file_id, "records": o.records, "usedBytes": o.used}
                            for o in self.outputs],
            "oldFiles": [{"name": f.name, "fileID": f.file_id, "size": f.size, "hadData": f.had_data,
                          "fate": f.fate, "newFileID": f.new_file_id} for f in self.old_files],
            "pending": self.pending,
            "recovered": self.recovered,
            "warnings": self.warnings,
            "carriedOver": self.carried_over.to_json() if self.carried_over is not None else None,
        }


# --- naming ---------------------------------------------------------------------------------------------

def name_number(prefix: str, name: str) -> int:
    """``JournalFilesRepository.getFileNameID``: the number between ``<prefix>-`` and the first ``.``, else
    between the last ``-`` and the first ``.``; -1 when neither parses."""
    base = name.split(".", 1)[0]
    for text in (base[len(prefix) + 1:] if base.startswith(prefix + "-") else None, base.rsplit("-", 1)[-1]):
        if text is not None and text.isdigit():
            return int(text)
    return -1


def infer_file_size(opened: OpenedJournal, default: int) -> int:
    """The journal's fileSize when no configuration says: the most common size of its files (ties: the
    larger), else ``default``."""
    sizes: dict[int, int] = {}
    for f in opened.files:
        sizes[f.size] = sizes.get(f.size, 0) + 1
    if not sizes:
        return default
    return max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]


def needs_compact(data_files: int, file_size: int, live_bytes: int, adds: int, replaceable_updates: int,
                  settings: CompactSettings) -> list[str]:
    """``JournalImpl.needsCompact`` (§4.1): the reasons compaction is due, empty when it is not.

    Disabled when compact-min-files is 0. Both rules need more data files than compact-min-files; the
    update factor uses integer division as Java's long division does.
    """
    reasons: list[str] = []
    if settings.compact_min_files == 0 or data_files <= settings.compact_min_files:
        return reasons
    if adds > 0 and replaceable_updates > 0 and replaceable_updates // adds > UPDATE_FACTOR:
        reasons.append(f"replaceable updates / adds = {replaceable_updates // adds} > {UPDATE_FACTOR}")
    margin = int(data_files * file_size * (settings.compact_percentage / 100.0))
    if live_bytes < margin:
        reasons.append(f"live bytes {live_bytes} < {settings.compact_percentage}% of {data_files} data files "
                       f"x {file_size} B ({margin})")
    return reasons


# --- the plan: what goes where --------------------------------------------------------------------------

class _Item:
    """One record to write. ``src`` is (file index, body offset, body length) of its body in the source."""

    __slots__ = ("type", "cc", "orig_cc", "tx_id", "rid", "utype", "src", "extra", "invalid")

    def __init__(self, type, cc=0, orig_cc=-1, tx_id=-1, rid=-1, utype=0, src=None, extra=b"", invalid=False):
        self.type = type
        self.cc = cc
        self.orig_cc = orig_cc
        self.tx_id = tx_id
        self.rid = rid
        self.utype = utype
        self.src = src
        self.extra = extra
        self.invalid = invalid

    def body_len(self) -> int:
        return self.src[2] if self.src is not None else 0

    def size(self) -> int:
        return fixed_size(self.type, FORMAT_VERSION) + self.body_len() + len(self.extra)


def _bump(cc: int) -> int:
    cc += 1
    return MAX_COMPACT_COUNT if cc > MAX_COMPACT_COUNT else cc


def _items(load: LoadResult, sources: list[tuple[int, int]], max_id_marker: int | None) -> Iterator[_Item]:
    """The records to write, in write order (see the module docstring). ``sources`` holds (tx id, record
    type) per live entry (``LoadResult.live_sources``). The reference of ``compact_layout`` in
    native/compact_write.c, and the path taken without the extension."""
    live = load.live
    n = len(live)
    i = 0
    while i < n:
        rec = live[i]
        tx, rtype = sources[i]
        if rtype not in _TX_TYPES:
            yield _Item(UPDATE if rec.is_update else ADD, _bump(rec.compact_count), rec.compact_count, -1,
                        rec.id, rec.user_record_type, (rec.file_index, rec.body_offset, rec.body_len))
            i += 1
            continue
        # a committed transaction's records sit together where its COMMIT was
        while i < n and sources[i][1] in _TX_TYPES and sources[i][0] == tx:
            rec = live[i]
            yield _Item(UPDATE_TX if rec.is_update else ADD_TX, _bump(rec.compact_count), rec.compact_count, tx,
                        rec.id, rec.user_record_type, (rec.file_index, rec.body_offset, rec.body_len))
            i += 1
        yield _Item(COMMIT, 0, -1, tx)
    for info in list(load.prepared) + list(load.failed):
        for rec in info.records:
            yield _Item(UPDATE_TX if rec.is_update else ADD_TX, _bump(rec.compact_count), rec.compact_count,
                        info.tx_id, rec.id, rec.user_record_type, (rec.file_index, rec.body_offset, rec.body_len))
        for rec in info.records_to_delete:
            yield _Item(DELETE_TX, 0, -1, info.tx_id, rec.id, 0, (rec.file_index, rec.body_offset, rec.body_len))
        if info.prepared:
            yield _Item(PREPARE, 0, -1, info.tx_id, extra=info.extra or b"", invalid=info.invalid)
    if max_id_marker is not None:
        yield _Item(ADD, 0, -1, -1, max_id_marker, 0, None)
        yield _Item(DELETE, 0, -1, -1, max_id_marker)


def _too_big(size: int, file_size: int) -> DataAtRiskError:
    return DataAtRiskError(f"a record of {size} bytes does not fit in a journal file of {file_size} "
                           "bytes: give the journal's real file size (--file-size or --broker-xml)")


class _Layout:
    """Places records into output files as ``AbstractJournalUpdateTask``/``JournalCompactor`` do, and
    (with a sink) encodes them. Output file k gets header fileID ``first_id + k``."""

    def __init__(self, file_size: int, first_id: int, sink=None):
        self.file_size = file_size
        self.first_id = first_id
        self.sink = sink  # object with open_file(k, file_id) -> bytearray, close_file(k, buf, used)
        self.files: list[OutputFile] = []
        self.split = False
        self.buf: bytearray | None = None
        self.used = 0
        self.tx_last: dict[int, int] = {}
        self.tx_count: dict[int, int] = {}

    # JournalTransaction.getCounter / incCounter against output files
    def _counter(self, tx: int) -> int:
        k = len(self.files) - 1
        if self.tx_last.get(tx) != k:
            self.tx_last[tx] = k
            self.tx_count[tx] = 0
        return self.tx_count[tx]

    def _inc(self, tx: int) -> None:
        self._counter(tx)
        self.tx_count[tx] += 1

    def _open(self) -> None:
        self._close()
        k = len(self.files)
        out = OutputFile(name="", file_id=self.first_id + k)
        self.files.append(out)
        self.used = HEADER_SIZE
        if self.sink is not None:
            self.buf = self.sink.open_file(k, out.file_id)
            self.buf[0:HEADER_SIZE] = FileHeader(FORMAT_VERSION, 0, out.file_id).encode()

    def _close(self) -> None:
        if self.files:
            self.files[-1].used = self.used
            if self.sink is not None and self.buf is not None:
                self.sink.close_file(len(self.files) - 1, self.buf, self.used)
                self.buf = None

    def _check_size(self, size: int) -> None:
        if size > self.file_size - HEADER_SIZE:
            raise _too_big(size, self.file_size)
        if not self.files or self.used + size > self.file_size:
            self._open()

    def _check_size_and_split(self, size: int, orig_cc: int) -> None:
        if not self.files:
            if orig_cc < COMPACT_SPLIT_LINE:
                self.split = True
            self._check_size(size)
            return
        if 0 <= orig_cc < COMPACT_SPLIT_LINE and not self.split:
            self.split = True
            self._open()
        self._check_size(size)

    def add(self, item: _Item, body: bytes | None = None) -> None:
        t = item.type
        size = item.size()
        if t in (ADD, UPDATE, ADD_TX, UPDATE_TX) and item.src is not None:
            self._check_size_and_split(size, item.orig_cc)
        else:
            self._check_size(size)
        k = len(self.files) - 1
        nrec = 0
        if t in (ADD_TX, UPDATE_TX, DELETE_TX):
            self._inc(item.tx_id)
        elif t == PREPARE:
            nrec = INVALID_PREPARE_COUNT if item.invalid else self._counter(item.tx_id)
        elif t == COMMIT:
            nrec = self._counter(item.tx_id)
            self.tx_last.pop(item.tx_id, None)
            self.tx_count.pop(item.tx_id, None)
        if self.buf is not None:
            self._encode(item, body, file_tag(self.first_id + k), nrec, size)
        self.used += size
        self.files[-1].records += 1

    def _encode(self, item: _Item, body: bytes | None, tag: int, nrec: int, size: int) -> None:
        buf = self.buf
        pos = self.used
        t = item.type
        body = body or b""
        if t in (ADD, UPDATE):
            _HDR_NOTX.pack_into(buf, pos, t, tag, item.cc, item.rid, len(body), item.utype & 0xFF)
            p = pos + _HDR_NOTX.size
        elif t in (ADD_TX, UPDATE_TX):
            _HDR_TX.pack_into(buf, pos, t, tag, item.cc, item.tx_id, item.rid, len(body), item.utype & 0xFF)
            p = pos + _HDR_TX.size
        elif t == DELETE_TX:
            _HDR_DELTX.pack_into(buf, pos, t, tag, 0, item.tx_id, item.rid, len(body))
            p = pos + _HDR_DELTX.size
        elif t == PREPARE:
            _REC_PREPARE.pack_into(buf, pos, t, tag, 0, item.tx_id, nrec, len(item.extra))
            p = pos + _REC_PREPARE.size
            buf[p:p + len(item.extra)] = item.extra
            _I32.pack_into(buf, p + len(item.extra), size)
            return
        elif t == COMMIT:
            _REC_COMMIT.pack_into(buf, pos, t, tag, 0, item.tx_id, nrec, size)
            return
        elif t == DELETE:
            _REC_DELETE.pack_into(buf, pos, t, tag, 0, item.rid, size)
            return
        else:  # pragma: no cover
            raise AssertionError(t)
        buf[p:p + len(body)] = body
        _I32.pack_into(buf, p + len(body), size)

    def finish(self) -> list[OutputFile]:
        self._close()
        return self.files


# --- the engine -----------------------------------------------------------------------------------------

@dataclass
class _Prepared:
    """Everything the write step needs, computed read-only."""

    opened: OpenedJournal
    load: LoadResult
    report: JournalCompaction
    sources: list[tuple[int, int]] | None  # (tx id, record type) per live entry; None with a native plan
    first_id: int
    next_id: int  # highest header ID / name number seen
    marker: int | None
    plan: bytes | None = None  # compact_layout's items (native.PLAN_FORMAT), None: the Python path
    extras: tuple = ()  # PREPARE extra data, indexed by the plan's items


def _kept_max_id(load: LoadResult) -> int:
    m = -1
    for r in load.live:
        if r.id > m:
            m = r.id
    for info in list(load.prepared) + list(load.failed):
        for r in info.records:
            if r.id > m:
                m = r.id
    return m


def plan_journal(journal: JournalDir, settings: CompactSettings | None = None, *,
                 progress: Callable[[int], None] | None = None, file_size_default: int | None = None,
                 use_native: bool | None = None) -> _Prepared:
    """Load ``journal`` read-only and lay out its compacted form (nothing is written). ``use_native``:
    lay out and later write with native/compact_write.c (None: when built) or with the Python reference."""
    opened = open_journal(journal)
    if opened.skipped:
        s = opened.skipped[0]
        opened.close()
        raise FormatError(f"Artemis would refuse to load this journal ({s.code}): {s.message}; "
                          "not compacting", path=s.path, offset=s.offset)
    if settings is None:
        settings = settings_for(journal)
    if settings.file_size <= 0:
        settings.file_size = infer_file_size(opened, file_size_default or journal.spec.default_file_size)
    report = JournalCompaction(kind=journal.kind, directory=str(journal.directory), settings=settings)
    report.pending = [{"code": p.code, "path": p.path, "message": p.message} for p in opened.pending]
    load = load_journal(opened, progress=progress, sources=True)
    report.files_before = len(opened.files)
    report.bytes_before = opened.bytes_total()
    data_scans = [s for s in load.scans if s.has_data]
    report.data_files = len(data_scans)
    report.live_records = len(load.live)
    report.prepared = len(load.prepared)
    report.failed = len(load.failed)
    report.max_id = load.max_id

    first_id = min((s.file.file_id for s in data_scans), default=None)
    next_id = -1
    for f in opened.files:
        next_id = max(next_id, f.file_id, name_number(journal.spec.prefix, f.name))
    for n in os.listdir(journal.directory):  # .cmp/.tmp/attic names count for nothing, but be safe
        if n.startswith(journal.spec.prefix + "-"):
            next_id = max(next_id, name_number(journal.spec.prefix, n))
    if first_id is None:
        first_id = next_id + 1

    if use_native is None:
        use_native = native.HAVE_COMPACT
    if use_native:
        prep = _plan_native(opened, load, report, first_id, next_id)
    else:
        prep = _plan_python(opened, load, report, first_id, next_id)
    report.needed = bool(report.reasons)
    report.max_id_marker = prep.marker is not None
    return prep


def _plan_python(opened: OpenedJournal, load: LoadResult, report: JournalCompaction, first_id: int,
                 next_id: int) -> _Prepared:
    """The layout by the Python reference (one :class:`_Item` per record)."""
    settings = report.settings
    sources = list(_SOURCE.iter_unpack(load.live_sources))
    live_bytes = 0
    adds = 0
    repl = 0
    replaceable = set(settings.replaceable_types)
    for rec, (_tx, rtype) in zip(load.live, sources):
        is_tx = rtype in _TX_TYPES
        live_bytes += fixed_size(ADD_TX if is_tx else ADD, FORMAT_VERSION) + rec.body_len
        if not rec.is_update:
            adds += 1
        elif not is_tx and rec.user_record_type in replaceable:
            repl += 1
    report.live_bytes = live_bytes
    report.reasons = needs_compact(report.data_files, settings.file_size, live_bytes, adds, repl, settings)
    marker = None
    if load.max_id >= 0 and _kept_max_id(load) < load.max_id:
        marker = load.max_id
    layout = _Layout(settings.file_size, first_id)
    for item in _items(load, sources, marker):
        layout.add(item)
    report.outputs = layout.finish()
    return _Prepared(opened, load, report, sources, first_id, next_id, marker)


def _plan_native(opened: OpenedJournal, load: LoadResult, report: JournalCompaction, first_id: int,
                 next_id: int) -> _Prepared:
    """The layout by ``compact_layout`` (native/compact_write.c): no Python object per record."""
    settings = report.settings
    live = load.live
    live_buf = live.buffer if isinstance(live, LiveList) else b"".join(_LIVE.pack(*r) for r in live)
    tail: list[bytes] = []
    extras: list[bytes] = []
    for info in list(load.prepared) + list(load.failed):
        tx = info.tx_id
        for r in info.records:
            t = UPDATE_TX if r.is_update else ADD_TX
            tail.append(_PLAN.pack(t, t, _bump(r.compact_count), r.compact_count, r.user_record_type, 0, 0, 0,
                                   r.file_index, r.body_offset, r.body_len, tx, r.id, 0, -1))
        for r in info.records_to_delete:
            tail.append(_PLAN.pack(DELETE_TX, DELETE_TX, 0, -1, 0, 0, 0, 0, r.file_index, r.body_offset,
                                   r.body_len, tx, r.id, 0, -1))
        if info.prepared:
            tail.append(_PLAN.pack(PREPARE, 0, 0, -1, 0, 1 if info.invalid else 0, 0, 0, -1, 0, 0, tx, -1, 0,
                                   len(extras)))
            extras.append(bytes(info.extra or b""))
    table = bytearray(256)
    for t in settings.replaceable_types:
        if 0 <= t < 256:
            table[t] = 1
    res = native.compact_layout(live_buf, load.live_sources, b"".join(tail),
                                array("i", [len(x) for x in extras]).tobytes(), bytes(table), settings.file_size,
                                load.max_id)
    if res[0] is None:
        raise _too_big(res[1], settings.file_size)
    plan, outs, live_bytes, adds, repl, marker = res
    report.live_bytes = live_bytes
    report.reasons = needs_compact(report.data_files, settings.file_size, live_bytes, adds, repl, settings)
    report.outputs = [OutputFile(name="", file_id=first_id + k, records=r, used=u) for k, (r, u) in enumerate(outs)]
    return _Prepared(opened, load, report, None, first_id, next_id, marker, plan, tuple(extras))


class _Syncer:
    """fsync(2) of many files at once: each fsync's checkpoint is passed in the caller's order when it is
    queued, the fsyncs themselves run on a few threads (``os.fsync`` releases the GIL), so the device gets
    them together instead of one round trip each. :meth:`wait` returns once every queued file is durable
    (and closed) and raises the first error. Use as a context manager; leaving it waits for every fsync."""

    THREADS = 4
    BATCH = 64  # files open at once at most

    def __init__(self):
        self._pool = None
        self._pending: list = []

    def __enter__(self) -> "_Syncer":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._drain(raise_first=False)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def submit(self, fd: int, path: Path) -> None:
        """Queue ``fd`` (owned from now on: closed once synced) for fsync."""
        try:
            atomic.checkpoint("fsync", path)
        except BaseException:
            os.close(fd)
            raise
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="amqtool-fsync")
        self._pending.append(self._pool.submit(_fsync_close, fd, path))
        if len(self._pending) >= self.BATCH:
            self.wait()

    def wait(self) -> None:
        self._drain(raise_first=True)

    def _drain(self, raise_first: bool) -> None:
        pending, self._pending = self._pending, []
        first = None
        for fut in pending:
            try:
                fut.result()
            except OSError as err:
                first = first or err
        if first is not None and raise_first:
            raise first


def _fsync_close(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(fd)


class _CmpSink:
    """Writes each finished output buffer whole to its ``.cmp`` file and queues its fsync (``syncer``)."""

    def __init__(self, directory: Path, names: list[str], file_size: int, reference: Path | None,
                 created: list[Path], warnings: list[str], syncer: _Syncer, reused: int = 0):
        self.syncer = syncer
        self.reused = reused  # outputs [0, reused) overwrite free files already renamed to their .cmp name
        self.directory = directory
        self.names = names
        self.file_size = file_size
        self.reference = reference
        self.created = created
        self.warnings = warnings
        self.buffer = bytearray(file_size)

    def open_file(self, k: int, file_id: int) -> bytearray:
        # One buffer reused and zeroed (Artemis reuses it without zeroing; zeros are tidier, §1.3).
        self.buffer[:] = bytes(self.file_size)
        return self.buffer

    def close_file(self, k: int, buf: bytearray, used: int) -> None:
        self.syncer.submit(self.write_file(k, buf), self.directory / self.names[k])  # durable before wait()

    def write_file(self, k: int, buf: bytearray) -> int:
        """Create output ``k`` (``O_EXCL``), or overwrite the free file taken for it (of the same size, so
        every byte is rewritten), and write ``buf`` whole; returns the open fd, not yet synced.
        Thread-safe: the native write pass calls it from its workers."""
        path = self.directory / self.names[k]
        if k < self.reused:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        else:
            mode = 0o644
            if self.reference is not None:
                mode = os.stat(self.reference).st_mode & 0o7777
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            self.created.append(path)
        try:
            view = memoryview(buf)
            pos = 0
            chunk = 1 << 20
            while pos < len(view):
                atomic.checkpoint("write", path)
                n = os.pwrite(fd, view[pos:pos + chunk], pos)
                if n <= 0:  # pragma: no cover
                    raise OSError(errno.EIO, "short write", str(path))
                pos += n
            if self.reference is not None:
                self.warnings.extend(atomic.copy_owner_and_mode(self.reference, path))
        except BaseException:
            os.close(fd)
            raise
        return fd


def _write_outputs(prep: _Prepared, directory: Path, names: list[str], reference: Path | None,
                   created: list[Path], *, reused: int = 0) -> None:
    """Second pass: encode every record into its output buffer (bodies read from the source now), write
    each buffer whole and fsync it. The first ``reused`` names are free files to overwrite."""
    with _Syncer() as syncer:
        _write_outputs_synced(prep, directory, names, reference, created, syncer, reused)
        syncer.wait()


def _write_outputs_synced(prep: _Prepared, directory: Path, names: list[str], reference: Path | None,
                          created: list[Path], syncer: _Syncer, reused: int = 0) -> None:
    s = prep.report.settings
    sink = _CmpSink(directory, names, s.file_size, reference, created, prep.report.warnings, syncer, reused)
    if prep.plan is not None:
        _fill_native(prep, sink)
        return
    layout = _Layout(s.file_size, prep.first_id, sink)
    opened = prep.opened
    for item in _items(prep.load, prep.sources, prep.marker):
        body = None
        if item.src is not None and item.src[2]:
            fi, off, ln = item.src
            body = opened.pread(fi, off, ln)
            if len(body) != ln:
                raise AmqtoolError(f"journal file shrank while compacting (expected {ln} bytes at {off})",
                                   path=str(opened.files[fi].path), offset=off)
        layout.add(item, body)
    files = layout.finish()
    if [(f.file_id, f.records, f.used) for f in files] != [(f.file_id, f.records, f.used) for f in prep.report.outputs]:
        raise AmqtoolError("internal error: write pass disagrees with the plan")  # pragma: no cover


FILL_THREADS = 2  # output files encoded and written at once (each holds one file-size buffer)


def _fill_native(prep: _Prepared, sink: "_CmpSink") -> None:
    """The write pass of a native plan: ``compact_fill`` encodes each output file's records into one
    buffer (version-2 records copied whole, neighbours in one pread, tag and compactCount rewritten).

    Output files are independent once planned, and both ``compact_fill`` and ``pwrite`` run without the
    GIL, so up to :data:`FILL_THREADS` files are filled and written at once (the copy of the live bytes
    is the pass's whole cost). Their fsyncs are queued in file order; on any error the files in flight
    are finished or abandoned and closed before it is raised, and the caller removes every ``.cmp``."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    opened = prep.opened
    files = opened.files
    outputs = prep.report.outputs
    versions = bytes(min(max(f.version, 0), 255) for f in files)
    starts = [0]
    for out in outputs:
        starts.append(starts[-1] + out.records)

    def one(k: int, buf: bytearray) -> int:
        out = outputs[k]
        buf[0:HEADER_SIZE] = FileHeader(FORMAT_VERSION, 0, out.file_id).encode()
        fds = array("i", [-1]) * len(files)
        try:
            for fi in native.compact_sources(prep.plan, starts[k], starts[k + 1], len(files)):
                try:
                    fds[fi] = os.open(files[fi].path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError as err:
                    raise UnknownStoreError(f"cannot open journal file: {err.strerror}",
                                            path=str(files[fi].path)) from None
            try:
                bad = native.compact_fill(prep.plan, starts[k], starts[k + 1], buf, file_tag(out.file_id), fds,
                                          versions, prep.extras, out.used)
            except OSError as err:
                raise AmqtoolError(f"reading a journal file failed while compacting: {err.strerror or err}",
                                   path=str(opened.journal.directory)) from None
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
        if bad is not None:
            fi, off = bad
            raise AmqtoolError("journal file changed or shrank while compacting: the record the load found "
                               "there is gone", path=str(files[fi].path), offset=off)
        return sink.write_file(k, buf)

    threads = min(FILL_THREADS, len(outputs))
    if threads <= 1:
        for k in range(len(outputs)):
            sink.syncer.submit(one(k, sink.buffer), sink.directory / sink.names[k])
        return
    free = [sink.buffer] + [bytearray(len(sink.buffer)) for _ in range(threads - 1)]
    in_flight: deque = deque()  # (k, buffer, future) in file order
    with ThreadPoolExecutor(threads, thread_name_prefix="amqtool-compact-fill") as pool:
        try:
            for k in range(len(outputs)):
                if not free:
                    done_k, buf, fut = in_flight.popleft()
                    sink.syncer.submit(fut.result(), sink.directory / sink.names[done_k])
                    free.append(buf)
                buf = free.pop()
                in_flight.append((k, buf, pool.submit(one, k, buf)))
            while in_flight:
                done_k, _buf, fut = in_flight.popleft()
                sink.syncer.submit(fut.result(), sink.directory / sink.names[done_k])
        except BaseException:
            for _k, _buf, fut in in_flight:
                fut.cancel()
            for _k, _buf, fut in in_flight:
                if not fut.cancelled() and fut.exception() is None:
                    os.close(fut.result())
            raise


def _reference_file(prep: _Prepared) -> Path | None:
    files = prep.opened.files
    return files[0].path if files else None


def _check_space(directory: Path, needed: int) -> None:
    try:
        atomic.ensure_free_space(directory, needed)
    except AmqtoolError as err:
        raise AmqtoolError(f"{err.message}; compaction not started, store unchanged", path=err.path) from None


def _pool_keep(kept_free: int, outputs: int, settings: CompactSettings) -> bool:
    """``addFreeFile`` with checkDelete: keep (reinitialise) a freed file while the pool is not full.

    Artemis counts ``free + data + 1 (current) + opened < poolSize``; after an offline compaction the last
    output file is the current one and nothing is opened yet, so that is ``free + outputs < poolSize``. The
    journal's minimum file count is kept too, so the broker need not create files at its next start.
    """
    total = kept_free + outputs
    return settings.pool_files < 0 or total < settings.pool_files or total < settings.min_files


def _reusable_free_files(prep: _Prepared) -> list[str]:
    """The store's free files that the outputs are written into, in file order (at most one per output).

    A free file holds no data (its records, if any, are stale: another tag) and has the journal's file size.
    Artemis' compactor takes its output files from the pool the same way (``JournalFilesRepository
    .openFileCMP`` -> ``takeFile``, renamed to ``.cmp``) and only creates files when the pool is empty; so
    repeated compaction keeps the file count constant instead of adding a file per output every run.
    """
    has_data = {s.file.name for s in prep.load.scans if s.has_data}
    size = prep.report.settings.file_size
    free = [f.name for f in prep.opened.files if f.name not in has_data and f.size == size]
    return free[:len(prep.report.outputs)]


def _give_back(d: Path, name: str, header: bytes) -> None:
    """Return a taken free file to the pool after a failure before the commit point: its own header again
    (so its fileID clashes with nothing), then its own name. Records already written after the header carry
    the tags of the new layout, not this file's, so the load ignores them as the stale records of a reused
    file. If even that fails the ``.cmp`` is removed, which Artemis would do at its start anyway."""
    cmp = d / (name + ".cmp")
    try:
        fd = os.open(cmp, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, header, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(cmp, d / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(cmp)


def compact_in_place(prep: _Prepared) -> JournalCompaction:
    """Write the ``.cmp`` files, commit with the control file, then switch over (Artemis' order)."""
    report = prep.report
    opened = prep.opened
    journal = opened.journal
    d = journal.directory
    spec = journal.spec
    settings = report.settings
    if not report.outputs and not opened.files:
        report.action = "nothing-to-do"
        return report
    next_id = prep.next_id
    reused = _reusable_free_files(prep)
    names: list[str] = list(reused)
    while len(names) < len(report.outputs):
        next_id += 1
        names.append(spec.file_name(next_id))
    for out, name in zip(report.outputs, names):
        out.name = name
    cmp_names = [n + ".cmp" for n in names]
    reference = _reference_file(prep)
    _check_space(d, (len(names) - len(reused)) * settings.file_size + 4096)

    created: list[Path] = []
    taken = set(reused)
    headers = {f.name: f.header.encode() for f in opened.files if f.name in taken}
    renamed: list[str] = []
    try:
        # A taken free file becomes <name>.cmp before it is overwritten: until the commit point Artemis (and
        # open_journal) discard every .cmp, so a kill costs at most that free file, never a data file.
        for name in reused:
            atomic.rename(d / name, d / (name + ".cmp"), sync_dir=False)
            renamed.append(name)
        _write_outputs(prep, d, cmp_names, reference, created, reused=len(reused))
        atomic.fsync_dir(d)
        # The taken free files are no longer old files: Artemis' roll-forward deletes every old file it
        # lists *before* it renames the .cmp files, so listing one would delete its new contents.
        control = ControlFile(old_files=[f.name for f in opened.files if f.name not in taken], new_files=cmp_names)
        with atomic.atomic_write(d / CONTROL_FILE_NAME, tmp_path=d / CONTROL_TMP_NAME,
                                 reference=reference) as fh:
            fh.write(control.encode())
        # ---- committed: from here on Artemis rolls forward whatever happens ----
    except atomic.InjectedFault:
        raise  # a simulated crash leaves everything as a real one would
    except BaseException as err:
        for p in created + [d / CONTROL_TMP_NAME]:
            with contextlib.suppress(OSError):
                os.unlink(p)
        for name in renamed:
            _give_back(d, name, headers[name])
        with contextlib.suppress(OSError):
            atomic.fsync_dir(d)
        if isinstance(err, OSError):
            raise AmqtoolError(f"compaction failed before its commit point, store unchanged: "
                               f"{err.strerror or err}", path=err.filename or str(d)) from None
        raise
    opened.close()
    try:
        _switch_over(prep, names, cmp_names, next_id, taken)
    except atomic.InjectedFault:
        raise
    except OSError as err:
        raise AmqtoolError(f"compaction committed but finishing the switch-over failed ({err.strerror or err}); "
                           f"{CONTROL_FILE_NAME} is kept and Artemis completes the compaction at its next start",
                           path=err.filename or str(d)) from None
    report.action = "compacted"
    _after_figures(report, d, spec)
    return report


def _switch_over(prep: _Prepared, names: list[str], cmp_names: list[str], next_id: int,
                 taken: set[str] = frozenset()) -> None:
    """``renameFiles`` then ``deleteControlFile``: free every old file (but the free files ``taken`` for
    outputs), rename the new ones."""
    report = prep.report
    opened = prep.opened
    d = opened.journal.directory
    settings = report.settings
    has_data = {s.file.name for s in prep.load.scans if s.has_data}
    kept_free = 0
    attic = d / "attic"
    attic_used = False
    # Every step below is undone or redone by the control file until it is gone (Artemis' rollforward
    # deletes each listed old file that exists and renames each .cmp that exists), so none needs to be
    # durable on its own: the reinitialised headers are fsynced together and the directory once, all before
    # the control file's removal, which is what must not become durable ahead of them.
    with _Syncer() as syncer:
        for f in opened.files:
            fate = OldFileFate(f.name, f.file_id, f.size, f.name in has_data)
            report.old_files.append(fate)
            if f.name in taken:
                fate.fate = "reused"
                continue
            path = d / f.name
            if f.size != settings.file_size:
                attic.mkdir(exist_ok=True)
                if len(os.listdir(attic)) < settings.max_attic_files:
                    atomic.rename(path, attic / f.name, sync_dir=False)
                    attic_used = True
                    fate.fate = "attic"
                else:
                    atomic.unlink(path, sync_dir=False)
                    fate.fate = "deleted"
            elif _pool_keep(kept_free, len(names), settings):
                next_id += 1
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    atomic.checkpoint("write", path)
                    os.pwrite(fd, FileHeader(FORMAT_VERSION, 0, next_id).encode(), 0)
                except BaseException:
                    os.close(fd)
                    raise
                syncer.submit(fd, path)
                fate.fate = "reinitialised"
                fate.new_file_id = next_id
                kept_free += 1
            else:
                atomic.unlink(path, sync_dir=False)
                fate.fate = "deleted"
        syncer.wait()
    for cmp, final in zip(cmp_names, names):
        atomic.rename(d / cmp, d / final, sync_dir=False)
    if attic_used:
        atomic.fsync_dir(attic)
    atomic.fsync_dir(d)
    atomic.unlink(d / CONTROL_FILE_NAME)


def _after_figures(report: JournalCompaction, directory: Path, spec) -> None:
    ext = "." + spec.extension
    files = [directory / n for n in os.listdir(directory) if n.endswith(ext)]
    report.files_after = len(files)
    report.bytes_after = sum(p.stat().st_size for p in files)


def predict_after(prep: _Prepared) -> None:
    """Dry-run figures: the files and bytes an in-place compaction would leave (same rules as
    :func:`_switch_over`)."""
    report = prep.report
    s = report.settings
    taken = set(_reusable_free_files(prep))
    kept = 0
    for f in prep.opened.files:
        if f.name not in taken and f.size == s.file_size and _pool_keep(kept, len(report.outputs), s):
            kept += 1
    report.files_after = len(report.outputs) + kept
    report.bytes_after = report.files_after * s.file_size


def compact_copy(prep: _Prepared, dest_dir: Path) -> JournalCompaction:
    """Write the compacted journal into ``dest_dir`` (which must exist and be empty): output files named
    after their header fileIDs, plus zero-filled free files up to the journal's minimum file count. The
    caller makes the whole destination appear atomically (temporary directory, then rename)."""
    report = prep.report
    spec = prep.opened.journal.spec
    s = report.settings
    names = [spec.file_name(o.file_id) for o in report.outputs]
    for out, name in zip(report.outputs, names):
        out.name = name
    tmp_names = [n + ".tmp" for n in names]
    reference = _reference_file(prep)
    needed = max(len(names), s.min_files) * s.file_size
    _check_space(dest_dir, needed)
    created: list[Path] = []
    _write_outputs(prep, dest_dir, tmp_names, reference, created)
    for tmp, final in zip(tmp_names, names):
        atomic.rename(dest_dir / tmp, dest_dir / final, sync_dir=False)
    next_id = max([o.file_id for o in report.outputs] + [prep.next_id])
    count = len(names)
    mode = os.stat(reference).st_mode & 0o7777 if reference is not None else 0o644
    while count < s.min_files:
        next_id += 1
        path = dest_dir / spec.file_name(next_id)
        atomic.preallocate(path, s.file_size, header=FileHeader(FORMAT_VERSION, 0, next_id).encode(), mode=mode)
        if reference is not None:
            report.warnings.extend(atomic.copy_owner_and_mode(reference, path))
        count += 1
    atomic.fsync_dir(dest_dir)
    report.action = "copied"
    _after_figures(report, dest_dir, spec)
    return report


# --- interrupted compactions ----------------------------------------------------------------------------

def finish_interrupted(journal: JournalDir) -> list[str]:
    """Do on disk what ``JournalImpl.checkControlFile`` + ``cleanupTmpFiles`` do at the broker's start
    (§4.3): roll a committed compaction forward, or discard an uncommitted one. Returns what was done."""
    from amqtool.formats.artemis.control import decode_control_file

    d = journal.directory
    ext = "." + journal.spec.extension
    done: list[str] = []
    ctl = d / CONTROL_FILE_NAME
    if ctl.exists():
        control = decode_control_file(ctl.read_bytes())
        if control is not None:
            for old in control.old_files:
                if (d / old).exists():
                    atomic.unlink(d / old)
                    done.append(f"deleted {old}")
            for new in control.new_files:
                if (d / new).exists():
                    final = new[: new.rindex(".cmp")]
                    atomic.rename(d / new, d / final)
                    done.append(f"renamed {new} to {final}")
            for src, dst in control.renames:
                if (d / src).exists():
                    atomic.unlink(d / dst, missing_ok=True)
                    atomic.rename(d / src, d / dst)
                    done.append(f"renamed {src} to {dst}")
        atomic.unlink(ctl)
        done.append(f"deleted {CONTROL_FILE_NAME}" + (" (committed: rolled forward)" if control else
                                                      " (not committed: discarded)"))
    for n in sorted(os.listdir(d)):
        if n.endswith(ext + ".cmp") or n.endswith(ext + ".tmp") or n == CONTROL_TMP_NAME:
            atomic.unlink(d / n)
            done.append(f"deleted leftover {n}")
    return done


def settings_for(journal: JournalDir, broker=None, *, file_size: int | None = None, min_files: int | None = None,
                 pool_files: int | None = None, compact_min_files: int | None = None,
                 compact_percentage: int | None = None, opened_size_hint: int | None = None) -> CompactSettings:
    """The settings for one journal: flags over broker.xml over Artemis' defaults. The bindings journal
    always has 1 MiB files and 2 minimum files (JournalStorageManager); the message journal's file size
    comes from journal-file-size, else from the files themselves."""
    is_messages = journal.spec is MESSAGES
    s = CompactSettings(file_size=0, replaceable_types=REPLACEABLE_MESSAGE_TYPES if is_messages else ())
    if broker is not None:
        s.pool_files = broker.journal_pool_files
        s.compact_min_files = broker.journal_compact_min_files
        s.compact_percentage = broker.journal_compact_percentage
        if is_messages:
            s.min_files = broker.journal_min_files
            s.file_size = broker.journal_file_size
        s.max_attic_files = getattr(broker, "journal_max_attic_files", DEFAULT_MAX_ATTIC_FILES) or DEFAULT_MAX_ATTIC_FILES
    if not is_messages:
        s.file_size = journal.spec.default_file_size
        s.min_files = 2
    if file_size is not None:
        s.file_size = file_size
    if min_files is not None and is_messages:
        s.min_files = min_files
    if pool_files is not None:
        s.pool_files = pool_files
    if compact_min_files is not None:
        s.compact_min_files = compact_min_files
    if compact_percentage is not None:
        s.compact_percentage = compact_percentage
    if s.compact_min_files < 0 or not (0 <= s.compact_percentage <= 100):
        raise UsageError("journal-compact-min-files must be >= 0 and journal-compact-percentage 0..100")
    if s.file_size == 0 and opened_size_hint:
        s.file_size = opened_size_hint
    return s


# --- reclaim without compaction --------------------------------------------------------------------------

def reclaim_in_place(prep: _Prepared, *, dry_run: bool = False) -> JournalCompaction:
    """Free the files the Reclaimer would free (``--reclaim-only``): reinitialised, deleted or moved to the
    attic as ``addFreeFile`` does. Each step is one file and leaves a loadable store (a header rewrite
    within one sector, or an unlink), as the broker's own reclaiming does."""
    from amqtool.engines.artemis.reclaim import check_reclaim_safe, reclaimable_files

    report = prep.report
    opened = prep.opened
    d = opened.journal.directory
    s = report.settings
    reclaim, data_files = reclaimable_files(opened)
    if reclaim and not check_reclaim_safe(opened, reclaim):
        report.warnings.append("the Reclaimer's counts would free files the load still needs; nothing reclaimed")
        reclaim = []
    remaining = len(data_files) - len(reclaim)
    free_now = len(opened.files) - len(data_files)
    next_id = prep.next_id
    kept = free_now
    fates = []
    for fi in reclaim:
        f = opened.files[fi]
        fate = OldFileFate(f.name, f.file_id, f.size, True)
        if f.size != s.file_size:
            fate.fate = "attic"
        elif _pool_keep(kept, remaining, s):
            next_id += 1
            fate.fate = "reinitialised"
            fate.new_file_id = next_id
            kept += 1
        else:
            fate.fate = "deleted"
        fates.append((f, fate))
    report.old_files = [fate for _, fate in fates]
    report.outputs = []
    if dry_run:
        report.files_after = len(opened.files) - sum(1 for _, x in fates if x.fate != "reinitialised")
        report.bytes_after = report.bytes_before - sum(f.size for f, x in fates if x.fate != "reinitialised")
        report.action = "planned"
        return report
    opened.close()
    attic = d / "attic"
    for f, fate in fates:
        path = d / f.name
        if fate.fate == "attic":
            attic.mkdir(exist_ok=True)
            if len(os.listdir(attic)) < s.max_attic_files:
                atomic.rename(path, attic / f.name)
            else:
                atomic.unlink(path)
                fate.fate = "deleted"
        elif fate.fate == "reinitialised":
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                atomic.checkpoint("write", path)
                os.pwrite(fd, FileHeader(FORMAT_VERSION, 0, fate.new_file_id).encode(), 0)
                atomic.fsync(fd, path)
            finally:
                os.close(fd)
        else:
            atomic.unlink(path)
    report.action = "reclaimed" if fates else "nothing-to-do"
    _after_figures(report, d, opened.journal.spec)
    return report


# --- the command's engine --------------------------------------------------------------------------------

@dataclass
class CompactRequest:
    """What ``amqtool compact`` was asked to do."""

    dry_run: bool = False
    if_needed: bool = False
    output: Path | None = None
    force: bool = False
    reclaim_only: bool = False
    journals: tuple[str, ...] = ("messages", "bindings")  # Artemis' CLI order
    file_size: int | None = None
    min_files: int | None = None
    pool_files: int | None = None
    compact_min_files: int | None = None
    compact_percentage: int | None = None


def compact_store(store, req: CompactRequest, *, progress: Callable[[int], None] | None = None,
                  lock_files: list | None = None) -> list[JournalCompaction]:
    """Compact (or plan, or reclaim) every selected journal of an Artemis ``store``.

    Raises StoreLockedError when a broker holds the store and ``force`` is not set (writing modes only),
    UsageError for a bad destination.
    """
    from amqtool.store import locks

    journals = [j for j in (store.messages, store.bindings) if j is not None and j.kind in req.journals]
    if not journals:
        raise UsageError("no Artemis journal selected in this store")
    writes_source = not req.dry_run and req.output is None
    copy_warning = None
    if writes_source:
        files = lock_files if lock_files is not None else locks.artemis_store_lock_files(store)
        locks.ensure_not_locked(files, force=req.force)  # --force: the caller reports the locks
    elif req.output is not None and not req.dry_run:
        # -o never writes the source, but a running broker may be writing it while it is read: say so.
        files = lock_files if lock_files is not None else locks.artemis_store_lock_files(store)
        held = locks.find_locks(files)
        if held:
            copy_warning = (f"the store is in use ({held[0].describe()}): the copy was read while a broker may "
                            "have been writing it and may be torn; stop the broker and copy again to be sure")
    broker = getattr(store, "settings", None)
    reports: list[JournalCompaction] = []
    copies: list[tuple[_Prepared, str]] = []
    for jd in journals:
        if writes_source:
            opened_probe = open_journal(jd)
            interrupted = [p for p in opened_probe.pending
                           if p.code in ("control-file-rollforward", "control-file-discard", "leftover-cmp",
                                         "leftover-tmp")]
            opened_probe.close()
            recovered = finish_interrupted(jd) if interrupted else []
        else:
            recovered = []
        settings = settings_for(jd, broker, file_size=req.file_size, min_files=req.min_files,
                                pool_files=req.pool_files, compact_min_files=req.compact_min_files,
                                compact_percentage=req.compact_percentage)
        prep = plan_journal(jd, settings, progress=progress)
        report = prep.report
        report.recovered = recovered
        if copy_warning:
            report.warnings.append(copy_warning)
        reports.append(report)
        if req.reclaim_only:
            reclaim_in_place(prep, dry_run=req.dry_run or req.output is not None)
            prep.opened.close()
            continue
        if req.if_needed and not report.needed:
            report.action = "skipped"
            predict_after(prep)
            report.files_after, report.bytes_after = report.files_before, report.bytes_before
            prep.opened.close()
            continue
        if req.dry_run:
            predict_after(prep)
            prep.opened.close()
            continue
        if req.output is not None:
            copies.append((prep, jd.directory.name))
            continue
        try:
            compact_in_place(prep)
        finally:
            prep.opened.close()
    if copies:
        _write_copy(copies, req.output, single=len(journals) == 1, store=store)
    return reports


def _write_copy(copies: list[tuple[_Prepared, str]], dest: Path, *, single: bool, store=None) -> None:
    """``-o DEST``: build the compacted store in a temporary sibling directory, then rename it into place,
    so DEST either does not exist (or stays empty) or holds the complete result. With ``store`` (a whole
    store was compacted), its page files, large-message files and node ID come along
    (:mod:`.store_copy`), so DEST is a store a broker can start from."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"destination {dest} exists and is not an empty directory")
    parent = dest.parent if str(dest.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{dest.name}.amqtool-compact-{os.getpid()}"
    if tmp.exists():
        import shutil
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        used: set[str] = set()
        for prep, name in copies:
            if single:
                target = tmp
            else:
                name = name if name not in used else prep.report.kind
                used.add(name)
                target = tmp / name
                target.mkdir()
            src_dir = prep.opened.journal.directory
            try:
                prep.report.warnings.extend(atomic.copy_owner_and_mode(src_dir, target))
            except OSError:
                pass
            try:
                compact_copy(prep, target)
            finally:
                prep.opened.close()
            prep.report.directory = str(dest if single else dest / name)
            if not single:
                atomic.fsync_dir(tmp)
        if store is not None and not single:
            from amqtool.engines.artemis.store_copy import carry_over

            carried = carry_over(store, tmp, copies[0][0].report.warnings)
            for prep, _name in copies:
                prep.report.carried_over = carried
        if dest.exists():
            dest.rmdir()
        atomic.rename(tmp, dest)
    except atomic.InjectedFault:
        raise
    except BaseException as err:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise AmqtoolError(f"writing the compacted copy failed, source untouched: {err.strerror or err}",
                               path=err.filename or str(dest)) from None
        raise
