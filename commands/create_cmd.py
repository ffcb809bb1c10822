"""``amqtool create``: pre-create Artemis journals, or write a demo broker store with a manifest."""
from __future__ import annotations

import sys
from typing import Optional

import typer

from amqtool.commands.main import app
from amqtool.commands.output import (
    FORMAT_OPTION,
    QUIET_OPTION,
    OutputFormat,
    guarded,
    progress,
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
    fmt: OutputFormat = FORMAT_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Pre-create a journal as Artemis does on first start, or write a demo broker store (--demo)."""
    with guarded(fmt):
        from amqtool.engines.artemis import create as engine

        fs = engine.parse_size(file_size, "--file-size") if file_size is not None else None
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


def _text(doc: dict, quiet: bool) -> None:
    out = sys.stdout
    for j in doc["journals"]:
        out.write(f"{j['kind']} journal {j['directory']}: {len(j['files'])} file(s) of {j['fileSize']} bytes "
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
