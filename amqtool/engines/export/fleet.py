"""``amqtool export STORE [STORE ...]``: many stores (the nightly backups of a fleet of brokers, Artemis and
KahaDB mixed) into one dataset.

Inputs. Stores are named on the command line, in a file (``--stores-from``, one a line; ``#`` comments and
blank lines skipped; ``-`` is stdin) or by shell-style patterns that amqtool expands itself
(:func:`expand_stores`), so a cron line can say ``'/backups/*/broker-*'``: a pattern is expanded only when no
file of that literal name exists, and matches directories only; a ``file://`` URI names a local path. The
same directory named twice (or through a symlink) is exported once.

Names. Each store gets a stable name (:func:`name_stores`): the node id Artemis keeps in ``server.lock``
(``FileLockNodeManager``; the id PrintData prints) when the store has one and no other input shares it
(two backups of one broker do), else its path relative to the inputs' common directory; made unique.

The dataset (schema.py): ``messages``, ``bindings`` and ``subscriptions`` (the durable subscriptions of the
KahaDB stores) with a first column ``store`` (Parquet: messages partitioned by ``store`` then ``queue``, the
others by ``store``), each store's rows exactly those its single-store export gives, in the same order (a
table no store gives a row is written empty, as a single store's export writes it); ``stores``: one row per
input (``schema.STORES_COLUMNS``) with its kind, path, node id, files and bytes as read, verdict and counts.
A store's verdict is its single-store export's: verify's on what was read (:mod:`amqtool.engines.verdicts`),
at least WARNING with problems of the export's own (undecodable messages); a store verify calls CRITICAL is
refused (a CRITICAL row, no message or binding row) unless ``--salvage``; a store whose files changed between
the survey and the read says so (``store-changed``). A store that cannot be exported (not a store,
unreadable, failing halfway) is a row with verdict ``UNKNOWN`` and the reason, and leaves no message or
binding row behind (each store is written aside and moved into the output only once it is complete). The
export fails as a whole only for what concerns the output itself (no space, read-only, ...).

Engines: :func:`export_fleet_local` exports the stores one after the other in process;
:mod:`.spark_export` reads the stores in Spark tasks through the data source's partitions and reader
(:mod:`.datasource`), writing the same tables with the same writers.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable
from urllib.parse import unquote, urlparse

from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.schema import (
    FLEET_BINDING_COLUMNS, FLEET_MESSAGE_COLUMNS, FLEET_SUBSCRIPTION_COLUMNS, SCHEMA_VERSION, STORES_COLUMNS,
)
from amqtool.engines.export.writers import OUTPUT_ERRNOS, FileMaker, OutputTarget, table_writer
from amqtool.errors import AmqtoolError, UsageError, Verdict

# Errors that concern the output, not a store: they fail the whole export (nothing is left behind).


# --- which stores ------------------------------------------------------------------------------------------


def _local_path(arg: str) -> str:
    """A store argument as a local path: ``file://`` URIs decoded, ``~`` expanded."""
    if arg.startswith("file:"):
        u = urlparse(arg)
        if u.netloc not in ("", "localhost"):
            raise UsageError(f"{arg}: only local file:// URIs are supported (storage every worker mounts)")
        return unquote(u.path)
    return os.path.expanduser(arg)


def _is_pattern(arg: str) -> bool:
    p = _local_path(arg)
    return glob.has_magic(p) and not os.path.lexists(p)


def read_stores_file(path: str) -> list[str]:
    """The lines of a ``--stores-from`` file (``-``: stdin), blank lines and ``#`` comments left out."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as err:
        raise UsageError(f"cannot read the list of stores: {err.strerror}", path=path) from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def is_fleet(args: Iterable[str], stores_from: str | None = None) -> bool:
    """A fleet export: several stores, a list file, or a pattern (even one matching a single store)."""
    args = list(args)
    return stores_from is not None or len(args) > 1 or any(_is_pattern(a) for a in args)


def expand_stores(args: Iterable[str], stores_from: str | None = None) -> list[str]:
    """The stores to export, absolute, in the order given (a pattern's matches sorted), each once. A pattern
    matching no directory is a usage error (as a shell's ``failglob``); a literal path that is no store is
    left for the export to report as that store's row."""
    items = list(args) + (read_stores_file(stores_from) if stores_from is not None else [])
    out, seen = [], set()
    for arg in items:
        p = _local_path(arg)
        if _is_pattern(arg):
            matches = sorted(m for m in glob.glob(p) if os.path.isdir(m))
            if not matches:
                raise UsageError(f"no store directory matches {arg!r}")
        else:
            matches = [p]
        for m in matches:
            ap = os.path.abspath(m)
            key = os.path.realpath(ap)
            if key not in seen:
                seen.add(key)
                out.append(ap)
    if not out:
        raise UsageError("no stores to export" + (f" (the list {stores_from} is empty)" if stores_from else ""))
    return out


@dataclass
class FleetStore:
    """One input of a fleet export and what is known of it before its export: found by :func:`survey`
    (directory listing, file sizes and the 19 bytes of ``server.lock``; no journal is read)."""

    index: int
    path: str
    name: str = ""
    kind: str | None = None
    node_id: str | None = None
    files: int = 0
    bytes: int = 0
    error: str | None = None  # why it cannot be exported
    inputs: list = field(default_factory=list)  # what reading it reads (amqtool.store.output.store_inputs)
    # the store as the driver detected it (a single store's export, whose directories a broker.xml may
    # name); None: the task detects it again from ``path``
    detected: object = None


def survey(index: int, path: str) -> FleetStore:
    """Detect the store at ``path`` and size it; a store that cannot be exported gets :attr:`FleetStore.error`."""
    from amqtool.engines.artemis.describe import server_node_id
    from amqtool.engines.export import store_file_sizes
    from amqtool.store.layout import detect
    from amqtool.store.output import store_inputs

    fs = FleetStore(index, path)
    try:
        store = detect(path)
        fs.kind = store.kind
        fs.inputs = store_inputs(store, path)
        if store.kind == "artemis":
            journals = store.journals()
            if not journals:
                raise UsageError("no bindings or messages journal found", path=path)
            fs.node_id = server_node_id(store.messages.directory if store.messages else journals[0].directory)
        elif store.kind not in ("kahadb", "leveldb"):
            raise UsageError(f"cannot export a {store.kind} store", path=path)
        sizes = store_file_sizes(store)
        fs.files, fs.bytes = len(sizes), sum(sizes)
    except AmqtoolError as err:
        fs.error = str(err)
    except OSError as err:
        fs.error = f"{path}: {err.strerror or err}"
    return fs


def name_stores(stores: list[FleetStore]) -> None:
    """Give each store its :attr:`~FleetStore.name` (see the module docstring): its node id when no other
    input has it, else its path relative to the inputs' common directory (its own name when it is that
    directory); a name met twice gets ``#2``, ``#3``..."""
    if not stores:
        return
    root = os.path.commonpath([s.path for s in stores])
    ids = Counter(s.node_id for s in stores if s.node_id)
    used: set[str] = set()
    for s in stores:
        if s.node_id and ids[s.node_id] == 1:
            name = s.node_id
        else:
            rel = os.path.relpath(s.path, root)
            name = rel if rel != "." else (os.path.basename(s.path) or s.path)
        base, n = name, 1
        while name in used:
            n += 1
            name = f"{base}#{n}"
        used.add(name)
        s.name = name


def plan_stores(args: Iterable[str], stores_from: str | None = None) -> list[FleetStore]:
    """Expand, survey and name the stores of a fleet export."""
    stores = [survey(i, p) for i, p in enumerate(expand_stores(args, stores_from))]
    name_stores(stores)
    return stores


# --- one store's export (the local engine; the writers' helpers both engines use) ---------------------------


def with_store_column(name: str, batch):
    """An Arrow record batch of ``MESSAGE_COLUMNS`` with the ``store`` column put first."""
    import pyarrow as pa

    col = pa.array([name] * batch.num_rows, type=pa.string())
    return pa.RecordBatch.from_arrays([col, *batch.columns], schema=_fleet_schema())


@functools.lru_cache(maxsize=1)
def _fleet_schema():
    from amqtool.engines.export.schema import arrow_schema

    return arrow_schema(FLEET_MESSAGE_COLUMNS)


def message_writer(files, fmt: str, part: int):
    """The writer of a part of a fleet's ``messages`` table (partitioned by store then queue); no file for
    a part without rows."""
    return table_writer(files, fmt, "messages", FLEET_MESSAGE_COLUMNS, partition_by=("store", "queue"),
                        part=part, write_empty=False)


def write_bindings(files, fmt: str, name: str, rows: list[tuple], part: int,
                   table: str = "bindings", columns=FLEET_BINDING_COLUMNS) -> None:
    """A store's rows of the fleet's ``bindings`` table (or of ``table``: ``subscriptions``), partitioned by
    store; no file when there are none."""
    w = table_writer(files, fmt, table, columns, partition_by="store", part=part, write_empty=False)
    for r in rows:
        w.write((name, *r))
    w.close()


def write_subscriptions(files, fmt: str, name: str, rows, part: int, summary) -> None:
    """A store's rows of the fleet's ``subscriptions`` table (partitioned by store), counted in its
    ``summary`` (the fleet document's ``subscriptions`` total)."""
    rows = list(rows)
    write_bindings(files, fmt, name, rows, part, "subscriptions", FLEET_SUBSCRIPTION_COLUMNS)
    summary.subscriptions = len(rows)


def write_store_messages(writer, name: str, items) -> None:
    """Rows (tuples) or Arrow record batches of one store into a fleet ``messages`` writer."""
    for item in items:
        if isinstance(item, tuple):
            writer.write((name, *item))
        else:
            writer.write_batch(with_store_column(name, item))


def export_store(fs: FleetStore, options: ExportOptions, fmt: str, files, part: int, *, engine: str = "local",
                 progress: Callable[[int], None] | None = None) -> ExportSummary:
    """Export one store of a fleet through ``files`` (a :class:`~.writers.FileMaker`): its ``bindings``,
    ``messages`` and (KahaDB) ``subscriptions`` rows, ``store`` column first, as its single-store export with
    the local engine makes them (:class:`~.local.LocalArtemisExport`, :class:`~.kahadb.KahaDBExport`), in
    files ``part-<part>``. Returns its summary; raises when the store cannot be exported."""
    from amqtool.store.layout import detect

    if fs.error:
        raise AmqtoolError(fs.error)
    store = detect(fs.path)
    writer = message_writer(files, fmt, part)
    if store.kind in ("kahadb", "leveldb"):
        if store.kind == "leveldb":
            from amqtool.engines.export.leveldb import LevelDBExport as export_class
        else:
            from amqtool.engines.export.kahadb import KahaDBExport as export_class

        ex = export_class(store, options, progress=progress, engine=engine)
        try:
            write_bindings(files, fmt, fs.name, ex.binding_rows(), part)
            write_store_messages(writer, fs.name, ex.rows())
            writer.close()
            write_subscriptions(files, fmt, fs.name, ex.subscription_rows(), part, ex.summary)
        finally:
            getattr(ex, "close", lambda: None)()
        return ex.summary
    from amqtool.engines.export.local import LocalArtemisExport

    with LocalArtemisExport(store, options, progress=progress) as ex:
        ex.summary.engine = engine
        write_bindings(files, fmt, fs.name, ex.binding_rows(), part)
        write_store_messages(writer, fs.name, ex.batches())
        writer.close()
    return ex.summary


def is_output_error(err: BaseException) -> bool:
    """An error writing the output (it fails the export), not one of reading a store (a store's row)."""
    return isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS


def describe_failure(err: BaseException) -> str:
    """One line for a store that could not be exported."""
    if isinstance(err, AmqtoolError):
        return str(err)
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename else ""
        return f"{where}{err.strerror or err}"
    return f"{type(err).__name__}: {err}"


def export_store_aside(fs: FleetStore, options: ExportOptions, fmt: str, staging: str, file_mode: int, part: int,
                       *, engine: str = "local", progress=None) -> tuple[ExportSummary | None, str | None]:
    """:func:`export_store` into the directory ``staging`` (created), so that a store that fails halfway
    leaves nothing: returns ``(summary, None)``, or ``(None, why)`` with ``staging`` removed. Errors writing
    the output are raised."""
    try:
        return export_store(fs, options, fmt, FileMaker(staging, file_mode), part, engine=engine,
                            progress=progress), None
    except Exception as err:  # noqa: BLE001 - a damaged store is a row, not a failed job
        shutil.rmtree(staging, ignore_errors=True)
        if is_output_error(err):
            raise
        return refused_summary(err, engine, fs.kind), describe_failure(err)


def refused_summary(err: BaseException, engine: str, kind: str | None) -> ExportSummary | None:
    """The summary of a store refused (:class:`~amqtool.engines.verdicts.SourceRefusedError`, no
    ``--salvage``): no rows, verify's findings, so its row says CRITICAL (or UNKNOWN: an unreadable journal
    file); None for any other failure (the row says UNKNOWN). Both fleet engines call this."""
    from amqtool.engines.verdicts import SourceRefusedError

    if not isinstance(err, SourceRefusedError):
        return None
    summary = ExportSummary(engine, kind or "")
    summary.findings = list(err.findings)
    return summary


# --- the dataset's summary ---------------------------------------------------------------------------------


@dataclass
class StoreOutcome:
    """A store's export: its summary, or why it could not be exported."""

    store: FleetStore
    summary: ExportSummary | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        s, fs = self.summary, self.store
        if s is not None and s.files is not None and self.error is None and s.files < fs.files:
            # the store changed between the survey and its read: the row gives what was read, and says so
            from amqtool.errors import Finding, Severity

            s.findings.append(Finding(
                Severity.WARNING, "store-changed",
                f"{fs.files} journal file(s) when the fleet was planned, {s.files} when the store was read: "
                f"the export holds what was read", fs.path, None))

    @property
    def verdict(self) -> Verdict:
        """verify's verdict on what the store's export read, with the export's problems
        (:mod:`amqtool.engines.verdicts`); CRITICAL for a store refused as such; UNKNOWN when it could not
        be read."""
        if self.summary is None:
            return Verdict.UNKNOWN
        return self.summary.verdict()

    def row(self) -> tuple:
        """Its row of the ``stores`` table (``schema.STORES_COLUMNS``): files and bytes as read."""
        s, fs = self.summary, self.store
        problem = self.error
        if problem is None and s is not None:
            from amqtool.engines.verdicts import describe

            worst = max(s.findings, key=lambda f: f.severity.verdict, default=None)
            if worst is not None and worst.severity.verdict > Verdict.OK:
                problem = describe(worst)
            elif s.problems:
                p = s.problems[0]
                problem = (f"message {p.message_id}: " if p.message_id is not None else "") + p.message
        files = s.files if s is not None and s.files is not None and self.error is None else fs.files
        size = s.bytes_scanned if s is not None and s.files is not None and self.error is None else fs.bytes
        return (fs.name, fs.kind, fs.path, fs.node_id, files, size, self.verdict.name,
                s.problem_count if s else 0, s.rows if s else 0, s.messages if s else 0, s.bindings if s else 0,
                problem)


def store_json(row: tuple) -> dict:
    """A ``stores`` row as the summary document lists it (camelCase keys)."""
    keys = ("store", "kind", "path", "nodeId", "files", "bytes", "verdict", "problemCount", "rows", "messages",
            "bindings", "problem")
    return dict(zip(keys, row))


def fleet_document(outcomes: list[StoreOutcome], *, engine: str, fmt: str, output: str) -> dict:
    """The summary of a fleet export (also written as ``export.json``): totals and the ``stores`` rows."""
    rows = [o.row() for o in outcomes]
    verdicts = Counter(o.verdict.name for o in outcomes)
    ok = [o.summary for o in outcomes if o.summary is not None]
    return {
        "engine": engine, "format": fmt, "output": output, "schemaVersion": SCHEMA_VERSION,
        "storeCount": len(outcomes),
        "storesByVerdict": {v.name: verdicts.get(v.name, 0) for v in Verdict},
        "rows": sum(s.rows for s in ok), "messages": sum(s.messages for s in ok),
        "bindings": sum(s.bindings for s in ok), "subscriptions": sum(s.subscriptions for s in ok),
        "problemCount": sum(s.problem_count for s in ok),
        "files": sum(o.store.files for o in outcomes), "bytes": sum(o.store.bytes for o in outcomes),
        "stores": [store_json(r) for r in rows],
    }


def fleet_verdict(outcomes: list[StoreOutcome], doc: dict | None = None) -> Verdict:
    """OK when every store exported cleanly; CRITICAL when a store's verdict is (verify calls it CRITICAL:
    refused, or salvaged); else WARNING when one had problems, could not be read or checked (the dataset was
    still made: the ``stores`` table says which), or when ``--queue`` matched no queue of any store
    (``doc["queueMismatch"]``, as a single store's export warns)."""
    worst = max((o.verdict for o in outcomes), default=Verdict.OK)
    if any(o.verdict is Verdict.CRITICAL for o in outcomes):  # (an UNKNOWN store sorts above it)
        return Verdict.CRITICAL
    if doc is not None and doc.get("queueMismatch"):
        return Verdict.WARNING
    return Verdict.OK if worst is Verdict.OK else Verdict.WARNING


def queue_mismatch(outcomes: list[StoreOutcome], options: ExportOptions) -> str | None:
    """With ``--queue``: the warning when no store of the fleet has a queue the patterns match (naming the
    queues there are), else None."""
    if not options.queues:
        return None
    names = sorted({q for o in outcomes if o.summary is not None for q in o.summary.queue_names})
    if any(options.wants(q) for q in names):
        return None
    shown = ", ".join(names[:20]) + (f" ... ({len(names)} in all)" if len(names) > 20 else "")
    return f"no queue of any store matches --queue {' '.join(options.queues)}; the stores' queues: {shown or '(none)'}"


def finish_dataset(target: OutputTarget, fmt: str, outcomes: list[StoreOutcome], doc: dict) -> None:
    """The driver's last writes: empty ``messages``/``bindings``/``subscriptions`` tables when no store gave a
    row, the ``stores`` table and ``export.json``."""
    for table, columns, part_by in (("messages", FLEET_MESSAGE_COLUMNS, ("store", "queue")),
                                    ("bindings", FLEET_BINDING_COLUMNS, "store"),
                                    ("subscriptions", FLEET_SUBSCRIPTION_COLUMNS, "store")):
        if not os.path.isdir(os.path.join(target.path, table)):
            table_writer(target, fmt, table, columns, partition_by=part_by).close()
    w = table_writer(target, fmt, "stores", STORES_COLUMNS)
    for o in outcomes:
        w.write(o.row())
    w.close()
    with target.open_file("export.json") as fh:
        fh.write(json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8") + b"\n")


# --- the local engine ---------------------------------------------------------------------------------------


@dataclass
class FleetRequest:
    """A fleet export: ``stores`` as given (paths, patterns, URIs), ``stores_from`` a list file."""

    stores: list[str]
    out: str
    fmt: str = "parquet"
    engine: str = "auto"
    master: str | None = None
    stores_from: str | None = None
    queues: tuple[str, ...] | None = None
    safe: bool = False
    salvage: bool = False  # export stores verify calls CRITICAL (amqtool.engines.verdicts)
    force: bool = False
    mode: int = 0o600
    ship: bool | None = None  # Spark: pack this environment for the workers (None: when the master is a cluster)


def check_request(req: FleetRequest) -> None:
    from amqtool.engines.export import ENGINES

    if req.fmt not in ("jsonl", "parquet"):
        raise UsageError("a fleet export writes tables: --format jsonl or parquet (the XML document is one "
                         "store's, for `artemis data imp`)")
    if req.engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}")
    if req.master and req.engine == "local":
        raise UsageError("--master needs the Spark engine (--engine spark or auto)")


def run_fleet_export(req: FleetRequest, *, progress: Callable[[int], None] | None = None,
                     task_progress: Callable[[int, int], None] | None = None,
                     store_progress: Callable[[dict], None] | None = None, spark_session=None,
                     status: Callable[[str], None] | None = None) -> tuple[dict, Verdict]:
    """Export the stores of ``req`` into one dataset. Returns the summary document (without ``verdict``) and
    the verdict (:func:`fleet_verdict`). ``progress(n)``: journal bytes read (local engine);
    ``task_progress(done, total)``: Spark tasks; ``store_progress(figures)``: after each store
    (:class:`FleetProgress`); ``status(line)``: status lines (the shipped environment's archive and cache)."""
    from amqtool.engines.export import _cores, auto_spark_threshold

    check_request(req)
    stores = plan_stores(req.stores, req.stores_from)
    options = ExportOptions(safe=req.safe, queues=tuple(req.queues) if req.queues else None, salvage=req.salvage)
    engine = req.engine
    if engine == "auto":
        threshold = auto_spark_threshold(_cores())
        total = sum(s.bytes for s in stores)
        engine = "spark" if req.master or (threshold is not None and total >= threshold) else "local"
    inputs = [p for s in stores for p in (s.inputs or [s.path])]
    target = OutputTarget(req.out, is_dir=True, force=req.force, mode=req.mode, inputs=inputs)
    with target.writing():
        if engine == "local":
            outcomes = export_fleet_local(stores, options, req.fmt, target, progress=progress,
                                          store_progress=store_progress)
        else:
            from amqtool.engines.export import spark_session_for
            from amqtool.engines.export.spark_export import export_stores

            with spark_session_for(target, req.master, spark_session, req.ship, status=status) as spark:
                outcomes = export_stores(spark, stores, options, req.fmt, target, task_progress=task_progress,
                                         store_progress=store_progress)
        doc = fleet_document(outcomes, engine=engine, fmt=req.fmt, output=str(target.out))
        mismatch = queue_mismatch(outcomes, options)
        if mismatch:
            doc["queueMismatch"] = mismatch
        finish_dataset(target, req.fmt, outcomes, doc)
    return doc, fleet_verdict(outcomes, doc)


class FleetProgress:
    """The figures a fleet export reports after each store: stores done / total, bytes, rows, and the slowest
    store so far (name and seconds)."""

    def __init__(self, total: int, total_bytes: int, callback: Callable[[dict], None] | None):
        self.total, self.total_bytes, self.callback = total, total_bytes, callback
        self.done = self.bytes = self.rows = 0
        self.slowest: tuple[float, str] | None = None

    def store_done(self, fs: FleetStore, rows: int, seconds: float) -> None:
        self.done += 1
        self.bytes += fs.bytes
        self.rows += rows
        if self.slowest is None or seconds > self.slowest[0]:
            self.slowest = (seconds, fs.name)
        if self.callback is not None:
            self.callback(self.figures())

    def figures(self) -> dict:
        return {"done": self.done, "total": self.total, "bytes": self.bytes, "totalBytes": self.total_bytes,
                "rows": self.rows, "slowest": self.slowest[1] if self.slowest else None,
                "slowestSeconds": round(self.slowest[0], 3) if self.slowest else None}


def export_fleet_local(stores: list[FleetStore], options: ExportOptions, fmt: str, target: OutputTarget, *,
                       progress: Callable[[int], None] | None = None,
                       store_progress: Callable[[dict], None] | None = None) -> list[StoreOutcome]:
    """The local engine: each store in turn, written aside (:func:`export_store_aside`) and moved into the
    output when complete."""
    import time

    from amqtool.engines.export.spark import commit_attempts

    track = FleetProgress(len(stores), sum(s.bytes for s in stores), store_progress)
    outcomes = []
    staging_root = target.side("stores")
    os.makedirs(staging_root, mode=0o700, exist_ok=True)
    for fs in stores:
        started = time.monotonic()
        staging = os.path.join(staging_root, str(fs.index))
        summary, error = export_store_aside(fs, options, fmt, staging, target.file_mode, fs.index,
                                            progress=progress)
        if summary is not None and os.path.isdir(staging):
            commit_attempts([staging], staging, str(target.path))
        outcomes.append(StoreOutcome(fs, summary, error))
        track.store_done(fs, summary.rows if summary else 0, time.monotonic() - started)
    shutil.rmtree(staging_root, ignore_errors=True)
    return outcomes
