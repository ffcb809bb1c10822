"""`amqtool bench [DIR]` and `amqtool bench sync-methods [DIR]`: journal write benchmarks (engines/bench.py).

`bench` times NIO, ASYNCIO, MAPPED and io_uring writes in DIR, one producer and many, and recommends
broker.xml settings; `--compat perf-journal` reproduces `artemis perf-journal`. `bench sync-methods` is
pg_test_fsync's comparison of sync calls. Data (table, JSON) on stdout; progress on stderr.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperGroup

from amqtool.commands.main import app
from amqtool.commands.output import (
    FORMAT_OPTION,
    QUIET_OPTION,
    OutputFormat,
    finish,
    guarded,
    render_findings_text,
    show_progress,
    stderr_console,
    terminal_width,
    write_document,
    write_lines,
)
from amqtool.commands.tables import WIDE_OPTION, Col, fold_lines, print_table
from amqtool.errors import CapabilityError, Finding, Severity, UsageError, Verdict


class _BenchGroup(TyperGroup):
    """`bench [DIR]` runs the group callback, `bench sync-methods [DIR]` the subcommand.

    Click would read a subcommand name in first place as the group's DIR argument; a first argument that
    names a subcommand is handed to that subcommand instead.
    """

    # `bench DIR --seconds 1`: options may follow DIR, as on any command (groups stop at the first word).
    allow_interspersed_args = True

    def parse_args(self, ctx, args):
        if args and args[0] in self.commands:
            super(TyperGroup, self).parse_args(ctx, [])  # the group's own options at their defaults
            ctx._protected_args, ctx.args = args[:1], args[1:]
            return ctx.args
        return super().parse_args(ctx, args)


bench_app = typer.Typer(
    cls=_BenchGroup,
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(bench_app, name="bench")


class Method(str, Enum):
    nio = "nio"
    asyncio = "asyncio"
    mapped = "mapped"
    io_uring = "io_uring"


class Pattern(str, Enum):
    one = "one"
    many = "many"
    both = "both"


class Compat(str, Enum):
    perf_journal = "perf-journal"


class JournalType(str, Enum):
    NIO = "NIO"
    ASYNCIO = "ASYNCIO"
    MAPPED = "MAPPED"


def _size(text: str) -> int:
    from amqtool.store.brokerxml import parse_byte_size

    try:
        return parse_byte_size(text)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a usage error
        raise UsageError(f"not a byte size: {text!r}") from exc


@contextmanager
def _progress(quiet: bool):
    """Yields ``(on_start(label, total), on_progress(done))``; no-ops unless stderr is a terminal."""
    if not show_progress(quiet):
        yield (lambda label, total: None), (lambda done: None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    state = {"task": None}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("writes"),
                  TimeElapsedColumn(), console=stderr_console(), transient=True, refresh_per_second=4) as bar:

        def on_start(label, total):
            if state["task"] is not None:
                bar.remove_task(state["task"])
            state["task"] = bar.add_task(label, total=total)

        def on_progress(done):
            if state["task"] is not None:
                bar.update(state["task"], completed=done)

        yield on_start, on_progress


def _settings(broker_xml: Optional[Path]):
    if broker_xml is None:
        return None
    from amqtool.store.brokerxml import read_broker_xml

    return read_broker_xml(broker_xml)


def _fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


BENCH_COLUMNS = (Col("journal type"), Col("pattern"), Col("sync", 2), Col("ops/s", 0, True), Col("MB/s", 3, True),
                 Col("p50", 1, True), Col("p90", 4, True), Col("p99", 1, True), Col("p99.9", 4, True),
                 Col("max", 3, True))


def _table(report, wide: bool = False) -> None:
    """The results in the table every command uses (:mod:`amqtool.commands.tables`): figures never wrap;
    on a narrow screen the latencies lose their decimals and the least telling columns (p90, p99.9, MB/s,
    max, sync) are left out and named."""
    lat_digits = 0 if terminal_width() < 120 and not wide else 1
    rows = []
    for r in report.results:
        if not r.available:
            rows.append([r.journal_type, r.label, r.sync, "n/a", "", "", "", "", "", ""])
            continue
        lat = r.latency
        rows.append([r.journal_type, r.label, r.sync, _fmt(r.ops_per_sec), _fmt(r.mb_per_sec, 1),
                     _fmt(lat.get("p50Us"), lat_digits), _fmt(lat.get("p90Us"), lat_digits),
                     _fmt(lat.get("p99Us"), lat_digits), _fmt(lat.get("p999Us"), lat_digits),
                     _fmt(lat.get("maxUs"), lat_digits)])
    print_table(f"journal writes in {report.directory} ({report.filesystem or '?'}, "
                f"{report.parameters['blockSize']} B blocks; latencies in µs)", BENCH_COLUMNS, rows, wide=wide)
    for r in report.results:
        if not r.available:
            write_lines(fold_lines([f"n/a: {r.journal_type} {r.label}: {r.reason}"], wide=wide))


@bench_app.callback()
def bench(
    ctx: typer.Context,
    directory: Optional[Path] = typer.Argument(None, help="Directory to write in (default: the journal "
                                               "directory of --broker-xml, else the current directory)."),
    method: Optional[List[Method]] = typer.Option(None, "--method", "-m", help="Only these methods "
                                                  "(repeatable); one that cannot run here then exits 3."),
    pattern: Pattern = typer.Option(Pattern.both, "--pattern", help="one producer waiting on each sync, "
                                    "many producers batched, or both."),
    file_size: str = typer.Option("10MiB", "--file-size", help="Size of the pre-filled file (journal-file-size)."),
    block_size: str = typer.Option("4096", "--block-size", help="Bytes per journal write."),
    writes: Optional[int] = typer.Option(None, "--writes", help="Writes per line (default: time-bound)."),
    seconds: Optional[float] = typer.Option(None, "--seconds", help="Seconds per line (default 2)."),
    producers: int = typer.Option(32, "--producers", help="Records per sync (NIO, MAPPED) or writes in flight "
                                  "(ASYNCIO, io_uring) for the many-producers pattern."),
    max_io: Optional[int] = typer.Option(None, "--max-io", help="journal-max-io: cap on AIO writes in flight "
                                         "(default 4096, or broker.xml)."),
    use_fsync: bool = typer.Option(False, "--fsync", help="NIO syncs with fsync instead of fdatasync "
                                   "(journal-datasync false)."),
    compat: Optional[Compat] = typer.Option(None, "--compat", help="perf-journal: Artemis' parameters and "
                                            "result lines."),
    journal_type: Optional[JournalType] = typer.Option(None, "--journal-type", help="With --compat: the "
                                                       "journal type (default: broker.xml, else ASYNCIO)."),
    tries: int = typer.Option(5, "--tries", help="With --compat: tries (the best counts)."),
    sync_writes: bool = typer.Option(False, "--sync-writes", help="With --compat: wait for each write."),
    no_sync: bool = typer.Option(False, "--no-sync", help="With --compat: no sync (perf-journal --no-sync)."),
    broker_xml: Optional[Path] = typer.Option(None, "--broker-xml", help="Take the directory, file size, "
                                              "journal type and journal-max-io from this broker.xml."),
    fmt: OutputFormat = FORMAT_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Benchmark journal writes (NIO, ASYNCIO, MAPPED, io_uring) and recommend broker.xml settings.

    Subcommand: `amqtool bench sync-methods [DIR]` compares sync calls as pg_test_fsync does.
    """
    if ctx.invoked_subcommand is not None:
        return
    from amqtool.engines import bench as engine

    with guarded(fmt):
        from amqtool.units import check_number

        check_number(writes, "--writes", minimum=1)
        check_number(seconds, "--seconds", above=0)
        check_number(producers, "--producers", minimum=1)
        check_number(max_io, "--max-io", minimum=1)
        check_number(tries, "--tries", minimum=1)
        settings = _settings(broker_xml)
        if directory is None:
            directory = settings.journal_dir if settings else Path(".")
        if compat is not None:
            _perf_journal(engine, directory, settings, journal_type, block_size, writes, tries,
                          not no_sync, sync_writes, max_io, fmt, quiet)
            return
        if journal_type is not None or sync_writes or no_sync:
            raise UsageError("--journal-type, --sync-writes and --no-sync go with --compat perf-journal")
        if max_io is None:
            max_io = settings.journal_max_io if settings and settings.journal_max_io else engine.DEFAULT_MAX_IO
        fsize = _size(file_size) if settings is None or file_size != "10MiB" else settings.journal_file_size
        with _progress(quiet) as (on_start, on_progress):
            report = engine.run_bench(
                directory,
                methods=[m.value for m in method] if method else None,
                patterns=None if pattern == Pattern.both else [pattern.value],
                file_size=fsize, block_size=_size(block_size), writes=writes, seconds=seconds,
                producers=producers, max_io=max_io, datasync=not use_fsync,
                on_start=on_start, on_progress=on_progress,
            )
        if fmt == OutputFormat.text:
            _table(report, wide)
            shown = [f for f in report.findings if f.code != "method-unavailable" or f.severity != Severity.INFO]
            if shown:
                sys.stdout.write("\n")
                render_findings_text(shown, wide=wide)
            rec = report.recommendation
            if rec.get("brokerXml"):
                write_lines(["", *fold_lines([f"Recommended broker.xml settings ({rec['journalType']} carried the "
                                              f"most records per second; buffer timeout from "
                                              f"{rec['basis'].get('journalBufferTimeout')}):"], wide=wide)])
                write_lines(rec["brokerXml"])
        else:
            write_document(report.to_json(), fmt, lists=("results", "findings"))
    finish(report.verdict)


def _perf_journal(engine, directory, settings, journal_type, block_size, writes, tries, sync, sync_writes,
                  max_io, fmt, quiet) -> None:
    from amqtool import native

    explicit = journal_type is not None
    jt = journal_type.value if explicit else (settings.journal_type if settings else "ASYNCIO")
    if max_io is None:
        max_io = settings.effective_max_io if settings else engine.DEFAULT_MAX_IO
    notes = []
    if jt == "ASYNCIO" and not explicit and not native.HAVE_AIO:
        # perf-journal falls back to NIO silently; amqtool says so.
        notes.append(f"ASYNCIO unavailable ({native.AIO_REASON}); timing NIO instead")
        jt = "NIO"
    with _progress(quiet) as (on_start, on_progress):
        try:
            doc = engine.run_perf_journal(
                directory, journal_type=jt, block_size=_size(block_size),
                writes=writes if writes is not None else engine.PERF_JOURNAL_WRITES, tries=tries, sync=sync,
                sync_writes=sync_writes, max_aio=max_io, on_start=on_start, on_progress=on_progress)
        except CapabilityError as exc:
            if explicit or jt != "ASYNCIO":
                raise
            notes.append(f"{exc.message}; timing NIO instead")
            jt = "NIO"
            doc = engine.run_perf_journal(
                directory, journal_type=jt, block_size=_size(block_size),
                writes=writes if writes is not None else engine.PERF_JOURNAL_WRITES, tries=tries, sync=sync,
                sync_writes=sync_writes, max_aio=max_io, on_start=on_start, on_progress=on_progress)
    for n in notes:
        stderr_console().print(f"amqtool: note: {n}")
    doc["notes"] = notes
    if fmt == OutputFormat.text:
        write_lines(doc["lines"])
        ex = doc["exact"]
        write_lines(fold_lines([f"# amqtool: best try {doc['triesNs'] and min(doc['triesNs']) / 1e6:.3f} ms; "
                                f"without the millisecond clock: {ex['writesPerMs']:.2f} writes per "
                                f"millisecond, journal-buffer-timeout {ex['journalBufferTimeout']}"]))
    else:
        write_document(doc, fmt, lists=())
    finish(Verdict.OK)


@bench_app.command("sync-methods")
def sync_methods(
    directory: Path = typer.Argument(Path("."), help="Directory to write in (put it on the journal disk)."),
    seconds: float = typer.Option(1.0, "--seconds", "-s", help="Seconds per test (pg_test_fsync: 5)."),
    writes: Optional[int] = typer.Option(None, "--writes", help="At most this many ops per test."),
    fmt: OutputFormat = FORMAT_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Compare sync methods as pg_test_fsync does (open_datasync, fdatasync, fsync, open_sync; with and
    without O_DIRECT), one and two 8 kB writes per op, in ops/s, µs/op and latency percentiles."""
    from amqtool.engines import bench as engine

    with guarded(fmt):
        from amqtool.units import check_number

        check_number(seconds, "--seconds", above=0)
        check_number(writes, "--writes", minimum=1)
        with _progress(quiet) as (on_start, on_progress):
            doc = engine.run_sync_methods(directory, seconds=seconds, writes=writes, on_start=on_start,
                                          on_progress=on_progress)
        if fmt == OutputFormat.text:
            out = []
            for n in (1, 2):
                rows = [r for r in doc["results"] if r["writesPerOp"] == n]
                if not rows:
                    continue
                what = "one 8kB write" if n == 1 else "two 8kB writes"
                out += ["", f"Compare file sync methods using {what}:",
                        "(in wal_sync_method preference order, except fdatasync is Linux's default)"]
                for r in rows:
                    label = r["method"] + (" (O_DIRECT)" if r["oDirect"] else "")
                    if r["available"]:
                        lat = r["latency"]
                        line = engine.pg_line(label, r["opsPerSec"], r["usecsPerOp"])
                        line += f"  p50 {lat['p50Us']:.0f}  p99 {lat['p99Us']:.0f}  max {lat['maxUs']:.0f} µs"
                    else:
                        line = engine.pg_line(label, None, None, available=False)
                    out.append(line)
            if any(not r["available"] for r in doc["results"]):
                out += ["", "* This file system and its mount options do not support direct I/O."]
            write_lines(fold_lines(out))
        else:
            write_document(doc, fmt, lists=("results",))
    finish(Verdict[doc["verdict"]])
