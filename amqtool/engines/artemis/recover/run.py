"""``recover`` for Artemis stores: every live record that survives the damage written into a new store at
DEST, and an exact account of what did not survive.

How (the broker's rules, then what the broker does not do):

* Each journal is loaded as ``JournalImpl.load`` loads it (:func:`~amqtool.engines.artemis.load.load_journal`):
  ``readJournalFile`` skips whatever fails a check (type, tag, size fields, checkSize) one byte at a time and
  takes the next record that passes them all, in the same file; every file is scanned on its own, so damage
  never spreads to the next file. What was skipped is decoded by :mod:`.damage` and listed.
* A file Artemis would refuse (``orderFiles``/``readFileHeader``: unreadable header, wrong version or
  userVersion, a negative fileID) stops the broker's whole load. Here it costs only its own records: when the
  records inside it agree on one tag, the header's fileID is that tag (``JournalFileImpl.getRecordID`` is the
  fileID's low 31 bits) and the file is read under it; otherwise it is reported lost. A file missing from
  the middle of the journal is found the way ``verify`` finds it (fileID gaps corroborated by orphaned
  updates) and reported.
* Transactions: the broker commits a transaction when the COMMIT's ``numberOfRecords`` matches the records of
  the commit's own file (``JournalTransaction``), so a record lost from an *earlier* file goes unnoticed and
  the transaction is committed half. Here any transaction with a lost record (its id decoded from the skipped
  bytes) is left out whole: the journal is loaded a second time without any of its records, so its adds are
  not committed and its deletes not applied. Transactions the broker itself would roll back (no COMMIT, or
  one whose count fails) are not written either, and are listed.
* The outputs are written by the compactor (:mod:`amqtool.engines.artemis.compact`, ``JournalCompactor``
  record layout, maxID kept), into a temporary directory beside DEST that is renamed into place
  (:func:`amqtool.engines.artemis.compact.run._write_copy`): DEST is absent or complete. The source is only
  read.
* Page files and large-message files are judged by ``verify``'s own checks (``PagingVerifier``, the
  ``.msg`` size against ``_AMQ_LARGE_SIZE``) and carried over when intact. A damaged page or ``.msg`` file is
  left out and reported; missing ones are reported.

Verdict: OK (0) when DEST holds everything the source's load would have returned, WARNING (1) when something
was lost or is doubtful, CRITICAL (2) when nothing could be saved.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amqtool.errors import Finding, Severity, UnknownStoreError, UsageError, Verdict
from amqtool.formats.artemis.records import (
    EVENT,
    FORMAT_VERSION,
    HEADER_SIZE,
    FileHeader,
    scan_records_py,
)
from amqtool.engines.artemis.load import FileGaps, FileScan, LoadResult, file_gaps
from amqtool.engines.artemis.recover.damage import LostRecord, decode_one, decode_region, reconstruct_undecoded
from amqtool.store.journal_files import JournalFile, OpenedJournal, open_journal
from amqtool.store.layout import ArtemisStore, JournalDir

QUEUE_BINDING_RECORD = 21
_SALVAGE_READ = 1 << 20  # bytes of a refused file read to infer its fileID from its records' tags
_FOREIGN_SEARCH = 64 * 1024


@dataclass
class RecoverRequest:
    """What ``amqtool recover`` was asked to do."""

    output: Path | None = None
    dry_run: bool = False
    journals: tuple[str, ...] = ("bindings", "messages")
    salvage: bool = False  # write from a source verify calls CRITICAL (amqtool.engines.verdicts)


@dataclass
class TxLoss:
    """A transaction not written to DEST."""

    journal: str
    tx_id: int
    reason: str  # records-lost | commit-count-mismatch | never-completed | prepare-unhealthy
    records: int
    lost: bool  # True: the source's load would have had it (or part of it); False: the broker rolls it back too

    def to_json(self) -> dict:
        return {"kind": "transaction", "journal": self.journal, "txId": self.tx_id, "reason": self.reason,
                "records": self.records, "lost": self.lost}


@dataclass
class FileLoss:
    """A whole file (journal, page or large message) not carried into DEST, or missing from the source."""

    kind: str  # journal-file | page-file | large-message
    path: str | None
    reason: str
    details: dict = field(default_factory=dict)
    lost: bool = True

    def to_json(self) -> dict:
        doc = {"kind": self.kind, "path": self.path, "reason": self.reason, "lost": self.lost}
        doc.update(self.details)
        return doc


@dataclass
class JournalRecovery:
    kind: str
    directory: str
    files: int = 0
    bytes: int = 0
    kept: int = 0
    lost: list[LostRecord] = field(default_factory=list)
    transactions: list[TxLoss] = field(default_factory=list)
    salvaged: list[dict] = field(default_factory=list)  # refused files read under an inferred fileID
    outputs: list[str] = field(default_factory=list)

    @property
    def bytes_skipped(self) -> int:
        return sum(r.length for r in self.lost if r.lost)

    def to_json(self) -> dict:
        return {"journal": self.kind, "directory": self.directory, "files": self.files, "bytes": self.bytes,
                "recordsKept": self.kept, "recordsLost": sum(1 for r in self.lost if r.lost), "bytesSkipped": self.bytes_skipped,
                "salvagedHeaders": self.salvaged, "outputFiles": self.outputs}


@dataclass
class RecoverReport:
    source: str
    destination: str | None
    dry_run: bool
    journals: list[JournalRecovery] = field(default_factory=list)
    files: list[FileLoss] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    carried: dict | None = None
    undelete: bool = False
    undeleted: list[dict] = field(default_factory=list)
    unrecoverable: list[dict] = field(default_factory=list)
    source_findings: list[Finding] = field(default_factory=list)  # verify's on the source (engines.verdicts)

    @property
    def kept(self) -> int:
        return sum(j.kept for j in self.journals)

    @property
    def lost_records(self) -> list[LostRecord]:
        return [r for j in self.journals for r in j.lost if r.lost]

    @property
    def listed_records(self) -> list[LostRecord]:
        return [r for j in self.journals for r in j.lost]

    @property
    def lost_transactions(self) -> list[TxLoss]:
        return [t for j in self.journals for t in j.transactions if t.lost]

    def counts(self) -> dict:
        return {
            "recordsKept": self.kept,
            "recordsLost": len(self.lost_records) + sum(t.records for t in self.lost_transactions),
            "damagedRecords": len(self.lost_records),
            "damagedRecordsDecoded": sum(1 for r in self.lost_records if r.decoded),
            "bytesSkipped": sum(j.bytes_skipped for j in self.journals),
            "transactionsNotCommitted": len(self.lost_transactions),
            "filesLost": sum(1 for f in self.files if f.lost),
            "undeleted": len(self.undeleted),
            "unrecoverable": len(self.unrecoverable),
        }

    @property
    def verdict(self) -> Verdict:
        """DEST's verdict: WARNING when it lacks something, CRITICAL when nothing was saved; and verify's on
        the source when that is CRITICAL (loss proven: recovered under ``--salvage``) or UNKNOWN. A source
        verify only warns about (a torn tail) is what recover repairs: it does not weigh on DEST."""
        from amqtool.engines.verdicts import verdict_of

        source = verdict_of(self.source_findings)
        source = source if source >= Verdict.CRITICAL else Verdict.OK
        lossy = bool(self.lost_records or self.lost_transactions or any(f.lost for f in self.files))
        if lossy and self.kept == 0:
            return max(source, Verdict.CRITICAL)
        if not self.journals and self.files:
            return max(source, Verdict.CRITICAL)
        return max(source, Verdict.WARNING if lossy else Verdict.OK)

    def to_json(self) -> dict:
        from amqtool.engines.verdicts import left_out

        lost = [r.to_json() for r in self.listed_records]
        lost += [t.to_json() for j in self.journals for t in j.transactions]
        lost += [f.to_json() for f in self.files]
        doc = {"verdict": self.verdict.name, "mode": "dry-run" if self.dry_run else "copy",
               "source": self.source, "destination": self.destination, "counts": self.counts(),
               "lost": lost, "journals": [j.to_json() for j in self.journals],
               "carriedOver": self.carried, "findings": [f.to_json() for f in self.findings],
               "sourceFindings": left_out(self.source_findings)}
        if self.undelete:
            doc["undeleted"] = self.undeleted
            doc["unrecoverable"] = self.unrecoverable
        return doc


# --- refused files -----------------------------------------------------------------------------------------

def _infer_header(path: Path) -> FileHeader | None:
    """The header a refused file must have had, from the tags of the records in its first MiB: every record
    carries the fileID's low 31 bits (``JournalFileImpl.getRecordID``). None when no record agrees."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_SALVAGE_READ)
    except OSError:
        return None
    for version in (FORMAT_VERSION, 1):
        records, _ = scan_records_py(data, 0, version, check_tag=False, start=HEADER_SIZE)
        tags = Counter(int.from_bytes(data[r[1] + 1:r[1] + 5], "big", signed=True) for r in records)
        if not tags:
            continue
        tag, n = tags.most_common(1)[0]
        if tag >= 0 and n >= max(2, len(records) // 2) or (tag >= 0 and len(records) == 1):
            return FileHeader(version, 0, tag)
    return None


def _open_salvaging(jd: JournalDir, rec: JournalRecovery, report: RecoverReport) -> OpenedJournal:
    """:func:`open_journal`, with every file Artemis would refuse either read under the fileID its records
    name, or reported lost; the view then never refuses."""
    opened = open_journal(jd)
    for s in opened.skipped:
        path = Path(s.path)
        header = None
        if s.code in ("bad-header-version", "bad-file-id", "user-version-mismatch"):
            header = _infer_header(path)
            taken = {f.file_id for f in opened.files}
            if header is not None and header.file_id in taken:
                header = None  # two files under one id: their order would be undefined
        if header is None:
            report.files.append(FileLoss("journal-file", s.path, s.code, {"message": s.message}))
            continue
        size = path.stat().st_size
        opened.files.append(JournalFile(path=path, name=path.name, size=size, header=header))
        rec.salvaged.append({"file": s.path, "problem": s.code, "inferredFileId": header.file_id,
                             "version": header.version})
        report.findings.append(Finding(
            Severity.WARNING, "header-salvaged",
            f"header refused by Artemis ({s.code}); read as fileID {header.file_id}, the tag its records carry",
            s.path, 0))
    opened.skipped = []
    opened.files.sort(key=lambda f: (f.file_id, f.name))
    return opened


# --- what the scan skipped --------------------------------------------------------------------------------

class _Skipped:
    """``on_file`` of the load: the skipped regions of each file, decoded; what the lenient decoding cannot
    read is reconstructed, or judged as a tail, once the load is complete (:meth:`resolve`)."""

    def __init__(self, opened: OpenedJournal, rec: JournalRecovery):
        self.opened = opened
        self.rec = rec
        self.undecoded: list[tuple[LostRecord, int, JournalFile, int]] = []  # (entry, file index, file, end)

    def _add(self, found: list[LostRecord], fi: int, jf: JournalFile, end: int) -> None:
        self.rec.lost.extend(found)
        # decode_region leaves at most one undecodable entry, the last, running to the region's end
        if found and not found[-1].decoded:
            self.undecoded.append((found[-1], fi, jf, end))

    def resolve(self, load: LoadResult) -> list[Finding]:
        """Once every file is loaded: name the undecodable entries that read as one record with one wrong field
        (:func:`reconstruct_undecoded`, given the journal's highest id); an undecodable tail that does not is
        no record the broker had (nothing of its load is missing), and is judged as verify judges a tail
        (:func:`amqtool.engines.artemis.verify.tail_finding`) instead of being listed lost."""
        from amqtool.engines.artemis.verify import tail_finding

        findings = []
        for entry, fi, jf, end in self.undecoded:
            def read(off: int, n: int, fi: int = fi) -> bytes:
                return self.opened.pread(fi, off, n)

            if reconstruct_undecoded(entry, read, end, jf.tag, jf.version, load.max_id):
                continue
            if entry.where == "tail":
                del self.rec.lost[next(i for i, r in enumerate(self.rec.lost) if r is entry)]
                findings.append(tail_finding(load, fi, str(jf.path), entry.offset, entry.length))
        self.undecoded = []
        return findings

    def __call__(self, scan: FileScan, gaps: FileGaps) -> None:
        jf = scan.file
        fi = scan.index
        regions = list(gaps.damaged)
        if gaps.damaged_count > len(regions):  # more than the load keeps: read this damaged file whole
            from amqtool import native

            data = self.opened.read_file(fi)
            records, _ = native.scan_records(data, jf.tag, jf.version, True, HEADER_SIZE)
            regions = file_gaps(data, records, examples=gaps.damaged_count).damaged
            del data

        def read(off: int, n: int) -> bytes:
            return self.opened.pread(fi, off, n)

        for first, nxt in regions:
            self._add(decode_region(read, self.rec.kind, str(jf.path), first, nxt, jf.tag, jf.version), fi, jf, nxt)
        if gaps.tail_first >= 0:
            first = gaps.tail_first
            head = read(first, _FOREIGN_SEARCH)
            own = len(head) >= 5 and int.from_bytes(head[1:5], "big", signed=True) == jf.tag
            if not own and first == gaps.end > HEADER_SIZE:
                # right where this file's own records end, one whose checkSize holds but whose tag does not,
                # and no record of that tag after it: ours with a damaged tag. An earlier use's records come
                # in runs under one tag and line up with ours only by chance.
                got = decode_one(head[:gaps.tail_end - first], jf.tag, jf.version)
                if got is not None and got[2] is not None:
                    tag = int.from_bytes(head[1:5], "big", signed=True)
                    rest, _ = scan_records_py(head[got[2]:], tag, jf.version, check_tag=True, start=0)
                    own = not rest
            if not own:
                from amqtool.engines.artemis.verify import _first_foreign_record

                if _first_foreign_record(head, first, jf.tag, jf.version) is not None:
                    return  # records of an earlier use of a reused file: not this journal's data
            self._add(decode_region(read, self.rec.kind, str(jf.path), first, gaps.tail_end, jf.tag, jf.version,
                                    where="tail"), fi, jf, gaps.tail_end)

    def events(self, scan: FileScan) -> None:
        """List the EVENT records of a file: the load ignores them (they only serve journal retention), and
        one flipped bit turns an ADD or UPDATE type byte (11, 12) into EVENT (10) without failing any check."""
        if not scan.type_counts.get(EVENT):
            return
        jf = scan.file
        for base, _data, recs, _marked in self.opened.scan_windows(scan.index):
            for r in recs:
                if r[0] == EVENT:
                    self.rec.lost.append(LostRecord(
                        self.rec.kind, str(jf.path), base + r[1], r[2], decoded=True, record_type=EVENT,
                        record_id=r[5], user_record_type=r[6], where="event", lost=False))


# --- one journal -------------------------------------------------------------------------------------------

def _queue_names(load: LoadResult | None) -> dict[int, str]:
    from amqtool.formats.artemis.userrecords import decode_user_record

    names: dict[int, str] = {}
    if load is None:
        return names
    for r in load.live:
        if r.user_record_type == QUEUE_BINDING_RECORD:
            try:
                names[r.id] = decode_user_record(QUEUE_BINDING_RECORD, load.body(r)).name
            except Exception:  # noqa: BLE001 - a damaged binding only costs its name in the report
                continue
    return names


def recover_journal(jd: JournalDir, report: RecoverReport, broker=None, progress: Callable[[int], None] | None = None,
                    transform: Callable[[LoadResult], None] | None = None):
    """Plan the recovered form of one journal (nothing written). Returns the compactor's plan, or None when
    no file of the journal could be read. ``transform(load)`` may change the live state before the layout
    (``--undelete``)."""
    from amqtool.engines.artemis.compact.plan import plan_journal
    from amqtool.engines.artemis.compact.settings import settings_for
    from amqtool.engines.artemis.verify import _gap_findings

    rec = JournalRecovery(jd.kind, str(jd.directory))
    report.journals.append(rec)
    opened = _open_salvaging(jd, rec, report)
    rec.files = len(opened.files)
    rec.bytes = opened.bytes_total()
    if not opened.files:
        opened.close()
        return None
    settings = settings_for(jd, broker)
    bad_tx: set[int] = set()
    dropped: Counter = Counter()
    gap_findings: list[Finding] = []
    tail_findings: list[Finding] = []

    def after_load(load: LoadResult) -> None:
        for a in load.anomalies:
            if a.code == "commit-count-mismatch":
                rec.transactions.append(TxLoss(jd.kind, a.ids["txId"], "commit-count-mismatch",
                                               a.ids.get("records", 0), True))
        for tx in load.failed:
            reason = "prepare-unhealthy" if tx.prepared else "never-completed"
            rec.transactions.append(TxLoss(jd.kind, tx.tx_id, reason,
                                           len(tx.records) + len(tx.records_to_delete), False))
        load.failed = []  # never written: the broker rolls them back, and a half transaction must not commit
        if transform is not None:
            transform(load)

    def first_pass(load: LoadResult) -> None:
        _gap_findings(load, gap_findings)
        tail_findings.extend(skipped.resolve(load))
        for scan in load.scans:
            skipped.events(scan)
        for r in rec.lost:
            if r.lost and r.decoded and r.tx_id is not None and r.tx_id >= 0:
                bad_tx.add(r.tx_id)
        if not bad_tx:
            after_load(load)

    dropped_ids: set[int] = set()
    while True:
        skipped = _Skipped(opened, rec)
        try:
            prep = plan_journal(jd, settings, progress=progress, opened=opened, on_file=skipped,
                                after_load=first_pass)
            break
        except UnknownStoreError as err:
            # a file that cannot be read (EIO, a vanished file) costs its own records only: drop it, start over
            bad = [f for f in opened.files if str(f.path) == err.path]
            if not bad:
                raise
            opened.close()
            opened.files.remove(bad[0])
            dropped_ids.add(bad[0].file_id)
            report.files.append(FileLoss("journal-file", err.path, "unreadable", {"message": err.message}))
            report.findings.append(Finding(Severity.CRITICAL, "unreadable", err.message, err.path))
            rec.lost.clear()
            rec.transactions.clear()
            bad_tx.clear()
            gap_findings.clear()
            tail_findings.clear()
            rec.files = len(opened.files)
            if not opened.files:
                return None
    report.findings.extend(tail_findings)
    for f in gap_findings:
        if f.code == "missing-journal-file" and dropped_ids:
            ids = [i for i in f.details.get("missingFileIds", []) if i not in dropped_ids]
            if not ids:
                continue  # the unreadable file left out explains the gap: listed once, as unreadable
            f.details["missingFileIds"] = ids
        if f.code == "missing-journal-file":
            report.files.append(FileLoss("journal-file", f.path, "missing-journal-file", dict(f.details)))
            report.findings.append(f)
    if bad_tx:
        def without_bad(t: tuple) -> bool:
            if t[4] in bad_tx:
                dropped[t[4]] += 1
                return False
            return True

        prep = plan_journal(jd, settings, opened=opened, record_filter=without_bad, after_load=after_load)
        for tx in sorted(bad_tx):
            rec.transactions.append(TxLoss(jd.kind, tx, "records-lost", dropped[tx], True))
    file_size = prep.report.settings.file_size
    for f in opened.files:
        if f.size < file_size:
            # Artemis creates every journal file at its full size (JournalFilesRepository.createFile fills
            # it): a shorter one was cut, and whatever followed the cut is gone without a trace
            report.files.append(FileLoss("journal-file", str(f.path), "short-file",
                                         {"size": f.size, "expectedSize": file_size}))
            report.findings.append(Finding(
                Severity.WARNING, "short-file",
                f"file is {f.size} bytes, not the journal's {file_size}: records after byte {f.size} are lost",
                str(f.path), f.size))
    load = prep.load
    rec.kept = len(load.live) + sum(len(t.records) + len(t.records_to_delete) for t in load.prepared)
    return prep


def _name_queues(report: RecoverReport, names: dict[int, str], messages: LoadResult | None) -> None:
    """Queue names for the lost references, and for each lost message record the queues of the ADD_REF
    records of its id that survive (the broker drops them: "cannot find message"), from the messages journal's
    load (:class:`~amqtool.engines.artemis.evidence.Evidence`, as verify weighs the loss)."""
    from amqtool.engines.artemis.recover.damage import MESSAGE_TYPES

    for r in report.lost_records:
        if r.queue_id is not None:
            r.queue = names.get(r.queue_id)
    wanted = [r for r in report.lost_records
              if r.journal == "messages" and r.user_record_type in MESSAGE_TYPES and r.message_id is not None]
    if not wanted or messages is None:
        return
    from amqtool.engines.artemis.evidence import Evidence

    refs = Evidence.build(None, messages).refs
    for r in wanted:
        r.queue_ids = sorted(refs.get(r.message_id, ()))
        r.queues = [names.get(q) for q in r.queue_ids]


def _page_and_large(store: ArtemisStore, loads: dict[str, LoadResult], report: RecoverReport) -> set[Path]:
    """Judge page and ``.msg`` files with verify's checks against the recovered journals; returns the files
    to leave out of DEST."""
    from amqtool.engines.artemis.paging import PagingVerifier
    from amqtool.engines.artemis.verify import _large_message_findings

    findings: list[Finding] = []
    paging = PagingVerifier(store)
    if "bindings" in loads:
        paging.add_bindings(loads["bindings"])
    paged = None
    if "messages" in loads:
        paging.add_messages(loads["messages"])
    if store.paging_dir is not None and "messages" in loads:
        paged = paging.verify(findings)
    if "messages" in loads:
        _large_message_findings(store, loads["messages"], findings, paging, paged)
    exclude: set[Path] = set()
    for f in findings:
        if f.code in ("page-damaged", "page-record-undecodable", "large-message-size"):
            kind = "large-message" if f.code.startswith("large") else "page-file"
            if f.path and Path(f.path).is_file():
                exclude.add(Path(f.path))
            report.files.append(FileLoss(kind, f.path, f.code, {"message": f.message, **f.details}))
            report.findings.append(f)
        elif f.code in ("page-missing", "large-message-missing"):
            kind = "large-message" if f.code.startswith("large") else "page-file"
            report.files.append(FileLoss(kind, f.path, f.code, {"message": f.message, **f.details}))
            report.findings.append(f)
        elif f.severity in (Severity.WARNING, Severity.CRITICAL):
            report.findings.append(Finding(Severity.WARNING, f.code, f.message, f.path, f.offset, f.details))
    return exclude


def recover_store(store: ArtemisStore, req: RecoverRequest, *, progress: Callable[[int], None] | None = None,
                  transform_for: Callable[[str], Callable[[LoadResult], None] | None] | None = None,
                  report: RecoverReport | None = None, before_switch=None) -> RecoverReport:
    """Recover ``store`` into ``req.output`` (or only report, with ``dry_run``). ``transform_for(kind)``
    gives a per-journal hook on the load and ``before_switch(tmp, preps)`` a last step on the finished copy
    before it is renamed into place (``--undelete``). The destination is claimed first
    (:mod:`amqtool.store.output`: never the store or around it, absent or empty, one writer at a time)."""
    from amqtool.store import output

    if req.output is None and not req.dry_run:
        raise UsageError("recover needs -o DEST (or --dry-run)")
    dest = req.output if not req.dry_run else None
    with output.claiming(dest, inputs=output.store_inputs(store) if dest is not None else ()):
        return _recover_store(store, req, progress=progress, transform_for=transform_for, report=report,
                              before_switch=before_switch)


def _recover_store(store: ArtemisStore, req: RecoverRequest, *, progress, transform_for, report,
                   before_switch) -> RecoverReport:
    from amqtool.engines.artemis.compact.run import _write_copy
    from amqtool.engines.verdicts import judge_for_writing
    from amqtool.store import locks

    journals = [j for j in store.journals() if j.kind in req.journals]
    if not journals:
        raise UnknownStoreError("no Artemis journal found", path=str(store.root))
    if report is None:
        report = RecoverReport(str(store.root), None if req.dry_run else str(req.output), req.dry_run)
    # verify's judge on the source (amqtool.engines.verdicts): a CRITICAL source is refused unless --salvage
    # (a dry run only reports). recover reads the files its own salvaging way, so this is a read of its own.
    report.source_findings = judge_for_writing(store, req.salvage or req.dry_run, command="recover")
    held = locks.find_locks(locks.artemis_store_lock_files(store))
    if held:
        report.findings.append(Finding(
            Severity.WARNING, "store-in-use",
            f"the store is in use ({held[0].describe()}): it was read while a broker may have been writing it",
            str(store.root)))
    broker = getattr(store, "settings", None)
    preps = []
    loads: dict[str, LoadResult] = {}
    names: dict[int, str] = {}
    try:
        for jd in journals:
            transform = transform_for(jd.kind) if transform_for is not None else None
            prep = recover_journal(jd, report, broker, progress, transform)
            if prep is None:
                continue
            preps.append((prep, jd.directory.name))
            loads[jd.kind] = prep.load
            if jd.kind == "bindings":
                names = _queue_names(prep.load)
        _name_queues(report, names, loads.get("messages"))
        exclude = _page_and_large(store, loads, report) if len(store.journals()) > 1 else set()
        if req.dry_run or not preps:
            return report
        single = len(store.journals()) == 1
        hook = None
        if before_switch is not None:
            def hook(tmp: Path) -> None:
                before_switch(tmp, preps, single)
        _write_copy(preps, Path(req.output), single=single, store=None if single else store,
                    exclude=frozenset(exclude), label="recover", before_switch=hook)
        by_kind = {r.kind: r for r in report.journals}
        for prep, _name in preps:
            rec = by_kind[prep.report.kind]
            rec.outputs = [o.name for o in prep.report.outputs]
            report.findings.extend(Finding(Severity.WARNING, "recover-warning", w, rec.directory)
                                   for w in prep.report.warnings)
            if prep.report.carried_over is not None:
                report.carried = prep.report.carried_over.to_json()
        return report
    finally:
        for prep, _name in preps:
            prep.opened.close()
