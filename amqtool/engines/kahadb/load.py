"""Loading a KahaDB store: scan every journal file, replay it, read the index beside it.

One pass over each directory's journal gives batch integrity (checksums, corrupted ranges, logical ends),
record integrity (tiling, command decoding) and the replayed live state; db.data is read for page 0 and
the per-destination journal files it still references. mKahaDB: every sub-store is loaded, then the
``txStore`` COMMIT records resolve the child stores' prepared cross-store transactions
(MultiKahaDBTransactionStore recovery).

Two implementations of the per-file loop give identical results: the Python one below (the reference, used
when the extension is not built or ``AMQTOOL_NO_NATIVE=1``) and ``amqtool._native.kahadb_scan_file``
(native/kahadb_scan.c), which scans batches, checks Adler-32 and applies plain ADD/REMOVE, subscription
and checkpoint records in C and calls back here (:func:`_apply_record`) for every other record.
"""
from __future__ import annotations

import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command, decode_destination
from amqtool.engines.kahadb.replay import Replay, Subscription, Transaction
from amqtool.engines.kahadb.scan import (
    FileScan,
    IndexState,
    JournalFile,
    hidden_after_zero_batch,
    iter_file,
    journal_files,
    load_index,
    mapped,
)


@dataclass
class DirResult:
    directory: Path
    files: list[JournalFile]
    scans: dict = field(default_factory=dict)  # file id -> FileScan
    index: IndexState | None = None
    replay: Replay | None = None
    open_transactions: list[Transaction] = field(default_factory=list)
    decode_errors: list = field(default_factory=list)  # (file id, offset, message)
    unknown_fields: list = field(default_factory=list)  # (file id, offset, type name, [(field, wt)])
    records: int = 0
    bytes_scanned: int = 0
    records_after_last_update: int = 0
    replay_start: tuple | None = None  # first user record after lastUpdate (Recovering from the journal @...)
    last_record: tuple | None = None
    is_tx_store: bool = False
    committed_by_tx_store: int = 0
    # db.data's order indexes and subscription cursors (indexed.read_indexed), or why they do not read
    indexed: dict | None = None
    indexed_error: str | None = None
    # what the index knows acknowledged but the replay alone would keep (indexed.reconcile): taken out of
    # the replay; a rebuild of the index from the journal would bring it back
    rebuild_extra: list = field(default_factory=list)
    # (destination key, message id) of the sends after an ack compaction file's marker that the replay skipped
    # and the index holds (put back into the replay by _restore_skipped): only a rebuild would lose them
    skip_restored: list = field(default_factory=list)

    def damage(self) -> int:
        """Batches whose checksum or framing fails and records that do not decode: what the replay could not
        see (the broker skips the same). Compaction refuses, export and migration report it."""
        return sum(len(s.corrupt) + len(s.bad_records) + (s.hidden is not None) for s in self.scans.values()) \
            + len(self.decode_errors)

    def torn_tail(self):
        """The corrupt range the newest file ends with, when it is what a crash mid-write leaves, else None:
        a batch cut short by the end of the file, or one whose checksum or framing fails with no batch after
        it (a preallocated file: the torn write is followed by its zero fill) that starts past the index
        checkpoint ``lastUpdate``, so no record the index was written from lies in it. The broker's
        ``Journal.recoveryCheck`` appends from its start (``scan_file``'s logical end), overwriting it."""
        if not self.files:
            return None
        f = self.files[-1]
        scan = self.scans.get(f.id)
        tail = scan.corrupt[-1] if scan is not None and scan.corrupt else None
        if tail is None or not tail.to_eof:
            return None
        if tail.reason == "truncated":
            return tail
        view = self.index.view if self.index else None
        if view is None:
            return None
        lu = view.metadata.last_update  # (None: no checkpoint yet, every record is replayed)
        if lu is not None and (f.id, tail.first) <= (lu.log_id, lu.offset):
            return None
        return None if _written_after(f.path, tail.first) else tail

    def damage_text(self) -> str:
        return (f"{self.directory}: {self.damage()} damaged batch(es) or record(s) in the journal; what they held "
                f"is not in the replay (run 'amqtool verify' for where)")

    @property
    def file_ids(self) -> set[int]:
        return {f.id for f in self.files}

    def file(self, fid: int) -> JournalFile | None:
        for f in self.files:
            if f.id == fid:
                return f
        return None


def load_directory(directory: Path, *, progress: Callable[[int], None] | None = None,
                   checksums: bool = True, use_native: bool | None = None,
                   drop_transactions: frozenset = frozenset(), skip_rewritten: bool = True) -> DirResult:
    """Scan, replay and index-read one store directory. ``use_native``: None = the C loop when built.
    ``drop_transactions`` (transaction keys): never committed (``recover``: they lost records).
    ``skip_rewritten=False``: an ack compaction file's marker never skips the rest of its file (what the
    running broker's index applied, rebuild_skips.py), where the broker's replay does."""
    files = journal_files(directory)
    res = DirResult(directory, files, is_tx_store=directory.name == "txStore")
    res.index = load_index(directory)
    meta = res.index.view.metadata if res.index.view else None
    last_update = (meta.last_update.log_id, meta.last_update.offset) if meta and meta.last_update else None
    if meta is not None and last_update is None:
        last_update = (-1, -1)  # never checkpointed: the broker replays the whole journal (§3.4)
    rp = res.replay = Replay({f.id for f in files} if skip_rewritten else set(), drop_transactions)
    c_scan = native.kahadb_scan_file if use_native is not False else None
    if use_native and c_scan is None:
        raise RuntimeError(f"the C KahaDB scanner is not available: {native.NATIVE_REASON or 'not built'}")
    check = native.kahadb_check_batches if c_scan is not None and checksums and len(files) > 1 else None
    for f, buf, verified in _mapped_files(files, check):
        scan = FileScan(f)
        res.scans[f.id] = scan
        if c_scan is not None:
            _load_file_native(c_scan, res, f, buf, scan, last_update, checksums, verified)
        else:
            _load_file_python(res, f, buf, scan, last_update, checksums)
        scan.hidden = hidden_after_zero_batch(buf, scan.end)
        res.bytes_scanned += f.size
        if progress is not None:
            progress(f.size)
    rp.materialize()
    res.open_transactions = rp.finish()
    return res


def _mapped_files(files: list[JournalFile], check) -> Iterator[tuple]:
    """``(file, map, verified)`` in id order. With ``check`` (the C checksum pass, which runs without the
    GIL) each file's Adler-32 pass runs in a worker thread while the previous file is replayed, and
    ``verified`` is the end of its leading run of checked-good batches; otherwise ``verified`` is 0."""
    if check is None:
        for f in files:
            with mapped(f.path) as buf:
                yield f, buf, 0
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kahadb-adler32")
    opened: list = []  # (context manager, map, future) of the current and the next file

    def start(f: JournalFile) -> None:
        cm = mapped(f.path)
        buf = cm.__enter__()
        fut = None
        if len(buf):
            # The scan holds the GIL for a whole file (it calls back into Python), so a worker that has not
            # yet reached the GIL-free check would wait for it: the two passes would run one after the
            # other. Wait until the worker is about to enter the check (measured: 0.34 s -> 0.26 s a GiB).
            entered = threading.Event()

            def run(buf=buf, entered=entered):
                entered.set()
                return check(buf)

            fut = pool.submit(run)
            entered.wait()
        opened.append((cm, buf, fut))

    try:
        start(files[0])
        for i, f in enumerate(files):
            cm, buf, fut = opened[0]
            verified = fut.result() if fut is not None else 0
            if i + 1 < len(files):
                start(files[i + 1])
            yield f, buf, verified
            opened.pop(0)
            cm.__exit__(None, None, None)
    finally:
        for cm, _buf, fut in opened:
            if fut is not None:
                fut.cancel()
                try:
                    fut.result()
                except (CancelledError, Exception):  # noqa: BLE001 - only waiting for the worker to let go
                    pass
            cm.__exit__(None, None, None)
        pool.shutdown(wait=True)


def _apply_record(res: DirResult, fid: int, offset: int, length: int, payload) -> None:
    """Decode one record's command and apply it (the whole per-record rule set of the Python loop)."""
    try:
        cmd = decode_command(payload)
    except FormatError as err:
        res.decode_errors.append((fid, offset, err.message))
        return
    finally:
        payload.release()
    if cmd.unknown:
        res.unknown_fields.append((fid, offset, cmd.type.name, list(cmd.unknown)))
    res.replay.apply(fid, offset, length, cmd)
    if cmd.type is EntryType.ADD_MESSAGE or cmd.type is EntryType.REMOVE_MESSAGE:
        # drop the memoryviews into the map before it is closed
        cmd.message = b""
        cmd.ack = None


def _load_file_python(res: DirResult, f: JournalFile, buf, scan: FileScan, last_update, checksums: bool) -> None:
    for rec in iter_file(f, buf, scan, checksums=checksums):
        loc = (f.id, rec.offset)
        res.records += 1
        res.last_record = loc
        if last_update is not None and loc > last_update:
            if res.records_after_last_update == 0:
                res.replay_start = loc
            res.records_after_last_update += 1
        _apply_record(res, f.id, rec.offset, rec.length, rec.payload)


def _resolve_destination(raw: bytes):
    try:
        d = decode_destination(raw)
    except FormatError:
        return None
    return d.key, d.type


_ENTRY_NAMES = [EntryType(i).name for i in range(len(EntryType))]


def _load_file_native(c_scan, res: DirResult, f: JournalFile, buf, scan: FileScan, last_update,
                      checksums: bool, verified: int = 0) -> None:
    rp = res.replay
    fid = f.id
    mv = memoryview(buf)

    def slow(offset: int, length: int) -> bool:
        _apply_record(res, fid, offset, length, mv[offset + jr.RECORD_HEAD_SPACE:offset + length])
        return rp.skip_file == fid

    def ensure(raw: bytes):
        return rp._dest(decode_destination(raw))

    try:
        (batches, data_bytes, records, corrupt, bad, end, counts, after, first_after, last_offset,
         unknown_removes, last_audit, last_ack, ack_blob) = c_scan(buf, fid, checksums, last_update, (rp.destinations, _resolve_destination,
                                                                      ensure, slow, Subscription), verified)
    finally:
        mv.release()
    scan.batches += batches
    scan.data_bytes += data_bytes
    scan.records += records
    scan.corrupt.extend(jr.CorruptRange(*c) for c in corrupt)
    for code, pos, boff, bend, value in bad:
        scan.bad_records.append((pos, jr.tiling_error(code, pos, boff, bend, value).message))
    scan.end = jr.End(*end)
    res.records += records
    if last_offset >= 0:
        res.last_record = (fid, last_offset)
    if after:
        if res.records_after_last_update == 0:
            res.replay_start = (fid, first_after)
        res.records_after_last_update += after
    for t, n in enumerate(counts):
        if n:
            name = _ENTRY_NAMES[t]
            rp.counts[name] = rp.counts.get(name, 0) + n
    rp.unknown_removes += unknown_removes
    # The newest of the fast path's and the slow path's checkpoint records of this file wins.
    if last_audit >= 0 and (rp.last_audit is None or (fid, last_audit) > rp.last_audit):
        rp.last_audit = (fid, last_audit)
    if last_ack >= 0 and (rp.last_ack_map is None or (fid, last_ack) > rp.last_ack_map):
        rp.last_ack_map = (fid, last_ack)
        rp.last_ack_map_blob = ack_blob


def load_store(store, *, progress=None, checksums: bool = True, use_native: bool | None = None,
               drop_transactions: frozenset = frozenset(), reconcile: bool = True) -> list[DirResult]:
    """Load every directory of ``store``. ``reconcile`` (the default): then take out of each replay what the
    index knows acknowledged (:func:`_reconcile`); without it the replay is what a rebuild of the index from
    the journal gives (call :func:`reconcile_results` later to get the default)."""
    results = [load_directory(Path(d), progress=progress, checksums=checksums, use_native=use_native,
                              drop_transactions=drop_transactions)
               for d in store.directories]
    if store.multi:
        tx_stores = [r for r in results if r.is_tx_store]
        children = [r for r in results if not r.is_tx_store]
        for txr in tx_stores:
            for tx in txr.replay.finished:
                if tx.state != "committed":
                    continue
                for child in children:
                    if child.replay.commit_prepared(tx.id.key):
                        child.committed_by_tx_store += 1
        for child in children:
            child.open_transactions = child.replay.finish()
    from amqtool.engines.kahadb.last_acks import hand_from_last_ack

    for d in results:
        if not d.is_tx_store:
            # what the broker hands each durable subscription from its LastAck on (last_acks.py); selectors
            # and messages decode with the index's OpenWire version (11 without one)
            view = d.index.view if d.index else None
            hand_from_last_ack(d, view.metadata.openwire_version if view else 11)
    if reconcile:
        reconcile_results(store, results)
    return results


def reconcile_results(store, results: list[DirResult]) -> None:
    for d in results:
        _reconcile(d, multi=store.multi)


def _reconcile(d: DirResult, *, multi: bool) -> None:
    """Read the order indexes of db.data and take out of the replay what they know acknowledged."""
    from amqtool.engines.kahadb.damage import checkpoint_moved
    from amqtool.engines.kahadb.indexed import read_indexed, reconcile

    view = d.index.view if d.index else None
    if view is None or d.is_tx_store:
        return
    d.indexed, d.indexed_error = read_indexed(d.directory)
    lu = view.metadata.last_update
    if d.indexed is None or lu is None:
        return
    if multi:
        # a child's transaction committed through txStore may not be in the child's index yet; one the child's
        # own COMMIT record at or before the checkpoint committed is (process(KahaCommitCommand) updated the
        # index before lastUpdate moved past it): a message of it the index lacks was acknowledged
        settled = {str(t.id) for t in d.replay.finished
                   if t.committed_at is not None and t.committed_at <= (lu.log_id, lu.offset)}
        keep = {}
        for key, st in d.replay.destinations.items():
            for mid, m in st.messages.items():
                if m.transaction is not None and m.transaction not in settled:
                    keep.setdefault(key, {})[mid] = m
    # (files swapped: the replay's locations as the index knew them, damage.checkpoint_moved)
    d.rebuild_extra = reconcile(d, d.indexed, (lu.log_id, lu.offset), checkpoint_moved(d))
    if multi:
        back = [x for x in d.rebuild_extra if x[2] in keep.get(x[0], {})]
        for key, sub, mid, _loc in back:
            st = d.replay.destinations[key]
            m = st.messages.setdefault(mid, keep[key][mid])
            if sub is not None:
                m.waiting.add(sub)
        d.rebuild_extra = [x for x in d.rebuild_extra if x not in back]
    _restore_skipped(d)


def _restore_skipped(d: DirResult) -> None:
    """Put back into the replay the queue messages it skipped after an ack compaction file's marker
    (``process(KahaRewrittenDataFileCommand)``: the rest of the file while the source file is there) that the
    index holds: a broker stopped with its compaction file the newest writes the next run's records there, and
    the running broker indexed them as it wrote them (rebuild_skips.py). The broker with this index delivers
    them; only a rebuild of the index would lose them. (Topic messages are left as the replay has them.)"""
    if d.replay.skip_file is None or not d.replay.skipped_records or not d.indexed:
        return
    full = load_directory(d.directory, skip_rewritten=False).replay
    for key, dest in d.indexed.items():
        st, src = d.replay.destinations.get(key), full.destinations.get(key)
        if src is None or (st is not None and st.destination.type in (1, 3)):
            continue
        for m in dest.messages:
            fm = src.messages.get(m.message_id)
            if fm is not None and fm.waiting is None and (st is None or m.message_id not in st.messages):
                d.replay._dest(src.destination).messages[m.message_id] = fm
                d.skip_restored.append((key, m.message_id))
    for key in {key for key, _mid in d.skip_restored}:
        st = d.replay.destinations[key]  # (in journal order again: the skipped file is older than what follows)
        st.messages = dict(sorted(st.messages.items(), key=lambda kv: (kv[1].file_id, kv[1].offset)))


def _written_after(path: Path, first: int) -> bool:
    """The newest file at ``path`` holds bytes written after the batch at ``first`` that fails: its last write was
    not torn there. ``DataFileAppender`` writes each batch with the end marker after it in one write over the
    preallocated zeros (``Journal.EOF_RECORD``), so a crash mid-write leaves, past the batch and that marker,
    only zeros (and the marker sparse preallocation puts in the file's last five bytes). Only a batch whose
    control record and record headers still agree on where it ends (its 'WRITE BATCH' header intact, its records
    tiling its declared size exactly) tells where that is: damage that hit them is judged as torn, as before."""
    import struct

    try:
        buf = path.read_bytes()
    except OSError:
        return False
    start = first + jr.BATCH_CONTROL_RECORD_SIZE
    if start > len(buf) or bytes(buf[first:first + len(jr.BATCH_CONTROL_RECORD_HEADER)]) \
            != jr.BATCH_CONTROL_RECORD_HEADER:
        return False
    size = struct.unpack_from(">i", buf, first + 16)[0]
    end = start + size
    if size <= 0 or end > len(buf):
        return False
    pos = start
    while pos + jr.RECORD_HEAD_SPACE <= end:
        length = struct.unpack_from(">i", buf, pos)[0]
        if length < jr.RECORD_HEAD_SPACE:
            return False
        pos += length
    if pos != end:
        return False
    rest = bytes(buf[end:])
    if rest.startswith(jr.EOF_RECORD):
        rest = rest[len(jr.EOF_RECORD):]
    if rest.endswith(jr.EOF_RECORD):
        rest = rest[:-len(jr.EOF_RECORD)]
    return bool(rest.strip(b"\0"))
