"""``amqtool check``: write-cache, disk-space, aio and all. Is this disk fit to hold a journal?

Thin: options -> targets and limits -> ``amqtool.engines.check`` -> a Rich table or one JSON document ->
exit code from the verdict. Nothing here changes the system.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List, Optional

import typer

from amqtool.commands.main import app
from amqtool.commands import nagios as plugin
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
    render_findings_text,
    stderr_console,
    write_document,
    write_lines,
)
from amqtool.commands.tables import WIDE_OPTION
from amqtool.commands.store_options import JDBC_PASSWORD_FILE_OPTION
from amqtool.errors import UsageError

check_app = typer.Typer(
    name="check",
    help="Is this disk fit to hold a journal? Write cache, free space against the broker limits, AIO/O_DIRECT.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(check_app, name="check")

PATHS_ARG = typer.Argument(None, help="Directories to check (default: the broker's store directories, else .).")
BROKER_XML = typer.Option(None, "--broker-xml", help="Artemis broker.xml: store directories and limits.")
ACTIVEMQ_XML = typer.Option(None, "--activemq-xml", help="ActiveMQ Classic activemq.xml: store and usage limits.")
MAX_DISK_USAGE = typer.Option(None, "--max-disk-usage",
                              help="Artemis max-disk-usage in percent (default 90; -1 = off).")
MIN_DISK_FREE = typer.Option(None, "--min-disk-free",
                             help="Artemis min-disk-free, e.g. 10GB, 512MiB (wins over --max-disk-usage).")
JOURNAL_MAX_IO = typer.Option(None, "--journal-max-io", help="Artemis journal-max-io (default 4096 for ASYNCIO).")
DEVICE_BLOCK_SIZE = typer.Option(None, "--journal-device-block-size",
                                 help="Artemis journal-device-block-size, e.g. 4096 or 4KiB.")
PROBE_SECONDS = typer.Option(3.0, "--probe-seconds", help="Length of the fsync-rate probe in `check all` (0 = skip).")


# --nagios: per filesystem its headroom (bytes and % of the filesystem) and used %, and the findings.
NAGIOS_LABELS = {"headroom_pct", "headroom", "used_pct", "findings_critical", "findings_warning"}


def _emit(name: str, report, mfmt: MetricFormat, quiet: bool, metrics_file: str | None = None,
          nagios: tuple | None = None, label: str = "", wide: bool = False) -> None:
    fmt = document_format(mfmt)
    doc = {"check": name, **report.to_json()}
    publish("check", label, doc, mfmt, metrics_file)
    if nagios is not None:
        _nagios(name, doc, report, *nagios)
    if mfmt is MetricFormat.prometheus:
        pass
    elif fmt in (OutputFormat.json, OutputFormat.jsonl):
        write_document(doc, fmt)
    else:
        _text(name, report, wide)
    finish(report.verdict)


def _text(name: str, report, wide: bool = False) -> None:
    """The findings, one each, folded to the terminal (their messages are prose: a table cell would wrap
    them into a column of words), then the verdict."""
    write_lines([f"amqtool check {name}"])
    render_findings_text(report.findings, wide=wide)
    write_lines([f"verdict: {report.verdict.name}"])


def _nagios_thresholds(nagios: bool, warning, critical, fmt) -> tuple | None:
    """(warn, crit) threshold maps for --nagios, None without it; -w/-c alone is a usage error."""
    if not nagios:
        if warning or critical:
            raise UsageError("-w/-c are thresholds of --nagios")
        return None
    if fmt is not MetricFormat.text:
        raise UsageError("--nagios prints its own status line; use --metrics-file, not --format, beside it")
    return (plugin.parse_thresholds(warning, "headroom_pct", NAGIOS_LABELS),
            plugin.parse_thresholds(critical, "headroom_pct", NAGIOS_LABELS))


def _nagios(name: str, doc: dict, report, warn: dict, crit: dict) -> None:
    """The plugin line of check (commands/nagios.py): the verdict, the findings, and per filesystem checked
    its headroom before the broker's disk limit blocks producers, in bytes and in % of the filesystem."""
    from amqtool.commands.metrics import _filesystems

    findings = doc.get("findings", [])
    n_crit = sum(1 for f in findings if f["severity"] == "critical")
    n_warn = sum(1 for f in findings if f["severity"] == "warning")
    figures = [plugin.Figure("findings_critical", n_crit, "", 0), plugin.Figure("findings_warning", n_warn, "", 0)]
    seen = set()
    for fs in _filesystems(doc):
        where = (fs.get("paths") or [fs.get("device")])[0]
        if where in seen:
            continue
        seen.add(where)
        total = fs.get("total") or 0
        if fs.get("headroom") is not None:
            figures.append(plugin.Figure(f"headroom {where}", fs["headroom"], "B", None, total or None))
            if total:
                figures.append(plugin.Figure(f"headroom_pct {where}", round(100.0 * fs["headroom"] / total, 2),
                                             "%", None, 100))
        if fs.get("usedPercent") is not None:
            figures.append(plugin.Figure(f"used_pct {where}", fs["usedPercent"], "%", 0, 100))
    worst = next((f for f in findings if f["severity"] in ("critical", "unknown")), None) or \
        next((f for f in findings if f["severity"] == "warning"), None)
    text = f"check {name}: {n_crit} critical, {n_warn} warning finding(s)"
    if worst is not None:
        text += f"; first: {worst['code']}: {plugin.brief(worst['message'])}"
    plugin.emit(report.verdict, text, figures, warn, crit, label_of=lambda f: f.label.split(" ", 1)[0])


@contextmanager
def _checking(label: str, fmt: MetricFormat, metrics_file: str | None, nagios: bool = False,
              warning: Optional[List[str]] = None, critical: Optional[List[str]] = None) -> Iterator[tuple | None]:
    """The frame of every check subcommand: an error ends as the plugin's UNKNOWN line (--nagios) or one error
    line and its exit code, with verdict UNKNOWN published to the metrics; -w/-c are checked against --nagios
    first. Yields the --nagios thresholds (None without it) for ``_emit``."""
    with unknown_on_error("check", label, fmt, metrics_file), \
            (plugin.nagios_guard() if nagios and fmt is MetricFormat.text else guarded(document_format(fmt))):
        # --nagios beside --format json(l) is refused in the format asked for (one JSON line), not as a plugin line
        yield _nagios_thresholds(nagios, warning, critical, fmt)


def _status(quiet: bool, message: str) -> None:
    if not quiet:
        stderr_console().print(message)


@check_app.command("write-cache")
def write_cache(
    paths: Optional[List[str]] = PATHS_ARG,
    broker_xml: Optional[str] = BROKER_XML,
    activemq_xml: Optional[str] = ACTIVEMQ_XML,
    root: str = typer.Option("/", "--root", hidden=True,
                             help="Read sys/, proc/self/mountinfo and run/udev/data from a recorded tree."),
    fmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    nagios: bool = plugin.NAGIOS_OPTION,
    warning: Optional[List[str]] = plugin.WARNING_OPTION,
    critical: Optional[List[str]] = plugin.CRITICAL_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Walk each path down to its disks and judge their write caches (reads sysfs/udev only)."""
    label = ",".join(paths or ["."])
    with _checking(label, fmt, metrics_file, nagios, warning, critical) as thresholds:
        from amqtool.engines.check import check_write_cache, configure

        cfg = configure(paths, broker_xml, activemq_xml)
        _emit("write-cache", check_write_cache(cfg.targets, root=root), fmt, quiet, metrics_file, thresholds,
              label=label, wide=wide)


@check_app.command("disk-space")
def disk_space(
    paths: Optional[List[str]] = PATHS_ARG,
    broker_xml: Optional[str] = BROKER_XML,
    activemq_xml: Optional[str] = ACTIVEMQ_XML,
    max_disk_usage: Optional[int] = MAX_DISK_USAGE,
    min_disk_free: Optional[str] = MIN_DISK_FREE,
    fmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    nagios: bool = plugin.NAGIOS_OPTION,
    warning: Optional[List[str]] = plugin.WARNING_OPTION,
    critical: Optional[List[str]] = plugin.CRITICAL_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Free space against Artemis max-disk-usage/min-disk-free and Classic storeUsage/tempUsage."""
    label = ",".join(paths or ["."])
    with _checking(label, fmt, metrics_file, nagios, warning, critical) as thresholds:
        from amqtool.engines.check import check_disk_space, configure

        cfg = configure(paths, broker_xml, activemq_xml, max_disk_usage, min_disk_free)
        _emit("disk-space", check_disk_space(cfg.targets, cfg.limit, cfg.classic), fmt, quiet, metrics_file, thresholds,
              label=label, wide=wide)


@check_app.command("aio")
def aio(
    path: str = typer.Argument(..., help="The journal directory (a test file is created there and removed)."),
    broker_xml: Optional[str] = BROKER_XML,
    journal_max_io: Optional[int] = JOURNAL_MAX_IO,
    journal_device_block_size: Optional[str] = DEVICE_BLOCK_SIZE,
    fmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    nagios: bool = plugin.NAGIOS_OPTION,
    warning: Optional[List[str]] = plugin.WARNING_OPTION,
    critical: Optional[List[str]] = plugin.CRITICAL_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Filesystem type, O_DIRECT write test, io_setup, aio-max-nr, block sizes and libaio."""
    with _checking(path, fmt, metrics_file, nagios, warning, critical) as thresholds:
        from amqtool.engines.check import check_aio, configure

        cfg = configure([path], broker_xml, journal_max_io=journal_max_io,
                        journal_device_block_size=journal_device_block_size)
        _emit("aio", check_aio(path, cfg.journal_max_io, cfg.device_block_size, cfg.journal_type), fmt, quiet, metrics_file, thresholds,
              label=path, wide=wide)


@check_app.command("all")
def check_all(
    paths: Optional[List[str]] = PATHS_ARG,
    broker_xml: Optional[str] = BROKER_XML,
    activemq_xml: Optional[str] = ACTIVEMQ_XML,
    max_disk_usage: Optional[int] = MAX_DISK_USAGE,
    min_disk_free: Optional[str] = MIN_DISK_FREE,
    journal_max_io: Optional[int] = JOURNAL_MAX_IO,
    journal_device_block_size: Optional[str] = DEVICE_BLOCK_SIZE,
    probe_seconds: float = PROBE_SECONDS,
    fmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    nagios: bool = plugin.NAGIOS_OPTION,
    warning: Optional[List[str]] = plugin.WARNING_OPTION,
    critical: Optional[List[str]] = plugin.CRITICAL_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Every check for every store directory, plus a short fsync-rate probe where the benchmark exists."""
    label = ",".join(paths or ["."])
    with _checking(label, fmt, metrics_file, nagios, warning, critical) as thresholds:
        from amqtool.engines.check import check_all as run_all, configure

        cfg = configure(paths, broker_xml, activemq_xml, max_disk_usage, min_disk_free, journal_max_io,
                        journal_device_block_size)
        from amqtool.units import check_number

        check_number(probe_seconds, "--probe-seconds", minimum=0)
        if probe_seconds > 0:
            _status(quiet, f"amqtool: probing fsync rate for {probe_seconds:g} s ...")
        report = run_all(cfg.targets, cfg.limit, cfg.classic, cfg.journal_max_io, cfg.device_block_size,
                         cfg.journal_type, probe_seconds)
        _emit("all", report, fmt, quiet, metrics_file, thresholds, label=label, wide=wide)


@check_app.command("db")
def db(
    broker_xml: Optional[str] = typer.Option(None, "--broker-xml", help="Artemis broker.xml with a <database-store>."),
    activemq_xml: Optional[str] = typer.Option(None, "--activemq-xml", help="ActiveMQ Classic activemq.xml with a jdbcPersistenceAdapter."),
    jdbc_url: Optional[str] = typer.Option(None, "--jdbc-url", help="jdbc:postgresql://host:port/db (credentials from AMQTOOL_JDBC_USER/AMQTOOL_JDBC_PASSWORD or --jdbc-password-file)."),
    jdbc_password_file: Optional[str] = JDBC_PASSWORD_FILE_OPTION,
    jdbc_table_prefix: Optional[str] = typer.Option(None, "--jdbc-table-prefix", help="Classic JDBC: the adapter's tablePrefix."),
    kind: str = typer.Option("auto", "--kind", help="Store kind: auto (by the tables present), classic or artemis."),
    fmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Can amqtool reach the broker's database, are the tables there (rows, sizes), and who holds the lock."""
    label = jdbc_url or activemq_xml or broker_xml or ""
    with _checking(label, fmt, metrics_file):
        from amqtool.engines.jdbc.check import check_db
        from amqtool.engines.jdbc.resolve import jdbc_store

        if kind not in ("auto", "classic", "artemis"):
            raise UsageError("--kind must be auto, classic or artemis")
        store = jdbc_store(jdbc_url, jdbc_password_file, activemq_xml=activemq_xml, broker_xml=broker_xml,
                           table_prefix=jdbc_table_prefix, probe=False)
        if store is None:
            raise UsageError("check db needs --jdbc-url, or --activemq-xml/--broker-xml naming a database store")
        _emit("db", check_db(store, kind), fmt, quiet, metrics_file, label=label, wide=wide)
