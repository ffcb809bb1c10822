"""``amqtool verify PATH``: findings with severity, code, file and offset, a summary and one verdict."""
from __future__ import annotations

import sys

import typer

from amqtool.commands.main import app
from amqtool.commands.metrics import METRIC_FORMAT_OPTION, METRICS_FILE_OPTION, MetricFormat, document_format, publish
from amqtool.commands.output import (
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
    mfmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Check a store's files and records; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
    fmt = document_format(mfmt)
    with guarded(fmt):
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
        verdict = overall_verdict(findings)
        doc = {
            "verdict": verdict.name,
            "kind": store.kind,
            "path": str(store.root),
            "findings": [f.to_json() for f in findings],
            "summary": summary,
        }
        publish("verify", str(store.root), doc, mfmt, metrics_file)
        if mfmt is MetricFormat.prometheus:
            pass
        elif fmt is OutputFormat.text:
            render_findings_text(findings)
            sys.stdout.write(_summary_line(summary))
            sys.stdout.write(f"verdict: {verdict.name}\n")
        else:
            write_document(doc, fmt)
        finish(verdict)


def _summary_line(summary: dict) -> str:
    keys = [k for k, v in summary.items() if isinstance(v, (int, float, str)) and k != "journals"]
    return "summary: " + ", ".join(f"{k}={summary[k]}" for k in keys) + "\n"
