"""``amqtool compact``: offline compaction of Artemis journals and KahaDB stores, safe to run from cron.

Thin: parse options, detect the store, hand to :func:`amqtool.engines.artemis.compact.compact_store` or
:func:`amqtool.engines.kahadb.compact.compact_kahadb`, print.
"""
from __future__ import annotations

import os

from pathlib import Path
from typing import Optional

import typer

from amqtool.commands.main import app
from amqtool.commands.metrics import (
    METRIC_FORMAT_OPTION,
    METRICS_FILE_OPTION,
    MetricFormat,
    document_format,
    publish,
    unknown_on_error,
)
from amqtool.commands.output import (
    QUIET_OPTION,
    OutputFormat,
    finish,
    guarded,
    progress,
    render_findings_text,
    stderr_console,
    write_document,
    write_lines,
)
from amqtool.commands.store_options import BROKER_XML_SETTINGS_OPTION
from amqtool.commands.stores import one_store
from amqtool.commands.tables import WIDE_OPTION, fold_lines
from amqtool.errors import Finding, Severity, UsageError, Verdict, overall_verdict
from amqtool.units import binary


def _findings(reports, dry_run: bool) -> list[Finding]:
    out: list[Finding] = []
    for r in reports:
        for p in r.pending:
            out.append(Finding(Severity.WARNING, "interrupted-compaction",
                               f"{p['code']}: {p['message']}", p["path"]))
        for line in r.recovered:
            out.append(Finding(Severity.INFO, "interrupted-compaction-finished", line, r.directory))
        if r.needed:
            sev = Severity.WARNING if dry_run else Severity.INFO
            out.append(Finding(sev, "compaction-needed", "; ".join(r.reasons), r.directory))
        for w in r.warnings:
            code = "store-in-use" if w.startswith("the store is in use") else "ownership" if "owner" in w else "compact-warning"
            out.append(Finding(Severity.WARNING, code, w, r.directory))
        if r.failed:
            out.append(Finding(Severity.INFO, "failed-transactions-carried",
                               f"{r.failed} unfinished transaction(s) carried over unresolved; the broker rolls "
                               "them back at its next start", r.directory))
    return out


def _not_needed(d: dict) -> str:
    """Why Artemis' thresholds (``JournalImpl.needsCompact``) do not call for compacting this journal, from
    its JSON figures: compaction disabled, too few data files, or enough live bytes."""
    s, data = d["settings"], d["before"]["dataFiles"]
    if s["compactMinFiles"] == 0:
        return "journal-compact-min-files is 0: compaction disabled"
    if data <= s["compactMinFiles"]:
        return f"{data} data file(s), not more than journal-compact-min-files {s['compactMinFiles']}"
    margin = int(data * s["fileSize"] * (s["compactPercentage"] / 100.0))
    return (f"live {binary(d['liveBytes'])} not below journal-compact-percentage {s['compactPercentage']}% of "
            f"{data} data files ({binary(margin)})")


def _text(reports, mode: str) -> list[str]:
    lines = []
    for r in reports:
        d = r.to_json()
        if r.action == "skipped":  # --if-needed: nothing was done, so there is no "after" to show
            lines.append(f"{r.kind} journal {r.directory}: skipped, not needed ({_not_needed(d)})")
            lines.append(f"  now: {d['before']['files']} files, {binary(d['before']['bytes'])}, "
                         f"{d['before']['dataFiles']} data files; live {r.live_records} records, "
                         f"{binary(r.live_bytes)} (live ratio {r.live_ratio:.1%})")
            continue
        lines.append(f"{r.kind} journal {r.directory}: {r.action}")
        lines.append(f"  before: {d['before']['files']} files, {binary(d['before']['bytes'])}, "
                     f"{d['before']['dataFiles']} data files; live {r.live_records} records, "
                     f"{binary(r.live_bytes)} (live ratio {r.live_ratio:.1%})")
        lines.append(f"  after:  {d['after']['files']} files, {binary(d['after']['bytes'])}, "
                     f"{d['after']['dataFiles']} data files; reclaimed {binary(r.reclaimed_bytes)}")
        if r.needed:
            lines.append("  compaction needed: " + "; ".join(r.reasons))
        for f in r.old_files:
            lines.append(f"  {f.name} (fileID {f.file_id}): {f.fate}"
                         + (f" as fileID {f.new_file_id}" if f.new_file_id is not None else ""))
    return lines


@app.command("compact")
def compact(
    path: Path = typer.Argument(..., help="Broker instance, data directory or journal directory."),
    broker_xml: Optional[str] = BROKER_XML_SETTINGS_OPTION,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write a compacted copy to DEST; PATH is left untouched."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Report what compaction would do; write nothing."),
    if_needed: bool = typer.Option(False, "--if-needed", help="Compact only when Artemis' thresholds say so (exit 0 otherwise)."),
    reclaim_only: bool = typer.Option(False, "--reclaim-only", help="Only free files that hold no live record (Reclaimer rules)."),
    force: bool = typer.Option(False, "--force", help="Write even though a broker holds the store's lock (dangerous)."),
    salvage: bool = typer.Option(False, "--salvage", help="Compact a store verify calls CRITICAL (refused otherwise, "
                                 "exit 2: compaction drops what the damaged bytes hold; run 'amqtool recover' first)."),
    journal: str = typer.Option("all", "--journal", help="all, messages or bindings."),
    file_size: Optional[str] = typer.Option(None, "--file-size", help="journal-file-size of the message journal (default: broker.xml, else the files' size)."),
    min_files: Optional[int] = typer.Option(None, "--min-files", help="journal-min-files."),
    pool_files: Optional[int] = typer.Option(None, "--pool-files", help="journal-pool-files (-1 = unlimited)."),
    compact_min_files: Optional[int] = typer.Option(None, "--compact-min-files", help="journal-compact-min-files (default 10)."),
    compact_percentage: Optional[int] = typer.Option(None, "--compact-percentage", help="journal-compact-percentage (default 30)."),
    live_below: float = typer.Option(50.0, "--live-below", help="KahaDB --if-needed: compact when live bytes are below this percentage of the log bytes."),
    pinned_below: int = typer.Option(0, "--pinned-below", help="KahaDB --if-needed: ... or when a log file is kept by fewer than N live messages."),
    mfmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: Optional[str] = METRICS_FILE_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Compact Artemis journals (Artemis' own crash-safe protocol) or a KahaDB store (live state rewritten,
    switched in atomically, index rebuilt by the broker) offline."""
    import time

    fmt = document_format(mfmt)
    started = time.monotonic()
    with unknown_on_error("compact", os.path.abspath(path), mfmt, metrics_file), guarded(fmt):
        from amqtool.engines.artemis.compact import CompactRequest, compact_store
        from amqtool.store.layout import ArtemisStore

        if journal not in ("all", "messages", "bindings"):
            raise UsageError("--journal must be all, messages or bindings")
        from amqtool.engines.artemis.create import parse_size
        from amqtool.units import check_number

        check_number(min_files, "--min-files", minimum=1)
        check_number(pool_files, "--pool-files", minimum=1, also=(-1,))
        check_number(compact_min_files, "--compact-min-files", minimum=0)
        check_number(compact_percentage, "--compact-percentage", minimum=0, maximum=100)
        check_number(live_below, "--live-below", minimum=0, maximum=100)
        check_number(pinned_below, "--pinned-below", minimum=0)
        file_size_bytes = parse_size(file_size, "--file-size") if file_size else None
        if output is not None and (dry_run or reclaim_only):
            raise UsageError("-o/--output cannot be combined with --dry-run or --reclaim-only")
        store = one_store(path, broker_xml, command="compact")
        if not isinstance(store, ArtemisStore):
            artemis_only = {"--reclaim-only": reclaim_only, "--journal": journal != "all", "--file-size": file_size,
                            "--min-files": min_files, "--pool-files": pool_files,
                            "--compact-min-files": compact_min_files, "--compact-percentage": compact_percentage}
            given = [name for name, v in artemis_only.items() if v not in (None, False)]
            if given:
                raise UsageError(f"{', '.join(given)}: Artemis journal option(s); this is a KahaDB store")
            _compact_kahadb(store, output, dry_run, if_needed, force, live_below, pinned_below, mfmt, quiet,
                            metrics_file, started, os.path.abspath(path), wide, salvage)
            return
        req = CompactRequest(
            dry_run=dry_run, if_needed=if_needed, output=output, force=force, reclaim_only=reclaim_only,
            salvage=salvage,
            journals=("messages", "bindings") if journal == "all" else (journal,),
            file_size=file_size_bytes, min_files=min_files,
            pool_files=pool_files, compact_min_files=compact_min_files, compact_percentage=compact_percentage,
        )
        if force and not dry_run and output is None and not quiet:
            from amqtool.store import locks

            for lk in locks.find_locks(locks.artemis_store_lock_files(store)):
                stderr_console().print(f"amqtool: warning: --force: {lk.describe()}")
        total = 0
        for jd in store.journals():
            total += sum(p.stat().st_size for p in jd.journal_files())
        judged: list[Finding] = []  # verify's findings first (amqtool.engines.verdicts): the verdict is its
        with progress("compact", total or None, quiet) as advance:
            reports = compact_store(store, req, progress=advance, judged=judged)
        judged = _judged_shown(judged, dry_run, salvage)
        mode = ("dry-run" if dry_run else "copy" if output is not None else
                "reclaim-only" if reclaim_only else "in-place")
        findings = judged + _findings(reports, dry_run)
        verdict = overall_verdict(findings)
        doc = {"verdict": verdict.name, "mode": mode, "ifNeeded": if_needed,
               "needed": any(r.needed for r in reports),
               "journals": [r.to_json() for r in reports],
               "findings": [f.to_json() for f in findings]}
        publish("compact", os.path.abspath(path), doc, mfmt, metrics_file, seconds=time.monotonic() - started)
        if mfmt is MetricFormat.prometheus:
            pass
        elif fmt in (OutputFormat.json, OutputFormat.jsonl):
            write_document(doc, fmt)
        else:
            write_lines(fold_lines(_text(reports, mode), wide=wide))
            render_findings_text(_shown(judged, _findings(reports, dry_run), dry_run), wide=wide)
        finish(verdict if verdict is not Verdict.OK else Verdict.OK)


def _judged_shown(judged: list[Finding], dry_run: bool, salvage: bool) -> list[Finding]:
    """verify's findings in compact's report: all of them with --dry-run, which judges the store as it is;
    with --salvage, what the compaction left out (as the other writers list it); otherwise none: a writing
    run refused a store verify calls CRITICAL already, and what a WARNING store held of concern (a torn
    tail) is gone with the compaction."""
    return judged if dry_run or salvage else []


def _shown(judged: list[Finding], own: list[Finding], dry_run: bool) -> list[Finding]:
    """The findings the text shows: verify's that weigh on the verdict (its INFO ones are verify's to show;
    the JSON document lists them all), then compaction's own (INFO ones only with --dry-run)."""
    return ([f for f in judged if f.severity is not Severity.INFO or f.code == "compaction-refused"]
            + [f for f in own if f.severity is not Severity.INFO or dry_run])


def _compact_kahadb(store, output, dry_run, if_needed, force, live_below, pinned_below, mfmt, quiet,
                    metrics_file=None, started=None, label=None, wide=False, salvage=False) -> None:
    import time

    fmt = document_format(mfmt)
    from amqtool.engines.kahadb.compact import KahaCompactRequest, compact_kahadb
    from amqtool.engines.kahadb.scan import journal_files

    if not 0 <= live_below <= 100:
        raise UsageError("--live-below must be a percentage between 0 and 100")
    if pinned_below < 0:
        raise UsageError("--pinned-below must be 0 or more")
    req = KahaCompactRequest(dry_run=dry_run, output=output, if_needed=if_needed, live_below=live_below,
                             pinned_below=pinned_below, force=force, salvage=salvage)
    if output is not None and not quiet:
        from amqtool.store import locks

        for lk in locks.find_locks([store.root / "lock"]):
            stderr_console().print(f"amqtool: warning: {lk.describe()}: the copy may be torn")
    total = sum(f.size for d in store.directories for f in journal_files(Path(d)))
    judged: list[Finding] = []  # verify's findings first (amqtool.engines.verdicts): the verdict is its
    with progress("compact", total or None, quiet) as advance:
        reports = compact_kahadb(store, req, progress=advance, judged=judged)
    judged = _judged_shown(judged, dry_run, salvage)
    mode = "dry-run" if dry_run else "copy" if output is not None else "in-place"
    own: list[Finding] = []
    for r in reports:
        for note in r.notes:
            own.append(Finding(Severity.INFO, "compact-note", note, r.directory))
        if r.reasons:
            sev = Severity.WARNING if dry_run else Severity.INFO
            own.append(Finding(sev, "compaction-needed", "; ".join(r.reasons), r.directory))
        if r.open_transactions_dropped:
            own.append(Finding(Severity.INFO, "open-transactions-dropped",
                               f"{r.open_transactions_dropped} open local transaction(s) left out: the broker "
                               "rolls them back at its next start", r.directory))
    findings = judged + own
    verdict = overall_verdict(findings)
    doc = {"verdict": verdict.name, "kind": "kahadb", "mode": mode, "ifNeeded": if_needed,
           "needed": any(r.reasons for r in reports),
           "stores": [r.to_json() for r in reports],
           "findings": [f.to_json() for f in findings]}
    publish("compact", label or str(store.root), doc, mfmt, metrics_file,
            seconds=None if started is None else time.monotonic() - started)
    if mfmt is MetricFormat.prometheus:
        pass
    elif fmt in (OutputFormat.json, OutputFormat.jsonl):
        write_document(doc, fmt)
    else:
        lines = []
        for r in reports:
            ratio = f" (live ratio {r.live_ratio:.1%})" if r.live_ratio is not None else ""
            if r.action == "not-needed":  # --if-needed skipped it: no "after"
                why = [f"live ratio not below --live-below {live_below:g}%"]
                if pinned_below:
                    why.append(f"no file kept by fewer than --pinned-below {pinned_below} live messages")
                lines.append(f"KahaDB {r.directory}: skipped, not needed ({'; '.join(why)})")
                lines.append(f"  now: {r.files_before} files, {binary(r.bytes_before)}; live "
                             f"{binary(r.live_bytes)}" + ratio)
                continue
            lines.append(f"KahaDB {r.directory}: {r.action}")
            if r.action in ("left", "refused"):
                continue
            lines.append(f"  before: {r.files_before} files, {binary(r.bytes_before)}; live {binary(r.live_bytes)}"
                         + ratio)
            if r.action != "not-needed":
                lines.append(f"  after:  {r.files_after} files, {binary(r.bytes_after)}; reclaimed "
                             f"{binary(r.reclaimed)}; {r.messages} messages, {r.subscriptions} subscriptions, "
                             f"{r.prepared_transactions} prepared transactions")
                for t in r.top[:5]:
                    lines.append(f"    {t['destination']}: {t['messages']} messages, {binary(t['bytes'])}")
        write_lines(fold_lines(lines, wide=wide))
        render_findings_text(_shown(judged, own, dry_run), wide=wide)
    finish(verdict)
