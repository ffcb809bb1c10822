"""Loading a KahaDB store: scan every journal file, replay it, read the index beside it.

One pass over each directory's journal gives batch integrity (checksums, corrupted ranges, logical ends),
record integrity (tiling, command decoding) and the replayed live state; db.data is read for page 0 and
the per-destination journal files it still references. mKahaDB: every sub-store is loaded, then the
``txStore`` COMMIT records resolve the child stores' prepared cross-store transactions
(MultiKahaDBTransactionStore recovery).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amqtool.errors import FormatError
from amqtool.formats.kahadb.commands import EntryType, decode_command
from amqtool.engines.kahadb.replay import Replay, Transaction
from amqtool.engines.kahadb.scan import FileScan, IndexState, JournalFile, iter_file, journal_files, load_index, mapped


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

    @property
    def file_ids(self) -> set[int]:
        return {f.id for f in self.files}

    def file(self, fid: int) -> JournalFile | None:
        for f in self.files:
            if f.id == fid:
                return f
        return None


def load_directory(directory: Path, *, progress: Callable[[int], None] | None = None,
                   checksums: bool = True) -> DirResult:
    files = journal_files(directory)
    res = DirResult(directory, files, is_tx_store=directory.name == "txStore")
    res.index = load_index(directory)
    meta = res.index.view.metadata if res.index.view else None
    last_update = (meta.last_update.log_id, meta.last_update.offset) if meta and meta.last_update else None
    if meta is not None and last_update is None:
        last_update = (-1, -1)  # never checkpointed: the broker replays the whole journal (§3.4)
    rp = res.replay = Replay({f.id for f in files})
    for f in files:
        scan = FileScan(f)
        res.scans[f.id] = scan
        with mapped(f.path) as buf:
            for rec in iter_file(f, buf, scan, checksums=checksums):
                loc = (f.id, rec.offset)
                res.records += 1
                res.last_record = loc
                if last_update is not None and loc > last_update:
                    if res.records_after_last_update == 0:
                        res.replay_start = loc
                    res.records_after_last_update += 1
                try:
                    cmd = decode_command(rec.payload)
                except FormatError as err:
                    res.decode_errors.append((f.id, rec.offset, err.message))
                    continue
                finally:
                    rec.payload.release()
                if cmd.unknown:
                    res.unknown_fields.append((f.id, rec.offset, cmd.type.name, list(cmd.unknown)))
                rp.apply(f.id, rec.offset, rec.length, cmd)
                if cmd.type is EntryType.ADD_MESSAGE or cmd.type is EntryType.REMOVE_MESSAGE:
                    # drop the memoryviews into the map before it is closed
                    cmd.message = b""
                    cmd.ack = None
        res.bytes_scanned += f.size
        if progress is not None:
            progress(f.size)
    res.open_transactions = rp.finish()
    return res


def load_store(store, *, progress=None, checksums: bool = True) -> list[DirResult]:
    results = [load_directory(Path(d), progress=progress, checksums=checksums) for d in store.directories]
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
    return results
