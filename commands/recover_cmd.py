"""``amqtool recover``: salvage what survives of a damaged store into a new store at DEST, never touching the
source, and say exactly what did not survive.

Thin: parse options, detect the store, hand to :func:`amqtool.engines.artemis.recover.recover_store` (Artemis)
or :func:`amqtool.engines.kahadb.recover.recover_kahadb` (KahaDB, mKahaDB), print.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

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
    write_lines,
)
from amqtool.commands.store_options import BROKER_XML_SETTINGS_OPTION
from amqtool.commands.stores import one_store
from amqtool.commands.tables import WIDE_OPTION, fold_lines
from amqtool.errors import UsageError
from amqtool.units import binary

MAX_TEXT_LOST = 200  # lost items listed in text output (JSON lists them all)


def _lost_line(item: dict) -> str:
    kind = item["kind"]
    if kind == "record" and "command" in item:  # KahaDB
        what = [item["reason"]] + [f"{k}={item[k]}" for k in ("command", "messageId", "destination", "transaction")
                                   if item.get(k)]
        where = item["file"] if item["directory"] == "." else f"{item['directory']}/{item['file']}"
        return f"  {where} @{item['offset']} ({item['length']} B): {' '.join(what)}"
    if kind == "record":
        what = []
        if item["recordType"]:
            what.append(item["recordType"])
        for key, label in (("recordId", "id"), ("txId", "tx"), ("userRecordType", "userType"),
                           ("messageId", "message"), ("queue", "queue"), ("queueId", "queueId")):
            if item.get(key) is not None:
                what.append(f"{label}={item[key]}")
        if item.get("queueIds"):
            what.append("queues=" + ",".join(n if n is not None else str(q)
                                              for q, n in zip(item["queueIds"], item["queues"])))
        if item.get("damagedField"):
            what.append(f"(its {item['damagedField']} damaged)")
        desc = " ".join(what) if item["decoded"] else "undecodable bytes"
        if not item["lost"]:
            desc += " (doubtful: an EVENT record, which the load ignores)"
        return f"  {item['file']} @{item['offset']} ({item['length']} B, {item['where']}): {desc}"
    if kind == "transaction":
        state = "lost" if item["lost"] else "rolled back as the broker would"
        return f"  {item['journal']} transaction {item['txId']}: {item['reason']}, {item['records']} record(s), {state}"
    return f"  {kind} {item['path']}: {item['reason']}"


# The text's figures are the JSON document's, read by these keys and named by these labels (one list, so the
# two outputs cannot disagree: a label once said "transactions not committed" for the transactions lost
# with a damaged record, beside an open transaction the rewrite dropped).
COUNT_LABELS = (("recordsKept", "records kept"), ("recordsLost", "records lost"),
                ("damagedRecords", "damaged records"), ("damagedRecordsDecoded", "of them decoded"),
                ("bytesSkipped", "bytes skipped"), ("transactionsNotCommitted", "transactions lost"),
                ("filesLost", "files lost"))
ARTEMIS_JOURNAL_LABELS = (("files", "files"), ("recordsKept", "records kept"), ("recordsLost", "records lost"),
                          ("bytesSkipped", "bytes skipped"))
KAHADB_LABELS = (("files", "files"), ("filesAfter", "files after"), ("messagesKept", "messages kept"),
                 ("acksKept", "acks kept"), ("subscriptions", "subscriptions"),
                 ("preparedTransactions", "prepared transactions kept"),
                 ("openTransactionsDropped", "open transactions dropped (the broker rolls them back)"),
                 ("recordsLost", "records lost"), ("bytesSkipped", "bytes skipped"))


def _figures(d: dict, labels) -> str:
    return ", ".join(f"{label} {binary(d[key]) if key == 'bytesSkipped' else d[key]}"
                     for key, label in labels if key in d)


def _text(doc: dict) -> list[str]:
    c = doc["counts"]
    lines = [f"recover {doc['source']} -> {doc['destination'] or '(dry run)'}: {doc['verdict']}",
             f"  {_figures(c, COUNT_LABELS)}"]
    if "undeleted" in doc:
        lines.append(f"  undeleted {c['undeleted']} message(s), {c['unrecoverable']} found unrecoverable")
        for u in doc["undeleted"][:MAX_TEXT_LOST]:
            lines.append(f"  message {u['messageId']} back on {', '.join(u['queues'])} (deleted after "
                         f"{u['deletedAfter'] or '?'}, before {u['deletedBefore'] or '?'})")
        if len(doc["undeleted"]) > MAX_TEXT_LOST:
            lines.append(f"  ... {len(doc['undeleted']) - MAX_TEXT_LOST} more (--format json lists them all)")
    for j in doc.get("journals", []):
        if "journal" in j:
            lines.append(f"  {j['journal']} journal {j['directory']}: {_figures(j, ARTEMIS_JOURNAL_LABELS)}")
        else:
            lines.append(f"  KahaDB {j['directory']}: {j['action']}, {_figures(j, KAHADB_LABELS)}")
    lost = doc["lost"]
    if lost:
        lines.append("lost or not carried over:")
        lines.extend(_lost_line(x) for x in lost[:MAX_TEXT_LOST])
        if len(lost) > MAX_TEXT_LOST:
            lines.append(f"  ... {len(lost) - MAX_TEXT_LOST} more (--format json lists them all)")
    return lines


@app.command("recover")
def recover(
    path: Path = typer.Argument(..., help="Broker instance, data directory or journal directory (read only)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the recovered store to DEST (must not exist or be empty)."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Report what would be recovered and lost; write nothing."),
    broker_xml: Optional[str] = BROKER_XML_SETTINGS_OPTION,
    activemq_xml: Optional[str] = typer.Option(None, "--activemq-xml", help="Read the KahaDB directory from this activemq.xml."),
    salvage: bool = typer.Option(False, "--salvage", help="Recover a store verify calls CRITICAL (refused otherwise, "
                                                          "exit 2): what survives, listing what is lost."),
    undelete: bool = typer.Option(False, "--undelete", help="Bring back deleted messages whose records are still in the files."),
    queue: Optional[list[str]] = typer.Option(None, "--queue", help="--undelete: only this queue (repeatable)."),
    since: Optional[str] = typer.Option(None, "--since", help="--undelete: only messages deleted at or after TIME (ISO 8601)."),
    until: Optional[str] = typer.Option(None, "--until", help="--undelete: only messages deleted before TIME (ISO 8601)."),
    fmt: OutputFormat = FORMAT_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Salvage a damaged store into a new one at DEST (the source is never written), or bring back deleted
    messages (--undelete); report every lost record. Exit 0 nothing lost, 1 DEST lacks something, 2 the
    source is CRITICAL to verify (refused without --salvage) or nothing saved."""
    with guarded(fmt):
        from amqtool.store.layout import ArtemisStore

        if output is None and not dry_run:
            raise UsageError("recover needs -o DEST or --dry-run")
        if output is not None and dry_run:
            raise UsageError("-o/--output cannot be combined with --dry-run")
        if not undelete and (queue or since or until):
            raise UsageError("--queue, --since and --until select what --undelete brings back")
        store = one_store(path, broker_xml, activemq_xml, command="recover")
        if isinstance(store, ArtemisStore):
            from amqtool.engines.artemis.recover import RecoverRequest, recover_store

            req = RecoverRequest(output=output, dry_run=dry_run, salvage=salvage)
            total = sum(p.stat().st_size for jd in store.journals() for p in jd.journal_files())
            with progress("recover", total or None, quiet) as advance:
                if undelete:
                    from amqtool.engines.artemis.recover.undelete import UndeleteFilter, recover_undelete

                    report = recover_undelete(store, req, UndeleteFilter.parse(queue, since, until),
                                              progress=advance)
                else:
                    report = recover_store(store, req, progress=advance)
            doc = report.to_json()
            verdict = report.verdict
        else:
            from amqtool.engines.kahadb.recover import KahaRecoverRequest, recover_kahadb

            if undelete:
                raise UsageError("--undelete is implemented for Artemis stores only")
            report = recover_kahadb(store, KahaRecoverRequest(output=output, dry_run=dry_run, salvage=salvage))
            doc = report.to_json()
            verdict = report.verdict
        if fmt in (OutputFormat.json, OutputFormat.jsonl):
            write_document(doc, fmt, lists=("lost", "undeleted", "unrecoverable", "findings", "journals"))
        else:
            write_lines(fold_lines(_text(doc), wide=wide))
            render_findings_text(report.findings, wide=wide)
        finish(verdict)
