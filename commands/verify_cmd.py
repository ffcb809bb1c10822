"""``amqtool verify PATH``: findings with severity, code, file and offset, a summary and one verdict."""
from __future__ import annotations

import sys

import typer

from amqtool.commands.main import app
from amqtool.commands.output import (
    FORMAT_OPTION,
    QUIET_OPTION,
    OutputFormat,
    finish,
    guarded,
    progress,
    render_findings_text,
    write_document,
)
from amqtool.errors import overall_verdict


@app.command("verify")
def verify(
    path: str = typer.Argument(".", help="Broker instance, data directory, journal directory or KahaDB directory."),
    broker_xml: str = typer.Option(None, "--broker-xml", help="Artemis broker.xml: use the directories it names."),
    activemq_xml: str = typer.Option(None, "--activemq-xml", help="ActiveMQ Classic activemq.xml: use its KahaDB store."),
    fmt: OutputFormat = FORMAT_OPTION,
    jdbc_url: str = typer.Option(None, "--jdbc-url", help="A database store: jdbc:postgresql://host:port/db (user and password from AMQTOOL_JDBC_USER/AMQTOOL_JDBC_PASSWORD or --jdbc-password-file)."),
    jdbc_password_file: str = typer.Option(None, "--jdbc-password-file", help="Read the database password from this file's first line."),
    jdbc_table_prefix: str = typer.Option(None, "--jdbc-table-prefix", help="Classic JDBC: the adapter's tablePrefix (default: activemq.xml's, else none)."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Check a store's files and records; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
    with guarded(fmt):
        if _verify_jdbc(jdbc_url, jdbc_password_file, jdbc_table_prefix, activemq_xml, broker_xml, fmt, quiet):
            return
        from amqtool.store.layout import detect

        store = detect(path, broker_xml, activemq_xml)
        if store.kind == "kahadb":
            from amqtool.engines import kahadb

            with progress("verifying", None, quiet) as advance:
                findings, summary = kahadb.verify_store(store, progress=advance)
        else:
            from amqtool.engines.artemis.verify import total_bytes, verify_store

            with progress("verifying", total_bytes(store), quiet) as advance:
                report = verify_store(store, progress=advance)
            findings, summary = report.findings, report.summary()
        _report(findings, summary, store.kind, str(store.root), fmt)


def _report(findings, summary: dict, kind: str, root: str, fmt: OutputFormat) -> None:
    """Findings, summary and verdict in the chosen format; exits with the verdict's code."""
    verdict = overall_verdict(findings)
    if fmt is OutputFormat.text:
        render_findings_text(findings)
        sys.stdout.write(_summary_line(summary))
        sys.stdout.write(f"verdict: {verdict.name}\n")
    else:
        write_document({
            "verdict": verdict.name,
            "kind": kind,
            "path": root,
            "findings": [f.to_json() for f in findings],
            "summary": summary,
        }, fmt)
    finish(verdict)


def _summary_line(summary: dict) -> str:
    keys = [k for k, v in summary.items() if isinstance(v, (int, float, str)) and k != "journals"]
    return "summary: " + ", ".join(f"{k}={summary[k]}" for k in keys) + "\n"


def _verify_jdbc(jdbc_url, password_file, table_prefix, activemq_xml, broker_xml, fmt: OutputFormat,
                 quiet: bool) -> bool:
    """A database store (``--jdbc-url``, or a configuration naming one): verify it and return True; else False."""
    from amqtool.engines.jdbc.resolve import jdbc_store

    store = jdbc_store(jdbc_url, password_file, activemq_xml=activemq_xml, broker_xml=broker_xml,
                       table_prefix=table_prefix)
    if store is None:
        return False
    if store.kind == "artemis-jdbc":
        from amqtool.engines.jdbc import artemis as engine
    else:
        from amqtool.engines.jdbc import classic as engine

    with progress("verifying", None, quiet) as advance:
        findings, summary = engine.verify_store(store, progress=advance)
    _report(findings, summary, store.kind, store.root, fmt)
    return True
