"""The plan: where every record goes (``JournalCompactor``'s write order and file placement), computed
read-only from the load. ``_items``/``_Layout`` are the Python reference of native/compact_write.c's
``compact_layout``."""
from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import DataAtRiskError, FormatError
from amqtool.engines.artemis.load import LiveList, LoadResult, load_journal
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
from amqtool.store.journal_files import OpenedJournal, open_journal
from amqtool.store.layout import JournalDir
from amqtool.engines.artemis.compact.settings import COMPACT_SPLIT_LINE, CompactSettings, INVALID_PREPARE_COUNT, JournalCompaction, MAX_COMPACT_COUNT, OutputFile, infer_file_size, name_number, needs_compact, settings_for

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
                 use_native: bool | None = None, opened: OpenedJournal | None = None, on_file=None,
                 record_filter: Callable[[tuple], bool] | None = None,
                 after_load: Callable[[LoadResult], None] | None = None,
                 load: LoadResult | None = None) -> _Prepared:
    """Load ``journal`` read-only and lay out its compacted form (nothing is written). ``use_native``:
    lay out and later write with native/compact_write.c (None: when built) or with the Python reference.

    ``load``: a load of the journal already made with ``sources=True`` (``stat`` lays out the load ``verify``
    judged, so the journal is scanned once); its ``opened`` view is used and the journal is not read again.

    For ``recover``: ``opened`` is a journal view prepared by the caller (its refused files already dealt
    with), ``on_file`` and ``record_filter`` go to :func:`load_journal`, and ``after_load(load)`` may drop
    what must not be written (it runs before the layout)."""
    if load is not None:
        if load.live_sources is None:
            raise ValueError("plan_journal needs a load made with sources=True")
        opened = load.opened
    if opened is None:
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
    if load is None:
        load = load_journal(opened, progress=progress, sources=True, on_file=on_file, record_filter=record_filter)
    if after_load is not None:
        after_load(load)
    report.files_before = len(opened.files)
    report.bytes_before = opened.bytes_total()
    # Data files as a broker's load leaves them: a file holding only a rejected candidate is freed by the
    # Reclaimer at the end of the load (LoadResult.freed_at_start), so it is neither counted nor compacted.
    start_data = {f.name for f in load.start_data_files}
    data_scans = [s for s in load.scans if s.file.name in start_data]
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
