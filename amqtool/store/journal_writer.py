"""Appending to an Artemis journal directory the way ``JournalImpl`` does with NIO.

What is mirrored (artemis-journal-format.md §1, §2, §3; ``JournalImpl``, ``JournalFilesRepository``,
``JournalTransaction``):

* **Files.** Every file is ``fileSize`` bytes, created as ``<name>.tmp``, filled with zeros, given the
  16-byte header (format version 2, userVersion, fileID) and renamed (``createFile0``). Names are
  ``<prefix>-<fileID>.<ext>``; fileIDs come from one increasing counter (``generateFileID``).
* **Start-up.** A new journal gets ``minFiles`` files (``ensureMinFiles``); the first is the current file,
  and one more file (the next free one, or a new one) is pre-opened for the rollover (``pushOpenedFile``).
  So an empty journal with minFiles 2 has files 1 and 2; once records reach file k, file k+1 exists too.
* **Rollover.** A record never spans files: when it does not fit (``position + size > fileSize``) the
  current file is closed, the pre-opened file becomes current (data starts at offset 16, or the aligned
  block start) and another file is pre-opened (``moveNextFile``/``openFile``). A record larger than
  ``fileSize - dataStart`` is refused, as Artemis refuses it.
* **Transactions.** Each ADD_TX/UPDATE_TX/DELETE_TX increments the transaction's counter for the file it
  landed in, resetting the counter when that file differs from the last one the transaction touched;
  PREPARE and COMMIT carry the counter read for *their own* file (``fillNumberOfRecords``, which resets it
  too when the commit lands in a new file). A COMMIT/PREPARE/ROLLBACK of an unknown transaction is refused
  like ``appendCommitRecord`` refuses it.
* **Opening an existing journal** (:meth:`JournalWriter.open`): the directory is loaded with
  :func:`amqtool.engines.artemis.load.load_journal`; files without data are re-initialised as free files with new
  fileIDs (header rewritten, body left as it is: ``addFreeFile``/``reinitializeFile``), the last data file
  becomes the current file positioned at its last data position, missing files are created up to
  ``minFiles``, one file is pre-opened, and transactions left incomplete get a ROLLBACK record appended
  (``JournalImpl.load`` with changeData). Prepared transactions stay open and may be committed or rolled
  back. ``nextFileID = max(header fileIDs, name numbers)``.

Not mirrored: the reclaimer (files whose records are all dead are not freed; the store looks like a
journal between reclaim passes, which loads the same), journal retention, compaction (``engines.compact``),
AIO itself (``alignment`` only reproduces its block-aligned data start and padded flushes).

Writes are buffered in memory (``buffer_size``, default 1 MiB) and written with ``pwrite``; ``sync`` chooses
durability: ``"append"`` fsyncs after every append (``journal-datasync`` on every record), ``"close"``
(default) fsyncs every file written and the directory once at :meth:`close`, ``"none"`` never (the caller
makes the result durable, e.g. by fsyncing a whole directory tree before renaming it into place).
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import AmqtoolError, UsageError
from amqtool.formats.artemis.records import (
    TransactionCounter,
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    EVENT,
    FORMAT_VERSION,
    HEADER_SIZE,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    FileHeader,
    file_tag,
)
from amqtool.store import atomic
from amqtool.store.layout import JournalDir, JournalSpec

# Version-2 record framings (§2.2), big-endian. Each ends with the i32 checkSize, packed separately.
_S_BASIC = struct.Struct(">Bibqi B")      # ADD / UPDATE / EVENT: type tag cc id len utype
_S_TX = struct.Struct(">Bibqqi B")        # ADD_TX / UPDATE_TX: type tag cc tx id len utype
_S_DELETE_TX = struct.Struct(">Bibqqi")   # DELETE_TX: type tag cc tx id len
_S_DELETE = struct.Struct(">Bibqi")       # DELETE: type tag cc id checkSize
_S_PREPARE = struct.Struct(">Bibqii")     # PREPARE: type tag cc tx nrec extraLen
_S_COMMIT = struct.Struct(">Bibqii")      # COMMIT: type tag cc tx nrec checkSize
_S_ROLLBACK = struct.Struct(">Bibqi")     # ROLLBACK: type tag cc tx checkSize
_I32 = struct.Struct(">i")

SYNC_MODES = ("append", "close", "none")
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16
DEFAULT_BUFFER_SIZE = 1 << 20


def fix_file_size(size: int, alignment: int) -> int:
    """``JournalStorageManager.fixJournalFileSize``: round the message-journal file size to the alignment."""
    if alignment <= 1:
        return size
    if size <= alignment:
        return alignment
    rem = size % alignment
    if rem == 0:
        return size
    return size - rem if rem < alignment // 2 else size - rem + alignment


def _align(pos: int, alignment: int) -> int:
    return pos if alignment <= 1 else (pos + alignment - 1) // alignment * alignment


def name_number(name: str, prefix: str) -> int | None:
    """The N of ``<prefix>-N.<ext>`` as ``getFileNameID`` parses it (text after the prefix up to the first
    dot, else between the last '-' and the first dot)."""
    base = name.split(".", 1)[0]
    for text in (base[len(prefix) + 1:] if name.startswith(prefix + "-") else None, base.rsplit("-", 1)[-1]):
        if text and re.fullmatch(r"-?\d+", text):
            return int(text)
    return None


@dataclass
class WriterFile:
    """One journal file the writer knows about."""

    name: str
    path: Path
    file_id: int

    @property
    def tag(self) -> int:
        return file_tag(self.file_id)


class _TxState(TransactionCounter):
    """A transaction being written: its per-file counter (keyed by fileID) and totals."""

    __slots__ = ("prepared", "records")

    def __init__(self, prepared: bool = False, records: int = 0):
        super().__init__()
        self.prepared = prepared
        self.records = records

    def inc(self, file_id: int) -> None:
        super().inc(file_id)
        self.records += 1


@dataclass
class WriterStats:
    records: int = 0
    bytes: int = 0
    files_created: int = 0
    rollovers: int = 0
    by_type: dict[int, int] = field(default_factory=dict)


class JournalWriter:
    """Appends records to one journal directory. Use :meth:`create` or :meth:`open`, then ``close()``
    (or a ``with`` block)."""

    def __init__(self, directory: str | os.PathLike, spec: JournalSpec, *, file_size: int | None = None,
                 min_files: int | None = None, user_version: int = 0, sync: str = "close",
                 buffer_size: int = DEFAULT_BUFFER_SIZE, alignment: int = 1, file_mode: int = 0o644,
                 reference_file: str | os.PathLike | None = None, writeback: bool = False,
                 write_fill: bool = True):
        if sync not in SYNC_MODES:
            raise UsageError(f"sync must be one of {', '.join(SYNC_MODES)}, not {sync!r}")
        self.directory = Path(directory)
        self.spec = spec
        self.alignment = max(1, int(alignment))
        self.file_size = fix_file_size(file_size or spec.default_file_size, self.alignment)
        self.min_files = spec.min_files if min_files is None else int(min_files)
        if self.min_files < 1:
            raise UsageError("min files must be at least 1")
        self.data_start = _align(HEADER_SIZE, self.alignment)
        if self.file_size <= self.data_start:
            raise UsageError(f"file size {self.file_size} leaves no room for records")
        self.user_version = user_version
        self.sync = sync
        self.buffer_size = max(int(buffer_size), 1)
        self.file_mode = file_mode
        self.reference_file = reference_file
        # with sync "none": start the disk writes of each file as the writer leaves it (the caller's fsync at
        # the end then waits for less; a bulk writer's disk and CPU work overlap)
        self.writeback = writeback and hasattr(os, "posix_fadvise")
        # new files zero-filled by writing (Artemis' NIO fill), or allocated (atomic.preallocate write_fill):
        # the same bytes; a writer of a tree fsynced before it is switched in need not write the zeros
        self.write_fill = write_fill
        self.stats = WriterStats()

        self.data_files: list[WriterFile] = []
        self.free_files: list[WriterFile] = []
        self.opened_file: WriterFile | None = None
        self.current: WriterFile | None = None
        self.next_file_id = 0
        self._fd = -1
        self._pos = 0  # position of the next record in the current file (buffer included)
        self._buf = bytearray()
        self._buf_start = 0
        self._dirty: set[str] = set()  # paths written since the last fsync
        self._txs: dict[int, _TxState] = {}
        self._closed = False

    # --- construction ----------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str | os.PathLike, spec: JournalSpec, **kwargs) -> "JournalWriter":
        """Start a brand-new journal in ``directory`` (created if missing), as Artemis does on first start.
        Refuses a directory that already holds files of this journal (or their ``.tmp``/``.cmp``)."""
        w = cls(directory, spec, **kwargs)
        w.directory.mkdir(parents=True, exist_ok=True)
        ext = "." + spec.extension
        existing = [n for n in os.listdir(w.directory)
                    if n.startswith(spec.prefix + "-") and (n.endswith(ext) or ext + "." in n)]
        if existing:
            raise UsageError(f"directory already holds journal files ({sorted(existing)[0]}, ...); "
                             f"open it to append instead", path=str(w.directory))
        w._set_up_current(last_data_pos=None)
        return w

    @classmethod
    def open(cls, directory: str | os.PathLike, spec: JournalSpec, *, rollback_incomplete: bool = True,
             **kwargs) -> "JournalWriter":
        """Continue an existing journal exactly where Artemis would append after loading it."""
        from amqtool.engines.artemis.load import load_journal
        from amqtool.store.journal_files import open_journal

        w = cls(directory, spec, **kwargs)
        jd = JournalDir(spec, w.directory)
        with open_journal(jd, user_version=w.user_version) as opened:
            if opened.control is not None or any(p.code.startswith("control-file") for p in opened.pending):
                raise AmqtoolError("journal has an interrupted compaction (journal-rename-control.ctr); "
                                   "let the broker or `amqtool compact` finish it first", path=str(w.directory))
            if opened.skipped:
                s = opened.skipped[0]
                raise AmqtoolError(f"Artemis would refuse to load this journal: {s.message}", path=s.path)
            result = load_journal(opened)
            # nextFileID = max(header fileID, name number) over the ordered files (calculateNextfileID)
            nid = 0
            for f in opened.files:
                nid = max(nid, f.file_id, name_number(f.name, spec.prefix) or 0)
            w.next_file_id = nid
            last_data_pos = None
            for scan in result.scans:
                jf = scan.file
                wf = WriterFile(jf.name, w.directory / jf.name, jf.file_id)
                if jf.path != wf.path:
                    raise AmqtoolError("journal has files pending a rename; let the broker finish it",
                                       path=str(jf.path))
                if scan.has_data:
                    w.data_files.append(wf)
                    last_data_pos = scan.last_data_pos
                elif jf.size != w.file_size:
                    raise AmqtoolError(f"empty journal file of {jf.size} bytes, expected {w.file_size} "
                                       f"(Artemis would move it to the attic)", path=str(jf.path))
                else:
                    w._reinitialize(wf)
                    w.free_files.append(wf)
            # Transactions still open after the load: prepared ones keep their counter for the file of
            # their last record; incomplete ones are rolled back below, as JournalImpl.load does.
            index_to_id = [f.file_id for f in opened.files]
            incomplete = []
            for tx in result.prepared:
                st = _TxState(prepared=True, records=len(tx.records) + len(tx.records_to_delete))
                if tx.prepare_location is not None:
                    pf = index_to_id[tx.prepare_location[0]]
                    st.last_file = pf
                    st.counter = sum(1 for r in tx.records + tx.records_to_delete
                                     if index_to_id[r.file_index] == pf)
                w._txs[tx.tx_id] = st
            for tx in result.failed:
                w._txs[tx.tx_id] = _TxState(records=len(tx.records) + len(tx.records_to_delete))
                incomplete.append(tx.tx_id)
        w._set_up_current(last_data_pos)
        if rollback_incomplete:
            for tx_id in incomplete:
                w.rollback(tx_id)
        return w

    def _file(self, file_id: int) -> WriterFile:
        name = self.spec.file_name(file_id)
        return WriterFile(name, self.directory / name, file_id)

    def _header(self, file_id: int) -> bytes:
        return FileHeader(FORMAT_VERSION, self.user_version, file_id).encode()

    def _create_file(self) -> WriterFile:
        """createFile0: ``<name>.tmp``, zero fill, header, rename."""
        self.next_file_id += 1
        wf = self._file(self.next_file_id)
        if wf.path.exists():
            raise AmqtoolError("journal file already exists; refusing to overwrite it", path=str(wf.path))
        tmp = wf.path.with_name(wf.name + ".tmp")
        durable = self.sync != "none"
        atomic.preallocate(tmp, self.file_size, header=self._header(wf.file_id), mode=self.file_mode,
                           sync=durable, exclusive=False, write_fill=self.write_fill)
        if self.reference_file is not None:
            atomic.copy_owner_and_mode(self.reference_file, tmp)
        atomic.rename(tmp, wf.path, sync_dir=durable)
        self.stats.files_created += 1
        return wf

    def _reinitialize(self, wf: WriterFile) -> None:
        """reinitializeFile: a new fileID in the header; the old body stays (its tag no longer matches)."""
        self.next_file_id += 1
        wf.file_id = self.next_file_id
        fd = os.open(wf.path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, self._header(wf.file_id), 0)
            if self.sync != "none":
                atomic.fsync(fd, wf.path)
        finally:
            os.close(fd)

    def _take_file(self) -> WriterFile:
        if self.free_files:
            return self.free_files.pop(0)
        return self._create_file()

    def _set_up_current(self, last_data_pos: int | None) -> None:
        # ensureMinFiles
        for _ in range(self.min_files - (len(self.data_files) + len(self.free_files))):
            self.free_files.append(self._create_file())
        if self.data_files:
            self.current = self.data_files.pop()
            pos = _align(last_data_pos if last_data_pos is not None else HEADER_SIZE, self.alignment)
        else:
            self.current = self.free_files.pop(0)
            pos = self.data_start
        self._open_current(pos)
        self.opened_file = self._take_file()  # pushOpenedFile

    def _open_current(self, pos: int) -> None:
        self._fd = os.open(self.current.path, os.O_WRONLY | os.O_CLOEXEC)
        self._pos = pos
        self._buf_start = pos
        self._buf = bytearray()

    # --- buffering -------------------------------------------------------------------------------------

    def _flush_buffer(self) -> None:
        if self._buf:
            atomic.checkpoint("write", self.current.path)
            view = memoryview(self._buf)
            off = self._buf_start
            while view:
                n = os.pwrite(self._fd, view, off)
                view = view[n:]
                off += n
            self._dirty.add(str(self.current.path))
            self._buf = bytearray()
        self._buf_start = self._pos

    def flush(self) -> None:
        """Write buffered records to the file (no fsync). With an alignment, pad to the next block, as an
        AIO flush does."""
        self._flush_buffer()
        if self.alignment > 1:
            padded = _align(self._pos, self.alignment)
            if padded <= self.file_size:
                self._pos = self._buf_start = padded

    def sync_now(self) -> None:
        """Flush and fsync every file written since the last sync."""
        self.flush()
        for p in sorted(self._dirty):
            if p == str(self.current.path):
                atomic.fsync(self._fd, p)
            else:
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    atomic.fsync(fd, p)
                finally:
                    os.close(fd)
        self._dirty.clear()

    def _move_next_file(self) -> None:
        self._flush_buffer()
        if self.sync == "append":
            self.sync_now()
        elif self.writeback:
            # POSIX_FADV_DONTNEED starts the writeback of the file's dirty pages without waiting for it (Linux
            # mm/fadvise.c) and drops its clean pages: the file is done with
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)
        fd, self._fd = self._fd, -1  # forgotten first: see OpenedJournal.close
        os.close(fd)
        self.data_files.append(self.current)
        self.current = self.opened_file
        self._open_current(self.data_start)
        self.opened_file = self._take_file()
        self.stats.rollovers += 1

    def _reserve(self, size: int) -> None:
        """switchFileIfNecessary: roll over when the record does not fit in the current file."""
        if self._closed:
            raise UsageError("journal writer is closed")
        if size > self.file_size - self.data_start:
            raise UsageError(f"record of {size} bytes is too large for journal files of {self.file_size} bytes")
        if self._pos + size > self.file_size:
            self._move_next_file()

    def _put(self, rec: bytes, rtype: int) -> None:
        self._buf += rec
        self._pos += len(rec)
        st = self.stats
        st.records += 1
        st.bytes += len(rec)
        st.by_type[rtype] = st.by_type.get(rtype, 0) + 1
        if self.sync == "append":
            self.sync_now()
        elif len(self._buf) >= self.buffer_size:
            self._flush_buffer()

    # --- appends ---------------------------------------------------------------------------------------

    @property
    def position(self) -> tuple[str, int]:
        """(current file name, offset of the next record)."""
        return self.current.name, self._pos

    def _basic(self, rtype: int, record_id: int, user_type: int, body: bytes, cc: int) -> None:
        size = 23 + len(body)
        self._reserve(size)
        self._put(b"".join((_S_BASIC.pack(rtype, self.current.tag, cc, record_id, len(body), user_type),
                            body, _I32.pack(size))), rtype)

    def append_add(self, record_id: int, user_type: int, body: bytes, *, compact_count: int = 0) -> None:
        self._basic(ADD, record_id, user_type, body, compact_count)

    def append_update(self, record_id: int, user_type: int, body: bytes, *, compact_count: int = 0) -> None:
        self._basic(UPDATE, record_id, user_type, body, compact_count)

    def append_records(self, records) -> None:
        """Append plain ADD/UPDATE records, ``(record type ADD or UPDATE, record id, user record type, body)``
        in order, compact count 0: the bytes, rollovers and stats of :meth:`append_add`/:meth:`append_update`
        called one by one, with less work per record (a bulk writer's path: ``create --from``). The records go
        to the file with ``pwritev`` from the callers' buffers, not copied into the write buffer."""
        if self.sync == "append":
            for rtype, record_id, user_type, body in records:
                self._basic(rtype, record_id, user_type, body, 0)
            return
        if self._closed:
            raise UsageError("journal writer is closed")
        self._flush_buffer()  # what is buffered goes first; then self._buf_start == self._pos
        pack, ipack = _S_BASIC.pack, _I32.pack
        file_size, limit = self.file_size, self.file_size - self.data_start
        by_type = self.stats.by_type
        parts: list = []
        size_of_parts = count = nbytes = 0
        tag = self.current.tag
        try:
            for rtype, record_id, user_type, body in records:
                size = 23 + len(body)
                if self._pos + size_of_parts + size > file_size:
                    if size > limit:
                        raise UsageError(f"record of {size} bytes is too large for journal files of {file_size} bytes")
                    self._write_parts(parts, size_of_parts)
                    parts, size_of_parts = [], 0
                    self._move_next_file()
                    tag = self.current.tag
                parts += (pack(rtype, tag, 0, record_id, len(body), user_type), body, ipack(size))
                size_of_parts += size
                count += 1
                nbytes += size
                by_type[rtype] = by_type.get(rtype, 0) + 1
                if len(parts) >= _IOV_MAX - 2 or size_of_parts >= self.buffer_size:
                    self._write_parts(parts, size_of_parts)
                    parts, size_of_parts = [], 0
        finally:
            self.stats.records += count
            self.stats.bytes += nbytes
            self._write_parts(parts, size_of_parts)

    def _write_parts(self, parts: list, nbytes: int) -> None:
        """Write ``parts`` (``nbytes`` in all) at the current position, with nothing buffered before them."""
        if not parts:
            return
        atomic.checkpoint("write", self.current.path)
        off = self._pos
        done = os.pwritev(self._fd, parts, off)
        if done < nbytes:  # a short write: the rest, joined
            rest = memoryview(b"".join(parts))[done:]
            off += done
            while rest:
                n = os.pwrite(self._fd, rest, off)
                rest = rest[n:]
                off += n
        self._dirty.add(str(self.current.path))
        self._pos += nbytes
        self._buf_start = self._pos

    def append_event(self, record_id: int, user_type: int, body: bytes) -> None:
        self._basic(EVENT, record_id, user_type, body, 0)

    def append_delete(self, record_id: int) -> None:
        self._reserve(18)
        self._put(_S_DELETE.pack(DELETE, self.current.tag, 0, record_id, 18), DELETE)

    def _tx(self, tx_id: int) -> _TxState:
        st = self._txs.get(tx_id)
        if st is None:
            st = self._txs[tx_id] = _TxState()
        return st

    def _tx_record(self, rtype: int, tx_id: int, record_id: int, user_type: int, body: bytes, cc: int) -> None:
        size = 31 + len(body)
        self._reserve(size)
        self._put(b"".join((_S_TX.pack(rtype, self.current.tag, cc, tx_id, record_id, len(body), user_type),
                            body, _I32.pack(size))), rtype)
        self._tx(tx_id).inc(self.current.file_id)

    def append_add_tx(self, tx_id: int, record_id: int, user_type: int, body: bytes, *,
                      compact_count: int = 0) -> None:
        self._tx_record(ADD_TX, tx_id, record_id, user_type, body, compact_count)

    def append_update_tx(self, tx_id: int, record_id: int, user_type: int, body: bytes, *,
                         compact_count: int = 0) -> None:
        self._tx_record(UPDATE_TX, tx_id, record_id, user_type, body, compact_count)

    def append_delete_tx(self, tx_id: int, record_id: int, body: bytes = b"") -> None:
        size = 30 + len(body)
        self._reserve(size)
        self._put(b"".join((_S_DELETE_TX.pack(DELETE_TX, self.current.tag, 0, tx_id, record_id, len(body)),
                            body, _I32.pack(size))), DELETE_TX)
        self._tx(tx_id).inc(self.current.file_id)

    def _known_tx(self, tx_id: int, what: str) -> _TxState:
        st = self._txs.get(tx_id)
        if st is None:
            raise UsageError(f"cannot {what} transaction {tx_id}: no record of it in this journal")
        return st

    def append_prepare(self, tx_id: int, extra: bytes = b"") -> None:
        """PREPARE with the transaction's counter for the prepare's file. A transaction with no records may
        be prepared (Artemis allows empty prepared transactions)."""
        size = 26 + len(extra)
        self._reserve(size)
        st = self._tx(tx_id)
        nrec = st.counter_for(self.current.file_id)
        st.prepared = True
        self._put(b"".join((_S_PREPARE.pack(PREPARE, self.current.tag, 0, tx_id, nrec, len(extra)),
                            extra, _I32.pack(size))), PREPARE)

    def append_commit(self, tx_id: int) -> None:
        st = self._known_tx(tx_id, "commit")
        self._reserve(22)
        nrec = st.counter_for(self.current.file_id)
        self._put(_S_COMMIT.pack(COMMIT, self.current.tag, 0, tx_id, nrec, 22), COMMIT)
        del self._txs[tx_id]

    def append_rollback(self, tx_id: int) -> None:
        self._known_tx(tx_id, "roll back")
        self._reserve(18)
        self._put(_S_ROLLBACK.pack(ROLLBACK, self.current.tag, 0, tx_id, 18), ROLLBACK)
        del self._txs[tx_id]

    # short names
    add = append_add
    update = append_update
    delete = append_delete
    event = append_event
    add_tx = append_add_tx
    update_tx = append_update_tx
    delete_tx = append_delete_tx
    prepare = append_prepare
    commit = append_commit
    rollback = append_rollback

    @property
    def open_transactions(self) -> dict[int, bool]:
        """tx id -> prepared, for transactions not yet committed or rolled back."""
        return {k: v.prepared for k, v in self._txs.items()}

    def files(self) -> list[WriterFile]:
        """Every file of the journal, in header-fileID order."""
        allf = list(self.data_files)
        if self.current is not None:
            allf.append(self.current)
        if self.opened_file is not None:
            allf.append(self.opened_file)
        allf += self.free_files
        return sorted(allf, key=lambda f: f.file_id)

    # --- end -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Write what is buffered; with ``sync="close"`` (or ``"append"``) fsync the files and directory."""
        if self._closed:
            return
        try:
            self._flush_buffer()
            if self.sync != "none":
                self.sync_now()
                atomic.fsync_dir(self.directory)
        finally:
            fd, self._fd = self._fd, -1  # forgotten first: see OpenedJournal.close
            if fd >= 0:
                os.close(fd)
            self._closed = True

    def abort(self) -> None:
        """Close without writing the buffer (what a crash would leave, minus the OS cache)."""
        fd, self._fd = self._fd, -1  # forgotten first: see OpenedJournal.close
        if fd >= 0:
            os.close(fd)
        self._buf = bytearray()
        self._closed = True

    def __enter__(self) -> "JournalWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif issubclass(exc_type, atomic.InjectedFault):
            self.abort()
        else:
            self.close()
