"""``amqtool create``: pre-create Artemis journals, or write a demo broker store with a manifest."""
from __future__ import annotations

import sys
from typing import Optional

import typer

from amqtool.commands.main import app
from amqtool.units import binary
from amqtool.commands.output import (
    FORMAT_OPTION,
    QUIET_OPTION,
    OutputFormat,
    guarded,
    progress,
    finish,
    stderr_console,
    write_document,
)


@app.command("create")
def create(
    path: str = typer.Argument(..., help="Journal directory (--kind bindings|messages) or broker instance "
                                          "directory (--kind broker, --demo)."),
    kind: str = typer.Option("messages", "--kind", help="bindings, messages or broker."),
    file_size: Optional[str] = typer.Option(None, "--file-size",
                                            help="Message journal file size (journal-file-size), e.g. 10MiB."),
    min_files: Optional[int] = typer.Option(None, "--min-files", help="Message journal min files (journal-min-files)."),
    demo: Optional[str] = typer.Option(None, "--demo", metavar="SIZE",
                                       help="Write a realistic demo broker store of about SIZE (e.g. 64MiB, 1GiB)."),
    seed: int = typer.Option(1, "--seed", help="Demo: random seed (same seed, same bytes)."),
    live_ratio: float = typer.Option(0.3, "--live-ratio", help="Demo: fraction of written messages left live."),
    no_large: bool = typer.Option(False, "--no-large-messages", help="Demo: write no large messages."),
    no_paging: bool = typer.Option(False, "--no-paging", help="Demo: no paged addresses."),
    source: Optional[str] = typer.Option(None, "--from", metavar="KAHADB",
                                         help="Migrate this ActiveMQ Classic KahaDB/mKahaDB store (or this "
                                              "`data exp` XML file) into a new Artemis store at PATH."),
    large_threshold: Optional[str] = typer.Option(None, "--large-message-threshold", metavar="SIZE",
                                                  help="--from: bodies above SIZE become large messages "
                                                       "(default 100KiB, as min-large-message-size)."),
    include_prepared: bool = typer.Option(False, "--include-prepared",
                                          help="--from: migrate messages of prepared XA transactions, still "
                                               "prepared."),
    dry_run: bool = typer.Option(False, "--dry-run", help="--from: say what would be migrated; write nothing."),
    force: bool = typer.Option(False, "--force", help="--from: read the source even while a broker locks it."),
    salvage: bool = typer.Option(False, "--salvage", help="--from: migrate a source verify calls CRITICAL (refused "
                                                          "otherwise, exit 2): what survives, listing what is "
                                                          "left out."),
    fmt: OutputFormat = FORMAT_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Pre-create a journal as Artemis does on first start, or write a demo broker store (--demo)."""
    with guarded(fmt):
        from amqtool.engines.artemis import create as engine

        fs = engine.parse_size(file_size, "--file-size") if file_size is not None else None
        from_only = [n for n, v in (("--large-message-threshold", large_threshold), ("--include-prepared",
                     include_prepared), ("--dry-run", dry_run), ("--force", force), ("--salvage", salvage)) if v]
        if source is None and from_only:
            from amqtool.errors import UsageError

            raise UsageError(f"{from_only[0]} applies to --from only")
        if source is not None:
            if demo is not None:
                from amqtool.errors import UsageError

                raise UsageError("--from and --demo are exclusive")
            _create_from(path, source, large_threshold, include_prepared, dry_run, force, fs, min_files, fmt,
                         quiet, salvage)
            return
        if demo is not None:
            size = engine.parse_size(demo, "--demo size")
            from amqtool.engines.artemis.demo import create_demo

            with progress("creating demo store", size, quiet) as advance:
                manifest = create_demo(path, size, seed=seed, live_ratio=live_ratio, file_size=fs,
                                       min_files=min_files, progress=advance,
                                       large_messages=not no_large, paging=not no_paging)
            doc = {
                "verdict": "OK",
                "path": path,
                "kind": "demo",
                "manifest": f"{path.rstrip('/')}/manifest.json",
                "journals": [{"kind": k, "directory": j["directory"], "fileSize": j["fileSize"],
                              "minFiles": j["minFiles"], "files": j["files"],
                              "liveRecordCount": j["liveRecordCount"]}
                             for k, j in manifest["expected"]["journals"].items()],
                "counts": manifest["counts"],
                "messageCounts": manifest["expected"]["messageCounts"],
            }
        else:
            if kind != "broker" and kind not in ("bindings", "messages"):
                from amqtool.errors import UsageError

                raise UsageError(f"--kind must be bindings, messages or broker, not {kind!r}")
            created = engine.create_journals(path, kind, file_size=fs, min_files=min_files)
            doc = {"verdict": "OK", "path": path, "kind": kind, "journals": [c.to_json() for c in created]}
        if fmt is OutputFormat.text:
            _text(doc, quiet)
        else:
            write_document(doc, fmt)


def _create_from(path, source, large_threshold, include_prepared, dry_run, force, fs, min_files, fmt, quiet,
                 salvage=False):
    from amqtool.engines.artemis.create import parse_size
    from amqtool.engines.migrate.write import DEFAULT_LARGE_THRESHOLD, create_from
    from amqtool.errors import Verdict

    threshold = DEFAULT_LARGE_THRESHOLD
    if large_threshold is not None:
        threshold = 0 if large_threshold.strip() == "0" else parse_size(large_threshold, "--large-message-threshold")
    with progress("migrating", None, quiet) as advance:
        doc = create_from(path, source, large_threshold=threshold, include_prepared=include_prepared,
                                 dry_run=dry_run, file_size=fs, min_files=min_files, force=force,
                                 progress=advance, salvage=salvage)
    left_out = doc["notConverted"] or doc["skippedDestinations"] or doc["schedulerStores"] or any(
        not t["migrated"] for t in doc["preparedTransactions"])
    # verify's verdict on the source (engines.verdicts), at least WARNING when something was left out
    verdict = max(Verdict[doc["sourceVerdict"]], Verdict.WARNING if left_out else Verdict.OK)
    doc = {"verdict": verdict.name, **doc}
    if fmt is OutputFormat.text:
        _text_from(doc)
        if not quiet:
            stderr_console().print(("would create " if dry_run else "created ") + doc["dest"])
    else:
        write_document(doc, fmt)
    finish(verdict)


class _Folded:
    """stdout for the text reports: each line folded to the terminal's width (commands.tables.fold)."""

    def write(self, text: str) -> None:
        from amqtool.commands.tables import fold_lines

        for line in fold_lines(text.rstrip("\n").split("\n")):
            sys.stdout.write(line + "\n")


def _text_from(doc: dict) -> None:
    out = _Folded()
    head = "would migrate" if doc["dryRun"] else "migrated"
    out.write(f"{head} {doc['messages']} message(s), {doc['references']} queue reference(s), "
              f"{binary(doc['bodyBytes'])} of bodies from {doc['source']} ({doc['kind']})\n")
    for a in doc["addresses"]:
        out.write(f"  address {a['name']} ({','.join(a['routingTypes'])})\n")
        for q in doc["queues"]:
            if q["address"] == a["name"]:
                extra = f", {q['preparedMessages']} prepared" if q["preparedMessages"] else ""
                out.write(f"    queue {q['name']}: {q['messages']} message(s){extra}\n")
    c = doc.get("counts", {})
    if c.get("largeMessages"):
        out.write(f"  large messages: {c['largeMessages']} ({binary(c['largeBytes'])})\n")
    for p in doc["notConverted"]:
        where = " ".join(str(x) for x in (p["destination"], p["location"], p["messageId"]) if x is not None)
        out.write(f"  not converted: {where + ': ' if where else ''}{p['reason']}\n")
    for s in doc["skippedDestinations"]:
        out.write(f"  left out: {s['type']} {s['destination']!r}: {s['reason']}\n")
    for t in doc["preparedTransactions"]:
        what = "migrated, still prepared" if t["migrated"] else "left out (--include-prepared to migrate)"
        out.write(f"  prepared transaction {t['id']}: {t['messages']} message(s) {what}\n")
    lt = doc["openLocalTransactions"]
    if lt["transactions"]:
        out.write(f"  unresolved local transactions: {lt['transactions']} ({lt['messages']} message(s), never "
                  f"migrated: the broker rolls them back)\n")
    for s in doc["schedulerStores"]:
        out.write(f"  scheduler store {s}: scheduled messages waiting there are not migrated\n")
    for f in doc.get("findings") or ():  # verify's on the source: what a salvage leaves out
        where = f" {f['path']}" + (f"@{f['offset']}" if f.get("offset") is not None else "") if f.get("path") else ""
        out.write(f"  {f['severity']}: {f['code']}{where}: {f['message']}\n")


def _text(doc: dict, quiet: bool) -> None:
    out = _Folded()
    for j in doc["journals"]:
        out.write(f"{j['kind']} journal {j['directory']}: {len(j['files'])} file(s) of {binary(j['fileSize'])} "
                  f"(min files {j['minFiles']})\n")
        for f in j["files"]:
            out.write(f"  {f['name']}  fileId={f['fileId']}  size={f['size']}\n")
    if doc["kind"] == "demo":
        c = doc["counts"]
        out.write(f"messages written {c['messagesWritten']}, live {c['messagesLive']} "
                  f"(ratio {c['actualLiveRatio']}), large {c['largeMessages']}, prepared transactions 1\n")
        for q, n in doc["messageCounts"].items():
            out.write(f"  queue {q}: {n} live message(s)\n")
        out.write(f"manifest: {doc['manifest']}\n")
    if not quiet:
        stderr_console().print(f"created {doc['path']}")
