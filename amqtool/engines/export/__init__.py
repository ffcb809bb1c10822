"""``amqtool export``: a store's live messages as the ``data exp`` XML document (Artemis), or as JSON Lines /
Parquet tables (one row per live message per queue, plus a bindings table and a subscriptions table of the
ActiveMQ Classic stores' durable subscriptions; Artemis and KahaDB stores), by
the local or the Spark engine. KahaDB rows come from :mod:`.kahadb` in both engines; a KahaDB store's XML
document is the migration's (:mod:`amqtool.engines.migrate.xml`: the ``data exp`` document of the Artemis
store ``create --from`` writes), local engine only.

:func:`run_export` is what the command calls. Both engines build rows with :mod:`.parse` and must give the
same rows; :mod:`.local` is the reference, :mod:`.spark_export` the one that scales (``local[*]`` or a
cluster), on the Spark data source's read path (:mod:`.datasource`).
"""
from __future__ import annotations

import contextlib

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# Arrow's memory pool is chosen when pyarrow is first imported (which this package does later): jemalloc
# hands the memory of written batches back where the default mimalloc pool keeps it (1 GiB demo store,
# Parquet: 247 MiB peak against 294 MiB). A pool the user chose is kept; a pyarrow built without jemalloc
# warns and falls back to its default.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.schema import BINDING_COLUMNS, MESSAGE_COLUMNS, SCHEMA_VERSION, SUBSCRIPTION_COLUMNS
from amqtool.engines.export.writers import OutputTarget, write_batches, write_subscription_table, write_table
from amqtool.errors import AmqtoolError, CapabilityError, UsageError, Verdict

FORMATS = ("xml", "jsonl", "parquet")
ENGINES = ("auto", "local", "spark")
# --engine auto picks the engine that finishes first, by a cost model measured with bench/bench_export.py on
# the 1 GiB demo store (2 cores, medians of 3 rounds, stop 23: the local engine writes on a second thread
# and pairs refs in C): the local engine ~2.8 s a GiB of journal; Spark ~5.5 s to start its JVM, ~1.45 s a
# GiB of load, plan and job on the driver, then ~2.85 s a GiB of task work shared by the cores at ~92%
# efficiency each (the tasks' work alone scaled 1.84x from one process to two). On two cores Spark no longer
# beats the local engine on one store at any size; it pays off from ~9.5 GiB on 4 cores, ~5.7 GiB on 8.
# (Measured when the driver loaded and planned; the load now runs in the tasks, once in each Python worker
# that reads a slice, in parallel: the serial part is of the same size. Not measured again since.)
LOCAL_S_PER_GIB = 2.8
SPARK_START_S = 5.5
SPARK_PLAN_S_PER_GIB = 1.45
SPARK_TASK_S_PER_GIB = 2.85
SPARK_CORE_EFFICIENCY = 0.92


def auto_spark_threshold(cores: int) -> int | None:
    """Journal bytes from which Spark ``local[*]`` on ``cores`` cores beats the local engine, JVM start
    included (4 cores: ~9.5 GiB; 8: ~5.7 GiB); None when it never does (one or two cores).
    ``AMQTOOL_EXPORT_SPARK_THRESHOLD`` (bytes) overrides it."""
    env = os.environ.get("AMQTOOL_EXPORT_SPARK_THRESHOLD")
    if env:
        return int(env)
    saved = LOCAL_S_PER_GIB - SPARK_PLAN_S_PER_GIB - SPARK_TASK_S_PER_GIB / (SPARK_CORE_EFFICIENCY * cores)
    if saved <= 0:
        return None
    return int(SPARK_START_S / saved * 2**30)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what local[*] gets (the JVM's availableProcessors)
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass
class ExportRequest:
    path: str
    out: str
    fmt: str
    engine: str = "auto"
    master: str | None = None
    queues: tuple[str, ...] | None = None
    safe: bool = False
    salvage: bool = False  # export from a source verify calls CRITICAL (amqtool.engines.verdicts)
    force: bool = False
    mode: int = 0o600
    broker_xml: str | None = None
    # database stores (amqtool.engines.export.jdbc)
    activemq_xml: str | None = None
    jdbc_url: str | None = None
    jdbc_password_file: str | None = None
    jdbc_table_prefix: str | None = None
    jdbc_driver_jar: str | None = None
    jdbc_partitions: int | None = None
    ship: bool | None = None  # Spark on a cluster: pack this environment for the workers (default yes)


def choose_engine(req: ExportRequest, store_bytes: int, cores: int | None = None) -> str:
    """The engine ``req`` asks for; for ``auto``: Spark with ``--master``, else the one that finishes first
    for ``store_bytes`` of journal on ``cores`` (default: this process's CPUs), see
    :func:`auto_spark_threshold`."""
    if req.engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}")
    if req.engine != "auto":
        if req.master and req.engine == "local":
            raise UsageError("--master needs the Spark engine (--engine spark or auto)")
        return req.engine
    if req.master:
        return "spark"
    threshold = auto_spark_threshold(cores or _cores())
    return "spark" if threshold is not None and store_bytes >= threshold else "local"


def store_file_sizes(store) -> list[int]:
    """The sizes of the journal files an export of ``store`` reads (KahaDB: its ``db-*.log`` files; Artemis:
    its journals' files that are not too large to load); stat only, nothing is opened."""
    sizes = []
    if store.kind == "kahadb":
        for d in store.directories:
            for p in Path(d).glob("db-*.log"):
                try:
                    sizes.append(p.stat().st_size)
                except OSError:
                    pass
        return sizes
    if store.kind in ("leveldb", "replicated-leveldb"):
        from amqtool.engines.leveldb.logfiles import log_files

        nodes = store.nodes if store.replicated else [store]
        return [f.size for n in nodes for f in log_files(n.log_dir())]
    from amqtool.store.journal_files import MAX_LOADABLE_SIZE

    for jd in store.journals():
        for p in jd.journal_files():
            try:
                size = p.stat().st_size
            except OSError:
                continue
            if size <= MAX_LOADABLE_SIZE:  # a larger file is refused, never read: it costs no export time
                sizes.append(size)
    return sizes


def _store_bytes(store) -> int:
    return sum(store_file_sizes(store))


def run_export(req: ExportRequest, *, progress: Callable[[int], None] | None = None,
               task_progress: Callable[[int, int], None] | None = None, spark_session=None,
               status: Callable[[str], None] | None = None) -> tuple[dict, Verdict]:
    """Export as ``req`` says. Returns the summary document (without ``verdict``) and the verdict: verify's
    on what the export read (its findings are the document's ``findings``), at least WARNING when some live
    message could not be written (undecodable record, or not representable in XML). A source verify calls
    CRITICAL is refused (:class:`~amqtool.engines.verdicts.SourceCriticalError`, exit 2) before anything is
    written, unless ``req.salvage``.
    ``progress(n)``: journal bytes read (local engine); ``task_progress(done, total)``: Spark tasks;
    ``status(line)``: status lines (the shipped environment's archive and cache)."""
    from amqtool.store.layout import detect

    if req.fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if req.safe and req.fmt == "xml":
        raise UsageError("--safe leaves bodies out, which the XML document (for `artemis data imp`) cannot do; "
                         "use --format jsonl or parquet")
    from amqtool.engines.jdbc.resolve import jdbc_store

    store = jdbc_store(req.jdbc_url, req.jdbc_password_file, activemq_xml=req.activemq_xml,
                       broker_xml=req.broker_xml, table_prefix=req.jdbc_table_prefix)
    if store is None:
        store = detect(req.path, req.broker_xml, req.activemq_xml)
    if store.kind == "classic-jdbc":
        if req.fmt == "xml":
            raise UsageError("the XML document is `artemis data exp`'s, for Artemis stores; export ActiveMQ Classic "
                             "stores with --format jsonl or parquet")
    elif store.kind == "artemis-jdbc":
        pass
    elif store.kind in ("kahadb", "leveldb"):
        if req.fmt == "xml" and (req.engine == "spark" or req.master):
            raise UsageError("the XML document of a KahaDB store (its messages converted to core messages, "
                             "as `create --from` writes them) is written by the local engine", path=req.path)
    elif store.kind != "artemis":
        raise CapabilityError(f"cannot export a {store.kind} store", path=req.path)
    elif not store.journals():
        raise UsageError("no bindings or messages journal found", path=req.path)
    # a database store's size is not known without asking it: the local engine unless Spark is asked for;
    # a KahaDB store's XML document is the local engine's
    if store.kind in ("kahadb", "leveldb") and req.fmt == "xml":
        engine = "local"
    else:
        engine = choose_engine(req, _store_bytes(store) if not store.kind.endswith("-jdbc") else 0)
    options = ExportOptions(safe=req.safe, queues=tuple(req.queues) if req.queues else None, salvage=req.salvage)
    target = OutputTarget(req.out, is_dir=req.fmt != "xml", force=req.force, mode=req.mode,
                          inputs=export_inputs(store, req))
    xml_writer = None
    with target.writing():
        if engine == "local":
            summary, xml_writer = _run_local(store, options, target, req.fmt, progress)
        else:
            summary, xml_writer = _run_spark(store, options, target, req, task_progress, spark_session, status)
        if target.is_dir and not (target.path / "subscriptions").is_dir():
            # a store without durable subscriptions of its own (Artemis): the table is still there, empty
            write_table(target, req.fmt, "subscriptions", SUBSCRIPTION_COLUMNS, ())
        if options.queues and not any(options.wants(q) for q in summary.queue_names):
            names = summary.queue_names
            shown = ", ".join(names[:20]) + (f" ... ({len(names)} in all)" if len(names) > 20 else "")
            summary.problem(None, f"no queue matches --queue {' '.join(options.queues)}; the store's queues: "
                                  f"{shown or '(none)'}")
        doc = summary.to_json()
        if xml_writer is not None:
            doc["xml"] = {"messagesWritten": xml_writer.messages_written, "skippedAmqp": xml_writer.skipped_amqp,
                          "skippedPrepared": xml_writer.skipped_prepared, "charactersReplaced": xml_writer.replaced}
            summary.skipped_not_xml = xml_writer.skipped_amqp
            doc["skippedNotXml"] = xml_writer.skipped_amqp
        doc.update(format=req.fmt, output=str(target.out), schemaVersion=SCHEMA_VERSION,
                   store=str(getattr(store, "root", req.path)))
        if target.is_dir:
            with target.open_file("export.json") as fh:
                fh.write(json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8") + b"\n")
    verdict = summary.verdict()
    if xml_writer is not None and (xml_writer.skipped_amqp or xml_writer.replaced):
        verdict = max(verdict, Verdict.WARNING)
    return doc, verdict


def export_inputs(store, req: ExportRequest) -> list:
    """What an export of ``store`` reads, which its output must not be, contain or lie in
    (:mod:`amqtool.store.output`): a file store's directories and broker instance (and the path given, unless
    a configuration file named the store); the configuration files given."""
    from amqtool.store.output import store_inputs

    configs = [p for p in (req.broker_xml, req.activemq_xml, req.jdbc_password_file) if p]
    if not store.kind.endswith("-jdbc"):  # a store of files (Artemis, KahaDB, LevelDB)
        return store_inputs(store) + configs
    return configs


def _write_tables(target: OutputTarget, fmt: str, binding_rows, rows=None, batches=None) -> None:
    """The bindings table, and the messages table from row tuples or from Arrow record batches."""
    write_table(target, fmt, "bindings", BINDING_COLUMNS, binding_rows)
    if batches is not None:
        write_batches(target, fmt, "messages", MESSAGE_COLUMNS, batches, partition_by="queue")
    else:
        write_table(target, fmt, "messages", MESSAGE_COLUMNS, rows, partition_by="queue")


def _run_local(store, options, target, fmt, progress):
    from amqtool.engines.export.local import LocalArtemisExport
    from amqtool.engines.export.xml import write_document

    if store.kind in ("kahadb", "leveldb") and fmt == "xml":
        from amqtool.engines.migrate.xml import KahaDBXmlExport

        ex = KahaDBXmlExport(store, options, progress=progress)
        bindings = ex.binding_rows()
        with target.open_file() as fh:
            w = write_document(fh, bindings, ex.rows())
        return ex.summary, w
    if store.kind == "classic-jdbc":
        from amqtool.engines.export.jdbc import ClassicJdbcExport

        ex = ClassicJdbcExport(store, options, progress=progress)
        try:
            _write_tables(target, fmt, ex.binding_rows(), ex.rows())
        finally:
            ex.close()
        write_subscription_table(target, fmt, ex.subscription_rows(), ex.summary)
        return ex.summary, None
    if store.kind == "kahadb":
        from amqtool.engines.export.kahadb import KahaDBExport

        ex = KahaDBExport(store, options, progress=progress)
        _write_tables(target, fmt, ex.binding_rows(), ex.rows())
        write_subscription_table(target, fmt, ex.subscription_rows(), ex.summary)
        return ex.summary, None
    if store.kind == "leveldb":
        from amqtool.engines.export.leveldb import LevelDBExport

        ex = LevelDBExport(store, options, progress=progress)
        try:
            _write_tables(target, fmt, ex.binding_rows(), ex.rows())
            write_subscription_table(target, fmt, ex.subscription_rows(), ex.summary)
        finally:
            ex.close()
        return ex.summary, None
    artemis_export = LocalArtemisExport
    if store.kind == "artemis-jdbc":  # the same engine over the tables' load
        from amqtool.engines.export.jdbc import ArtemisJdbcExport as artemis_export
    with artemis_export(store, options, progress=progress) as ex:
        bindings = ex.binding_rows()
        if fmt == "xml":
            with target.open_file() as fh:
                w = write_document(fh, bindings, ex.rows())
            return ex.summary, w
        _write_tables(target, fmt, bindings, batches=ex.batches())
        return ex.summary, None


@contextlib.contextmanager
def spark_session_for(target: OutputTarget, master: str | None, spark_session=None, ship: bool | None = None,
                      jars: list[str] | None = None, status: Callable[[str], None] | None = None):
    """The Spark session of an export to ``target``: ``spark_session`` when given (left running), else one
    started for it (:func:`.spark.get_session`, with ``jars`` on its class path) and stopped after. The
    JVM's log sits beside OUT, not in the work directory (removed with it before an error is read): it is
    kept when the export fails, so the path the error names still exists, and removed when it succeeds."""
    from amqtool.engines.export.spark import get_session, stop_session

    own = spark_session is None
    log = target.out.parent / f"{target.out.name}.spark.log"
    try:
        spark = spark_session or get_session(master, log_path=str(log), local_dir=str(target.side("spark-local")),
                                             ship=ship, jars=jars, status=status)
    except BaseException:
        if not log.exists() or isinstance(sys.exc_info()[1], KeyboardInterrupt):
            with contextlib.suppress(OSError):
                log.unlink()
        raise
    keep = False
    interrupted = False
    try:
        yield spark
    except KeyboardInterrupt:
        interrupted = True
        raise
    except Exception as err:  # a failure (not an interruption): keep the log the message names
        keep = own and log.exists()
        if keep and isinstance(err, AmqtoolError) and str(log) not in err.message:
            err.message = f"{err.message} (Spark's log: {log})"
            err.args = (err.message,)
        raise
    finally:
        if own:
            stop_session(spark, interrupted=interrupted)  # the JVM is gone before the work directory goes
            if not keep:
                with contextlib.suppress(OSError):
                    log.unlink()


def _run_spark(store, options, target, req, task_progress, spark_session, status=None):
    from amqtool.engines.export.spark_export import XmlRows, export_store
    from amqtool.engines.export.xml import write_document

    jars = None
    if store.kind.endswith("-jdbc"):
        from amqtool.engines.export.jdbc import find_driver_jar

        if req.fmt == "xml":
            raise UsageError("the Spark engine writes jsonl or parquet tables for database stores; use "
                             "--engine local for the XML document")
        jars = [find_driver_jar(store.target.vendor, req.jdbc_driver_jar)] if store.kind == "classic-jdbc" else None
    with spark_session_for(target, req.master, spark_session, req.ship, jars=jars, status=status) as spark:
        if store.kind.endswith("-jdbc"):  # read by Spark's JDBC source, or by the driver
            from amqtool.engines.export.jdbc import spark_export

            ex = spark_export(spark, store, options, task_progress, req.jdbc_partitions)
            ex.write_tables(target, req.fmt)
            return ex.summary, None
        if req.fmt == "xml":  # (an Artemis store: a Classic store's document is the local engine's)
            rows = XmlRows(spark, store, req.path, options, task_progress)
            bindings = rows.binding_rows()
            with target.open_file() as fh:
                w = write_document(fh, bindings, rows.rows())
            return rows.summary, w
        # a store of files: the data source's read path (datasource.py), written in the tasks
        return export_store(spark, store, req.path, options, req.fmt, target, task_progress), None


__all__ = ["ExportRequest", "ExportOptions", "ExportSummary", "run_export", "choose_engine", "FORMATS", "ENGINES"]
