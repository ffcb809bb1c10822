"""The command's engine: every selected journal of a store compacted, planned or reclaimed, locks checked
first, interrupted compactions finished first, ``-o DEST`` built aside and renamed into place."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from amqtool.errors import AmqtoolError, Finding, FormatError, Severity, UsageError
from amqtool.store import atomic
from amqtool.store.journal_files import open_journal
from amqtool.engines.artemis.compact.plan import _Prepared, plan_journal
from amqtool.engines.artemis.compact.reclaim_only import reclaim_in_place
from amqtool.engines.artemis.compact.settings import JournalCompaction, settings_for
from amqtool.engines.artemis.compact.switch import compact_copy, compact_in_place, finish_interrupted, predict_after

# --- the command's engine --------------------------------------------------------------------------------

@dataclass
class CompactRequest:
    """What ``amqtool compact`` was asked to do."""

    dry_run: bool = False
    if_needed: bool = False
    output: Path | None = None
    force: bool = False
    reclaim_only: bool = False
    # write even though verify calls the store CRITICAL (refused otherwise: see _compact_store)
    salvage: bool = False
    journals: tuple[str, ...] = ("messages", "bindings")  # Artemis' CLI order
    file_size: int | None = None
    min_files: int | None = None
    pool_files: int | None = None
    compact_min_files: int | None = None
    compact_percentage: int | None = None


def compact_store(store, req: CompactRequest, *, progress: Callable[[int], None] | None = None,
                  lock_files: list | None = None, judged: list | None = None) -> list[JournalCompaction]:
    """:func:`_compact_store`, with ``-o DEST`` claimed first (:mod:`amqtool.store.output`: never the store,
    inside it or around it; absent or empty; one writer at a time)."""
    from amqtool.store import output

    dest = req.output if req.output is not None and not req.dry_run else None
    with output.claiming(dest, inputs=output.store_inputs(store) if dest is not None else ()):
        return _compact_store(store, req, progress=progress, lock_files=lock_files, judged=judged)


def _compact_store(store, req: CompactRequest, *, progress: Callable[[int], None] | None = None,
                   lock_files: list | None = None, judged: list | None = None) -> list[JournalCompaction]:
    """Compact (or plan, or reclaim) every selected journal of an Artemis ``store``.

    ``judged``: verify's findings on the store are appended to it, and the plans are laid out from verify's
    loads (one scan: amqtool.engines.verdicts). With ``--dry-run``, which judges, a journal compaction would
    refuse (a file Artemis refuses) then gives an INFO ``compaction-refused`` finding instead of an error:
    verify's findings carry the verdict; one with no loadable file is not planned.

    Writing modes (in place, ``-o``, ``--reclaim-only``) take verify's verdict on the load they write from:
    a store verify calls CRITICAL raises :class:`~amqtool.engines.verdicts.SourceCriticalError` (exit 2)
    before anything is written, unless ``req.salvage``; a WARNING one (a torn tail) is compacted.

    Raises StoreLockedError when a broker holds the store and ``force`` is not set (writing modes only),
    UsageError for a bad destination.
    """
    if judged is not None and req.dry_run:
        from amqtool.engines.artemis.verify import verify_store

        with contextlib.ExitStack() as keep:
            report = verify_store(store, progress, keep=keep, sources=True)
            judged.extend(report.findings)
            return _compact_journals(store, req, progress, lock_files, report.loads, judged)
    if req.dry_run:
        return _compact_journals(store, req, progress, lock_files, None, None)
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.engines.verdicts import refuse_compaction
    from amqtool.store import locks

    if req.output is None:  # a broker's lock is the first answer, before any judgement of a store in use
        locks.ensure_not_locked(lock_files if lock_files is not None else locks.artemis_store_lock_files(store),
                                force=req.force)
    with contextlib.ExitStack() as keep:
        # Writing takes verify's verdict on the load it writes from: compaction keeps only what loads, so a
        # CRITICAL store would lose for good what its damaged bytes held (which recover can still read).
        report = verify_store(store, progress, keep=keep, sources=True)
        refuse_compaction(report.findings, req.salvage, str(getattr(store, "root", "")) or None)
        if judged is not None:
            judged.extend(report.findings)
        return _compact_journals(store, req, progress, lock_files, report.loads, None)


def _compact_journals(store, req: CompactRequest, progress, lock_files, loads: dict | None,
                      judged: list | None) -> list[JournalCompaction]:
    from amqtool.store import locks

    journals = [j for j in (store.messages, store.bindings) if j is not None and j.kind in req.journals]
    if not journals:
        raise UsageError("no Artemis journal selected in this store")
    writes_source = not req.dry_run and req.output is None
    copy_warning = None
    if writes_source:
        files = lock_files if lock_files is not None else locks.artemis_store_lock_files(store)
        locks.ensure_not_locked(files, force=req.force)  # --force: the caller reports the locks
        # amqtool's own writer lock, held to the end: a second writer stops here, readers see a switch coming
        writer = locks.WriterLock([j.directory for j in journals])
    else:
        writer = contextlib.nullcontext()
    if req.output is not None and not req.dry_run:
        # -o never writes the source, but a running broker may be writing it while it is read: say so.
        files = lock_files if lock_files is not None else locks.artemis_store_lock_files(store)
        held = locks.find_locks(files)
        if held:
            copy_warning = (f"the store is in use ({held[0].describe()}): the copy was read while a broker may "
                            "have been writing it and may be torn; stop the broker and copy again to be sure")
    with writer:
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
            if loads is None or (judged is None and (recovered or jd.kind not in loads)):
                # (an interrupted compaction finished just now changed the files verify loaded: plan afresh)
                prep = plan_journal(jd, settings, progress=progress)
            elif judged is None:  # writing after verify: its load, a refusal an error
                prep = plan_journal(jd, settings, load=loads[jd.kind])
            else:  # --dry-run after verify: its load, a refusal a finding
                if jd.kind not in loads:
                    continue
                try:
                    prep = plan_journal(jd, settings, load=loads[jd.kind])
                except FormatError as err:
                    judged.append(Finding(Severity.INFO, "compaction-refused", err.message, err.path, err.offset))
                    continue
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


def _write_copy(copies: list[tuple[_Prepared, str]], dest: Path, *, single: bool, store=None,
                exclude=frozenset(), label: str = "compact", before_switch=None) -> None:
    """``-o DEST``: build the compacted store in a temporary sibling directory, then rename it into place,
    so DEST either does not exist (or stays empty) or holds the complete result. With ``store`` (a whole
    store was compacted), its page files, large-message files and node ID come along
    (:mod:`.store_copy`), so DEST is a store a broker can start from."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"destination {dest} exists and is not an empty directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic.aside_dir(dest, label)
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

            carried = carry_over(store, tmp, copies[0][0].report.warnings, exclude)
            for prep, _name in copies:
                prep.report.carried_over = carried
        if before_switch is not None:  # recover --undelete: append to the copy before it appears
            before_switch(tmp)
        atomic.switch_dir(tmp, dest)
    except atomic.InjectedFault:
        raise
    except BaseException as err:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise AmqtoolError(f"writing the {label}ed copy failed, source untouched: {err.strerror or err}",
                               path=err.filename or str(dest)) from None
        raise
