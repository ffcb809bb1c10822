"""``verify`` for Artemis stores: findings with severity, code, file and offset, and one verdict.

What is judged, and why (codes are documented in man/amqtool-verify.1):

* The file view Artemis would load (:func:`open_journal`): an interrupted compaction (control file, leftover
  ``.cmp``), leftover ``.tmp`` and short files, headers Artemis refuses (format version, userVersion), and
  duplicate header fileIDs.
* The bytes of each file between the records the scanner accepts. Zero (or HornetQ ``'J'``) filler is what
  Artemis writes. Records with another tag after the data are left over from an earlier use of a reused
  file, which Artemis ignores by design (``info``). Anything else after the last record of the newest file is
  a torn tail, the normal result of a crash mid-write (``warning``: the broker drops that record). Damaged
  bytes *followed by valid records* mean data was lost in the middle of a file (``critical``).
* The transactions as the load sees them: a COMMIT whose record count does not match makes Artemis discard
  the whole transaction (``critical``); an unhealthy PREPARE makes it a failed transaction (``warning``);
  prepared and never-completed transactions are normal states and reported as ``info``.
* Large messages: a live large-message record without its ``<id>.msg`` file is data loss (``critical``);
  a ``.msg`` file no record points to is disk space the broker leaks (``warning``).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from amqtool.errors import FormatError, Finding, Severity, UnknownStoreError
from amqtool.formats.artemis.records import scan_records_py
from amqtool.engines.artemis.load import GAP_EXAMPLES, FileGaps, FileScan, LoadResult, live_ids_of_type, load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import ArtemisStore, JournalDir

ADD_LARGE_MESSAGE = 30  # JournalRecordIds.ADD_LARGE_MESSAGE

_STALE_SEARCH_LIMIT = 64 * 1024
MAX_DAMAGED_PER_FILE = GAP_EXAMPLES  # FileGaps keeps this many examples per file
MAX_LISTED_MISSING_IDS = 100  # of the fileIDs missing between data files


@dataclass
class JournalSummary:
    kind: str
    directory: str
    files: int = 0
    bytes: int = 0
    records: int = 0
    live_records: int = 0
    prepared: int = 0
    failed: int = 0
    max_id: int = -1

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "directory": self.directory,
            "files": self.files,
            "bytes": self.bytes,
            "records": self.records,
            "liveRecords": self.live_records,
            "preparedTransactions": self.prepared,
            "failedTransactions": self.failed,
            "maxId": self.max_id,
        }


@dataclass
class VerifyReport:
    findings: list[Finding] = field(default_factory=list)
    journals: list[JournalSummary] = field(default_factory=list)
    paging: dict | None = None  # paging: PagingVerifier summary

    def summary(self) -> dict:
        doc = {
            "files": sum(j.files for j in self.journals),
            "bytes": sum(j.bytes for j in self.journals),
            "records": sum(j.records for j in self.journals),
            "liveRecords": sum(j.live_records for j in self.journals),
            "journals": [j.to_json() for j in self.journals],
        }
        if self.paging is not None:  # paging
            doc["paging"] = self.paging
        return doc


def _first_foreign_record(data: bytes, base: int, tag: int, version: int) -> int | None:
    """Offset of the first complete record whose tag is not ``tag`` in ``data`` (the file's bytes from
    ``base``, the first 64 KiB of a tail), or None."""
    records, _ = scan_records_py(data, tag, version, check_tag=False, start=0)
    for rec in records:
        if int.from_bytes(data[rec[1] + 1:rec[1] + 5], "big", signed=True) != tag:
            return base + rec[1]
    return None


class _GapInspector:
    """Classifies the bytes between accepted records of each file (called by load_journal per file). Reads
    only the first bytes of a tail (``opened.pread``), never a whole file."""

    def __init__(self, opened, findings: list[Finding]):
        self.opened = opened
        self.findings = findings
        self.tails: list[tuple[int, str, int, int]] = []

    def __call__(self, scan: FileScan, gaps: FileGaps) -> None:
        jf = scan.file
        path = str(jf.path)
        for first, off in gaps.damaged[:MAX_DAMAGED_PER_FILE]:
            self.findings.append(Finding(
                Severity.CRITICAL, "damaged-record",
                f"{off - first} damaged byte(s) followed by valid records: at least one record was "
                f"lost here (the broker skips it and goes on)", path, first, {"nextValidRecord": off}))
        if gaps.damaged_count > MAX_DAMAGED_PER_FILE:
            self.findings.append(Finding(
                Severity.CRITICAL, "damaged-record",
                f"{gaps.damaged_count - MAX_DAMAGED_PER_FILE} more damaged region(s) in this file", path, None))
        if gaps.tail_first < 0:
            return
        first = gaps.tail_first
        head = self.opened.pread(scan.index, first, _STALE_SEARCH_LIMIT)
        # A torn record of the current use of the file carries the file's own tag.
        own_tag = (len(head) >= 5 and 10 <= head[0] <= 19
                   and int.from_bytes(head[1:5], "big", signed=True) == jf.tag)
        stale_at = None if own_tag else _first_foreign_record(head, first, jf.tag, jf.version)
        if stale_at is not None:
            self.findings.append(Finding(
                Severity.INFO, "stale-records",
                "records of an earlier use of this reused file follow the data; Artemis ignores them "
                "(their tag is not this file's)", path, stale_at))
            return
        last = gaps.tail_end - first
        # Whether this is a torn tail (newest data file) is known only once every file is scanned.
        self.tails.append((scan.index, path, first, last))

    def finish(self, result) -> None:
        data_indexes = [s.index for s in result.scans if s.has_data]
        current = data_indexes[-1] if data_indexes else -1
        for index, path, first, length in self.tails:
            if index == current:
                self.findings.append(Finding(
                    Severity.WARNING, "torn-tail",
                    f"{length} byte(s) of a partly written record after the last valid record of the "
                    f"newest file: the broker stopped mid-write and will drop that record", path, first))
            else:
                self.findings.append(Finding(
                    Severity.WARNING, "damaged-tail",
                    f"{length} byte(s) of damaged data after the last valid record of a file that is not "
                    f"the newest", path, first))


def _pending_findings(opened, findings: list[Finding]) -> None:
    for p in opened.pending:
        if p.code in ("control-file-rollforward", "control-file-discard", "control-file-unreadable"):
            findings.append(Finding(Severity.WARNING, "interrupted-compaction", p.message, p.path, None))
        elif p.code == "leftover-cmp":
            findings.append(Finding(Severity.WARNING, "leftover-cmp",
                                    p.message + " (a compaction was interrupted before it committed)", p.path))
        elif p.code == "leftover-tmp":
            findings.append(Finding(Severity.INFO, "leftover-tmp", p.message, p.path))
        elif p.code == "short-file":
            findings.append(Finding(Severity.WARNING, "short-file", p.message, p.path, 0))
    for s in opened.skipped:
        if s.code == "unreadable":  # could not check: not a verdict on the store
            # (journalFile: its records may end other records' lives, so no live state is known without it)
            findings.append(Finding(Severity.UNKNOWN, s.code, s.message, s.path, s.offset, {"journalFile": True}))
        elif s.code == "bad-file-id":
            findings.append(Finding(Severity.CRITICAL, s.code, s.message, s.path, s.offset))
        else:
            findings.append(Finding(Severity.CRITICAL, s.code, s.message + " (Artemis will refuse to start)",
                                    s.path, s.offset))
    seen: dict[int, str] = {}
    for f in opened.files:
        if f.file_id in seen:
            findings.append(Finding(
                Severity.CRITICAL, "duplicate-file-id",
                f"header fileID {f.file_id} is also in {seen[f.file_id]}: their load order is undefined",
                str(f.path), 8))
        else:
            seen[f.file_id] = f.name


def _name_number(name: str) -> int | None:
    """N of ``<prefix>-N.<ext>`` (JournalFilesRepository.getFileNameID)."""
    stem = name.split(".", 1)[0]
    tail = stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _gap_findings(result: LoadResult, findings: list[Finding]) -> None:
    """Header fileIDs missing between data files: a file removed from the middle of the journal, or not.

    Artemis issues fileIDs one by one, to new files (whose name carries the id) and to freed files it
    reinitialises (``JournalFilesRepository.addFreeFile`` -> ``reinitializeFile``, which keeps the old name).
    A reinitialised free file that is later deleted (pool trimming by ``journal-pool-files``, or a
    compaction's switch-over) takes its id with it, and a compaction gives its outputs the lowest old ids
    (``nextOrderingID``) while the freed files get new ones. So a gap proves nothing by itself once the journal
    has been compacted (a live record with compactCount > 0 says so). What does prove a loss is a live UPDATE
    whose ADD is gone: the broker never frees a file that holds the ADD of a live record, so only a removed
    file explains it. Hence: a gap is ``missing-journal-file`` (warning) when the journal was never compacted
    and reused files do not explain it, or when live updates without their add corroborate it; otherwise it is
    ``file-id-gap`` (info).
    """
    data_ids = [s.file.file_id for s in result.scans if s.has_data]
    if len(data_ids) < 2:
        return
    low, high = min(data_ids), max(data_ids)
    # Counted from the sorted ids present, never by walking the range: a damaged header can claim any
    # 64-bit fileID.
    inside = sorted({f.file_id for f in result.files if low < f.file_id < high})
    count = high - low - 1 - len(inside)
    if count <= 0:
        return
    missing: list[int] = []  # the first few, for people
    expected = low + 1
    for fid in inside + [high]:
        while expected < fid and len(missing) < MAX_LISTED_MISSING_IDS:
            missing.append(expected)
            expected += 1
        expected = fid + 1
    reused = sum(1 for f in result.files if _name_number(f.name) not in (None, f.file_id))
    where = str(result.files[0].path.parent)
    shown = ", ".join(map(str, missing[:10])) + (f" ... ({count} in all)" if count > 10 else "")
    details = {"missingFileIds": missing, "missingCount": count}
    if count <= reused:
        findings.append(Finding(
            Severity.INFO, "file-id-gap",
            f"fileID(s) {shown} missing between data files; explained by {reused} reused file(s)", where, None,
            details))
        return
    added = set()
    compacted = False
    for r in result.live:
        if not r.is_update:
            added.add(r.id)
        if r.compact_count > 0:
            compacted = True
    orphans = sum(1 for r in result.live if r.is_update and r.id not in added)
    details["liveUpdatesWithoutAdd"] = orphans
    if compacted and not orphans:
        findings.append(Finding(
            Severity.INFO, "file-id-gap",
            f"fileID(s) {shown} missing between data files; the journal has been compacted, which frees and "
            f"deletes files, and every live update still has its add: nothing shows a lost file", where, None,
            details))
        return
    because = (f"; {orphans} live update(s) have lost their add record" if orphans else
               " and not explained by reused files")
    findings.append(Finding(
        Severity.WARNING, "missing-journal-file",
        f"fileID(s) {shown} missing between data files{because}: a journal file appears to have been "
        f"removed; its records are lost", where, None, details))


def _load_findings(result: LoadResult, findings: list[Finding]) -> None:
    files = result.files

    def where(a) -> tuple[str, int]:
        return str(files[a.file_index].path), a.offset

    severities = {
        "commit-count-mismatch": Severity.CRITICAL,
        "prepare-count-mismatch": Severity.WARNING,
        "update-unknown-id": Severity.INFO,
        "delete-unknown-id": Severity.INFO,
        "commit-unknown-tx": Severity.INFO,
        "rollback-unknown-tx": Severity.INFO,
    }
    messages = {
        "commit-count-mismatch": lambda i: (
            f"transaction {i['txId']}: the commit record counts {i['expected']} record(s) in its file but "
            f"{i['found']} are there; Artemis discards the whole transaction ({i['records']} record(s))"),
        "prepare-count-mismatch": lambda i: (
            f"transaction {i['txId']}: the prepare record counts {i['expected']} record(s) in its file but "
            f"{i['found']} are there; Artemis treats the transaction as failed"),
        "update-unknown-id": lambda i: (
            f"update of record {i['id']}, which has no add (its file may have been reclaimed)"),
        "delete-unknown-id": lambda i: (
            f"delete of record {i['id']}, which has no add (its file may have been reclaimed)"),
        "commit-unknown-tx": lambda i: (
            f"commit of transaction {i['txId']}, which has no records (they may have been reclaimed)"),
        "rollback-unknown-tx": lambda i: (
            f"rollback of transaction {i['txId']}, which has no records (they may have been reclaimed)"),
    }
    listed: dict[str, int] = {}
    for a in result.anomalies:
        sev = severities[a.code]
        if sev is Severity.INFO:
            # Routine after reclaiming: one finding per kind, with the count and the first place.
            if a.code in listed:
                continue
            listed[a.code] = 1
            path, off = where(a)
            n = result.anomaly_counts[a.code]
            msg = messages[a.code](a.ids) + (f"; {n - 1} more like it" if n > 1 else "")
            findings.append(Finding(sev, a.code, msg, path, off, {"count": n}))
        else:
            path, off = where(a)
            findings.append(Finding(sev, a.code, messages[a.code](a.ids), path, off, dict(a.ids)))
    for tx in result.prepared:
        path, off = (str(files[tx.prepare_location[0]].path), tx.prepare_location[1]) if tx.prepare_location else (None, None)
        findings.append(Finding(
            Severity.INFO, "tx-prepared",
            f"transaction {tx.tx_id} is prepared (XA, in doubt) with {len(tx.records)} record(s) and "
            f"{len(tx.records_to_delete)} delete(s); the broker keeps it until a transaction manager "
            f"resolves it", path, off, {"txId": tx.tx_id}))
    for tx in result.failed:
        first = (tx.records or tx.records_to_delete or [None])[0]
        path = str(files[first.file_index].path) if first is not None else None
        what = "was prepared unhealthily" if tx.prepared else "has no commit, prepare or rollback record"
        findings.append(Finding(
            Severity.INFO, "tx-incomplete",
            f"transaction {tx.tx_id} {what}; the broker rolls back its {len(tx.records)} record(s) at start",
            path, None, {"txId": tx.tx_id}))


def _large_message_findings(store: ArtemisStore, result: LoadResult, findings: list[Finding],
                            paging=None, paged: dict | None = None) -> None:
    ids = set(live_ids_of_type(result.live, ADD_LARGE_MESSAGE, is_update=False))
    for tx in result.prepared:
        ids.update(r.id for r in tx.records if r.user_record_type == ADD_LARGE_MESSAGE)
    # paging (amqtool.engines.artemis.paging): large messages in page files point at .msg files too, and the
    # journal's headers carry _AMQ_LARGE_SIZE, which a broker-written .msg file matches.
    paged = paged or {}
    declared = {mid: j.declared_size for mid, j in paging.view.large.items()} if paging is not None else {}
    lm_dir = store.large_messages_dir
    files: dict[int, str] = {}
    if lm_dir is not None:
        try:
            names = os.listdir(lm_dir)
        except OSError as err:
            findings.append(Finding(Severity.UNKNOWN, "unreadable", f"cannot list: {err.strerror}", str(lm_dir)))
            return
        for n in names:
            stem, dot, ext = n.partition(".")
            if ext == "msg" and stem.isdigit():
                files[int(stem)] = str(Path(lm_dir) / n)
    for mid in sorted(ids - files.keys()):
        findings.append(Finding(
            Severity.CRITICAL, "large-message-missing",
            f"large message {mid} has a journal record but no {mid}.msg body file",
            str(lm_dir / f"{mid}.msg") if lm_dir else None, None, {"messageId": mid}))
    for mid in sorted(paged.keys() - ids - files.keys()):
        p = paged[mid]
        if p.pending:  # a paged large message every queue consumed keeps no claim on its body
            findings.append(Finding(
                Severity.CRITICAL, "large-message-missing",
                f"paged large message {mid} (page {p.page}, message {p.number}) has no {mid}.msg body file",
                str(lm_dir / f"{mid}.msg") if lm_dir else p.path, None, {"messageId": mid, "page": p.page}))
    for mid in sorted(files.keys() - ids - paged.keys()):
        findings.append(Finding(
            Severity.WARNING, "large-message-orphan",
            f"{mid}.msg has no large-message record in the journal or the pages (disk space the broker never "
            f"frees)", files[mid], None, {"messageId": mid}))
    for mid in sorted(files.keys() & (ids | paged.keys())):
        try:  # a body the broker (and this tool) cannot read could not be checked: UNKNOWN for it
            with open(files[mid], "rb"):
                pass
        except IsADirectoryError:  # no body file at all: lost, as a missing one
            findings.append(Finding(
                Severity.CRITICAL, "large-message-missing",
                f"large message {mid}'s body {mid}.msg is a directory, not a file", files[mid], None,
                {"messageId": mid}))
            continue
        except OSError as err:
            findings.append(Finding(
                Severity.UNKNOWN, "unreadable",
                f"large message {mid}'s body file cannot be read ({err.strerror}): its body could not be checked",
                files[mid], None, {"messageId": mid}))
            continue
        size = declared.get(mid) if mid in ids else paged[mid].declared_size
        if size is None:
            continue
        try:
            actual = os.stat(files[mid]).st_size
        except OSError:
            continue
        if actual != size:
            findings.append(Finding(
                Severity.CRITICAL, "large-message-size",
                f"{mid}.msg holds {actual} byte(s) but its header says _AMQ_LARGE_SIZE={size}: the body is "
                + ("truncated" if actual < size else "longer than written"), files[mid], None,
                {"messageId": mid, "size": actual, "declaredSize": size}))


def _jms_findings(result: LoadResult, findings: list[Finding]) -> None:
    """A 1.x JMS journal's live records must decode as ``JMSJournalStorageManagerImpl.load`` decodes them:
    an unknown record type or a body that does not decode makes that load throw (the 1.x broker does not
    start; a 2.x broker ignores the journal, so what it held is only in these records)."""
    from amqtool.formats.artemis.jmsrecords import decode_jms_record

    for rec in result.live:
        try:
            decode_jms_record(rec.user_record_type, result.body(rec))
        except FormatError as err:
            findings.append(Finding(
                Severity.CRITICAL, "jms-record-undecodable",
                f"JMS journal record {rec.id} (type {rec.user_record_type}): {err.message}",
                str(result.files[rec.file_index].path), rec.body_offset))


def verify_journal(store: ArtemisStore, journal: JournalDir, report: VerifyReport,
                   progress: Callable[[int], None] | None = None, paging=None,
                   opened=None) -> LoadResult | None:
    """Verify one journal directory, appending findings and its summary to ``report``. ``opened``: the
    journal already opened by the caller (:func:`open_journal`), who keeps it open to read the bodies of the
    returned load (the export judges the load it exports, so the journal is scanned once)."""
    findings = report.findings
    summary = JournalSummary(journal.kind, str(journal.directory))
    with (contextlib.nullcontext(opened) if opened is not None else open_journal(journal)) as opened:
        _pending_findings(opened, findings)
        summary.files = len(opened.files)
        if not opened.files:
            if not opened.skipped:
                findings.append(Finding(Severity.WARNING, "no-journal-files",
                                        "no loadable journal file in this directory", str(journal.directory)))
            report.journals.append(summary)
            return None
        inspector = _GapInspector(opened, findings)
        result = load_journal(opened, on_file=inspector, progress=progress)
        inspector.finish(result)
        summary.bytes = sum(s.file.size for s in result.scans)
        summary.records = sum(s.records for s in result.scans)
        summary.live_records = len(result.live)
        summary.prepared = len(result.prepared)
        summary.failed = len(result.failed)
        summary.max_id = result.max_id
        if not opened.skipped:  # a refused or unreadable file is reported as such, not as a fileID gap
            _gap_findings(result, findings)
        _load_findings(result, findings)
        if journal.kind == "jms":
            _jms_findings(result, findings)
        if journal.kind == "bindings" and paging is not None:  # paging: queue ids for the page cursors
            paging.add_bindings(result)
        if journal.kind == "messages":
            paged = None
            if paging is not None:  # paging: read the page files while the journal is open
                paging.add_messages(result)
                paged = paging.verify(findings)
                report.paging = paging.summary_json()
            _large_message_findings(store, result, findings, paging, paged)
    report.journals.append(summary)
    return result


def verify_store(store: ArtemisStore, progress: Callable[[int], None] | None = None, *,
                 loads: dict | None = None) -> VerifyReport:
    """Verify every journal of ``store``. Raises UnknownStoreError when it holds no journal.

    ``loads``: a dict that receives ``kind -> (opened journal, load result)`` of the bindings and messages
    journals, left open for the caller to read and close (what the export exports is what was judged)."""
    report = VerifyReport()
    journals = store.journals()
    if not journals and store.jms is None:
        raise UnknownStoreError("no Artemis journal found", path=str(store.root))
    from amqtool.engines.artemis.paging import PagingVerifier

    paging = PagingVerifier(store, progress)
    for journal in journals:
        if loads is None:
            verify_journal(store, journal, report, progress, paging)
            continue
        opened = open_journal(journal)
        loads[journal.kind] = (opened, None)
        loads[journal.kind] = (opened, verify_journal(store, journal, report, progress, paging, opened=opened))
    if store.jms is not None:
        verify_journal(store, store.jms, report, progress)
    if store.messages is None and store.paging_dir is not None:  # paging: pages without a message journal
        paging.verify(report.findings)
        report.paging = paging.summary_json()
    _not_a_store(store, report)
    _journal_gone(store, report)
    return report


def _journal_gone(store: ArtemisStore, report: VerifyReport) -> None:
    """A bindings journal with files but no message journal (its directory gone, or no file in it).

    The broker keeps paged messages' page transactions and its queues' page cursors (acknowledgements and
    page counters) in the message journal, which it recreates empty at start. So page files that still hold
    messages prove the journal's loss: the broker skips every paged message of a transaction it no longer
    knows and delivers again what the lost cursors had acknowledged (CRITICAL ``messages-journal-missing``).
    With no page file holding a message, nothing shows the journal held anything (an upgraded 1.x data
    directory has only a bindings and a JMS journal): no finding."""
    by_kind = {j.kind: j for j in report.journals}
    bindings = by_kind.get("bindings")
    messages = by_kind.get("messages")
    if bindings is None or not bindings.files or (messages is not None and messages.files):
        return
    where = str(store.messages.directory) if store.messages is not None else str(store.root)
    what = "has no journal file" if store.messages is not None else "is missing"
    paged = (report.paging or {}).get("messages", 0)
    if paged:
        pending = (report.paging or {}).get("pendingMessages", 0)
        report.findings.append(Finding(
            Severity.CRITICAL, "messages-journal-missing",
            f"the message journal {what}, while the page files hold {paged} message(s) ({pending} still to consume "
            f"by the page cursors): their page transactions and the cursors' acknowledgements were in that "
            f"journal; the broker skips the transactional ones and delivers acknowledged ones again", where, None,
            {"pagedMessages": paged, "pendingMessages": pending}))


# header problems that mean "not a journal file" (random bytes, another program's file)
_NOT_JOURNAL = ("bad-header-version", "user-version-mismatch", "bad-file-id")


def _not_a_store(store: ArtemisStore, report: VerifyReport) -> None:
    """No file of the store has an Artemis journal header, and no page file is there either: what the files
    hold is not a store (random bytes named like a journal file), which is UNKNOWN ("could not check": the
    man page's "not a store"), not a verdict on a broker's data. The header findings are folded into one
    ``not-a-store`` finding naming the files. A store with one loadable file keeps its CRITICAL findings
    (Artemis refuses to start with a file it cannot read a header from)."""
    if any(j.files for j in report.journals) or (report.paging or {}).get("pages"):
        return
    headers = [f for f in report.findings if f.code in _NOT_JOURNAL]
    if not headers:
        return
    report.findings[:] = [f for f in report.findings if f.code not in _NOT_JOURNAL]
    report.findings.append(Finding(
        Severity.UNKNOWN, "not-a-store",
        f"no file here has an Artemis journal header ({len(headers)} file(s) named like journal files, first "
        f"{os.path.basename(headers[0].path or '')}: {headers[0].message}): not a store",
        str(store.root), None, {"files": [f.path for f in headers]}))


def total_bytes(store: ArtemisStore) -> int:
    """Bytes of the journal files to scan (for progress totals)."""
    total = 0
    for j in store.journals():
        for p in j.journal_files():
            try:
                total += p.stat().st_size
            except OSError:
                pass
    if store.paging_dir is not None:  # paging: the page files verify reads too
        from amqtool.engines.artemis.paging import find_page_stores

        for ps in find_page_stores(store.paging_dir)[0]:
            for pid in ps.pages:
                try:
                    total += ps.page_path(pid).stat().st_size
                except OSError:
                    pass
    return total
