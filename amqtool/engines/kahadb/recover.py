"""``recover`` for KahaDB and mKahaDB stores: the live state that the intact batches give, written as a new
store at DEST, and every command of the damaged batches listed.

The broker's journal reader (``Journal.recoveryCheck`` / ``DataFileAccessor``) checks each write batch: the
control record's magic, its size, that it fits in the file, and, with ``checksumJournalFiles``, its Adler-32
(kahadb-format.md §3.1). A batch that fails is a corrupted range; the broker either refuses to start
(``checkForCorruptJournalFiles`` with ``ignoreMissingJournalfiles=false``) or skips the range and drops the
messages the index still points into it (§3.3). Here:

* every batch that fails is skipped whole (never half-applied) by the same scan
  (:func:`amqtool.engines.kahadb.load.load_store`), and the live state is the replay of the rest, by the
  broker's own recovery rules (:mod:`amqtool.engines.kahadb.replay`);
* a journal file the index still references but that is gone is listed (``verify``'s
  ``kahadb-missing-journal-file``): its messages are not in the replay, so not in DEST;
* a transaction one of whose commands was in a skipped batch is left out whole (its COMMIT replayed as a
  ROLLBACK, :class:`~amqtool.engines.kahadb.replay.Replay`'s ``drop_transactions``): the broker would
  commit what is left of it;
* the skipped ranges are read back leniently: when the control record is intact, each user record of the
  batch is decoded where it can be (command, message id, destination, transaction) and listed; otherwise the
  range is listed by file, offset and length. An ack (REMOVE) that is lost brings its message back: it is
  listed with its message id so the operator knows a duplicate may be delivered;
* the live state is written by the compactor's writer (:mod:`amqtool.engines.kahadb.compact`: the broker's
  appender rules, ``JournalWriter``), without an index: the broker rebuilds ``db.data`` from these few files
  at its first start; an mKahaDB ``txStore`` is copied as it is;
* DEST is built in a temporary directory beside it and renamed into place; the source is only read.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import AmqtoolError, Finding, Severity, UsageError, Verdict
from amqtool.formats.kahadb import journal as jr
from amqtool.store import atomic

MAX_RANGE_READ = 4 << 20


@dataclass
class KahaRecoverRequest:
    output: Path | None = None
    dry_run: bool = False
    salvage: bool = False  # write from a source verify calls CRITICAL (amqtool.engines.verdicts)


@dataclass
class KahaLost:
    """One command of a damaged batch, or an undecodable range."""

    directory: str
    file: str
    offset: int
    length: int
    reason: str  # checksum | bad-header | bad-size | truncated | record-tiling | undecodable-command
    decoded: bool = False
    command: str | None = None
    message_id: str | None = None
    destination: str | None = None
    transaction: str | None = None
    tx_key: tuple | None = None  # TransactionId.key, to leave the transaction out whole

    def to_json(self) -> dict:
        return {"kind": "record", "directory": self.directory, "file": self.file, "offset": self.offset,
                "length": self.length, "reason": self.reason, "decoded": self.decoded, "command": self.command,
                "messageId": self.message_id, "destination": self.destination, "transaction": self.transaction,
                "lost": True}


@dataclass
class KahaDirRecovery:
    directory: str
    action: str = "planned"
    files: int = 0
    bytes: int = 0
    messages: int = 0
    acks: int = 0
    subscriptions: int = 0
    prepared_transactions: int = 0
    open_transactions_dropped: int = 0
    lost: list[KahaLost] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)  # journal files the index still references
    transactions: list[dict] = field(default_factory=list)  # left out whole: they lost a record
    files_after: int = 0

    def to_json(self) -> dict:
        return {"directory": self.directory, "action": self.action, "files": self.files, "bytes": self.bytes,
                "messagesKept": self.messages, "acksKept": self.acks, "subscriptions": self.subscriptions,
                "preparedTransactions": self.prepared_transactions,
                "openTransactionsDropped": self.open_transactions_dropped,
                "recordsLost": len(self.lost), "bytesSkipped": sum(x.length for x in self.lost),
                "filesAfter": self.files_after}


@dataclass
class KahaRecoverReport:
    source: str
    destination: str | None
    dry_run: bool
    directories: list[KahaDirRecovery] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    source_findings: list[Finding] = field(default_factory=list)  # verify's on the source (engines.verdicts)

    @property
    def lost(self) -> list[KahaLost]:
        return [x for d in self.directories for x in d.lost]

    @property
    def kept(self) -> int:
        return sum(d.messages + d.acks + d.subscriptions for d in self.directories)

    @property
    def missing(self) -> list[dict]:
        return [m for d in self.directories for m in d.missing]

    @property
    def verdict(self) -> Verdict:
        """DEST's verdict (WARNING when it lacks something, CRITICAL when nothing was kept), and verify's on
        the source when that is CRITICAL or UNKNOWN (engines.verdicts; a warning is what recover repairs)."""
        from amqtool.engines.verdicts import verdict_of

        source = verdict_of(self.source_findings)
        source = source if source >= Verdict.CRITICAL else Verdict.OK
        if not self.lost and not self.missing:
            return source
        return max(source, Verdict.CRITICAL if self.kept == 0 else Verdict.WARNING)

    def to_json(self) -> dict:
        lost = [x.to_json() for x in self.lost] + [t for d in self.directories for t in d.transactions] + \
            self.missing
        return {"verdict": self.verdict.name, "kind": "kahadb", "mode": "dry-run" if self.dry_run else "copy",
                "source": self.source, "destination": self.destination,
                "counts": {"recordsKept": self.kept,
                           "recordsLost": len(self.lost) + sum(t["records"] for d in self.directories
                                                               for t in d.transactions),
                           "damagedRecords": len(self.lost),
                           "damagedRecordsDecoded": sum(1 for x in self.lost if x.decoded),
                           "bytesSkipped": sum(x.length for x in self.lost),
                           "transactionsNotCommitted": sum(len(d.transactions) for d in self.directories),
                           "filesLost": len(self.missing), "undeleted": 0},
                "lost": lost, "journals": [d.to_json() for d in self.directories],
                "findings": [f.to_json() for f in self.findings],
                "sourceFindings": [f.to_json() for f in self.source_findings
                                   if f.severity.value in ("critical", "warning", "unknown")][:100]}


def _read(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(length)


def _decode_range(directory: str, path: Path, first: int, last: int, reason: str) -> list[KahaLost]:
    """The commands of the corrupted range ``first..last`` (inclusive) of ``path``, read leniently."""
    from amqtool.formats.kahadb.commands import decode_command

    end = last + 1
    buf = _read(path, first, min(end - first, MAX_RANGE_READ))
    whole = KahaLost(directory, path.name, first, end - first, reason)
    if len(buf) < jr.BATCH_CONTROL_RECORD_SIZE or buf[:16] != jr.BATCH_CONTROL_RECORD_HEADER:
        return [whole]
    size = int.from_bytes(buf[16:20], "big", signed=True)
    stop = min(len(buf), jr.BATCH_CONTROL_RECORD_SIZE + max(size, 0))
    pos = jr.BATCH_CONTROL_RECORD_SIZE
    out: list[KahaLost] = []
    while pos + jr.RECORD_HEAD_SPACE <= stop:
        length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        if buf[pos + 4] != jr.USER_RECORD_TYPE or length < jr.RECORD_HEAD_SPACE or pos + length > stop:
            break
        item = KahaLost(directory, path.name, first + pos, length, reason)
        try:
            cmd = decode_command(bytes(buf[pos + jr.RECORD_HEAD_SPACE:pos + length]))
        except AmqtoolError:
            item.command = None
        else:
            item.decoded = True
            item.command = cmd.name
            dest = getattr(cmd, "destination", None)
            if dest is not None:
                item.destination = f"{dest.kind}://{dest.name}"
            item.message_id = getattr(cmd, "message_id", None) or None
            tx = getattr(cmd, "transaction", None)
            item.transaction = str(tx) if tx is not None else None
            item.tx_key = tx.key if tx is not None else None
        out.append(item)
        pos += length
    if pos < end - first:  # what follows the last decodable record (or the whole range)
        out.append(KahaLost(directory, path.name, first + pos, (end - first) - pos, reason))
    return out


def _lost_of(d, directory: str) -> list[KahaLost]:
    out: list[KahaLost] = []
    for fid in sorted(d.scans):
        sc = d.scans[fid]
        path = sc.file.path
        for cr in sc.corrupt:
            out.extend(_decode_range(directory, path, cr.first, cr.last, cr.reason))
        for off, message in sc.bad_records:
            out.append(KahaLost(directory, path.name, off, 0, "record-tiling", command=message))
    for fid, off, message in d.decode_errors:
        f = d.file(fid)
        out.append(KahaLost(directory, f.path.name if f else f"db-{fid}.log", off, 0, "undecodable-command",
                            command=message))
    return out


def recover_kahadb(store, req: KahaRecoverRequest, progress=None) -> KahaRecoverReport:
    """Recover ``store`` (a KahaDBStore) into ``req.output``, or only report with ``dry_run``. The output is
    claimed first (:mod:`amqtool.store.output`)."""
    from amqtool.store import output

    if req.output is None and not req.dry_run:
        raise UsageError("recover needs -o DEST (or --dry-run)")
    dest = req.output if not req.dry_run else None
    with output.claiming(dest, inputs=output.store_inputs(store) if dest is not None else ()):
        return _recover_kahadb(store, req, progress)


def _recover_kahadb(store, req: KahaRecoverRequest, progress=None) -> KahaRecoverReport:
    from amqtool.engines.kahadb.compact import (
        KahaCompactRequest,
        _checksums,
        _copy_as_is,
        _max_file_length,
        write_compacted,
    )
    from amqtool.engines.kahadb.compact.script import ScriptFigures
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.verify import verify_directory
    from amqtool.store import locks

    if req.output is None and not req.dry_run:
        raise UsageError("recover needs -o DEST (or --dry-run)")
    dest = Path(req.output) if req.output is not None else None
    report = KahaRecoverReport(str(store.root), None if req.dry_run else str(dest), req.dry_run)
    # verify's judge on the source (amqtool.engines.verdicts): a CRITICAL source is refused unless --salvage
    from amqtool.engines.verdicts import judge_for_writing

    report.source_findings = judge_for_writing(store, req.salvage or req.dry_run, command="recover")
    held = locks.find_locks([store.root / "lock"] + [Path(p) / "lock" for p in store.directories])
    if held:
        report.findings.append(Finding(Severity.WARNING, "store-in-use",
                                       f"the store is in use ({held[0].describe()}): the copy may be torn",
                                       str(store.root)))
    results = load_store(store, progress=progress)
    lost_by_dir = {str(d.directory): _lost_of(d, str(Path(d.directory).relative_to(store.root)
                                                  if store.multi else Path(".")))
                   for d in results}
    bad = frozenset(x.tx_key for lost in lost_by_dir.values() for x in lost if x.tx_key is not None)
    if bad:
        # a transaction with a record in a damaged batch is not committed half: replay again without it
        results = load_store(store, drop_transactions=bad)
    tmp = None
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = atomic.aside_dir(dest, "recover")
        atomic.copy_owner_and_mode(store.root, tmp)
    try:
        for d in results:
            rel = Path(d.directory).relative_to(store.root) if store.multi else Path(".")
            rec = KahaDirRecovery(str(d.directory), files=len(d.files), bytes=sum(f.size for f in d.files))
            report.directories.append(rec)
            rec.lost = lost_by_dir[str(d.directory)]
            for key, tx in d.replay.dropped.items():
                rec.transactions.append({"kind": "transaction", "directory": str(rel), "txId": str(tx.id),
                                         "reason": "records-lost", "records": tx.sends + tx.acks, "lost": True})
            found: list[Finding] = []
            verify_directory(d, found)  # verify's own judgement of files the index needs but that are gone
            for f in found:
                if f.code == "kahadb-missing-journal-file":
                    rec.missing.append({"kind": "journal-file", "directory": str(rel), "path": f.path,
                                        "reason": "missing-journal-file", "lost": True, **f.details})
                    report.findings.append(f)
            if d.is_tx_store:
                rec.action = "copied-as-is" if tmp is not None else "would-copy-as-is"
                if tmp is not None:
                    _copy_as_is(Path(d.directory), tmp / rel)
                continue
            rec.open_transactions_dropped = sum(1 for t in d.open_transactions if t.state != "prepared")
            max_len = _max_file_length(store, d, KahaCompactRequest())
            checksums = _checksums(store)
            figures = ScriptFigures()
            target = None
            if tmp is not None:
                target = tmp / rel
                target.mkdir(parents=True, exist_ok=True)
                atomic.copy_owner_and_mode(d.directory, target)
            files = write_compacted(d, target, max_len, checksums, figures)
            rec.files_after = len(files)
            rec.action = "recovered" if target is not None else "would-recover"
            rec.messages, rec.acks = figures.messages, figures.acks
            rec.subscriptions, rec.prepared_transactions = figures.subscriptions, figures.prepared_transactions
        if tmp is not None:
            atomic.fsync_dir(tmp)
            atomic.switch_dir(tmp, dest)
            tmp = None
    except atomic.InjectedFault:
        raise
    except BaseException as err:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise AmqtoolError(f"writing the recovered copy failed, source untouched: {err.strerror or err}",
                               path=err.filename or str(dest)) from None
        raise
    return report
