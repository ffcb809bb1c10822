"""``amqtool stat PATH``: per queue, per paged address and per journal, what a store holds and what it costs
on disk (text tables, JSON, JSON lines). Thin: detect, :func:`amqtool.engines.stat.stat_store`, print."""
from __future__ import annotations

import enum
import os
from datetime import datetime, timezone

import typer

from amqtool.commands.main import app
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
    table_console,
    write_document,
)
from amqtool.commands.store_options import ACTIVEMQ_XML_KAHADB_OPTION, BROKER_XML_OPTION
from amqtool.errors import Verdict


class SortKey(str, enum.Enum):
    bytes = "bytes"
    messages = "messages"
    oldest = "oldest"


def _when(millis: int | None) -> str:
    if not millis:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _age(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n:
            return f"{seconds // n}{unit}"
    return f"{seconds}s"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.1%}"


def _size(n: int | None) -> str:
    from amqtool.units import binary

    return "-" if n is None else binary(n)


def render_tables(doc: dict) -> None:
    """The three tables (queues, paged addresses, journals) fitted to the terminal, Rich never interpreting
    the names (markup off: a queue may be called ``[red]``)."""
    from rich.table import Table

    console = table_console()
    t = Table(title=f"queues ({doc['kind']} {doc['path']}, by {doc['sort']})", title_justify="left")
    for col, just in (("queue", "left"), ("address", "left"), ("messages", "right"), ("bytes", "right"),
                      ("oldest (UTC)", "left"), ("age", "right"), ("sched", "right"), ("expired", "right"),
                      ("redeliv", "right"), ("prep", "right"), ("paged", "right"), ("large", "right")):
        t.add_column(col, justify=just, overflow="fold")
    for r in doc["queues"]:
        name = r["name"] + (f" [{r['subscription']}]" if r["subscription"] else "")
        t.add_row(name, r["address"] or "-", str(r["messages"]), _size(r["bytes"]), _when(r["oldest"]),
                  _age(r["oldestAgeSeconds"]), str(r["scheduled"]), str(r["expired"]), str(r["redelivered"]),
                  str(r["prepared"]), str(r["paged"]), str(r["large"]))
    console.print(t)
    if doc["addresses"]:
        t = Table(title="paged addresses", title_justify="left")
        for col, just in (("address", "left"), ("page files", "right"), ("bytes", "right"),
                          ("pages to consume", "right"), ("paged messages", "right")):
            t.add_column(col, justify=just, overflow="fold")
        for a in doc["addresses"]:
            t.add_row(a["address"], str(a["pageFiles"]), _size(a["bytes"]), str(a["pagesToConsume"]),
                      str(a["pagedMessages"]))
        console.print(t)
    t = Table(title="journals", title_justify="left")
    for col, just in (("journal", "left"), ("directory", "left"), ("files", "right"), ("bytes", "right"),
                      ("live", "right"), ("live ratio", "right"), ("compact frees", "right"),
                      ("reclaim frees", "right")):
        t.add_column(col, justify=just, overflow="fold")
    for j in doc["journals"]:
        t.add_row(j["journal"], j["directory"], str(j["files"]), _size(j["bytes"]), _size(j["liveBytes"]),
                  _ratio(j["liveRatio"]), _size(j["compactFrees"]), _size(j["reclaimOnlyFrees"]))
    console.print(t)
    tot = doc["totals"]
    console.print(f"{tot['queues']} queue(s), {tot['messages']} message reference(s), {_size(tot['bytes'])} in "
                  f"messages; journals {_size(tot['journalBytes'])}, paging {_size(tot['pagingBytes'])}")


@app.command("stat")
def stat(
    path: str = typer.Argument(".", help="Broker instance, data directory, journal directory or KahaDB directory."),
    broker_xml: str = BROKER_XML_OPTION,
    activemq_xml: str = ACTIVEMQ_XML_KAHADB_OPTION,
    mfmt: MetricFormat = METRIC_FORMAT_OPTION,
    metrics_file: str = METRICS_FILE_OPTION,
    sort: SortKey = typer.Option(SortKey.bytes, "--sort", help="Order queues by bytes, messages (largest first) or oldest."),
    top: int = typer.Option(None, "--top", help="Only the first N queues after sorting."),
    at: int = typer.Option(None, "--at", metavar="MILLIS", help="Judge expiry, schedules and ages at this instant (epoch ms; default now)."),
    reclaim: bool = typer.Option(False, "--reclaim", help="Artemis: also figure what compact --reclaim-only would free (one more pass)."),
    quiet: bool = QUIET_OPTION,
) -> None:
    """Per queue, paged address and journal: messages, bytes, oldest message, what compaction would free."""
    fmt = document_format(mfmt)
    with unknown_on_error("stat", os.path.abspath(path), mfmt, metrics_file), guarded(fmt):
        from amqtool.units import check_number

        check_number(top, "--top", minimum=0)
        check_number(at, "--at", minimum=0)
        from amqtool.engines.stat import stat_store
        from amqtool.store.layout import detect

        store = detect(path, broker_xml, activemq_xml)
        with progress("reading", None, quiet) as advance:
            doc = stat_store(store, sort=sort.value, top=top, now=at, reclaim=reclaim, progress=advance)
        verdict = Verdict[doc["verdict"]]
        publish("stat", os.path.abspath(path), doc, mfmt, metrics_file)
        if mfmt is MetricFormat.prometheus:
            pass
        elif fmt is OutputFormat.text:
            render_tables(doc)
        else:
            write_document(doc, fmt, lists=("queues", "addresses", "journals"))
        finish(verdict)
