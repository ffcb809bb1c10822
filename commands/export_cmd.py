"""``amqtool export PATH -o OUT --format xml|jsonl|parquet``: a store's live messages, for another broker
(`artemis data imp`), for inspection, or as evidence before a risky repair."""
from __future__ import annotations

import enum
import sys

import typer

from amqtool.commands.main import app
from amqtool.commands.output import (
    QUIET_OPTION,
    OutputFormat,
    finish,
    guarded,
    show_progress,
    stderr_console,
    write_document,
)
from amqtool.commands.store_options import BROKER_XML_OPTION, JDBC_PASSWORD_FILE_OPTION


class ExportFormat(str, enum.Enum):
    xml = "xml"
    jsonl = "jsonl"
    parquet = "parquet"


class Engine(str, enum.Enum):
    auto = "auto"
    local = "local"
    spark = "spark"


class Report(str, enum.Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


class _ExportBar:
    """The export's one progress bar on stderr (a terminal only, started by the first report): the journal
    bytes read (the local engine), or the Spark engine's tasks (completed / total tasks of the running stages,
    from Spark's status tracker) once it reports them; bytes reported after that are not shown. One live
    display: a bytes bar and a tasks bar on the same line would overwrite each other."""

    def __init__(self, quiet: bool):
        self.enabled = show_progress(quiet)
        self.bar = None
        self.spark = False
        self.read = 0

    def __enter__(self):
        return self

    def _start(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[figures]}"),
                            TimeElapsedColumn(), console=stderr_console(), transient=True, refresh_per_second=4)
        self.bar.start()
        self.task = self.bar.add_task("reading", total=None, figures="")

    def advance(self, n: int) -> None:
        """``n`` more journal bytes read (the local engine's loader and reader)."""
        if not self.enabled or self.spark:
            return
        from amqtool.units import binary

        if self.bar is None:
            self._start()
        self.read += n
        self.bar.update(self.task, completed=self.read, figures=binary(self.read))

    def update(self, done: int, total: int) -> None:
        """The Spark engine's tasks: ``done`` of ``total``."""
        if not self.enabled:
            return
        if self.bar is None:
            self._start()
        self.spark = True
        self.bar.update(self.task, description="spark tasks", completed=done, total=total, figures=f"{done}/{total}")

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


class _FleetBar:
    """A fleet export's progress on stderr (a terminal only): stores done / total, bytes, rows and the
    slowest store so far (``FleetProgress.figures``), after each store."""

    def __init__(self, quiet: bool):
        self.enabled = show_progress(quiet)
        self.bar = None

    def __enter__(self):
        return self

    @staticmethod
    def line(f: dict) -> str:
        from amqtool.units import binary

        slow = f" · slowest {f['slowest']} ({f['slowestSeconds']:.1f} s)" if f["slowest"] is not None else ""
        return f"stores {f['done']}/{f['total']} · {binary(f['bytes'])} of {binary(f['totalBytes'])} · {f['rows']:,} rows{slow}"

    def update(self, figures: dict) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(BarColumn(bar_width=20), TextColumn("{task.description}"), TimeElapsedColumn(),
                                console=stderr_console(), transient=True, refresh_per_second=4)
            self.bar.start()
            self.task = self.bar.add_task("", total=figures["total"])
        self.bar.update(self.task, completed=figures["done"], description=self.line(figures))

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


@app.command("export")
def export(
    paths: list[str] = typer.Argument(None, help="Stores: Artemis instance, data or journal directories; KahaDB/mKahaDB "
                                                "directories (default .). Several, or quoted patterns (amqtool expands "
                                                "them), make one dataset of the fleet."),
    out: str = typer.Option(..., "--output", "-o", help="Output: a file (xml) or a directory of tables (jsonl, parquet)."),
    fmt: ExportFormat = typer.Option(None, "--format", "-f", help="xml (artemis data exp; one store's default), jsonl "
                                                                  "or parquet (a fleet's default)."),
    stores_from: str = typer.Option(None, "--stores-from", help="Read stores (or patterns) from FILE, one a line "
                                                                "(- for stdin): a fleet export."),
    engine: Engine = typer.Option(Engine.auto, "--engine", help="local (in process), spark, or auto (by store size)."),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*]); implies the Spark engine."),
    ship: bool = typer.Option(None, "--ship/--no-ship", help="Spark cluster: pack this environment for workers "
                                                             "without amqtool (default), or use theirs."),
    queues: list[str] = typer.Option(None, "--queue", help="Only queues matching this pattern (fnmatch; repeatable)."),
    safe: bool = typer.Option(False, "--safe", help="No body bytes: body_size and body_sha256 only (jsonl, parquet)."),
    salvage: bool = typer.Option(False, "--salvage", help="Export from a store verify calls CRITICAL (refused otherwise, "
                                                          "exit 2): what survives, listing what is left out."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output (only once the new one is complete)."),
    mode: str = typer.Option(None, "--mode", help="Octal mode of output files (default 600; directories get x where r)."),
    broker_xml: str = BROKER_XML_OPTION,
    activemq_xml: str = typer.Option(None, "--activemq-xml", help="ActiveMQ Classic activemq.xml: use the store it names (KahaDB or JDBC)."),
    jdbc_url: str = typer.Option(None, "--jdbc-url", help="A database store: jdbc:postgresql://host:port/db (credentials from AMQTOOL_JDBC_USER/AMQTOOL_JDBC_PASSWORD or --jdbc-password-file)."),
    jdbc_password_file: str = JDBC_PASSWORD_FILE_OPTION,
    jdbc_table_prefix: str = typer.Option(None, "--jdbc-table-prefix", help="Classic JDBC: the adapter's tablePrefix."),
    jdbc_driver_jar: str = typer.Option(None, "--jdbc-driver-jar", help="Spark engine: the JDBC driver jar (default: the system's, e.g. /usr/share/java/postgresql.jar)."),
    jdbc_partitions: int = typer.Option(None, "--jdbc-partitions", min=1, help="Spark engine, Classic JDBC: ID ranges read in parallel (default: the cores)."),
    report: Report = typer.Option(Report.text, "--report", help="Summary on stdout: text, json or jsonl (one object a line: problems, stores, then the summary)."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Export a store's live messages (one row per message per queue, paged ones included) and its bindings;
    several stores (a fleet) into one dataset with a stores table."""
    with guarded(None if report is Report.text else OutputFormat(report.value)):
        from amqtool.engines.export import ExportRequest, run_export
        from amqtool.engines.export.fleet import is_fleet
        from amqtool.engines.export.writers import parse_mode

        paths = list(paths or [])
        if is_fleet(paths, stores_from):
            if broker_xml:
                from amqtool.errors import UsageError

                raise UsageError("--broker-xml names the directories of one store; export a fleet by its stores' "
                                 "paths")
            _export_fleet(paths, stores_from, out, fmt, engine, master, queues, safe, force, mode, report, quiet,
                          ship, salvage)
            return
        path = paths[0] if paths else "."
        if not (jdbc_url or broker_xml or activemq_xml):
            from amqtool.commands.stores import one_store

            one_store(path, command="export")  # several stores under PATH: say which (or export them as a fleet)
        fmt = fmt or ExportFormat.xml
        req = ExportRequest(path=path, out=out, fmt=fmt.value, engine=engine.value, master=master,
                            queues=tuple(queues) if queues else None, safe=safe, salvage=salvage, force=force,
                            mode=parse_mode(mode), broker_xml=broker_xml, activemq_xml=activemq_xml, jdbc_url=jdbc_url,
                            jdbc_password_file=jdbc_password_file, jdbc_table_prefix=jdbc_table_prefix,
                            jdbc_driver_jar=jdbc_driver_jar, jdbc_partitions=jdbc_partitions, ship=ship)
        with _ExportBar(quiet) as bar:
            doc, verdict = run_export(req, progress=bar.advance, task_progress=bar.update, status=_status(quiet))
        doc = {"verdict": verdict.name, **doc}
        if report is not Report.text:
            write_document(doc, OutputFormat(report.value), lists=("problems",))
        else:
            subs = f", {doc['subscriptions']} durable subscriptions" if doc.get("subscriptions") else ""
            _say(f"exported {doc['rows']} rows ({doc['messages']} messages on "
                 f"{len(doc['rowsByQueue'])} queues, {doc['bindings']} bindings{subs}) to "
                 f"{doc['output']} [{doc['format']}, {doc['engine']} engine]\n")
            if doc["problemCount"]:
                first = doc["problems"][0]
                where = f"message {first['messageId']}: " if first["messageId"] is not None else ""
                _say(f"WARNING: {doc['problemCount']} problem(s); first: {where}{first['message']}\n")
            _write_findings(doc.get("findings") or ())
            if doc.get("skippedNotXml"):
                _say(f"WARNING: {doc['skippedNotXml']} AMQP message(s) left out of the XML "
                     "(not converted to core); export them with --format jsonl or parquet\n")
        finish(verdict)


def _say(text: str) -> None:
    """A line of the text report on stdout, folded to the terminal's width (commands.tables.fold)."""
    from amqtool.commands.tables import fold_lines

    for line in fold_lines(text.rstrip("\n").split("\n")):
        sys.stdout.write(line + "\n")


def _status(quiet: bool):
    """Status lines on stderr (the shipped environment's archive, what its cache's pruning removed), unless
    ``--quiet``."""
    if quiet:
        return None
    console = stderr_console()
    return lambda line: console.print(line, soft_wrap=True)


def _write_findings(findings) -> None:
    """verify's findings on what the export read (what it leaves out or could not check), one a line."""
    for f in findings:
        where = f" {f['path']}" + (f"@{f['offset']}" if f.get("offset") is not None else "") if f.get("path") else ""
        sys.stdout.write(f"{f['severity'].upper()}: {f['code']}{where}: {f['message']}\n")


def _export_fleet(paths, stores_from, out, fmt, engine, master, queues, safe, force, mode, report, quiet,
                  ship, salvage=False) -> None:
    from amqtool.engines.export.fleet import FleetRequest, run_fleet_export
    from amqtool.engines.export.writers import parse_mode

    req = FleetRequest(stores=paths, stores_from=stores_from, out=out, fmt=(fmt or ExportFormat.parquet).value,
                       engine=engine.value, master=master, queues=tuple(queues) if queues else None, safe=safe,
                       force=force, mode=parse_mode(mode), ship=ship, salvage=salvage)
    with _FleetBar(quiet) as bar:
        doc, verdict = run_fleet_export(req, store_progress=bar.update, status=_status(quiet))
    doc = {"verdict": verdict.name, **doc}
    if report is not Report.text:
        write_document(doc, OutputFormat(report.value), lists=("problems", "stores"))
    else:
        by = doc["storesByVerdict"]
        subs = f", {doc['subscriptions']} durable subscriptions" if doc.get("subscriptions") else ""
        _say(f"exported {doc['rows']} rows ({doc['messages']} messages, {doc['bindings']} bindings{subs}) "
             f"from {doc['storeCount']} stores ({by['OK']} OK, {by['WARNING']} with problems, "
             f"{by['CRITICAL']} critical, {by['UNKNOWN']} not read or checked) to {doc['output']} "
             f"[{doc['format']}, {doc['engine']} engine]\n")
        for st in doc["stores"]:
            if st["verdict"] != "OK":
                _say(f"{st['verdict']}: {st['store']} ({st['path']}): {st['problem']}\n")
        if doc.get("queueMismatch"):
            _say(f"WARNING: {doc['queueMismatch']}\n")
    finish(verdict)
