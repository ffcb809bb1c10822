"""The live state of an Artemis journal, built exactly as ``JournalImpl.load`` builds it (§3).

Rules mirrored from ``JournalImpl.load`` and ``JournalTransaction`` (artemis-journal-format.md §3):

* files in header-fileID order, each scanned as ``readJournalFile`` does;
* ADD and UPDATE go to the live list in scan order; a DELETE removes *every* entry of that id, including
  an ADD that comes after it (the broker never reuses ids; Artemis filters by id at the end);
* transactional records wait in a holder until COMMIT, when they join the live list in their order; a
  COMMIT or PREPARE is healthy only if ``numberOfRecords`` equals the transaction's counter for the
  commit's own file (the counter resets whenever the transaction touches another file, and reading it
  for a PREPARE or COMMIT in a new file resets it too); an unhealthy COMMIT discards the transaction;
* a COMMIT or ROLLBACK without a holder is ignored (its body may have been reclaimed) and does not make
  the file a data file;
* at the end, transactions never completed (or prepared unhealthily) are failed, prepared ones are
  returned with their records, and ``maxID`` covers adds and updates including prepared ones.

Bodies are not kept: a live record carries where its body is (file index, offset, length), so memory grows
with live records, not with journal size. :meth:`LoadResult.body` reads one on demand.

Two implementations give identical results (tests/native/test_loader.py): the loop in this module, which is
the reference, and ``amqtool._native.Loader`` (native/journal_load.c), which makes the same decisions in C
without a Python object per record and keeps the live list packed (:class:`LiveList`, 27 bytes an entry).
:func:`load_journal` uses the C one when the extension is built, unless ``record_filter`` is given or
``use_native=False``.
"""
from __future__ import annotations

import hashlib
import re
import struct
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable

from amqtool import native
from amqtool.errors import UnknownStoreError
from amqtool.formats.artemis.records import (
    TransactionCounter,
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    EVENT,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    fixed_size,
)
from amqtool.store.journal_files import WINDOW, JournalFile, OpenedJournal

# One surviving record (RecordInfo without its data): where its body lies instead of the body itself.
LiveRecord = namedtuple(
    "LiveRecord", "id user_record_type is_update compact_count file_index body_offset body_len"
)
_new_live = tuple.__new__  # _new_live(LiveRecord, (...)) skips namedtuple argument parsing

_SOURCE = struct.Struct(native.SOURCE_FORMAT)  # LoadResult.live_sources entries: tx id, record type
_LIVE = struct.Struct(native.LIVE_FORMAT)  # id, user_record_type, is_update, compact_count, file_index,
#                                            body_offset, body_len: LiveRecord's fields in its order


def _unpack_live(buf) -> list[LiveRecord]:
    return [_new_live(LiveRecord, t) for t in _LIVE.iter_unpack(buf)]


class LiveList(Sequence):
    """The live list of a native load: packed entries (``native.LIVE_FORMAT``) in one buffer, handed out as
    :class:`LiveRecord` on access. Behaves as the read-only list the Python load returns (``len``, iteration,
    indexing and slicing, ``==`` against a list)."""

    __slots__ = ("_buf", "_n")

    def __init__(self, buf):
        self._buf = memoryview(buf).cast("B")
        self._n = len(self._buf) // _LIVE.size

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return map(_new_live, _live_cls_repeat(), _LIVE.iter_unpack(self._buf))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("live list index out of range")
        return _new_live(LiveRecord, _LIVE.unpack_from(self._buf, i * _LIVE.size))

    def indexes_of_types(self, user_record_types, adds_only: bool = False) -> list[int]:
        """Indexes of the entries whose user_record_type is in ``user_record_types`` (``adds_only``: and that
        are no update), found without materialising the others: the type bytes are gathered with one strided
        copy and searched in C."""
        types = bytes(self._buf[8::_LIVE.size])  # user_record_type is the 9th byte of an entry ("=qB...")
        table = bytearray(256)
        for t in user_record_types:
            if 0 <= t < 256:
                table[t] = 1
        marks = types.translate(table)
        if adds_only:  # is_update, the 10th byte, is 0 or 1: clear the marks of the updates
            updates = int.from_bytes(bytes(self._buf[9::_LIVE.size]), "little")
            marks = (int.from_bytes(marks, "little") & ~updates).to_bytes(len(marks), "little")
        out = []
        find = marks.find
        i = find(1)
        while i >= 0:
            out.append(i)
            i = find(1, i + 1)
        return out

    def ids_of_type(self, user_record_type: int, is_update: bool | None = None) -> list[int]:
        """Ids of the entries of ``user_record_type`` (and ``is_update`` unless None), in list order."""
        out = []
        for i in self.indexes_of_types((user_record_type,)):
            rid, _t, upd = _LIVE.unpack_from(self._buf, i * _LIVE.size)[:3]
            if is_update is None or upd == is_update:
                out.append(rid)
        return out

    @property
    def buffer(self) -> memoryview:
        """The packed entries (``native.LIVE_FORMAT`` each), read-only."""
        return self._buf

    def file_index_at(self, i: int) -> int:
        return _LIVE.unpack_from(self._buf, i * _LIVE.size)[4]

    def tuples(self):
        """The entries as plain tuples in LiveRecord's field order (cheaper than LiveRecord when scanning)."""
        return _LIVE.iter_unpack(self._buf)

    def __eq__(self, other):
        if isinstance(other, (LiveList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (LiveList, (bytes(self._buf),))

    def __repr__(self) -> str:
        return f"LiveList({self._n} records)"


def live_ids_of_type(live, user_record_type: int, is_update: bool | None = None) -> list[int]:
    """Ids of the live entries of ``user_record_type`` (and ``is_update`` unless None), for a list or a
    :class:`LiveList` (which answers without building a LiveRecord per entry)."""
    if isinstance(live, LiveList):
        return live.ids_of_type(user_record_type, is_update)
    return [r.id for r in live
            if r.user_record_type == user_record_type and (is_update is None or r.is_update == is_update)]


def _live_cls_repeat():
    from itertools import repeat

    return repeat(LiveRecord)


@dataclass
class TxInfo:
    """A transaction left open at the end of the load (prepared or failed), as Artemis reports it."""

    tx_id: int
    records: list[LiveRecord] = field(default_factory=list)
    records_to_delete: list[LiveRecord] = field(default_factory=list)
    prepared: bool = False
    invalid: bool = False
    extra: bytes | None = None
    prepare_location: tuple[int, int] | None = None  # (file index, offset) of the PREPARE record


@dataclass
class FileScan:
    """What scanning one file found."""

    index: int
    file: JournalFile
    records: int = 0
    marked: bool = False
    has_data: bool = False
    last_data_pos: int = 16
    type_counts: dict[int, int] = field(default_factory=dict)


@dataclass
class Anomaly:
    """A load-time observation that ``verify`` turns into a finding."""

    code: str
    file_index: int
    offset: int
    ids: dict = field(default_factory=dict)


@dataclass
class FileGaps:
    """The bytes of one file outside its accepted records that are not filler (0 or HornetQ 'J'): what
    ``verify`` judges. ``damaged`` holds the first :data:`GAP_EXAMPLES` regions *between* records as
    (first non-filler offset, offset of the next record); zeros between two records are such a region too, from
    the end of the record before, unless AIO padding explains them (:func:`aio_padding`: JournalImpl writes a
    file's records back to back, so a run of whole records zeroed exactly is damage); ``damaged_count`` counts
    them all; ``end`` is where
    the last record ends (16 without records), ``tail_first`` the first non-filler byte after it (-1: none)
    and ``tail_end`` the offset just past the last non-zero byte of the file when ``tail_first`` is one.
    """

    damaged: list[tuple[int, int]]
    damaged_count: int
    end: int
    tail_first: int
    tail_end: int = -1


GAP_EXAMPLES = 20
AIO_BLOCK = 512  # the smallest block AIOSequentialFileFactory aligns its writes to


def aio_padding(start: int, end: int) -> bool:
    """Whether zeros in ``[start, end)`` before a record at ``end`` can be padding a broker wrote. AIO journals
    pad each write to the factory's alignment (``AIOSequentialFile.writeDirect`` advances its position by
    ``calculateBlockSize`` of the buffer; ``AIOSequentialFileFactory.calculateAlignment``: the file system's block
    size, 512 when it cannot tell), so the next write's first record starts a block, less than a block after the
    last record's end. Any power-of-two alignment of at least 512 is allowed: the largest one ``end`` is a
    multiple of bounds the padding. NIO writes carry none."""
    return end % AIO_BLOCK == 0 and end - start < (end & -end)

_NOT_FILLER = re.compile(rb"[^\x00J]")


def file_gaps(data: bytes, records: list, examples: int = GAP_EXAMPLES) -> FileGaps:
    """:class:`FileGaps` of a file from its bytes and scanner tuples (the reference of the C loader's)."""
    search = _NOT_FILLER.search
    pos = 16
    damaged = []
    count = 0
    for rec in records:
        off = rec[1]
        if off > pos:
            m = search(data, pos, off)
            if m is not None or not aio_padding(pos, off):
                count += 1
                if len(damaged) < examples:
                    damaged.append((pos if m is None else m.start(), off))
        pos = off + rec[2]
    m = search(data, pos)
    if m is None:
        return FileGaps(damaged, count, pos, -1, -1)
    return FileGaps(damaged, count, pos, m.start(), len(data.rstrip(b"\x00")))


@dataclass
class LoadResult:
    """The outcome of :func:`load_journal`. ``live`` is a list (Python load) or a :class:`LiveList` (C load):
    use it as a read-only sequence."""

    opened: OpenedJournal
    live: Sequence[LiveRecord]
    prepared: list[TxInfo]
    failed: list[TxInfo]
    max_id: int
    number_of_records: int  # JournalLoadInformation.numberOfRecords: ids in the live map
    scans: list[FileScan]
    anomalies: list[Anomaly]
    anomaly_counts: dict[str, int]
    # load_journal(sources=True): per live entry, in list order, the record it came from, packed as
    # native.SOURCE_FORMAT ("=qB": transaction id or -1, record type ADD/UPDATE/ADD_TX/UPDATE_TX)
    live_sources: bytes | None = None

    @property
    def files(self) -> list[JournalFile]:
        return self.opened.files

    def body(self, rec: LiveRecord) -> bytes:
        """The body bytes of ``rec`` (read from its file now)."""
        if rec.body_len == 0:
            return b""
        return self.opened.pread(rec.file_index, rec.body_offset, rec.body_len)

    def body_sha256(self, rec: LiveRecord) -> str:
        return hashlib.sha256(self.body(rec)).hexdigest()

    def updates_of(self, ids) -> dict[int, list[LiveRecord]]:
        """Id of ``ids`` -> its live updates, in load order (one pass over the live records)."""
        out: dict[int, list[LiveRecord]] = {x: [] for x in ids}
        for r in self.live:
            if r.is_update and r.id in out:
                out[r.id].append(r)
        return out

    @property
    def data_files(self) -> list[JournalFile]:
        """``getDataFiles()`` after a read-only load: every data file but the last, which becomes current."""
        data = [s.file for s in self.scans if s.has_data]
        return data[:-1]

    @property
    def current_file(self) -> JournalFile | None:
        """The file Artemis would append to: the last data file (None when there is none, in which case
        Artemis would take or create a free file)."""
        data = [s.file for s in self.scans if s.has_data]
        return data[-1] if data else None

    @property
    def freed_at_start(self) -> list[JournalFile]:
        """Data files that hold no record, only a rejected candidate that made ``readJournalFile`` call
        ``markAsDataFile`` (typically stale bytes of a reused file that happen to carry its new tag), and
        that are not the current file. A broker's load (changeData: broker start, ``artemis data compact``)
        ends with ``checkReclaimStatus``, and the Reclaimer frees every such file at once: it has no positive
        and no negative, so both of ``Reclaimer.scan``'s criteria hold. Artemis therefore treats them as free
        files (it reuses them for its next files, compaction outputs included); only the read-only
        ``data print`` load, which runs no Reclaimer, keeps them in ``dataFiles``."""
        data = [s for s in self.scans if s.has_data]
        return [s.file for s in data[:-1] if s.records == 0]

    @property
    def start_data_files(self) -> list[JournalFile]:
        """The files that hold data once a broker has loaded the journal, the current file included: the
        data files less :attr:`freed_at_start`. How ``compact`` and ``print`` count data files."""
        freed = {f.name for f in self.freed_at_start}
        return [s.file for s in self.scans if s.has_data and s.file.name not in freed]


class _Tx(TransactionCounter):
    """TransactionHolder + JournalTransaction counters, merged (they live and die together on load)."""

    __slots__ = ("tx_id", "records", "deletes", "prepared", "invalid", "extra", "prepare_location")

    def __init__(self, tx_id: int):
        super().__init__()
        self.tx_id = tx_id
        self.records = []
        self.deletes = []
        self.prepared = False
        self.invalid = False
        self.extra = None
        self.prepare_location = None


MAX_ANOMALY_EXAMPLES = 100


def load_journal(
    opened: OpenedJournal,
    *,
    check_tag: bool = True,
    on_file: Callable[[FileScan, "FileGaps"], None] | None = None,
    progress: Callable[[int], None] | None = None,
    record_filter: Callable[[tuple], bool] | None = None,
    use_native: bool | None = None,
    sources: bool = False,
) -> LoadResult:
    """Load the live state of ``opened`` as ``JournalImpl.load(..., fixBadTx=false)`` would.

    ``on_file(scan, gaps)`` is called after each file is scanned and processed, with its :class:`FileGaps`
    (verify judges the bytes between and after records from them; it reads what else it needs with
    ``opened.pread``). ``progress(n)`` receives bytes scanned. The C load reads each file through a bounded
    window (memory: the window plus the live index, whatever the files' sizes); this Python loop, the
    reference, reads each file whole. ``check_tag=False`` accepts records of earlier uses of reused files
    (``--reclaimed``). ``record_filter`` (keep a scanner tuple or not) needs the Python load; ``use_native``
    forces one implementation (None: C when built). ``sources=True`` fills ``LoadResult.live_sources``.
    """
    if use_native is None:
        use_native = native.HAVE_NATIVE_LOADER and record_filter is None
    if use_native:
        if record_filter is not None:
            raise ValueError("record_filter needs the Python load")
        return _load_native(opened, check_tag, on_file, progress, sources)
    scan = native.scan_records

    entries: dict[int, LiveRecord] = {}  # sequence -> entry, in the order Artemis' list would hold them
    by_id: dict[int, list[int]] = {}
    deleted: set[int] = set()
    srcs: dict[int, tuple[int, int]] | None = {} if sources else None  # sequence -> (tx id, record type)
    live_ids: set[int] = set()  # JournalImpl.records keys
    txs: dict[int, _Tx] = {}  # LinkedHashMap: failed/prepared are reported in first-seen order
    anomalies: list[Anomaly] = []
    counts: dict[str, int] = {}
    scans: list[FileScan] = []
    max_id = -1
    seq = 0

    def note(code: str, fi: int, off: int, **ids) -> None:
        n = counts.get(code, 0)
        counts[code] = n + 1
        if n < MAX_ANOMALY_EXAMPLES:
            anomalies.append(Anomaly(code, fi, off, ids))

    def append(entry: LiveRecord, tx_id: int, rtype: int) -> None:
        nonlocal seq
        rid = entry.id
        if rid in deleted:
            # Artemis drops every entry of a deleted id at the end of the load. An ADD after its id's DELETE is
            # noted: the broker deletes a record only once it was added, so one of the two ids was damaged.
            if not entry.is_update:
                note("add-of-deleted-id", entry.file_index, entry.body_offset, id=rid)
            return
        seq += 1
        entries[seq] = entry
        if srcs is not None:
            srcs[seq] = (tx_id, rtype)
        lst = by_id.get(rid)
        if lst is None:
            by_id[rid] = [seq]
        else:
            lst.append(seq)

    def delete(rid: int) -> None:
        deleted.add(rid)
        for s in by_id.pop(rid, ()):
            del entries[s]
            if srcs is not None:
                del srcs[s]

    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        version = jf.version
        body_start = {t: fixed_size(t, version) - 4 for t in (EVENT, ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX)}
        records, marked = scan(data, jf.tag, version, check_tag, 16)
        if record_filter is not None:
            records = [r for r in records if record_filter(r)]
        fs = FileScan(fi, jf, records=len(records), marked=marked)
        has_data = marked
        tcounts = fs.type_counts
        for rec in records:
            t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len = rec
            tcounts[t] = tcounts.get(t, 0) + 1
            if t == ADD:
                if rid > max_id:
                    max_id = rid
                has_data = True
                append(_new_live(LiveRecord, (rid, utype, False, cc, fi, off + body_start[t], body_len)), -1, t)
                live_ids.add(rid)
            elif t == UPDATE:
                if rid > max_id:
                    max_id = rid
                has_data = True
                append(_new_live(LiveRecord, (rid, utype, True, cc, fi, off + body_start[t], body_len)), -1, t)
                if rid not in live_ids:
                    note("update-unknown-id", fi, off, id=rid)
            elif t == DELETE:
                has_data = True
                if rid in live_ids:
                    live_ids.discard(rid)
                else:
                    note("delete-unknown-id", fi, off, id=rid)
                delete(rid)
            elif t == ADD_TX or t == UPDATE_TX:
                if rid > max_id:
                    max_id = rid
                has_data = True
                tx = txs.get(tx_id)
                if tx is None:
                    tx = txs[tx_id] = _Tx(tx_id)
                tx.records.append(_new_live(LiveRecord, (rid, utype, t == UPDATE_TX, cc, fi, off + body_start[t],
                                                         body_len)))
                tx.inc(fi)
            elif t == DELETE_TX:
                has_data = True
                tx = txs.get(tx_id)
                if tx is None:
                    tx = txs[tx_id] = _Tx(tx_id)
                # RecordInfo(id, 0, data, isUpdate=true, ..., compactCount)
                tx.deletes.append(_new_live(LiveRecord, (rid, 0, True, cc, fi, off + body_start[t], body_len)))
                tx.inc(fi)
            elif t == PREPARE:
                has_data = True
                tx = txs.get(tx_id)
                if tx is None:
                    tx = txs[tx_id] = _Tx(tx_id)  # empty prepared transactions are allowed
                tx.prepared = True
                start = off + fixed_size(PREPARE, version) - 4
                tx.extra = bytes(data[start:start + extra_len])
                tx.prepare_location = (fi, off)
                if tx.counter_for(fi) != nrec:
                    tx.invalid = True
                    note("prepare-count-mismatch", fi, off, txId=tx_id, expected=nrec, found=tx.counter)
            elif t == COMMIT:
                tx = txs.pop(tx_id, None)
                if tx is None:
                    note("commit-unknown-tx", fi, off, txId=tx_id)
                    continue
                has_data = True
                found = tx.counter_for(fi)
                if found == nrec:
                    for r in tx.records:
                        append(r, tx_id, UPDATE_TX if r.is_update else ADD_TX)
                        live_ids.add(r.id)
                    for r in tx.deletes:
                        live_ids.discard(r.id)
                        delete(r.id)
                else:
                    note("commit-count-mismatch", fi, off, txId=tx_id, expected=nrec, found=found,
                         records=len(tx.records) + len(tx.deletes))
            elif t == ROLLBACK:
                tx = txs.pop(tx_id, None)
                if tx is None:
                    note("rollback-unknown-tx", fi, off, txId=tx_id)
                    continue
                has_data = True
            # EVENT: ignored by load (the default JournalReaderCallback does nothing, not even hasData).
        fs.has_data = has_data
        if records:
            last = records[-1]
            fs.last_data_pos = last[1] + last[2]
        scans.append(fs)
        if on_file is not None:
            on_file(fs, file_gaps(data, records))
        if progress is not None:
            progress(len(data))
        del data, records

    prepared: list[TxInfo] = []
    failed: list[TxInfo] = []
    for tx in txs.values():
        info = TxInfo(tx.tx_id, tx.records, tx.deletes, tx.prepared, tx.invalid, tx.extra, tx.prepare_location)
        if not tx.prepared or tx.invalid:
            failed.append(info)
        else:
            for r in tx.records:
                if r.id > max_id:
                    max_id = r.id
            prepared.append(info)

    return LoadResult(
        opened=opened,
        live=list(entries.values()),
        prepared=prepared,
        failed=failed,
        max_id=max_id,
        number_of_records=len(live_ids),
        scans=scans,
        anomalies=anomalies,
        anomaly_counts=counts,
        live_sources=(b"".join(_SOURCE.pack(*v) for v in srcs.values()) if srcs is not None else None),
    )


def _anomaly_ids(code: str, a: int, b: int, c: int, d: int) -> dict:
    # the keywords load_journal's note() gets for each code, in the same order
    if code in ("update-unknown-id", "delete-unknown-id", "add-of-deleted-id"):
        return {"id": a}
    if code == "prepare-count-mismatch":
        return {"txId": a, "expected": b, "found": c}
    if code == "commit-count-mismatch":
        return {"txId": a, "expected": b, "found": c, "records": d}
    return {"txId": a}


def _load_native(opened: OpenedJournal, check_tag: bool, on_file, progress, sources: bool = False) -> LoadResult:
    """load_journal through ``amqtool._native.Loader``: the same result as the loop above."""
    loader = native.Loader(max_examples=MAX_ANOMALY_EXAMPLES, sources=sources, window=WINDOW)
    want_gaps = on_file is not None
    scans: list[FileScan] = []
    for fi, jf in enumerate(opened.files):
        try:
            n, marked, has_data, last_pos, tcounts, gaps, size = loader.feed(
                opened.fd(fi), fi, jf.tag, jf.version, check_tag, want_gaps, GAP_EXAMPLES)
        except OSError as err:
            raise UnknownStoreError(f"cannot read journal file: {err.strerror}", path=str(jf.path)) from None
        jf.size = size  # as read: a file that changed since it was listed is read as it is now
        fs = FileScan(fi, jf, records=n, marked=marked, has_data=has_data, last_data_pos=last_pos,
                      type_counts=dict(tcounts))
        scans.append(fs)
        if on_file is not None:
            on_file(fs, FileGaps(*gaps))
        if progress is not None:
            progress(size)
    _n, max_id, number_of_records, txs, raw_anomalies, counts = loader.finish()
    prepared: list[TxInfo] = []
    failed: list[TxInfo] = []
    for tx_id, recs, dels, is_prepared, invalid, extra, ploc in txs:
        info = TxInfo(tx_id, _unpack_live(recs), _unpack_live(dels), is_prepared, invalid, extra, ploc)
        if not is_prepared or invalid:
            failed.append(info)
        else:
            for r in info.records:
                if r.id > max_id:
                    max_id = r.id
            prepared.append(info)
    anomalies = [Anomaly(code, fi, off, _anomaly_ids(code, a, b, c, d))
                 for code, fi, off, a, b, c, d in raw_anomalies]
    return LoadResult(
        opened=opened,
        live=LiveList(loader),
        prepared=prepared,
        failed=failed,
        max_id=max_id,
        number_of_records=number_of_records,
        scans=scans,
        anomalies=anomalies,
        anomaly_counts=dict(counts),
        live_sources=loader.sources() if sources else None,
    )
