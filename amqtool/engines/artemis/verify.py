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
import functools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from amqtool.errors import FormatError, Finding, Severity, UnknownStoreError
from amqtool.formats.artemis.records import scan_records_py
from amqtool.engines.artemis.load import GAP_EXAMPLES, FileGaps, FileScan, LoadResult, live_ids_of_type, load_journal
from amqtool.engines.artemis.tails import IdLedger, reweigh
from amqtool.engines.artemis.missing_journal import messages_journal_missing
from amqtool.engines.artemis.ack_queue import acks_of_unknown_queues
from amqtool.engines.artemis.message_headers import misread_messages, retyped_messages
from amqtool.engines.artemis.compaction_marks import compactor_outputs
from amqtool.engines.artemis.cmp_copies import lost_copies_finding
from amqtool.engines.artemis.current_file import current_file
from amqtool.engines.artemis.cut_file import cut_current_file
from amqtool.engines.artemis.cut_off_tx import last_open_tx
from amqtool.engines.artemis.deleted_neighbours import update_of_deleted
from amqtool.engines.artemis import deleted_first, free_files, journal_crash, orphan_acks, prepare_mismatch
from amqtool.engines.artemis.acked_refs import readded_refs
from amqtool.engines.artemis.doubled_refs import ack_retyped_finding
from amqtool.engines.artemis.retyped_refs import ref_retyped_finding
from amqtool.engines.artemis.short_records import short_record_finding
from amqtool.engines.artemis.retyped_dupids import retyped_duplicate_id_finding
from amqtool.engines.artemis.page_tx_ids import page_tx_damaged_findings
from amqtool.engines.artemis.open_strays import strayed_findings
from amqtool.engines.artemis.unknown_commits import committed_open_tx
from amqtool.engines.artemis.retyped_tx import retyped_findings
from amqtool.engines.artemis.tx_neighbours import neighbour_tx
from amqtool.engines.artemis.skipped_bindings import skipped_bindings_findings
from amqtool.engines.artemis.page_counter_over import raise_counter_over
from amqtool.engines.artemis.dropped_page_tx import page_tx_dropped_findings
from amqtool.engines.artemis.paged_tx_ids import paged_tx_id_findings
from amqtool.engines.artemis.damaged_ids import never_issued, never_issued_ids
from amqtool.engines.artemis.removed_outputs import removed_outputs
from amqtool.engines.artemis.lost_deletes import (
    cut_deletes, deleted_in_damage, discarded_deletes, moved_deletes, moved_updates,
)
from amqtool.engines.artemis.add_placement import in_present_files, missing_between, placed_in_gaps
from amqtool.engines.artemis.own_acks import ack_before_delete, deleted_after_own_ack
from amqtool.engines.artemis.ref_in_place import run_owned
from amqtool.engines.artemis.strayed_refs import strayed_refs
from amqtool.engines.artemis.lost_end import lost_end
from amqtool.engines.artemis.refless_add import refless_add
from amqtool.engines.artemis.acked_refless import acked_refless
from amqtool.engines.artemis.restart_orphans import left_by_restart, restart_shaped
from amqtool.engines.artemis.stale_tail import compactor_leftover, own_record_start, stale_fragment
from amqtool.formats.artemis.userrecords import JournalRecordIds as _R
from amqtool.engines.artemis.compaction_window import ids_lost_while_compacting
from amqtool.store.journal_files import open_journal, with_negative_ids
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
    loads: dict = field(default_factory=dict)  # kind -> LoadResult, with verify_store(keep=...)
    gaps: dict = field(default_factory=dict)  # kind -> {file index: (FileScan, FileGaps)} of those loads
    pager: object = None  # the PagingVerifier once it has read the pages (stat takes its figures)

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
    only the bytes of damaged regions (up to ``MAX_RECONSTRUCT`` each) and the first bytes of a tail
    (``opened.pread``), never a whole file. Damaged regions are judged once both journals are loaded
    (:meth:`judge`): what the damaged record held decides what its loss costs (``evidence``)."""

    def __init__(self, opened, findings: list[Finding], kind: str):
        self.opened = opened
        self.findings = findings
        self.kind = kind
        self.tails: list[tuple[int, str, int, int]] = []
        self.regions: list[tuple[str, int, int, object]] = []  # (path, first, next record, bytes to rebuild)
        self.mismatched: list = []  # commit-count-mismatch anomalies: judged by what their transaction held
        self.more_damaged: list[tuple[str, int]] = []
        self.foreign: list[tuple[int, str, int, int]] = []  # (file index, path, offset, tag) of record-less files
        self.tail_bytes: dict[int, object] = {}
        self.files: dict[int, tuple[FileScan, FileGaps]] = {}  # file index -> the load's scan and gaps of it
        self.ledger = None  # tails.IdLedger of the store, set by verify_store: judges damaged tails
        # ids whose DELETE the damage this inspector saw may have taken (lost_deletes.py), set by verify_journal
        self.lost_deletes: set[int] = set()
        self.by_tag: dict[int, list[int]] | None = None  # tag -> indexes of the files carrying it (read lazily)
        self.top_tag: int | None = None  # the highest fileID of the journal's files (read lazily)

    def _region(self, scan: FileScan, first: int, end: int):
        """The damaged bytes (and a few before them) to reconstruct from once the load is complete."""
        from amqtool.engines.artemis.evidence import MAX_RECONSTRUCT

        if end - first > MAX_RECONSTRUCT:
            return None
        base = max(first - 24, 16)
        return (self.opened.pread(scan.index, base, end - base), base, scan.file.tag, scan.file.version)

    def __call__(self, scan: FileScan, gaps: FileGaps) -> None:
        self.files[scan.index] = (scan, gaps)
        jf = scan.file
        path = str(jf.path)
        for first, off in gaps.damaged[:MAX_DAMAGED_PER_FILE]:
            self.regions.append((path, first, off, self._region(scan, first, off)))
        if gaps.damaged_count > MAX_DAMAGED_PER_FILE:
            self.more_damaged.append((path, gaps.damaged_count - MAX_DAMAGED_PER_FILE))
        if gaps.tail_first < 0:
            return
        first = gaps.tail_first
        if self.by_tag is None:
            self.by_tag = {}
            for i, f in enumerate(self.opened.files):
                self.by_tag.setdefault(f.tag, []).append(i)
        previous = compactor_leftover(self.opened, scan.index, first, gaps.tail_end, self.by_tag)
        if previous is not None:
            self.findings.append(Finding(
                Severity.INFO, "stale-records",
                f"the compactor's buffer follows the data: the bytes of its previous output (fileID {previous}) at "
                "the same offsets; Artemis ignores them", path, first))
            return
        head = self.opened.pread(scan.index, first, _STALE_SEARCH_LIMIT)
        # A torn record of the current use of the file carries the file's own tag (so does one whose type byte
        # was damaged: the broker skips it)
        if self.top_tag is None:
            self.top_tag = max(f.tag for f in self.opened.files)
        own_tag = own_record_start(head, jf.tag, self.top_tag)
        stale_at = None if own_tag else _first_foreign_record(head, first, jf.tag, jf.version)
        if stale_at is None and not own_tag and stale_fragment(head, first, gaps.tail_end, tag=jf.tag,
                                                                 last_end=gaps.end):
            self.findings.append(Finding(
                Severity.INFO, "stale-records",
                "the tail of a record of an earlier use of this reused file follows the data (its start lies "
                "under this use's last record); Artemis ignores it", path, first))
            return
        if stale_at is not None:
            if scan.records == 0:
                # a file with no record of its own: reinitialised for reuse, or its header's fileID is damaged
                # (judged in judge(): would its records change the live state if the header said their tag?)
                tag = int.from_bytes(head[stale_at - first + 1:stale_at - first + 5], "big", signed=True)
                self.foreign.append((scan.index, path, stale_at, tag))
                return
            self.findings.append(Finding(
                Severity.INFO, "stale-records",
                "records of an earlier use of this reused file follow the data; Artemis ignores them "
                "(their tag is not this file's)", path, stale_at))
            return
        last = gaps.tail_end - first
        # Whether this is a torn tail (newest data file) is known only once every file is scanned; a tail of
        # another file is judged by the record it held, when it is one (a damaged last record).
        self.tails.append((scan.index, path, first, last))
        self.tail_bytes[scan.index] = self._region(scan, first, min(gaps.tail_end + 4, jf.size))

    def finish(self, result) -> None:
        """Keep the load once every file is scanned: which tail is the newest file's (torn by a crash) is
        known only then."""
        self.result = result
        self.mismatched = [a for a in result.anomalies if a.code == "commit-count-mismatch"]

    def judge(self, evidence) -> None:
        """Findings for the damaged regions, discarded transactions and tails, weighed by what the damaged
        records held (:mod:`amqtool.engines.artemis.evidence`)."""
        from amqtool.engines.artemis.evidence import (
            HARMLESS, LOSS, UNKNOWN, Rebuilt, committed_ids, deleted_ids, ended_tx_ids, reconstruct,
            rolled_back_ids, strayed_records, transaction_records)
        from amqtool.engines.artemis.bindings_run import commit_in_zeros, no_binding_change, zeroed_commit_records
        from amqtool.engines.artemis.partial_record import of_deleted_record, partial_record
        from amqtool.engines.artemis.split_region import pair_effect, read_pair
        from amqtool.engines.artemis.wiped_run import run_finding

        max_id = self.result.max_id
        mismatched = {a.ids["txId"] for a in self.mismatched}
        lost_in_tx: dict[int, list] = {}  # tx id -> its records rebuilt from damaged bytes
        lost_at: dict[int, set] = {}  # tx id -> (path, offset) of the damaged regions that held one of its records
        # transactions never applied whatever they held: left open at the end (neither committed nor
        # prepared: the broker discards them at load) and rolled back (read lazily: a rescan)
        open_txs = {tx.tx_id for tx in self.result.failed if not tx.prepared}
        rolled_back: list = []

        def never_applied(tx_id: int) -> bool:
            if tx_id in open_txs:
                return True
            if not rolled_back:
                rolled_back.append(rolled_back_ids(self.opened))
            return tx_id in rolled_back[0]

        def resolved_anyway(rec) -> bool:
            # a ROLLBACK of the transaction survives: JournalImpl.load discards it with or without its PREPARE
            # or COMMIT (onReadRollbackRecord; a transaction is never both committed and rolled back); a COMMIT
            # survives a lost PREPARE: it applies the records either way (onReadCommitRecord)
            never_applied(-1)  # (reads the rolled-back ids once)
            if rec.tx_id in rolled_back[0]:
                return True
            if rec.type == 17 and "committed" not in cache:
                cache["committed"] = committed_ids(self.opened)
            return rec.type == 17 and rec.tx_id in cache["committed"]

        def effect_of(rec):
            if rec.type in (13, 14, 15) and never_applied(rec.tx_id):
                return HARMLESS
            if rec.type in (13, 14, 15):
                # its transaction commits without it (a count in another file) or is discarded whole (the
                # commit's count no longer matches): judged with the transaction's records
                lost_in_tx.setdefault(rec.tx_id, []).append(rec)
                if rec.tx_id in mismatched:
                    return HARMLESS  # the commit-count-mismatch finding below carries the verdict
                return evidence.effect_of_discarded([rec])
            if rec.type in (17, 18) and resolved_anyway(rec):
                return HARMLESS
            if rec.type in (17, 18):
                # a lost PREPARE or COMMIT: the transaction is rolled back at start, with all it held
                return evidence.effect_of_discarded(transaction_records(self.opened, rec.tx_id))
            if rec.type == 19 and evidence.bare:
                # a lost ROLLBACK of a prepared transaction leaves it prepared: JournalImpl.load hands it back
                return LOSS if rec.tx_id in {tx.tx_id for tx in self.result.prepared} else HARMLESS
            return evidence.effect_of_loss(self.kind, rec)

        cache: dict = {}

        def own_deleted() -> set:
            if "deleted" not in cache:
                cache["deleted"] = deleted_ids(self.opened)
            return cache["deleted"]

        def live_ids() -> set:
            if "live" not in cache:
                cache["live"] = {r.id for r in self.result.live}
            return cache["live"]

        for path, first, off, region in self.regions:
            index = next(i for i, f in enumerate(self.result.files) if str(f.path) == path)
            candidates = (reconstruct(region[0], region[1], first, off, region[2], region[3], max_id,
                                      bare=evidence.bare) if region else [])
            if any(r.type == 18 and r.wrong for r in candidates):
                # a commit read with a damaged field, naming a transaction that ended elsewhere, was no commit of it
                # (public bindings journal, seed 7507: zeros over a COMMIT's tag and tx id read as transaction 0's)
                if "ended" not in cache:
                    cache["ended"] = ended_tx_ids(self.opened)
                candidates = [r for r in candidates if not (r.type == 18 and r.wrong and r.tx_id in cache["ended"])]
                # and one whose last record before it is of a transaction left with no end whose discard changes
                # what the broker delivers was that transaction's COMMIT, its id damaged too (demo-s3's bindings,
                # make fuzz seed 9892: 16 zeros over a COMMIT's tag and tx id read as transaction 0's, "changes
                # nothing", while the broker rolled back the queue binding it committed, with its 32 messages)
                cut = (last_open_tx(self.result, index, first)
                       if any(r.type == 18 and r.wrong for r in candidates) else None)
                if cut is not None and evidence.effect_of_discarded(transaction_records(self.opened, cut)) != HARMLESS:
                    candidates = [replace(r, tx_id=cut, wrong=f"{r.wrong} and transaction id")
                                  if r.type == 18 and r.wrong else r for r in candidates]
            nameless = {r.tx_id for r in candidates if r.type in (13, 14, 15) and r.wrong
                        and not transaction_records(self.opened, r.tx_id)}
            if nameless:
                # a transactional record read with a damaged field, naming a transaction with no other record, was
                # one of the transaction whose records are written around it (tx_neighbours.py)
                owner = neighbour_tx(self.opened, index, first, off)
                if owner is not None:
                    candidates = [replace(r, tx_id=owner, wrong=f"{r.wrong} and transaction id")
                                  if r.type in (13, 14, 15) and r.tx_id in nameless else r for r in candidates]
            effects = {effect_of(rec) for rec in candidates}
            effect = effects.pop() if len(effects) == 1 else UNKNOWN
            rec = candidates[0] if candidates else None
            if candidates and {(r.type in (13, 14, 15), r.tx_id) for r in candidates} == {(True, rec.tx_id)}:
                lost_at.setdefault(rec.tx_id, set()).add((path, first))
            if not candidates and region:  # more than one field damaged: its intact head may still tell
                part = partial_record(region[0], region[1], first, off, region[2], region[3])
                if part is not None and of_deleted_record(part, own_deleted(), live_ids()):
                    rec, effect = part, (effect_of(part) if part.type in (13, 14) else HARMLESS)
            if not candidates and region and effect != HARMLESS:  # two records, each damaged at one end
                pair = read_pair(region, first, off, self.result, index)
                if pair is not None:
                    rec, effect = pair, pair_effect(pair, effect_of, evidence, self.opened, self.kind)
            last_ack = (ack_before_delete(self.opened, index, first, off)
                        if rec is None and region and self.kind == "messages" else None)
            if last_ack is not None:  # an acknowledgement whose head was damaged, right before its DELETE
                self.findings.append(Finding(
                    Severity.WARNING, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records: an update of an acknowledgement's "
                    f"size right before the DELETE of message {last_ack[0]}, whose records acknowledge every queue "
                    f"they reference but queue {last_ack[1]}: its last acknowledgement, whose loss changes nothing the "
                    f"broker delivers (the DELETE removes the message all the same)", path, first,
                    {"nextValidRecord": off, "lastAck": {"messageId": last_ack[0], "queueId": last_ack[1]}}))
                continue
            deleted_one = (update_of_deleted(self.opened, index, first, off)
                           if rec is None and region and self.kind == "messages" else None)
            if deleted_one is not None:  # an update whose head was damaged, between two records of one message
                self.findings.append(Finding(
                    Severity.WARNING, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records: an update written between two "
                    f"records of message {deleted_one}, so one of its own, and a DELETE of the message survives "
                    f"after it: its loss changes nothing the broker delivers", path, first,
                    {"nextValidRecord": off, "deletedMessage": deleted_one}))
                continue
            refless = (refless_add(self.opened, index, first, evidence, off)
                       if (effect == HARMLESS or rec is None) and region and self.kind == "messages" else None)
            if refless is not None:
                # however the bytes read back (a reference with its id damaged too reads as an update of some
                # other record: 02_broker_mixed_compacted, header zeros; or nothing: zeros over whole records), the
                # message whose ADD is the last record before them has no reference anywhere: they held its
                # references (refless_add.py). Proof, so weighed before the ids around a run
                self.findings.append(Finding(
                    Severity.CRITICAL, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records (the broker skips them and goes on): "
                    f"message {refless}, whose ADD is the last record before them, has no reference left anywhere: "
                    f"they held its references, and the broker deletes a message no queue holds at start", path,
                    first, {"nextValidRecord": off, "reflessMessage": refless}))
                continue
            ended = (lost_end(self.opened, self.result, index, first, first, evidence)
                     if rec is None and region and self.kind == "messages" else None)
            if ended is not None:
                # the run begins with a PREPARE or COMMIT head of a transaction the load fails (lost_end.py, as on a
                # damaged end): the broker wrote its end there. Proof, so weighed before the ids around a run,
                # which cannot tell a lost end from a transaction a client rolled back (cut_off_tx.py)
                what = "PREPARE" if ended[0] == 17 else "COMMIT"
                self.findings.append(Finding(
                    Severity.CRITICAL, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records (the broker skips them and goes on): "
                    f"the first record lost there, whose header survives, is the {what} of transaction {ended[1]}, "
                    f"which the load holds open with live records: the broker fails the transaction and loses them",
                    path, first, {"nextValidRecord": off, "lostEnd": {"recordType": ended[0], "txId": ended[1]}}))
                continue
            run = (run_finding(self.ledger, self.result, path, first, off, region, evidence, effect_of, own_deleted())
                   if rec is None and region and self.kind == "messages" else None)
            if run is not None:  # records taken whole: judged by the ids around them (wiped_run.py)
                self.findings.append(run)
                continue
            why = (no_binding_change(region, first, off, self.result, evidence, index)
                   if effect != HARMLESS and region and self.kind == "bindings" else None)
            if why is not None:  # too few bytes for a binding transaction (bindings_run.py)
                self.findings.append(Finding(
                    Severity.WARNING, "damaged-record", f"{off - first} damaged byte(s) followed by valid records "
                    f"(the broker skips them and goes on): {why}", path, first, {"nextValidRecord": off}))
                continue
            if effect == HARMLESS and region and self.kind == "bindings":
                # the zeros before them took whole records (bindings_run.py)
                open_tx = commit_in_zeros(self.result, evidence, index, first)
                emptied = zeroed_commit_records(self.result, index, first, rec) if open_tx is None else None
                if open_tx is not None or emptied is not None:
                    why = (f"binding transaction {open_tx}, left open, may have ended there (its COMMIT lost, the "
                           f"broker drops what it held)" if open_tx is not None else
                           f"they end with the COMMIT of transaction {emptied}, no record of which is left: the "
                           f"zeros took its binding change")
                    self.findings.append(Finding(
                        Severity.CRITICAL, "damaged-record",
                        f"{off - first} damaged byte(s) followed by valid records, after zeros running back to the "
                        f"last record read, which took whole records: {why}", path, first,
                        {"nextValidRecord": off, "txId": open_tx if open_tx is not None else emptied}))
                    continue
            if effect == HARMLESS:
                self.findings.append(Finding(
                    Severity.WARNING, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records: they held {_held(rec)}, whose "
                    f"loss changes nothing the broker delivers", path, first, {"nextValidRecord": off}))
            else:
                what = (f"they held {_held(rec)}, which the broker will lose" if effect == LOSS else
                        f"they held {_held(rec)}" if rec is not None else "at least one record was lost here")
                self.findings.append(Finding(
                    Severity.CRITICAL, "damaged-record",
                    f"{off - first} damaged byte(s) followed by valid records (the broker skips them and goes "
                    f"on): {what}", path, first, {"nextValidRecord": off}))
        files = self.result.files
        # A COMMIT split from its records by a damaged transaction id commits nothing ("commit-unknown-tx") and
        # leaves its own transaction open, which the broker rolls back at start (unknown_commits.py).
        failed = {tx.tx_id: tx for tx in self.result.failed if not tx.prepared}
        for a in self.result.anomalies:
            if a.code != "commit-unknown-tx" or not failed:
                continue
            t = a.ids["txId"]
            if any(p == str(files[a.file_index].path) for p, _ in lost_at.get(t, ())):
                # its own records lie in damaged bytes of its file, read back under its id: they were lost, not
                # split from it by a damaged id (the damaged-record finding weighs them)
                continue
            tx = committed_open_tx(self.result, self.opened, a, failed)
            if tx is not None:
                recs = [Rebuilt(13 if not r.is_update else 14, 0, 0, tx.tx_id, r.id, r.user_record_type,
                                self.opened.pread(r.file_index, r.body_offset, r.body_len), "")
                        for r in tx.records]
                recs += [Rebuilt(15, 0, 0, tx.tx_id, r.id, 0, b"", "") for r in tx.records_to_delete]
                effect = evidence.effect_of_discarded(recs)
                if effect != HARMLESS:
                    self.findings.append(Finding(
                        Severity.CRITICAL, "commit-damaged",
                        f"the commit of transaction {t}, which has no records, committed open transaction "
                        f"{tx.tx_id} (one damaged byte apart, or the page transaction it holds names {t}): a "
                        f"transaction id was damaged, so the broker rolls {tx.tx_id} back and loses what it held "
                        f"({len(recs)} record(s))", str(files[a.file_index].path), a.offset,
                        {"txId": tx.tx_id, "commitTxId": t}))
        for a in self.mismatched:
            i = a.ids
            where = str(files[a.file_index].path)
            unexplained = i["expected"] - i["found"] - sum(1 for p, _ in lost_at.get(i["txId"], ()) if p == where)
            effect = evidence.effect_of_discarded(
                lost_in_tx.get(i["txId"], []),
                intact=transaction_records(self.opened, i["txId"])
                + strayed_records(self.result, self.opened, i["txId"], unexplained, a.file_index))
            harmless = effect == HARMLESS
            self.findings.append(Finding(
                Severity.WARNING if harmless else Severity.CRITICAL, "commit-count-mismatch",
                f"transaction {i['txId']}: the commit record counts {i['expected']} record(s) in its file but "
                f"{i['found']} are there; Artemis discards the whole transaction ({i['records']} record(s))"
                + ("; none of them changes what the broker delivers" if harmless else
                   "; the broker loses what it held" if effect == LOSS else ""),
                str(files[a.file_index].path), a.offset, dict(i)))
        for index, jf in enumerate(self.result.files):
            if jf.file_id >= 1 << 31:
                changes = evidence.changes_with(self.kind, _retagged(self.opened, index, jf.tag))
                self.findings.append(Finding(
                    Severity.CRITICAL if changes else Severity.WARNING, "file-id-damaged",
                    f"header fileID {jf.file_id} is not one Artemis issues (its records carry {jf.tag}): its high "
                    f"bytes were damaged and the broker loads this file after every other, "
                    + ("which changes what it delivers" if changes else "to the same state"),
                    str(jf.path), 8, {"fileId": jf.file_id, "recordTag": jf.tag}))
        # A free file keeps the records of its earlier use, which read under their old fileID change the live
        # state (their deletes reclaimed or compacted away): only what a free file cannot be tells a damaged
        # header (free_files.py).
        # ids deleted by a transaction the load drops (a COMMIT whose count the damage changed, or one left open)
        # have live updates because of that damage, not because a free file holds their add
        explained = self.lost_deletes
        if self.foreign and (self.mismatched or self.result.failed):
            explained = explained | discarded_deletes(self.result)
        for index, path, offset, tag in self.foreign:
            retagged = functools.partial(_retagged, self.opened, index, tag)
            lone = len(self.foreign) == 1
            if free_files.header_damaged(self.result, index, tag, retagged, lone,
                                         explained) and evidence.changes_with(
                    self.kind, retagged()):
                self.findings.append(Finding(
                    Severity.CRITICAL, "file-header-damaged",
                    f"none of this file's records carry its header's fileID, but they carry {tag}, and read under "
                    f"it they hold live records: the header was damaged and the broker will not load them",
                    path, 8, {"recordTag": tag}))
            else:
                self.findings.append(Finding(
                    Severity.INFO, "stale-records",
                    "records of an earlier use of this reused file follow the data; Artemis ignores them (their "
                    "tag is not this file's: a free file, re-initialised for reuse with its old records kept)",
                    path, offset))
        for skipped in self.opened.skipped:
            if skipped.code == "bad-file-id":
                self.findings.append(self._bad_file_id(skipped, evidence))
        for path, n in self.more_damaged:
            self.findings.append(Finding(
                Severity.CRITICAL, "damaged-record", f"{n} more damaged region(s) in this file", path, None))
        current = current_file(self.result)
        self._clean_ends(current, evidence)
        for index, path, first, length in self.tails:
            effect = None
            # bytes that read as one damaged record stand for it alone, unless the room left would have held the
            # next file's first record: then records were written after it too (tails.py weighs them)
            if index != current and _room_for_next(self.result, index, first) is None:
                effect = self._tail_effect(index, first, length, evidence, effect_of)
            elif index == current and not journal_crash.crash_left(self.result, index, first):
                last_end = self.files[index][1].end if index in self.files else None
                effect = (journal_crash.lost_record_effect(self.opened, index, first, effect_of, self.result.max_id,
                                                           length, self.kind, bare=evidence.bare, last_end=last_end)
                          or self._tail_effect(index, first, length, evidence, effect_of))
                self.findings.append(journal_crash.not_a_crash_finding(
                    path, first, length, effect, self.kind,
                    journal_crash.own_record_at(self.opened, index, first, last_end), evidence.bare))
                continue
            if effect is None and index != current:
                retyped = self._retyped_effect(index, first, effect_of)
                if retyped is not None:
                    self.findings.append(retyped)
                    continue
            if effect is None:
                self.findings.append(reweigh(tail_finding(self.result, index, path, first, length), self.ledger,
                                             self.result, index, first, evidence))
                continue
            harmless = effect == HARMLESS
            self.findings.append(Finding(
                Severity.WARNING if harmless else Severity.CRITICAL, "damaged-tail",
                f"{length} byte(s) of a damaged record after the last valid record of a file that is not the "
                f"newest: " + ("its loss changes nothing the broker delivers" if harmless else
                              "the broker will lose what it held"), path, first))

    def _clean_ends(self, current: int, evidence) -> None:
        """A ``damaged-tail`` for each data file before the current one that ends cleanly but leaves room for the
        next file's first record (:mod:`~amqtool.engines.artemis.clean_end`): records were lost there, weighed as
        a damaged end's (``tails.reweigh``)."""
        from amqtool.engines.artemis.clean_end import cut_at_record, room_left

        damaged = {index for index, *_ in self.tails}
        compacting = any(p.code == "leftover-cmp" for p in self.opened.pending)
        for scan in self.result.scans:
            index = scan.index
            if not scan.has_data or index >= current or index in damaged:
                continue
            end = self.files[index][1].end if index in self.files else -1
            cut = cut_at_record(self.result, index, end)
            if cut is not None:
                finding = Finding(
                    Severity.CRITICAL, "damaged-tail",
                    f"the file ends exactly where its last record ends, {cut} bytes, shorter than the journal's "
                    f"files: Artemis fills every file to its size before use, so it was cut at a record's start, "
                    f"and the records after the cut are lost", str(scan.file.path), cut,
                    {"cleanEnd": True, "cut": True})
                self.findings.append(reweigh(finding, self.ledger, self.result, index, cut, evidence))
                continue
            room = room_left(self.result, index, end, compacting)
            if room is None:
                continue
            end, free, size = room
            finding = Finding(
                Severity.WARNING, "damaged-tail",
                # (", which leaves": tails.reweigh keeps what precedes it and says the rest its own way)
                f"the file ends cleanly after its last record (cut or zeroed from a record's start), which leaves "
                f"{free} byte(s) free while the next file (the next fileID) starts with a {size}-byte record: the "
                f"broker moves to a new file only for a record that does not fit, so records written here were "
                f"lost", str(scan.file.path), end,
                {"freeBytes": free, "nextRecordSize": size, "recordsLost": True, "cleanEnd": True})
            self.findings.append(reweigh(finding, self.ledger, self.result, index, end, evidence))

    def _bad_file_id(self, skipped, evidence) -> Finding:
        """A header with a negative fileID. ``JournalFileImpl`` tags records with ``fileID & 0x7FFFFFFF``, so
        when only the high bytes were damaged the broker still reads the file's records, and loads the file
        first (``JOURNAL_FILE_COMPARATOR`` compares the 64-bit ids; the real JournalImpl does so); the load here
        skips it. Only the order of its records against the others' changed, so the finding is CRITICAL when the
        file read first gives the broker another live state or other prepared transactions than the file read
        in its place (its records' tag: :func:`evidence.loads_alike`), and a warning otherwise. When
        its records carry another tag than the header's low bits, the broker reads none of them (it tags by the
        header), and they were either this file's own (its low bytes damaged too) or an earlier use's (a free
        file, reinitialised under a new fileID with its old records kept: ``JournalFilesRepository
        .reinitializeFile``); which cannot be told, so it is CRITICAL when reading them under their tag, in its
        place, changes the live state, else a warning: lost or stale, they hold nothing the broker delivers.
        Else a warning (a free file: nothing the broker delivers changes)."""
        import dataclasses

        from amqtool.formats.artemis.records import file_tag
        from amqtool.engines.artemis.evidence import loads_alike
        from amqtool.store.journal_files import JournalFile, OpenedJournal, read_head

        critical = Finding(Severity.CRITICAL, skipped.code, skipped.message, skipped.path, skipped.offset)
        path = Path(skipped.path)
        got = read_head(path)
        if got is None:
            return critical
        header, size, first_tag = got
        own = file_tag(header.file_id)
        if not self.opened.files or header.user_version != self.opened.files[0].header.user_version:
            return critical
        jf = JournalFile(path=path, name=path.name, size=size, header=header)

        def with_file(f):  # the other files as the broker orders them, and ``f``
            others = [o for o in self.opened.files if o.path != path]
            return OpenedJournal(self.opened.journal, sorted(others + [f], key=lambda x: x.file_id))

        if first_tag is not None and first_tag != own:
            # another file has that fileID: Artemis issues each once, so they are an earlier use's records
            stale = any(f.file_id == first_tag for f in self.opened.files)
            # A negative fileID is damage to the header's high bytes, which leaves its low 31 bits as they were:
            # when they are an id above the records' tag that no other file has, within the journal's ids, the
            # file was a freed one reinitialised under that new id (reinitializeFile: the next fileID, old
            # records kept), whose records the broker never read before the damage either
            others = [f.file_id for f in self.opened.files if f.path != path and 0 < f.file_id < 1 << 31]
            reused = (not stale and 0 < first_tag < own and own not in others and bool(others)
                      and own <= max(others) + 1)
            if reused:
                return Finding(
                    Severity.WARNING, skipped.code,
                    skipped.message + f"; its low 31 bits ({own}) are an id above the tag its records carry "
                    f"({first_tag}) that no other file has: a freed file reinitialised under a new fileID, its "
                    f"earlier use's records kept, which the broker reads neither way",
                    skipped.path, skipped.offset, {"fileId": header.file_id, "recordTag": first_tag})
            if first_tag <= 0 or not stale and evidence.changes_with(
                    self.kind, with_file(dataclasses.replace(jf, header=dataclasses.replace(header,
                                                                                            file_id=first_tag)))):
                return critical
            return Finding(
                Severity.WARNING, skipped.code,
                skipped.message + (f"; another file has fileID {first_tag}, the tag they carry: they are records of "
                                   f"an earlier use of this file, which the broker never reads" if stale else
                                   f"; read under the tag they carry ({first_tag}), in its place, its records change "
                                   f"nothing the broker delivers: lost or an earlier use's, none was a live record"),
                skipped.path, skipped.offset, {"fileId": header.file_id, "recordTag": first_tag})

        # what was lost is only the file's place: the broker reads it first, where it was written in its place
        # (under its records' tag); the same file read in either place is the same store to the broker
        placed = dataclasses.replace(jf, header=dataclasses.replace(header, file_id=own))
        if not loads_alike(self.kind, with_file(jf), with_file(placed), evidence.bare):
            return Finding(Severity.CRITICAL, skipped.code,
                           skipped.message + "; read first (as the broker reads it) rather than in its place, it "
                           "changes what the broker delivers", skipped.path, skipped.offset,
                           {"fileId": header.file_id})
        return Finding(
            Severity.WARNING, skipped.code,
            skipped.message + "; read there rather than in its place, it changes nothing the broker delivers",
            skipped.path, skipped.offset, {"fileId": header.file_id})

    def _retyped_effect(self, index: int, first: int, effect_of) -> Finding | None:
        """CRITICAL when the tail of a file that is not the newest starts with a record of this use whole but
        for its type byte, whose loss the broker delivers (:mod:`~amqtool.engines.artemis.retyped_tail`);
        else None (the tail is judged as one)."""
        from amqtool.engines.artemis.evidence import LOSS
        from amqtool.engines.artemis.retyped_tail import retyped_record

        jf = self.opened.files[index]
        rec = retyped_record(lambda off, n: self.opened.pread(index, off, n), first, jf.tag, jf.version,
                             self.result.max_id)
        if rec is None or effect_of(rec) != LOSS:
            return None
        return Finding(
            Severity.CRITICAL, "damaged-tail",
            f"the record after the last valid record of a file that is not the newest is whole but for its type "
            f"byte ({rec.total} bytes, record id {rec.id}, user record type {rec.user_type}): the broker skips it, "
            f"and loses what it held", str(jf.path), first,
            {"recordId": rec.id, "userRecordType": rec.user_type, "recordType": rec.type})

    def _tail_effect(self, index: int, first: int, length: int, evidence, effect_of):
        """What losing the damaged last record of a file that is not the newest costs, when the tail's bytes
        read as one record (None: they do not)."""
        from amqtool.engines.artemis.evidence import UNKNOWN, reconstruct

        region = self.tail_bytes.get(index)
        if region is None:
            return None
        buf, base, tag, version = region
        for end in range(first + length, min(first + length + 4, base + len(buf)) + 1):
            candidates = reconstruct(buf[:end - base], base, first, end, tag, version, self.result.max_id,
                                     bare=evidence.bare)
            if candidates:
                effects = {effect_of(rec) for rec in candidates}
                return effects.pop() if len(effects) == 1 else UNKNOWN
        return None


def newest_data_file(result) -> int:
    """Index of the newest file holding records in a load ``result`` (the one a crash can tear), or -1."""
    data_indexes = [s.index for s in result.scans if s.has_data]
    return data_indexes[-1] if data_indexes else -1


def tail_finding(result, index: int, path: str, first: int, length: int) -> Finding:
    """The judgement of ``length`` bytes at ``first`` after the last valid record of file ``index`` that are
    neither filler nor an earlier use's records: a torn tail of the newest file (what a crash mid-write
    leaves), a damaged tail of another one, or a cut when the file is shorter than the journal's others
    (Artemis fills every file to the journal's file size before use). The current file is
    :func:`~amqtool.engines.artemis.current_file.current_file`'s: the newest data file, or a later one whose first
    record is the one torn."""
    if index == current_file(result):
        if not journal_crash.crash_left(result, index, first):
            return journal_crash.not_a_crash_finding(path, first, length, None)
        where = ("after the last valid record of the newest file" if first > 16 else
                 "at the start of the newest file, its first record (the broker had just moved to this file)")
        return Finding(
            Severity.WARNING, "torn-tail",
            f"{length} byte(s) of a partly written record {where}: the broker stopped mid-write and will drop "
            f"that record", path, first)
    sizes = [f.size for f in result.files]
    if len(sizes) > 1 and sizes[index] < max(sizes):
        # records were lost (a file the broker moved on from holds no torn record), but what they held is
        # weighed as any damaged end's: ``tails.reweigh`` (``cut``)
        return Finding(
            Severity.WARNING, "damaged-tail",
            f"{length} byte(s) of a cut record after the last valid record of a file that is not the "
            f"newest and is shorter than the journal's files: it was truncated, and the records after "
            f"the cut are lost", path, first, {"cutRecordBytes": length})
    room = _room_for_next(result, index, first)
    if room is not None:
        # records were lost here, but what they held is gone with them: nothing proves the broker delivers
        # less (the fault campaign has such stores where it does not), so a warning that says so
        return Finding(
            Severity.WARNING, "damaged-tail",
            f"{length} byte(s) of damaged data after the last valid record of a file that is not the newest, "
            f"which leaves {room[0]} byte(s) free, while the next file starts with a {room[1]}-byte record: the "
            f"broker moves to a new file only for a record that does not fit, so records were written here and "
            f"are lost (what they held cannot be told)", path, first,
            {"freeBytes": room[0], "nextRecordSize": room[1], "recordsLost": True})
    return Finding(
        Severity.WARNING, "damaged-tail",
        f"{length} byte(s) of damaged data after the last valid record of a file that is not "
        f"the newest (what a crash mid-write leaves once the broker has moved on, or damage)",
        path, first)


_ROOM_ALIGNMENT = 4096  # the largest block start Artemis aligns a reopened file's position to (AIO; NIO and MAPPED: 1)


def _room_for_next(result, index: int, first: int) -> tuple[int, int] | None:
    """(free bytes after the last valid record of file ``index``, size of the first record of the next data
    file) when that record would have fit in them; else None.

    ``JournalImpl.switchFileIfNecessary`` opens the next file only for a record that does not fit in the
    current one, and a restart goes on writing at the end of the last valid record of the newest file
    (``setUpCurrentFile``, at ``calculateBlockStart``: unmoved by NIO and MAPPED, whose alignment is 1 -- their
    files' first record follows the 16-byte header -- and aligned by AIO, given up to 4096 bytes here), so a file
    the broker moved on from has less room left than the next file's first record needs -- unless the move was
    forced: a compaction starts by moving on
    (the file it leaves is compacted away, and the compactor's last output ends wherever the live data
    ended: its records carry a compactCount above 0, so such a file is not judged here), and so does a
    replication sync (``forceMoveNextFile``), which leaves a clean end, never damaged bytes (this judges a
    damaged tail only). Format version 1 records carry no compactCount: not judged."""
    from amqtool import native

    opened = result.opened
    jf = result.files[index]
    if jf.version < 2:
        return None
    later = [s.index for s in result.scans if s.has_data and s.index > index]
    if not later:
        return None
    nxt = result.files[later[0]]
    head = opened.pread(later[0], 0, min(nxt.size, 1 << 20))
    recs, _ = native.scan_records(head, nxt.tag, nxt.version, True, 16)
    if not recs or recs[0][1] != 16 or recs[0][3] != 0:
        return None  # the next file's first record is damaged, or the compactor wrote it (or its count is damaged)
    own, _ = native.scan_records(opened.read_file(index), jf.tag, jf.version, True, 16)
    own = [r for r in own if r[1] < first]
    if own and own[-1][3] != 0:
        return None  # the compactor's last output
    end = own[-1][1] + own[-1][2] if own else 16
    # a file whose first record follows its 16-byte header was written unaligned (NIO, MAPPED: getAlignment() is
    # 1, so calculateBlockStart never moves a reopened file's position), as was the next one (checked above)
    align = 1 if (own[0][1] if own else first) == 16 else _ROOM_ALIGNMENT
    free = jf.size - -(-end // align) * align
    return (free, recs[0][2]) if recs[0][2] <= free else None


def _retagged(opened, index: int, tag: int):
    """``opened`` with file ``index``'s header fileID set to ``tag`` (and the files in load order again): what
    Artemis would load had that header not been damaged."""
    import dataclasses

    from amqtool.store.journal_files import OpenedJournal

    files = list(opened.files)
    jf = files[index]
    files[index] = dataclasses.replace(jf, header=dataclasses.replace(jf.header, file_id=tag))
    files.sort(key=lambda f: f.file_id)
    return OpenedJournal(opened.journal, files)


def _held(rec) -> str:
    if isinstance(rec, list):  # two records read from one damaged region (split_region.py)
        return " and ".join(_held(r) for r in rec)
    names = {10: "an event", 11: "an add", 12: "an update", 13: "a transactional add", 14: "a transactional update",
             15: "a transactional delete", 16: "a delete", 17: "a prepare", 18: "a commit", 19: "a rollback"}
    what = names.get(rec.type, f"a type-{rec.type} record")
    ident = f" of record {rec.id}" if rec.id >= 0 else ""
    tx = f" in transaction {rec.tx_id}" if rec.tx_id >= 0 else ""
    user = f" (user record type {rec.user_type})" if rec.type in (11, 12, 13, 14) else ""
    return f"{what}{ident}{user}{tx} (its {rec.wrong or 'bytes'} damaged)"


def _unreported_lost_commits(result, evidence, findings: list[Finding]) -> list[Finding]:
    """``lost_commits``' findings for the transactions no damaged end already names as committed and lost."""
    from amqtool.engines.artemis.lost_commits import lost_commit_findings

    if result is None or result.opened.skipped or any(
            f.code in ("file-id-damaged", "bad-file-id", "duplicate-file-id") for f in findings):
        return []  # a file left out or read otherwise than the broker reads it: its transactions' ends are not this load's
    named = {int(t) for f in findings if f.code == "damaged-tail" and (f.details or {}).get("lostIds")
             for t in f.details["lostIds"].get("committedTransactions", {})}
    # a transaction whose id a damaged byte made (tx-id-damaged: records strayed from a committed one) is judged there
    named |= {f.details["txId"] for f in findings if f.code == "tx-id-damaged" and f.details}
    return [f for f in lost_commit_findings(result, evidence) if f.details["txId"] not in named]


def _pending_findings(opened, findings: list[Finding]) -> None:
    # one finding for a compaction's leftover .cmp files: a compaction killed mid-way leaves one per output it had
    # opened (234 on a hold-out written by real JournalImpl), and Artemis deletes them all at start
    cmps = [p for p in opened.pending if p.code == "leftover-cmp"]
    if cmps:
        message = (cmps[0].message if len(cmps) == 1 else
                   f"leftover .cmp file and {len(cmps) - 1} more beside it: Artemis deletes them at start")
        findings.append(Finding(Severity.WARNING, "leftover-cmp",
                                message + " (a compaction was interrupted before it committed)",
                                cmps[0].path, None, {"files": [p.path for p in cmps]} if len(cmps) > 1 else {}))
    for p in opened.pending:
        if p.code in ("control-file-rollforward", "control-file-discard", "control-file-unreadable"):
            findings.append(Finding(Severity.WARNING, "interrupted-compaction", p.message, p.path, None))
        elif p.code == "leftover-tmp":
            findings.append(Finding(Severity.INFO, "leftover-tmp", p.message, p.path))
    for s in opened.skipped:
        if s.code == "unreadable":  # could not check: not a verdict on the store
            # (journalFile: its records may end other records' lives, so no live state is known without it)
            findings.append(Finding(Severity.UNKNOWN, s.code, s.message, s.path, s.offset, {"journalFile": True}))
        elif s.code == "bad-file-id":
            if not opened.files:  # no load to weigh it against (judged in _GapInspector.judge otherwise)
                findings.append(Finding(Severity.CRITICAL, s.code, s.message, s.path, s.offset))
        else:
            findings.append(Finding(Severity.CRITICAL, s.code, s.message + " (Artemis will refuse to start)",
                                    s.path, s.offset))


def _duplicate_findings(result: LoadResult, findings: list[Finding], foreign: set[int]) -> None:
    """Two data files whose headers carry one fileID. JournalFilesRepository orders the files by fileID, so
    the order of the two is undefined, and records of one can land before or after those of the other: that
    is CRITICAL -- unless one of them holds no record at all, under that fileID or any other (a free file:
    ``foreign`` holds the indexes of files with records of another tag only), where no order changes what
    the broker loads. A byte-for-byte copy loads twice to the same state: a WARNING."""
    seen: dict = {}  # fileID -> the first FileScan with it
    for scan in result.scans:
        f = scan.file
        if f.file_id not in seen:
            seen[f.file_id] = scan
            continue
        first = seen[f.file_id]
        other = first.file
        if _same_bytes(other.path, f.path):
            # a copy: Artemis loads its records twice, in a row; every add, update and delete then lands on
            # the same id again and the live state is the one the original gives
            findings.append(Finding(
                Severity.WARNING, "duplicate-file-id",
                f"a byte-for-byte copy of {other.name} (header fileID {f.file_id}): Artemis loads its records "
                f"twice, to the same state; remove the copy", str(f.path), 8))
        elif (first.records or first.index in foreign) and (scan.records or scan.index in foreign):
            findings.append(Finding(
                Severity.CRITICAL, "duplicate-file-id",
                f"header fileID {f.file_id} is also in {other.name}, with other records: their load order is "
                f"undefined", str(f.path), 8))
        elif scan.records or scan.index in foreign:
            seen[f.file_id] = scan  # the one that holds records is the one a later duplicate is weighed against


def _same_bytes(a, b, window: int = 1 << 20) -> bool:
    """Whether two files hold the same bytes (read in windows)."""
    try:
        if os.stat(a).st_size != os.stat(b).st_size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(window), fb.read(window)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _name_number(name: str) -> int | None:
    """N of ``<prefix>-N.<ext>`` (JournalFilesRepository.getFileNameID)."""
    stem = name.split(".", 1)[0]
    tail = stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _compaction_evidence(result: LoadResult, lost_deletes: set[int] = frozenset(),
                         missing=None) -> tuple[bool, int, int]:
    """(whether the journal was compacted: a live record with a compactCount, or a file the compactor wrote
    (:mod:`~amqtool.engines.artemis.compaction_marks`), the number of live updates whose add is gone, the number
    of those a restart may have left: :func:`~amqtool.engines.artemis.restart_orphans.restart_shaped`, not
    counted in the second). A
    compaction frees files and gives freed files new ids, so a file gone from between data files proves a loss
    only in a journal never compacted, or beside live updates that lost their add (the broker never frees a
    file holding the add of a live record). ``missing``: a test of a bracket of fileIDs (add_placement.py): only
    the updates whose add could have lain in a missing fileID count."""
    added = set()
    compacted = bool(compactor_outputs(result))
    for r in result.live:
        if not r.is_update:
            added.add(r.id)
        if r.compact_count > 0:
            compacted = True
    # a DELETE the damage took leaves its record's updates live, whose add the reclaimer freed long ago
    # (lost_deletes.py): they are no trace of a removed file
    orphans = {r.id for r in result.live if r.is_update and r.id not in added} - set(lost_deletes)
    orphans -= moved_deletes(result, orphans)
    orphans -= moved_updates(result, orphans)
    if orphans:  # deleted by a transaction the damage made the load drop (lost_deletes.discarded_deletes)
        orphans -= discarded_deletes(result)
    if orphans:  # a deleted message's last acknowledgement, its id damaged: its DELETE follows (own_acks.py)
        orphans -= deleted_after_own_ack(result, orphans)
    if orphans:  # a reference written right after its message's ADD, its id damaged (ref_in_place.py)
        orphans -= set(run_owned(result, orphans))
    # A lone id of updates without their add, one flipped bit from a live add's id, is that record's id
    # damaged (the broker applies it to nothing), as likely as a lost file holding that one add: no evidence
    # of a lost file by itself. Real JournalImpl stores with reclaimer gaps showed such flips turned into a
    # CRITICAL missing-journal-file. A lost file leaves the updates of every add it held.
    # An acknowledgement is excepted: one in a later file than its message's records is what a lost file
    # leaves most (the fault campaign's deleted files), and its message is delivered again.
    # Any lone orphan id the broker never issued (damaged_ids: negative, or far outside the journal's ids) is
    # a damaged id, an acknowledgement's too.
    # With ``missing`` (a gap to weigh), where the add lay decides instead of the bit (add_placement.py): a
    # flipped id whose add would have lain in a file still there is no trace, and one whose add lay in a
    # missing id is as much a trace as any (a deleted file whose one live message has its reference elsewhere
    # leaves exactly one such id, one bit from its neighbours' ids, as ids are dense).
    acked = {r.id for r in result.live if r.is_update and r.user_record_type == _R.ACKNOWLEDGE_REF}
    explained = orphans if len(orphans) == 1 and (missing is None and not orphans & acked and any(
        next(iter(orphans)) ^ (1 << k) in added for k in range(64)) or never_issued(result, next(iter(orphans)))
    ) else set()
    orphans -= explained
    if orphans:  # any id the broker never issued is a damaged id, beside other orphans too: no lost add
        orphans -= never_issued_ids(result, orphans)
    if missing is not None:
        orphans = placed_in_gaps(result, orphans, missing)
        # a lone acknowledged id older than every add, with a freed fileID after it: its DELETE's file, which
        # a restart untied from the update (restart_orphans.py)
        orphans -= left_by_restart(result, orphans, missing)
    # acknowledgements and delivery counts with room for their DELETE's file after them: a restart leaves them
    # in a healthy journal as a removed file does (restart_orphans.restart_shaped)
    shaped = restart_shaped(result, orphans)
    return (compacted, sum(1 for r in result.live if r.is_update and r.id in orphans - shaped),
            sum(1 for r in result.live if r.is_update and r.id in shaped))


def _short_file_findings(opened, result: LoadResult | None, findings: list[Finding], *,
                         pool_files: int | None = None, lost_deletes: set[int] = frozenset()) -> None:
    """A file shorter than the 16-byte header: ``JournalImpl.orderFiles`` logs "ignoring short file" and
    deletes it, with whatever it held. Its name may be one of the journal's ids between data files that no
    file has (it was a data file there: Artemis names a new file after its fileID and keeps the name when it
    reinitialises a freed file). It proves a loss (CRITICAL) only when live updates lost their add
    (:func:`_compaction_evidence`), or when the journal cannot have freed it: never compacted, with a pool
    broker.xml says is unbounded (as for :func:`_gap_findings`). Otherwise nothing shows it held a live
    record: in a compacted journal such a name is as likely a free file the compaction reinitialised (a header,
    no records), and a data file whose records all died since (the reclaimer frees such files, and a real
    JournalImpl store killed mid-run has them) is lost to no one: a warning."""
    ids = sorted(f.file_id for f in opened.files)
    compacted, orphans, shaped = _compaction_evidence(result, lost_deletes) if result is not None else (False, 0, 0)
    unbounded = not compacted and pool_files is not None and pool_files < 0
    for p in opened.pending:
        if p.code != "short-file":
            continue
        n = _name_number(Path(p.path).name)
        inside = n is not None and ids and ids[0] < n < ids[-1] and n not in ids
        if inside and not orphans and not unbounded:
            why = ("the journal was compacted, which frees files" if compacted else
                   "a data file whose records all died is one the broker may free")
            held = ("every live update still has its add" if not shaped else
                    f"the {shaped} live acknowledgement(s) or delivery count(s) without their add are what a restart "
                    f"leaves once the broker freed their message's files (restart_orphans.restart_shaped)")
            findings.append(Finding(Severity.WARNING, "short-file", p.message + (
                f" (its name is one of the journal's ids between data files, but {why}, and {held}: nothing proves "
                f"it held live records)"), p.path, 0))
        elif inside:
            findings.append(Finding(Severity.CRITICAL, "short-file", p.message + (
                " (its name is one of the journal's ids between data files: the records it held are lost)"),
                p.path, 0))
        else:
            findings.append(Finding(Severity.WARNING, "short-file", p.message, p.path, 0))


def _gap_findings(result: LoadResult, findings: list[Finding], found_elsewhere: set[int] = frozenset(), *,
                  pool_files: int | None = None, lost_deletes: set[int] = frozenset()) -> None:
    """Header fileIDs missing between data files, or below the oldest (ids start at 1): a file removed, or not.

    Artemis issues fileIDs one by one, to new files (whose name carries the id) and to freed files it
    reinitialises (``JournalFilesRepository.addFreeFile`` -> ``reinitializeFile``, which keeps the old name).
    A reinitialised free file that is later deleted (pool trimming by ``journal-pool-files``, or a
    compaction's switch-over) takes its id with it, and a compaction gives its outputs the lowest old ids
    (``nextOrderingID``) while the freed files get new ones. So a gap proves nothing by itself once the journal
    has been compacted (a live record with compactCount > 0 says so). What does prove a loss is a live UPDATE
    whose ADD is gone: the broker never frees a file that holds the ADD of a live record, so only a removed
    file explains it. A bounded pool (``journal-pool-files`` >= 0) deletes freed files without any compaction,
    an unbounded one keeps them all. Hence: live updates whose add could have lain in a missing fileID
    (add_placement.py: ids are issued counting up and files filled in fileID order) make a gap
    ``missing-journal-file`` (critical), as does a never-compacted journal whose broker.xml says the pool is
    unbounded; otherwise the gap is ``file-id-gap`` (info): a compacted journal, a bounded pool, or a pool
    unknown without broker.xml, as on any healthy broker run with ``journal-pool-files`` 10 (the default
    ``artemis create`` writes).
    """
    # A fileID past 2^31 (whose tag, its low 31 bits, its records still carry) is not one Artemis issued:
    # they count up from 1, one a file. Its high bytes were damaged; judged by _GapInspector.judge.
    data_ids = [s.file.file_id for s in result.scans if s.has_data and s.file.file_id < 1 << 31]
    if not data_ids:
        return
    low, high = min(data_ids), max(data_ids)
    # such a file's records still carry the id it was issued (its tag): that id is not missing
    found_elsewhere = set(found_elsewhere) | {s.file.tag for s in result.scans
                                               if s.has_data and s.file.file_id >= 1 << 31}
    where = str(result.files[0].path.parent)
    # weighed first: a file written while the compaction ran may be the newest holding records, leaving no gap
    # below the newest data file
    window = ids_lost_while_compacting(result)
    if window:
        # no reclaim runs while a compaction does: a file written since it began is removed only by hand
        shown = ", ".join(map(str, window[:10])) + (f" ... ({len(window)} in all)" if len(window) > 10 else "")
        findings.append(Finding(
            Severity.CRITICAL, "missing-journal-file",
            f"fileID(s) {shown} issued while the interrupted compaction ran (after its inputs) are carried by no "
            f"file: the broker frees no file while compacting, so a journal file written then was removed; its "
            f"records are lost", where, None,
            {"missingFileIds": window[:MAX_LISTED_MISSING_IDS], "missingCount": len(window), "duringCompaction": True}))
        return
    # Counted from the sorted ids present, never by walking the range: a damaged header can claim any
    # 64-bit fileID. The range starts at 1, not at the oldest data file: Artemis issues fileIDs from 1
    # (JournalFilesRepository.generateFileID), so an id below the oldest data file that no file carries went
    # the way an id between data files goes (a reused file's old id, a file the pool deleted, or a removed one).
    inside = sorted({f.file_id for f in result.files if 0 < f.file_id < high}
                    | {t for t in found_elsewhere if 0 < t < high})
    count = high - 1 - len(inside)
    if count <= 0:
        return
    missing: list[int] = []  # the first few, for people
    expected = 1
    for fid in inside + [high]:
        while expected < fid and len(missing) < MAX_LISTED_MISSING_IDS:
            missing.append(expected)
            expected += 1
        expected = fid + 1
    reused = sum(1 for f in result.files if _name_number(f.name) not in (None, f.file_id))
    shown = ", ".join(map(str, missing[:10])) + (f" ... ({count} in all)" if count > 10 else "")
    span = "between data files" if missing[0] > low else "before the oldest data file or between data files"
    details = {"missingFileIds": missing, "missingCount": count}
    if count <= reused:
        findings.append(Finding(
            Severity.INFO, "file-id-gap",
            f"fileID(s) {shown} missing {span}; explained by {reused} reused file(s)", where, None,
            details))
        return
    compacted, orphans, shaped = _compaction_evidence(result, lost_deletes, missing_between(inside, high))
    details["liveUpdatesWithoutAdd"] = orphans + shaped
    if orphans:
        # live updates without their add: the broker never frees a file holding the add of a live record
        findings.append(Finding(
            Severity.CRITICAL, "missing-journal-file",
            f"fileID(s) {shown} missing {span}; {orphans} live update(s) have lost their add "
            f"record: a journal file appears to have been removed; its records are lost", where, None, details))
        return
    gone = removed_outputs(result, found_elsewhere) if compacted else []
    if gone:
        first = gone[0]
        details["removedOutputs"] = gone
        findings.append(Finding(
            Severity.CRITICAL, "missing-journal-file",
            f"fileID(s) {shown} missing {span}; fileID {first['fileId']} lies between two outputs of one "
            f"compaction, holding {first['neighbourMessages'][0]} and {first['neighbourMessages'][1]} messages, "
            f"and the ids between theirs ({first['idsAfter'] + 1}..{first['idsBefore'] - 1}) carry only "
            f"{first['deletes']} DELETE(s): the broker frees a compacted file only once every message it held is "
            f"deleted, so this one was removed with live messages in it; they are lost", where, None, details))
        return
    if shaped and (compacted or pool_files is None or pool_files >= 0):
        # (a never-compacted journal whose pool keeps every freed file is judged below: any gap there is a removal)
        details["restartMayExplain"] = True
        findings.append(Finding(
            Severity.WARNING, "missing-journal-file",
            f"fileID(s) {shown} missing {span}; {shaped} live acknowledgement(s) or delivery count(s) have lost "
            f"their add record, with room after them for the file of their DELETE: either a journal file holding "
            f"their message was removed (the broker loses it on its other queues), or the broker freed that file "
            f"and, after a restart, the file of the DELETE (JournalImpl.load ties no update to a message whose add "
            f"it did not read, and a healthy journal keeps such updates): which, cannot be told", where, None,
            details))
        return
    if compacted or (pool_files is not None and pool_files >= 0):
        how = ("compacted, which frees and deletes files" if compacted else
               f"configured with journal-pool-files {pool_files}: the broker deletes the freed files its pool "
               f"does not keep")
        findings.append(Finding(
            Severity.INFO, "file-id-gap",
            f"fileID(s) {shown} missing {span}; the journal was {how}, and every live update "
            f"still has its add: nothing shows a lost file", where, None, details))
        return
    if pool_files is not None:
        # an unbounded pool (journal-pool-files -1, Artemis' default) keeps every file the reclaimer frees,
        # and the journal was never compacted: only a removal explains the gap
        findings.append(Finding(
            Severity.CRITICAL, "missing-journal-file",
            f"fileID(s) {shown} missing {span} of a journal never compacted, whose broker keeps "
            f"every freed file (journal-pool-files {pool_files}): a journal file has been removed; its records "
            f"are lost", where, None, details))
        return
    # Without broker.xml the pool is unknown: Artemis' default (-1) keeps every freed file, but `artemis
    # create` writes journal-pool-files 10, under which the reclaimer's freed files beyond the pool are
    # deleted, ids and all (JournalFilesRepository.addFreeFile: real JournalImpl runs with a pool of 10 leave
    # such gaps between data files and below the oldest without any compaction). With no live update whose add
    # could have lain in a missing id, nothing shows a removal: a healthy broker's store reads so every night.
    # What still proves one: the page counters (_corroborated_gaps), a commit counting records gone, an
    # acknowledgement without its reference (their own findings).
    details["poolMayExplain"] = True
    findings.append(Finding(
        Severity.INFO, "file-id-gap",
        f"fileID(s) {shown} missing {span} of a journal never compacted, and nothing left refers to what they "
        f"held: normal if journal-pool-files bounds the broker's pool (it deletes the freed files the pool does "
        f"not keep), a removed file if not (give --broker-xml to tell)", where, None, details))


def _corroborated_gaps(findings: list[Finding]) -> None:
    """A gap the pool may explain (the INFO ``file-id-gap`` of :func:`_gap_findings` marked ``poolMayExplain``) is
    a CRITICAL ``missing-journal-file``
    when the paging shows journal records gone too: a queue's page counter over the messages its pages still
    hold to consume (its counter records' decrements, or cursor records, were in the lost file). The
    reclaimer frees a file only when every record in it is dead, so a freed file takes no live counter
    record with it."""
    over = [f for f in findings if f.code == "page-counter-mismatch"
            and (f.details or {}).get("stored", 0) > (f.details or {}).get("counted", 0)]
    if not over:
        return
    for i, f in enumerate(findings):
        if f.code == "file-id-gap" and (f.details or {}).get("poolMayExplain"):
            queues = ", ".join(str(o.details["queueId"]) for o in over[:10])
            findings[i] = Finding(
                Severity.CRITICAL, "missing-journal-file",
                f.message.split(": normal if")[0] + f", and the page counters of queue(s) {queues} exceed what "
                f"their pages hold: the file held live records, which are lost", f.path, f.offset,
                dict(f.details or {}, corroboratedBy="page-counter-mismatch"))


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
        if a.code == "commit-count-mismatch":
            continue  # judged with the evidence (_GapInspector.judge)
        if a.code == "add-of-deleted-id":
            continue  # judged by what the dropped record held (deleted_first.py)
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
            # the current page's last record (its message id torn by a crash mid-write) costs that message only
            torn = paging is not None and paging.is_crash_tail(p.path, p.number)
            findings.append(Finding(
                Severity.WARNING if torn else Severity.CRITICAL, "large-message-missing",
                f"paged large message {mid} (page {p.page}, message {p.number}) has no {mid}.msg body file"
                + ("; it is the last record of the current page, what a crash mid-write leaves" if torn else ""),
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
                   stack: contextlib.ExitStack | None = None,
                   sources: bool = False) -> tuple[LoadResult | None, _GapInspector | None]:
    """Verify one journal directory, appending findings and its summary to ``report``. Returns its load and
    its gap inspector, whose damaged regions :func:`verify_store` judges once both journals are loaded. With
    ``stack`` the journal stays open until the stack closes (the evidence reads bodies after the load);
    ``sources``: the load keeps what compaction's plan needs (``LoadResult.live_sources``)."""
    findings = report.findings
    summary = JournalSummary(journal.kind, str(journal.directory))
    if stack is None:
        stack = contextlib.ExitStack()
        owned = stack
    else:
        owned = contextlib.nullcontext()
    with owned:
        opened = stack.enter_context(open_journal(journal))
        if any(s.code == "bad-file-id" for s in opened.skipped):
            # the broker reads a file of a negative fileID first (bad-file-id judges its place): so does this load
            opened = stack.enter_context(with_negative_ids(opened, judged=True))
        _pending_findings(opened, findings)
        summary.files = len(opened.files)
        if not opened.files:
            _short_file_findings(opened, None, findings)
            if not opened.skipped:
                findings.append(Finding(Severity.WARNING, "no-journal-files",
                                        "no loadable journal file in this directory", str(journal.directory)))
            report.journals.append(summary)
            return None, None
        inspector = _GapInspector(opened, findings, journal.kind)
        result = load_journal(opened, on_file=inspector, progress=progress, sources=sources)
        inspector.finish(result)
        _duplicate_findings(result, findings, {i for i, _, _, _ in inspector.foreign})
        lost_deletes = deleted_in_damage(inspector.regions, result.max_id) if inspector.regions else set()
        lost_deletes |= cut_deletes(result, inspector.regions, inspector.tails)
        inspector.lost_deletes = lost_deletes
        _short_file_findings(opened, result, findings, lost_deletes=lost_deletes,
                             pool_files=store.settings.journal_pool_files if store.settings is not None else None)
        summary.bytes = sum(s.file.size for s in result.scans)
        summary.records = sum(s.records for s in result.scans)
        summary.live_records = len(result.live)
        summary.prepared = len(result.prepared)
        summary.failed = len(result.failed)
        summary.max_id = result.max_id
        if not opened.skipped:  # a refused or unreadable file is reported as such, not as a fileID gap
            # an id whose records are in a file with another header fileID is judged as that file's header
            _gap_findings(result, findings, {t for _, _, _, t in inspector.foreign}, lost_deletes=lost_deletes,
                          pool_files=store.settings.journal_pool_files if store.settings is not None else None)
        _load_findings(result, findings)
        copies = lost_copies_finding(result)
        if copies is not None:
            findings.append(copies)
        if journal.kind == "bindings":
            findings.extend(skipped_bindings_findings(result, str(journal.directory)))
        cut = cut_current_file(result)
        if cut is not None:
            findings.append(cut)
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
                report.pager = paging
            _large_message_findings(store, result, findings, paging, paged)
    report.journals.append(summary)
    return result, inspector


def verify_store(store: ArtemisStore, progress: Callable[[int], None] | None = None, *,
                 keep: contextlib.ExitStack | None = None, sources: bool = False) -> VerifyReport:
    """Verify every journal of ``store``. Raises UnknownStoreError when it holds no journal.

    ``keep``: the journals stay open until the caller closes this stack, and ``report.loads`` holds their
    load results by kind (``report.gaps`` each file's scan and the bytes between its records, as the load saw
    them): what the export exports, print prints, or stat counts is the load verify judged
    (one scan); ``sources``: those loads carry what compaction's plan needs (stat's compaction figures)."""
    from amqtool.engines.artemis.evidence import Evidence

    report = VerifyReport()
    journals = store.journals()
    if not journals and store.jms is None:
        raise UnknownStoreError("no Artemis journal found", path=str(store.root))
    from amqtool.engines.artemis.paging import PagingVerifier

    paging = PagingVerifier(store, progress)
    results: dict[str, LoadResult | None] = {}
    inspectors = []
    with contextlib.ExitStack() as stack:
        for journal in journals:
            result, inspector = verify_journal(store, journal, report, progress, paging,
                                               keep if keep is not None else stack, sources)
            results[journal.kind] = result
            if inspector is not None:
                inspectors.append(inspector)
        if results.get("messages") is not None or results.get("bindings") is not None:
            evidence = Evidence.build(results.get("bindings"), results.get("messages"))
            ledger = IdLedger([i.opened for i in inspectors], store, paging.view)
            if store.paging_dir is not None and paging.view.messages_loaded:  # a lost page transaction's cost
                evidence.paged_pending = paging.pending_of_page_tx
                evidence.page_unacked = paging.unacked_on_page
            evidence.no_pages = store.paging_dir is None
            for inspector in inspectors:
                inspector.ledger = ledger
                inspector.judge(evidence)
            if results.get("messages") is not None:
                prepare_mismatch.reweigh(report.findings, results["messages"], evidence)
            # (first: a retyped reference whose loss is harmless explains the acknowledgement left without it)
            retyped = retyped_findings(results.get("messages"), evidence)
            retyped += strayed_findings(results.get("messages"), evidence)
            retyped += _unreported_lost_commits(results.get("messages"), evidence, report.findings + retyped)
            _evidence_findings(store, evidence, results, report.findings,
                               {i for ins in inspectors if ins.kind == "messages" for i in ins.lost_deletes})
            _message_findings(store, evidence, results.get("messages"), report.findings)
            report.findings += page_tx_damaged_findings(results.get("messages"), report.pager)
            report.findings += [f for r in results.values() if r is not None
                                for f in deleted_first.findings(r, evidence)]
            report.findings += orphan_acks.findings(results.get("messages"), evidence)
            report.findings += retyped
            report.findings += page_tx_dropped_findings(results.get("messages"), report.pager)
            report.findings += paged_tx_id_findings(report.pager, results)
            journal_crash.lost_bindings(report.findings, report.pager)
    _corroborated_gaps(report.findings)
    raise_counter_over(report.findings, report.pager)
    report.loads = {k: r for k, r in results.items() if r is not None}
    report.gaps = {i.kind: i.files for i in inspectors}
    if store.jms is not None:
        _, inspector = verify_journal(store, store.jms, report, progress)
        if inspector is not None:
            inspector.judge(Evidence())
    if report.pager is None and store.paging_dir is not None:  # paging: pages without a (loaded) message journal
        paging.verify(report.findings)
        report.paging = paging.summary_json()
        report.pager = paging
    _not_a_store(store, report)
    gone = messages_journal_missing(store, report.journals, report.paging)
    if gone is not None:
        report.findings.append(gone)
    return report


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


MAX_LISTED = 20


def _message_findings(store: ArtemisStore, evidence, result: LoadResult | None, findings: list[Finding]) -> None:
    """Every message the broker would deliver must decode as its load decodes it: a persister id it does not
    know, or an encoding that runs past the body, makes ``loadMessageJournal`` throw (``print`` shows such a
    message as undecodable; ``export`` leaves it out). Decoded by the export's C column decoder (the Python
    reference without the extension); large-message bodies are not read here (their files are checked apart)."""
    from amqtool.engines.export.columns import row
    from amqtool.engines.export.local import check_messages
    from amqtool.engines.export.model import ExportSummary
    from amqtool.store.journal_files import BodyWindows

    if result is None:
        return
    live = {}
    for m in evidence.messages:
        qs = evidence.live_queues(m)
        if qs:
            live[m] = qs
    records = [r for r in result.live
               if not r.is_update and r.user_record_type in (45, 31) and r.id in live]
    if not records:
        return
    records.sort(key=lambda r: (r.file_index, r.body_offset))
    body = BodyWindows(result.opened).body
    summary = ExportSummary("verify", "artemis")
    messages = ((r.user_record_type, body(r.file_index, r.body_offset, r.body_len), r.id,
                 [row("", q, None) for q in sorted(live[r.id])], "") for r in records)
    check_messages(messages, safe=True, large=None, summary=summary)
    if summary.problem_count:
        where = {r.id: r for r in records}
        first = summary.problems[0]
        rec = where.get(first.message_id)
        shown = "; ".join(f"message {p.message_id}: {p.message}" for p in summary.problems[:5])
        findings.append(Finding(
            Severity.CRITICAL, "message-undecodable",
            f"{summary.problem_count} message(s) still on a queue do not decode as the broker's load decodes them "
            f"(it throws on them): {shown}", str(result.files[rec.file_index].path) if rec else None,
            rec.body_offset if rec else None,
            {"count": summary.problem_count, "messageIds": [p.message_id for p in summary.problems]}))


def _records_missing(messages, describe, why: str, path: str, offset: int | None = None, **details) -> Finding:
    """The ``message-record-missing`` finding of ``messages`` (ids), each shown by ``describe``, ``why`` saying
    what proves their message records lost."""
    ids = sorted(messages)
    shown = ", ".join(describe(m) for m in ids[:MAX_LISTED]) + (" ..." if len(ids) > MAX_LISTED else "")
    return Finding(Severity.CRITICAL, "message-record-missing", f"{len(ids)} message(s) {why}: {shown}", path, offset,
                   {"messageIds": ids[:100], "count": len(ids), **details})


def _evidence_findings(store: ArtemisStore, evidence, results: dict, findings: list[Finding],
                       lost_deletes: set[int] = frozenset()) -> None:
    """What the references say was lost (see :mod:`amqtool.engines.artemis.evidence`). ``lost_deletes``: ids
    whose DELETE the damage verify reports may have taken (lost_deletes.py): their updates left live without
    their add are no lost message record, as they are no lost file (:func:`_compaction_evidence`)."""
    from amqtool.engines.artemis.zeroed_adds import zeroed_adds

    where = str(store.messages.directory) if store.messages is not None else str(store.root)
    orphans = evidence.orphan_refs()
    # references without their message right after zeros that ran from the record before: the ADD was zeroed whole,
    # leaving no damaged bytes to judge (zeroed_adds.py); no damaged id or misfiled reference leaves zeros
    pending = {m for m, updates in evidence.undeleted_orphans().items()
               if m not in orphans and any(t == _R.ADD_REF for t, _q in updates)}
    zeroed = zeroed_adds(results["messages"], pending) if pending and results.get("messages") is not None else {}
    if zeroed:
        first = zeroed[min(zeroed)]
        findings.append(_records_missing(
            zeroed, lambda m: f"{m} ({zeroed[m][2]} zero bytes at {zeroed[m][1]} of {Path(zeroed[m][0]).name})",
            "still referenced by queues have no message record, and zeros fill the bytes before their first "
            "reference, where the broker writes a message's record: it was zeroed whole, and the broker drops "
            "their references", first[0], first[1], zeroedAdds=True))
    if orphans:
        findings.append(_records_missing(
            orphans, lambda m: f"{m} (queues {', '.join(map(str, sorted(orphans[m])))})",
            "still referenced by queues have no message record (the broker drops their references)", where))
    # a journal file that could not be read (UNKNOWN) holds records this evidence lacks: what it would say
    # about missing records proves nothing then
    unread = any(f.code == "unreadable" for f in findings)
    lost = {} if unread else {m: u for m, u in evidence.lost_adds().items() if m not in orphans and m not in zeroed}
    if lost and results.get("messages") is not None:
        # the message's DELETE read whole under an id one damaged byte away, right after its last update: it was
        # deleted, and its add reclaimed long ago (lost_deletes.moved_deletes; campaign seed 8484046452063032)
        moved = moved_deletes(results["messages"], set(lost))
        lost = {m: u for m, u in lost.items() if m not in moved and m not in lost_deletes}
        # an id the broker never issued is a damaged id, no lost add (damaged_ids.py); so is one whose first
        # reference, written right after its add, lies where no file went missing (add_placement.py)
        damaged = (never_issued_ids(results["messages"], set(lost)) | in_present_files(results["messages"], set(lost))
                   if lost else set())
        lost = {m: u for m, u in lost.items() if m not in damaged}
        # a deleted message's last acknowledgement, its id damaged, is followed by that message's DELETE
        # (own_acks.py), and a reference so damaged stands right after its message's ADD (ref_in_place.py): no
        # lost add, nor a second one beside the one a restart leaves (restart_orphans.py; campaign sweep seed
        # 9111)
        moved = (deleted_after_own_ack(results["messages"], set(lost)) | set(run_owned(results["messages"], set(lost)))
                 if lost else set())
        lost = {m: u for m, u in lost.items() if m not in moved}
        # acknowledgements and delivery counts with room after them for their DELETE's file: a restart leaves
        # them in a healthy journal as a removed file does (restart_orphans.restart_shaped), a warning
        left = restart_shaped(results["messages"], set(lost))
        shaped = {m: u for m, u in lost.items() if m in left}
        lost = {m: u for m, u in lost.items() if m not in shaped}
        if sum(map(len, shaped.values())) >= 2 and not any(f.details.get("restartMayExplain") for f in findings):
            findings.append(replace(_records_missing(
                shaped, lambda m: f"{m} (queues {', '.join(map(str, sorted({q for _, q in shaped[m]})))})",
                "never deleted keep only acknowledgements or delivery counts, with no message record, and a fileID "
                "after them no file carries: either their message's file was removed (the broker loses them on "
                "their other queues), or the broker freed it and, after a restart, the file of their DELETE "
                "(restart_orphans.py), which cannot be told", where, restartMayExplain=True),
                severity=Severity.WARNING))
        if sum(map(len, lost.values())) < 2:
            # what is left is one record, as lost_adds takes none alone (one damaged id field makes one; a
            # restart leaves one: restart_orphans.py): the explained id no longer vouches for it
            lost = {}
    if lost:
        findings.append(_records_missing(
            lost, lambda m: f"{m} (queues {', '.join(map(str, sorted({q for _, q in lost[m]})))})",
            f"never deleted keep {sum(map(len, lost.values()))} reference or acknowledgement record(s) but have no "
            f"message record: the broker never frees the file of a message not deleted, so the record (or its "
            f"file) was lost, and the queues still holding the messages lose them", where))
    # A file that could not be read may hold the records that explain a damaged id; two files with one fileID
    # hold every record twice (judged as duplicate-file-id): then no reference or acknowledgement is moved.
    ids_trusted = not unread and not any(f.code == "duplicate-file-id" for f in findings)
    for moved, what, named in (
            (evidence.moved_refs() if ids_trusted else [],
             "name a message already routed to that queue, one damaged byte away from a message routed elsewhere "
             "that lacks it: the broker never delivers that message there", "message "),
            (evidence.run_moved_refs() if ids_trusted else [],
             "written right after a message's record (where the broker routes it) name an id with no message "
             "record one damaged byte from that message's, which has no reference on that queue: the broker never "
             "delivers the message there", ""),
            (readded_refs(evidence) if ids_trusted else [],
             "name a message already acknowledged on that queue, written after that acknowledgement, one damaged "
             "byte from a message acknowledged there that lacks its reference: the broker puts the first back on "
             "the queue and delivers it again", "message "),
            (strayed_refs(evidence) if ids_trusted else [],
             "name a message of an address never routed to that queue, one damaged byte from a message acknowledged "
             "there whose reference is gone: the broker delivers the named message on a queue it was never sent "
             "to (strayed_refs.py)", "message ")):
        if moved:
            shown = ", ".join(f"message {o} on queue {q} (its reference now names {named}{m})"
                              for m, q, o in moved[:MAX_LISTED])
            findings.append(Finding(
                Severity.CRITICAL, "ref-moved", f"{len(moved)} reference record(s) {what}: {shown}", where, None,
                {"count": len(moved), "messageIds": [o for _, _, o in moved[:100]]}))
    requeued = evidence.requeued_refs() if ids_trusted else []
    if requeued:
        shown = ", ".join(f"message {m} on queue {lost} (its reference now names queue {q})"
                          for m, q, lost in requeued[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "ref-moved",
            f"{len(requeued)} reference record(s) name a queue their message is already routed to, one damaged "
            f"byte away from the queue of the same address it lacks: the broker never delivers the message "
            f"there: {shown}", where, None, {"count": len(requeued), "messageIds": [m for m, _, _ in requeued[:100]]}))
    moved_acks = evidence.moved_acks() if ids_trusted else []
    if moved_acks:
        named: dict[tuple[int, int], list[int]] = {}  # several candidates of one damaged id: one of them
        for m, q, o in moved_acks:
            named.setdefault((m, q), []).append(o)
        shown = ", ".join(f"message {' or '.join(map(str, os))} on queue {q} (its acknowledgement now names {m})"
                          for (m, q), os in list(named.items())[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "ack-moved",
            f"{len(named)} acknowledgement record(s) name a message id with no record, one damaged byte away "
            f"from a message still on that queue: the broker drops the acknowledgement and delivers the "
            f"acknowledged message again: {shown}", where, None,
            {"count": len(named), "messageIds": [o for _, _, o in moved_acks[:100]]}))
    acks = sorted(set(evidence.acks_without_ref()) | set(acks_of_unknown_queues(evidence) if ids_trusted else ()))
    if acks:
        shown = ", ".join(f"{m} on queue {q}" for m, q in acks[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "ack-without-ref",
            f"{len(acks)} acknowledgement(s) of a message on a queue it was never routed to: a reference or "
            f"acknowledgement record was changed, so an acknowledged message comes back or a reference is "
            f"lost: {shown}", where, None, {"count": len(acks)}))
    retyped_ack = ack_retyped_finding(evidence, where) if ids_trusted else None
    if retyped_ack is not None:
        findings.append(retyped_ack)
    retyped_ref = ref_retyped_finding(evidence, where) if ids_trusted else None
    if retyped_ref is not None:
        findings.append(retyped_ref)
    # a reference read as an acknowledgement (ref-retyped) leaves the same trace: named there once
    retyped_ids = set(retyped_ref.details["messageIds"]) if retyped_ref is not None else set()
    refless = [m for m in acked_refless(evidence) if m not in retyped_ids]
    if refless:
        shown = ", ".join(map(str, refless[:MAX_LISTED]))
        findings.append(Finding(
            Severity.CRITICAL, "message-refs-lost",
            f"{len(refless)} message(s) acknowledged on a queue have no reference left anywhere and no DELETE, "
            f"while records follow their last acknowledgement: their references were lost to damage, a queue "
            f"still held each (the broker deletes a message at its last acknowledgement), and the broker deletes "
            f"a message no reference holds at start: {shown}", where, None,
            {"count": len(refless), "messageIds": refless[:100]}))
    retyped = retyped_messages(results.get("messages"), evidence.live_queues)
    if retyped:
        first = retyped[0]
        r = first.record
        shown = ", ".join(f"{x.record.id} (type {x.record.user_record_type}, queues "
                          f"{', '.join(map(str, x.queues))})" for x in retyped[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "message-record-retyped",
            f"{len(retyped)} message record(s) carry a user record type that is no message type while their "
            f"body decodes as a message and references of them are live (first: record {r.id}, type "
            f"{r.user_record_type}, a message of type {first.was}): their type byte was damaged, the broker "
            f"never loads them as messages and drops their references: {shown}",
            str(results["messages"].files[r.file_index].path), r.body_offset - 1,
            {"count": len(retyped), "messageIds": [x.record.id for x in retyped[:100]]}))
    messages = results.get("messages")
    stray = {m: evidence.live_queues(m) for m in evidence.refs if m not in evidence.messages}
    misread = misread_messages(messages.opened, {m: q for m, q in stray.items() if q}) if messages else []
    if misread:
        first = misread[0]
        shown = ", ".join(f"{x.message_id} (read as {'an event' if x.record_type == 10 else f'record {x.record_id}'}"
                          f", queues {', '.join(map(str, x.queues))})" for x in misread[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "message-header-damaged",
            f"{len(misread)} message(s) still referenced by queues have no message record of their own, but a "
            f"record holds each of them under another record type or id: its header was damaged, the broker "
            f"never loads it as that message and drops its references: {shown}",
            str(messages.files[first.file_index].path), first.offset,
            {"count": len(misread), "messageIds": [x.message_id for x in misread[:100]]}))
    if evidence.unknown_types:
        r = evidence.unknown_types[0]
        findings.append(Finding(
            Severity.CRITICAL, "unknown-record-type",
            f"{len(evidence.unknown_types)} live record(s) of a user record type the broker's message journal "
            f"load does not know (first: record {r.id}, type {r.user_record_type}): it throws 'Invalid record "
            f"type' and does not start", str(results["messages"].files[r.file_index].path), r.body_offset,
            {"count": len(evidence.unknown_types)}))
    short = short_record_finding(results.get("messages"), evidence.have_bindings)
    if short is not None:
        findings.append(short)
    retyped_dup = retyped_duplicate_id_finding(results.get("messages"), evidence.have_bindings)
    if retyped_dup is not None:
        findings.append(retyped_dup)
    retyped_updates = [r for r in evidence.retyped_updates if r.id in evidence.messages]
    if retyped_updates:
        r = retyped_updates[0]
        findings.append(Finding(
            Severity.CRITICAL, "update-retyped",
            f"{len(retyped_updates)} live update record(s) of a live message carry a message record type with an "
            f"8-byte body, a queue id (first: message {r.id}, type {r.user_record_type}): the broker writes a "
            f"message record only as an ADD, so each is the message's reference or acknowledgement with its user "
            f"record type damaged; the load takes it for a message record, and the message's references do not "
            f"survive it as the broker wrote them: it is lost on its queues, or an acknowledged one comes back",
            str(results["messages"].files[r.file_index].path), r.body_offset,
            {"count": len(retyped_updates), "messageIds": sorted({x.id for x in retyped_updates})[:100]}))
    if evidence.bad_refs:
        r = evidence.bad_refs[0]
        findings.append(Finding(
            Severity.CRITICAL, "ref-undecodable",
            f"{len(evidence.bad_refs)} live reference or acknowledgement record(s) whose body is not one queue id "
            f"(first: record {r.id}, {r.body_len} bytes): the broker's load fails on it",
            str(results["messages"].files[r.file_index].path), r.body_offset, {"count": len(evidence.bad_refs)}))
    if evidence.binding_problems:
        # loadBindingJournal decodes every queue and address binding; one that does not decode throws there
        first = evidence.binding_problems[0]
        findings.append(Finding(
            Severity.CRITICAL, "binding-undecodable",
            f"{len(evidence.binding_problems)} bindings record(s) do not decode (first: record {first.record_id}, "
            f"type {first.user_record_type}: {first.message}): the broker's load of its bindings fails",
            str(results["bindings"].files[first.file_index].path), first.body_offset,
            {"count": len(evidence.binding_problems)}))
    if (store.bindings is None and store.messages is not None and evidence.refs
            and Path(store.messages.directory) != Path(store.root)):  # a data directory, not one journal given
        # Artemis creates both journals at its first start and never removes one: messages routed to queues
        # with no bindings journal at all lost every queue (the broker deletes their references)
        findings.append(Finding(
            Severity.CRITICAL, "bindings-journal-missing",
            f"no bindings journal beside a messages journal whose {len(evidence.refs)} message(s) are routed to "
            f"queues: the broker has none of those queues and drops the messages", where, None,
            {"messages": len(evidence.refs)}))
    unknown = evidence.refs_to_unknown_queues()
    if unknown:
        shown = ", ".join(f"queue {q} ({len(m)} message(s))" for q, m in sorted(unknown.items())[:MAX_LISTED])
        findings.append(Finding(
            Severity.CRITICAL, "ref-unknown-queue",
            f"messages are referenced by queue ids the bindings journal does not hold (the broker skips "
            f"them): {shown}", where, None,
            {"queueIds": sorted(unknown), "messages": sum(len(m) for m in unknown.values())}))


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
