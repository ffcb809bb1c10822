"""``--format prometheus`` and ``--metrics-file`` for verify, stat, check and compact: the node_exporter
textfile-collector format, built with the Prometheus project's own client library (``prometheus_client``:
``CollectorRegistry``, ``Gauge``, ``generate_latest``, and ``write_to_textfile``, which writes a temporary
file beside the target and renames it over, so the collector never reads half a file).

Every metric is a gauge named ``amqtool_*`` labelled with the store ``path`` (and ``queue``,
``subscription``, ``journal``, ``address``, ``severity`` where they apply), built from the command's own JSON
document, so the two outputs never disagree:

* every command: ``amqtool_verdict`` (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN: the exit code),
  ``amqtool_findings`` by severity, ``amqtool_last_run_timestamp_seconds``;
* stat: per queue ``amqtool_queue_messages``, ``_bytes``, ``_oldest_message_age_seconds``,
  ``_scheduled_messages``, ``_expired_messages``, ``_redelivered_messages``, ``_prepared_messages``,
  ``_paged_messages``; per paged address ``amqtool_paging_bytes`` and ``amqtool_paging_pages_to_consume``;
  per journal ``amqtool_journal_bytes``, ``_live_bytes``, ``_live_ratio`` and
  ``amqtool_journal_reclaimable_bytes{by="compact"|"reclaim-only"}``;
* check: per filesystem ``amqtool_filesystem_usable_bytes``, ``_headroom_bytes`` (free space before the
  broker's disk limit blocks producers) and ``_used_ratio``;
* compact: ``amqtool_compact_duration_seconds``, per journal ``amqtool_compact_reclaimed_bytes`` and
  ``amqtool_journal_live_ratio``.
"""
from __future__ import annotations

import enum
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import typer

from amqtool.commands.output import OutputFormat

SEVERITIES = ("info", "warning", "critical", "unknown")
VERDICT_CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}


class MetricFormat(str, enum.Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"
    prometheus = "prometheus"


METRIC_FORMAT_OPTION = typer.Option(MetricFormat.text, "--format", "-f",
                                    help="Output format: text, json, jsonl or prometheus (textfile-collector format).")
METRICS_FILE_OPTION = typer.Option(None, "--metrics-file", metavar="PATH",
                                   help="Also write the metrics to PATH atomically (node_exporter textfile collector).")


def document_format(fmt: MetricFormat) -> OutputFormat:
    """The format the rest of the command runs with; prometheus output is handled before any of it (an error
    then goes to stderr only, never as a JSON document on stdout)."""
    return OutputFormat.text if fmt is MetricFormat.prometheus else OutputFormat(fmt.value)


class _Gauges:
    def __init__(self, registry):
        self.registry = registry
        self._gauges: dict = {}

    def set(self, name: str, doc: str, labels: dict, value) -> None:
        if value is None:
            return
        from prometheus_client import Gauge

        g = self._gauges.get(name)
        if g is None:
            g = self._gauges[name] = Gauge(name, doc, list(labels), registry=self.registry)
        g.labels(**{k: "" if v is None else str(v) for k, v in labels.items()}).set(float(value))


def _common(g: _Gauges, command: str, path: str, doc: dict) -> None:
    labels = {"command": command, "path": path}
    g.set("amqtool_verdict", "Verdict of the last run: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the exit code).",
          labels, VERDICT_CODES.get(doc.get("verdict"), 3))
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in doc.get("findings") or []:
        counts[f.get("severity", "unknown")] = counts.get(f.get("severity", "unknown"), 0) + 1
    for sev, n in counts.items():
        g.set("amqtool_findings", "Findings of the last run by severity.", dict(labels, severity=sev), n)
    g.set("amqtool_last_run_timestamp_seconds", "When the last run finished (Unix time).", labels, time.time())


def _stat(g: _Gauges, path: str, doc: dict) -> None:
    for r in doc.get("queues", []):
        # several stores under one path: each row's own store is its path label (a queue name may recur)
        labels = {"path": r.get("store", path), "queue": r["name"], "subscription": r.get("subscription") or ""}
        for key, name, help_ in (
                ("messages", "amqtool_queue_messages", "Messages of the queue, paged ones included (as QueueImpl.getMessageCount)."),
                ("bytes", "amqtool_queue_bytes", "Journal record bytes of the queue's live messages."),
                ("oldestAgeSeconds", "amqtool_queue_oldest_message_age_seconds", "Age of the oldest message."),
                ("scheduled", "amqtool_queue_scheduled_messages", "References scheduled for later delivery."),
                ("expired", "amqtool_queue_expired_messages", "Expired messages still stored."),
                ("redelivered", "amqtool_queue_redelivered_messages", "References with a delivery count above 0."),
                ("prepared", "amqtool_queue_prepared_messages", "References held by prepared XA transactions."),
                ("paged", "amqtool_queue_paged_messages", "Paged messages the queue still has to consume.")):
            g.set(name, help_, labels, r.get(key))
    for a in doc.get("addresses", []):
        labels = {"path": a.get("store", path), "address": a["address"]}
        g.set("amqtool_paging_bytes", "Bytes of the address's page files.", labels, a["bytes"])
        g.set("amqtool_paging_pages_to_consume", "Pages still holding messages to consume.", labels,
              a["pagesToConsume"])
    for j in doc.get("journals", []):
        labels = {"path": j.get("store", path), "journal": j["journal"], "directory": j["directory"]}
        g.set("amqtool_journal_bytes", "Bytes of the journal's files.", labels, j["bytes"])
        g.set("amqtool_journal_live_bytes", "Live bytes of the journal.", labels, j["liveBytes"])
        g.set("amqtool_journal_live_ratio", "Live ratio of the journal (0..1).", labels, j["liveRatio"])
        for by, key in (("compact", "compactFrees"), ("reclaim-only", "reclaimOnlyFrees")):
            g.set("amqtool_journal_reclaimable_bytes", "Bytes compaction (or reclaiming alone) would free.",
                  dict(labels, by=by), j.get(key))


def _filesystems(doc) -> list[dict]:
    """Every ``filesystems`` entry anywhere in a check document (check all nests one per check)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "filesystems" and isinstance(v, list):
                out += [x for x in v if isinstance(x, dict) and "usable" in x]
            else:
                out += _filesystems(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _filesystems(v)
    return out


def _check(g: _Gauges, doc: dict) -> None:
    seen = set()
    for fs in _filesystems(doc):
        for p in fs.get("paths") or [fs.get("device")]:
            if (p, fs.get("device")) in seen:
                continue
            seen.add((p, fs.get("device")))
            labels = {"path": p, "device": fs.get("device") or ""}
            g.set("amqtool_filesystem_usable_bytes", "Bytes usable on the filesystem.", labels, fs.get("usable"))
            g.set("amqtool_filesystem_headroom_bytes", "Free bytes before the broker's disk limit blocks producers.",
                  labels, fs.get("headroom"))
            used = fs.get("usedPercent")
            g.set("amqtool_filesystem_used_ratio", "Used fraction of the filesystem (0..1).", labels,
                  None if used is None else used / 100.0)


def _compact(g: _Gauges, path: str, doc: dict, seconds: float | None) -> None:
    g.set("amqtool_compact_duration_seconds", "Duration of the compaction run.", {"path": path}, seconds)
    for j in doc.get("journals") or doc.get("stores") or []:
        journal = j.get("journal") or "kahadb"
        labels = {"path": path, "journal": journal, "directory": j.get("directory", "")}
        g.set("amqtool_compact_reclaimed_bytes", "Bytes the compaction freed (or would free, dry run).", labels,
              j.get("reclaimedBytes"))
        g.set("amqtool_journal_live_ratio", "Live ratio of the journal (0..1).", labels, j.get("liveRatio"))


def build_registry(command: str, path: str, doc: dict, *, seconds: float | None = None):
    """A CollectorRegistry holding the command's metrics (see the module docstring)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    g = _Gauges(registry)
    _common(g, command, path, doc)
    if command == "stat":
        _stat(g, path, doc)
    elif command == "check":
        _check(g, doc)
    elif command == "compact":
        _compact(g, path, doc, seconds)
    return registry


_published = [False]  # did this run publish its metrics (see unknown_on_error)


@contextmanager
def unknown_on_error(command: str, path, fmt: MetricFormat, metrics_file: str | None) -> Iterator[None]:
    """A run that ends in UNKNOWN (exit 3: bad input, unreadable store, broker running) before it published
    its metrics still publishes ``amqtool_verdict`` 3, so monitoring sees the failure instead of a stale
    file. Wraps the command's ``guarded`` block."""
    _published[0] = False
    try:
        yield
    except typer.Exit as ex:
        if ex.exit_code == 3 and not _published[0] and (fmt is MetricFormat.prometheus or metrics_file):
            try:
                publish(command, str(path), {"verdict": "UNKNOWN", "findings": []}, fmt, metrics_file)
            except Exception:  # noqa: BLE001 - the error line is already out; never mask the exit code
                pass
        raise


def publish(command: str, path: str, doc: dict, fmt: MetricFormat, metrics_file: str | None, *,
            seconds: float | None = None) -> None:
    """Write the metrics to stdout (``--format prometheus``) and/or atomically to ``metrics_file``."""
    _published[0] = True
    if fmt is not MetricFormat.prometheus and not metrics_file:
        return
    from prometheus_client import generate_latest, write_to_textfile

    registry = build_registry(command, path, doc, seconds=seconds)
    if metrics_file:
        try:
            write_to_textfile(str(metrics_file), registry)  # temp file + rename, as the collector requires
        except OSError as err:
            from amqtool.errors import AmqtoolError

            raise AmqtoolError(f"cannot write the metrics file: {err.strerror or err}", path=str(metrics_file))
    if fmt is MetricFormat.prometheus:
        sys.stdout.write(generate_latest(registry).decode("utf-8"))
