"""``amqtool verify PATH``: findings with severity, code, file and offset, a summary and one verdict."""
from __future__ import annotations

import os

import sys

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
    progress,
    render_findings_text,
    write_document,
    write_lines,
)
from amqtool.commands.stores import describe, header, stores_at, where
from amqtool.commands.tables import WIDE_OPTION, fold_lines
from amqtool.commands.store_options import (
    ACTIVEMQ_XML_KAHADB_OPTION,
    BROKER_XML_OPTION,
    JDBC_PASSWORD_FILE_OPTION,
    JDBC_TABLE_PREFIX_OPTION,
    JDBC_URL_OPTION,
)
from amqtool.errors import UsageError, Verdict, overall_verdict

# --nagios figures: always the findings and sizes; live_ratio and oldest_age come from `stat` (one more read of
# the store), so only when a threshold names them.
NAGIOS_LABELS = {"findings_critical", "findings_warning", "files", "bytes", "live_records", "live_ratio",
                 "oldest_age"}


@app.command("verify")
def verify(
    path: str = typer.Argument(".", help="Broker instance, data directory, journal directory or KahaDB directory."),
    broker_xml: str = BROKER_XML_OPTION,
    activemq_xml: str = ACTIVEMQ_XML_KAHADB_OPTION,
    mfmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    nagios: bool = plugin.NAGIOS_OPTION,
    warning: list[str] = plugin.WARNING_OPTION,
    critical: list[str] = plugin.CRITICAL_OPTION,
    jdbc_url: str = JDBC_URL_OPTION,
    jdbc_password_file: str = JDBC_PASSWORD_FILE_OPTION,
    jdbc_table_prefix: str = JDBC_TABLE_PREFIX_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Check a store's files and records; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
    fmt = document_format(mfmt)
    if (warning or critical) and not nagios:
        with guarded(fmt):
            raise UsageError("-w/-c are thresholds of --nagios")
    if nagios and mfmt is not MetricFormat.text:
        with guarded(fmt):
            raise UsageError("--nagios prints its own status line; use --metrics-file, not --format, beside it")
    if nagios:
        quiet = True
    with unknown_on_error("verify", os.path.abspath(path), mfmt, metrics_file), \
            (plugin.nagios_guard() if nagios else guarded(fmt)):
        if nagios:
            warn = plugin.parse_thresholds(warning, "live_ratio", NAGIOS_LABELS)
            crit = plugin.parse_thresholds(critical, "live_ratio", NAGIOS_LABELS)

        from amqtool.engines.jdbc.resolve import jdbc_store

        # a database store (--jdbc-url, or a configuration naming one) before the files
        store = jdbc_store(jdbc_url, jdbc_password_file, activemq_xml=activemq_xml, broker_xml=broker_xml,
                           table_prefix=jdbc_table_prefix)
        stores = [store] if store is not None else stores_at(path, broker_xml, activemq_xml)
        if nagios and len(stores) > 1:
            raise UsageError(f"{len(stores)} stores under {os.path.abspath(path)} ({describe(stores)}): --nagios "
                             "checks one store; give its path")
        runs = [(s, *_verify_one(s, quiet)) for s in stores]
        store, findings, summary = runs[0]
        verdict = overall_verdict([f for _, fs, _ in runs for f in fs])
        if len(runs) == 1:
            doc = {
                "verdict": verdict.name,
                "kind": store.kind,
                "path": str(store.root),
                "findings": [f.to_json() for f in findings],
                "summary": summary,
            }
        else:  # every store found, each named; the verdict is the worst
            doc = {
                "verdict": verdict.name,
                "kind": "several",
                "path": os.path.abspath(path),
                "findings": [{**f.to_json(), "store": where(s)} for s, fs, _ in runs for f in fs],
                "summary": {"stores": len(runs)},
                "stores": [{"kind": s.kind, "path": where(s), "verdict": overall_verdict(fs).name,
                            "summary": sm} for s, fs, sm in runs],
            }
        publish("verify", os.path.abspath(path), doc, mfmt, metrics_file)
        if nagios:
            _nagios(store, doc, warn, crit)
        if mfmt is MetricFormat.prometheus:
            pass
        elif fmt is OutputFormat.text:
            for s, fs, sm in runs:
                if len(runs) > 1:
                    sys.stdout.write(header(s) + "\n")
                render_findings_text(fs, wide=wide)
                write_lines(fold_lines([_summary_line(sm)], wide=wide))
            if len(runs) > 1:
                write_lines(fold_lines([f"{len(runs)} stores checked: {describe(stores)}"], wide=wide))
            sys.stdout.write(f"verdict: {verdict.name}\n")
        else:
            write_document(doc, fmt, lists=("findings", "stores"))
        finish(verdict)


def _verify_one(store, quiet: bool):
    """(findings, summary) of one store, by the engine of its kind."""
    if store.kind.endswith("-jdbc"):
        if store.kind == "artemis-jdbc":
            from amqtool.engines.jdbc import artemis as engine
        else:
            from amqtool.engines.jdbc import classic as engine

        with progress("verifying", None, quiet) as advance:
            return engine.verify_store(store, progress=advance)
    if store.kind == "kahadb":
        from amqtool.engines import kahadb

        with progress("verifying", None, quiet) as advance:
            return kahadb.verify_store(store, progress=advance)
    if store.kind in ("leveldb", "replicated-leveldb"):
        from amqtool.engines.leveldb.verify import verify_store as verify_leveldb

        with progress("verifying", None, quiet) as advance:
            return verify_leveldb(store, progress=advance)
    from amqtool.engines.artemis.verify import total_bytes, verify_store

    with progress("verifying", total_bytes(store), quiet) as advance:
        report = verify_store(store, progress=advance)
    return report.findings, report.summary()


def _summary_line(summary: dict) -> str:
    keys = [k for k, v in summary.items() if isinstance(v, (int, float, str)) and k != "journals"]
    return "summary: " + ", ".join(f"{k}={summary[k]}" for k in keys)


def _nagios(store, doc: dict, warn: dict, crit: dict) -> None:
    """The plugin line of verify (commands/nagios.py): perfdata of the findings and sizes, and, when a
    threshold asks, the message journal's live ratio (%) and the oldest message's age (s) from ``stat``."""
    summary = doc["summary"]
    findings = doc["findings"]
    n_crit = sum(1 for f in findings if f["severity"] == "critical")
    n_warn = sum(1 for f in findings if f["severity"] == "warning")
    figures = [plugin.Figure("findings_critical", n_crit, "", 0), plugin.Figure("findings_warning", n_warn, "", 0),
               plugin.Figure("files", summary.get("files", 0), "", 0),
               plugin.Figure("bytes", summary.get("bytes", 0), "B", 0)]
    live = summary.get("liveRecords", summary.get("live"))
    if live is not None:
        figures.append(plugin.Figure("live_records", live, "", 0))
    if {"live_ratio", "oldest_age"} & (set(warn) | set(crit)) and not store.kind.endswith("-jdbc"):
        from amqtool.engines.stat import stat_store

        st = stat_store(store)
        ratios = [j["liveRatio"] for j in st["journals"]
                  if j["liveRatio"] is not None and j["journal"] in ("messages", "kahadb")]
        if ratios:
            figures.append(plugin.Figure("live_ratio", round(min(ratios) * 100, 2), "%", 0, 100))
        ages = [r["oldestAgeSeconds"] for r in st["queues"] if r["oldestAgeSeconds"] is not None]
        figures.append(plugin.Figure("oldest_age", max(ages) if ages else 0, "s", 0))
    worst = next((f for f in findings if f["severity"] in ("critical", "unknown")), None) or \
        next((f for f in findings if f["severity"] == "warning"), None)
    text = f"verify {doc['path']}: {n_crit} critical, {n_warn} warning finding(s)"
    if worst is not None:
        text += f"; first: {worst['code']}: {plugin.brief(worst['message'])}"
    plugin.emit(Verdict[doc["verdict"]], text, figures, warn, crit)
