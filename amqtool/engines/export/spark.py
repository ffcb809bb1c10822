"""The Spark export engine: the driver plans with the local engine's load, Spark tasks read and decode the
message bodies through a Python data source and hand the rows to the JVM as Arrow, Spark writes the tables.

Why this shape. An export's bulk work is reading and decoding message bodies: Python decoding
(:func:`parse.decode_message`: the core message, its TypedProperties, the property rows; a paged message is
read, re-encoded and decoded) costs ~100-150 µs a message, while the liveness of a 1 GiB journal costs ~2 s
on the driver (the C loader, then the broker state). The first Spark engine parsed *every* journal record
into a Python Row in the workers, resolved liveness with DataFrame joins, then built the message rows in
Python and pickled them into the JVM again: per-record Python rows through py4j and pickle cost 5x the local
engine (1 GiB demo store: 124 s on one core, 91 s on two, against 23 s). So liveness is computed once, on
the driver, by the local engine's own code (memory in proportion to the live records, as there), and what
Spark distributes is the work that costs: bodies and decoding.

1. **Plan** (driver). :class:`~amqtool.engines.export.local.LocalArtemisExport` loads the journals exactly
   as the local engine does and lists every journal message with rows
   (:meth:`~amqtool.engines.export.local.LocalArtemisExport.message_refs`: its record's location and its
   rows' queue, state, transaction, delivery count and scheduled time) in message-id order; for the paged
   messages, the journals' paging facts (:class:`~amqtool.engines.paging.PagingJournalView`, from the same
   load) and the store's pages (:func:`~amqtool.engines.paging.store_pages`). The plan is cut into
   :class:`JournalPart` runs of messages and :class:`PagedPart` runs of whole pages (each with only the
   cursor acks and page-complete records of its own pages), sized by estimated cost (a fixed cost a
   message and a row, plus the bytes), a few per core (:func:`plan_partitions`), and pickled to a private
   file that only the driver side reads.
2. **Read** (Spark tasks). :class:`ExportSource`, a PySpark Python data source: ``partitions()`` hands out
   the parts (a task receives its own; the reader carries what every part shares: file paths, bindings,
   options), ``read(part)`` runs the local engine's functions on it,
   :func:`~amqtool.engines.export.local.journal_message_rows` on each message body (read by its location)
   or :func:`~amqtool.engines.paging.paged_export_rows` on its pages, and yields ``pyarrow.RecordBatch`` es
   of a few thousand rows (``schema.MESSAGE_COLUMNS``): the rows reach the JVM as Arrow, not as pickled
   Rows. Rows and order are the local engine's: the parts in message-id order, then the pages in exploring
   order. Each part's counts and problems come back in an accumulator keyed by part (a re-evaluated part
   replaces its value) and are merged in part order.
3. **Write**: Parquet partitioned by queue, or JSON Lines, by Spark's own writers; XML streamed by the
   driver in the local engine's order (``toLocalIterator`` keeps the order of the parts).

What bounds it (1 GiB demo store, 2 cores; CPU seconds measured per process): the tasks' decoding is
the local engine's own Python, ~25 s (the local engine's whole export is ~25-30 s of one core); Spark
adds ~18 s of JVM (Arrow to rows and its row-by-row Parquet writer, C1-compiled), ~8 s of Python start-up
(every Python process Spark launches compiles pyspark from its zip, ~1.3 s each, and an export needs
four kinds: data source lookup, creation, read planning, task workers) and the driver's ~3.5 s of load
and plan. ~55 s of CPU on two cores: ``local[2]`` comes out about level with the local engine (four runs on
an otherwise quiet machine: 25-32 s against 22-29 s) and 1.3-1.6x faster than ``local[1]``, whose JVM side
mostly waits for its one Python worker. Only more cores (or a cluster) can make it pay.

The session: ``local[*]`` by default, tuned for a small machine (driver memory, no UI, bound to
127.0.0.1, the JVM's C1 compiler only); ``master`` (or ``spark-submit --master``) takes the same job to a
cluster, where every worker must see the store at the same path and have amqtool installed (the plan holds
absolute paths). The JVM's own stdout/stderr (log4j start-up chatter) go to a log file, never to the
user's terminal.
"""
from __future__ import annotations

import math
import os
import pickle
import shutil
import sys
import tempfile
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from amqtool.engines.export.model import MAX_PROBLEM_EXAMPLES, ExportOptions, ExportSummary
from amqtool.engines.export.schema import BINDING_COLUMNS, MESSAGE_COLUMNS, spark_schema
from amqtool.errors import CapabilityError

try:
    from pyspark.accumulators import AccumulatorParam
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
except ImportError:  # pragma: no cover - pyspark is a dependency; get_session says so when it is missing
    AccumulatorParam = DataSource = DataSourceReader = InputPartition = object

ENGINE = "spark"
DEFAULT_MASTER = "local[*]"

# Planning: parts are sized by estimated cost, in nanoseconds of one core. Measured in the tasks on the 1 GiB
# demo store (2 cores): a journal message (3.2 KB body, 1.2 rows) and a paged one (1.3 KB, 1.5 rows) both
# cost ~300 µs, Python decoding and the JVM's conversion and Parquet writing together; so mostly a fixed
# cost a message, plus one a row and a little a body byte (read, hashed, copied, compressed).
MESSAGE_NS = 200_000
ROW_NS = 50_000
BYTE_NS = 5
PARTS_PER_CORE = 3
MIN_PART_COST = 1_000_000_000
MAX_PARTS = 1024
# Arrow batches handed to the JVM: this many rows, or fewer when their bodies pass BATCH_BYTES.
BATCH_ROWS = 4096
BATCH_BYTES = 16 << 20


# --- the session -----------------------------------------------------------------------------------------


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _loopback_master(master: str) -> bool:
    host = master.split("://", 1)[-1].split(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1")


def session_conf(master: str, *, local_dir: str | None = None) -> dict[str, str]:
    """The Spark settings of an export session (see the module docstring). No shuffle settings: the export
    has no shuffle (the driver plans, each task reads its own part and writes it)."""
    conf = {
        "spark.master": master,
        "spark.app.name": "amqtool-export",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("AMQTOOL_SPARK_DRIVER_MEMORY", "6g"),
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.sql.parquet.compression.codec": "snappy",
        # partitionBy("queue") without a sort: each task keeps a writer per queue open instead of sorting its
        # rows (bodies and all) by queue first (measured: the sort cost the JVM ~6 s CPU on the 1 GiB demo)
        "spark.sql.maxConcurrentOutputFileWriters": "64",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    if _is_local(master):
        # The driver's JVM runs the tasks' JVM side (Arrow to rows, the Parquet writer). It lives for one
        # export, and its C2 JIT compiler spent as much CPU as the tasks (measured on the 1 GiB demo, 2 cores:
        # 13 s of compiler threads, 28 s of JVM CPU in all); with C1 only, 20 s and the export ~10% faster.
        conf["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1"
    if _is_local(master) or _loopback_master(master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if local_dir:
        os.makedirs(local_dir, mode=0o700, exist_ok=True)
        conf["spark.local.dir"] = local_dir
    return conf


@contextmanager
def _jvm_output_to(log_path: str | None):
    """Point fds 1 and 2 at ``log_path`` while the JVM is spawned (it inherits them), then restore ours."""
    if log_path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log_fd):
            os.close(fd)


def get_session(master: str | None = None, *, log_path: str | None = None, local_dir: str | None = None):
    """A SparkSession for the export (an active one is reused, as under spark-submit)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as err:  # pragma: no cover - pyspark is a dependency
        raise CapabilityError(f"the Spark engine needs pyspark: {err}") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or os.environ.get("MASTER") or DEFAULT_MASTER
    if _is_local(master) or _loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver and block manager bind loopback only
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for k, v in session_conf(master, local_dir=local_dir).items():
        builder = builder.config(k, v)
    try:
        with _jvm_output_to(log_path):
            spark = builder.getOrCreate()
    except Exception as err:  # JVM missing, master unreachable...
        where = f" (see {log_path})" if log_path else ""
        raise CapabilityError(f"cannot start Spark with master {master}: {str(err).splitlines()[0]}{where}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Progress:
    """Polls the status tracker from a daemon thread and reports (completed tasks, total tasks)."""

    def __init__(self, sc, callback: Callable[[int, int], None] | None):
        self.sc = sc
        self.callback = callback
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.callback is not None:
            self._thread = threading.Thread(target=self._run, name="amqtool-spark-progress", daemon=True)
            self._thread.start()
        return self

    def _run(self):
        tracker = self.sc.statusTracker()
        while not self._stop.wait(0.5):
            try:
                done = total = 0
                skip = {sid for jid in tracker.getJobIdsForGroup(WARM_UP_GROUP)  # not the export's own work
                        for sid in (getattr(tracker.getJobInfo(jid), "stageIds", None) or ())}
                for sid in tracker.getActiveStageIds():
                    if sid in skip:
                        continue
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
                if total:
                    self.callback(done, total)
            except Exception:  # noqa: BLE001 - progress must never break the export
                pass

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)


# --- the plan --------------------------------------------------------------------------------------------


class JournalPart(InputPartition):
    """A run of journal messages in message-id order: ``(message id, file index, body offset, body length,
    user record type, refs)`` each, ``refs`` as :meth:`LocalArtemisExport.message_refs` gives them."""

    def __init__(self, index: int, messages: list[tuple]):
        self.index = index
        self.messages = messages


class PagedPart(InputPartition):
    """A run of whole pages in exploring order (``(PageStore, page id)``, each PageStore trimmed to the
    run's pages) and the paging facts they need: the journals' view with only these pages' cursor acks and
    page-complete records."""

    def __init__(self, index: int, pages: list[tuple], view):
        self.index = index
        self.pages = pages
        self.view = view


@dataclass
class ReadContext:
    """What every part's reader needs: the message journal's files (absolute paths by file index), the
    bindings, where large-message bodies are, the options, the store, and the accumulator the parts report
    their counts and problems to."""

    paths: dict[int, str]
    bindings: object  # parse.Bindings
    large_dir: str | None
    options: ExportOptions
    store: object
    summaries: object  # Accumulator of {part index: ExportSummary}


def split_runs(costs: list[int], k: int) -> list[tuple[int, int]]:
    """``[start, end)`` runs of consecutive items whose costs are about ``sum / k`` each (at most ``k``)."""
    n = len(costs)
    if n == 0:
        return []
    total = sum(costs)
    if k <= 1 or n == 1 or total <= 0:
        return [(0, n)]
    runs, start, acc, j = [], 0, 0, 1
    for i, c in enumerate(costs):
        acc += c
        if j < k and i + 1 < n and acc >= total * j / k:
            runs.append((start, i + 1))
            start, j = i + 1, j + 1
    runs.append((start, n))
    return runs


def plan_partitions(journal_costs: list[int], page_costs: list[int], cores: int) -> tuple[list, list]:
    """The runs of journal messages and of pages the parts take: a few parts per core (enough for the cores
    to finish together), none much smaller than :data:`MIN_PART_COST`, shared between the journal and the
    paging part in proportion to their costs."""
    wj, wp = sum(journal_costs), sum(page_costs)
    parts = max(1, min(MAX_PARTS, PARTS_PER_CORE * max(1, cores), math.ceil((wj + wp) / MIN_PART_COST)))
    kj = kp = 0
    if journal_costs:
        kj = max(1, round(parts * wj / (wj + wp))) if wj + wp else 1
    if page_costs:
        kp = max(1, parts - kj)
    return split_runs(journal_costs, kj), split_runs(page_costs, kp)


def journal_cost(body_len: int, rows: int, large_size: int = 0) -> int:
    """Estimated cost of a journal message (see :data:`MESSAGE_NS`)."""
    return MESSAGE_NS + ROW_NS * rows + BYTE_NS * (body_len + large_size)


def _page_costs(pages: list[tuple]) -> list[int]:
    """Estimated cost of each page: its messages, estimated from its size and the average record size of the
    first page of its store (framed in C, not decoded), with a row each, and its bytes."""
    from amqtool.engines.paging import PageFile, page_framing

    per_record: dict[int, float] = {}
    out = []
    for ps, pid in pages:
        try:
            size = os.path.getsize(ps.page_path(pid))
        except OSError:
            out.append(MESSAGE_NS)
            continue
        if id(ps) not in per_record and size > 0:
            per_record[id(ps)] = 0
            try:
                with PageFile(ps.page_path(pid)) as pf:
                    end = page_framing(pf.buf, pf.size)
                per_record[id(ps)] = end.offset / end.records if end.records else 0
            except OSError:
                pass
        avg = per_record.get(id(ps)) or 0
        messages = max(1, int(size / avg)) if avg else 1
        out.append(messages * (MESSAGE_NS + ROW_NS) + BYTE_NS * size)
    return out


class _PagingByPage:
    """A :class:`~amqtool.engines.paging.PagingJournalView`'s cursor acks and page-complete records indexed
    by page, so each run of pages takes its own in one pass (a store can hold millions of cursor acks)."""

    def __init__(self, view):
        self.view = view
        self.acks: dict[int, list[tuple[int, int]]] = {}  # page -> [(queue, message number)]
        for q, positions in view.acks.items():
            for page, number in positions:
                self.acks.setdefault(page, []).append((q, number))
        self.complete: dict[int, list[int]] = {}  # page -> [queue]
        for q, pages in view.complete.items():
            for page in pages:
                self.complete.setdefault(page, []).append(q)

    def slice(self, page_ids: set[int]):
        """The view with only the cursor acks and page-complete records of ``page_ids`` (a queue belongs to
        one address, so other stores' pages of the same number only add entries nobody asks for)."""
        from amqtool.engines.paging import PagingJournalView

        acks: dict[int, set] = {}
        complete: dict[int, set] = {}
        for page in page_ids:
            for q, number in self.acks.get(page, ()):
                acks.setdefault(q, set()).add((page, number))
            for q in self.complete.get(page, ()):
                complete.setdefault(q, set()).add(page)
        v = self.view
        # loaded: the task must not load the journals again (load_view returns a loaded view as it is)
        return PagingJournalView(bindings_loaded=True, messages_loaded=True, queues=v.queues, page_tx=v.page_tx,
                                 page_tx_prepared=v.page_tx_prepared, acks=acks, complete=complete)


def _paged_parts(pages: list[tuple], runs: list[tuple[int, int]], view, first_index: int) -> list[PagedPart]:
    by_page = _PagingByPage(view) if runs else None
    parts = []
    for i, (a, b) in enumerate(runs):
        run, trimmed = [], {}
        for ps, pid in pages[a:b]:
            t = trimmed.get(id(ps))
            if t is None:  # absolute folder: tasks may run elsewhere, in another working directory
                t = trimmed[id(ps)] = replace(ps, folder=type(ps.folder)(os.path.abspath(ps.folder)), pages={},
                                              bad_names=[])
            t.pages[pid] = ps.pages[pid]
            run.append((t, pid))
        parts.append(PagedPart(first_index + i, run, by_page.slice({pid for _, pid in run})))
    return parts


def _write_plan(directory: str, name: str, ctx, parts: list) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as fh:  # in a 0700 directory of its own (mkdtemp)
        pickle.dump(ctx, fh, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(parts, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _source_df(spark, plan_path: str):
    # the schema given: Spark need not start a Python process to ask the source for it
    return spark.read.format(ExportSource.name()).schema(spark_schema(MESSAGE_COLUMNS)).option("plan", plan_path).load()


WARM_UP_GROUP = "amqtool-export-warm-up"
_WARMED: "weakref.WeakSet" = weakref.WeakSet()


def _warm_up(spark, plan_dir: str, cores: int) -> None:
    """Run the data source once on an empty plan, in a thread, while the driver loads the store and plans.
    Before its first task Spark runs a chain of Python processes, one after the other: one to look up data
    sources (at the first registration), one to create the source, one to plan the read, then the task
    workers; each first compiles pyspark from its zip (~1.3 s apiece on this machine). Measured on the 1 GiB
    demo store: 7 s from the write to the first task without this, 2 s with it (the driver's plan takes
    ~3.5 s). The export's own job then finds the processes running. A failure here is left to that job."""
    try:
        spark.sparkContext.setJobGroup(WARM_UP_GROUP, "amqtool export: start Spark's Python processes")
        spark.dataSource.register(ExportSource)
        path = _write_plan(plan_dir, "warm-up.pickle", None, [InputPartition(i) for i in range(cores)])
        _source_df(spark, path).write.format("noop").mode("overwrite").save()
    except Exception:  # noqa: BLE001
        pass


class _PerPart(AccumulatorParam):
    """part index -> that part's summary; a re-evaluated part (a retried task, a second action on the same
    rows) replaces its earlier value instead of adding to it."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        a.update(b)
        return a


# --- the data source (what Spark tasks run) ---------------------------------------------------------------


class ExportSource(DataSource):
    """The export rows of a plan (option ``plan``: the plan file the driver wrote) as a Spark data source."""

    @classmethod
    def name(cls) -> str:
        return "amqtool_export"

    def schema(self):
        return spark_schema(MESSAGE_COLUMNS)

    def reader(self, schema):
        return ExportReader(self.options["plan"])


class ExportReader(DataSourceReader):
    """Reads the plan file (on the driver, where Spark plans the scan): the :class:`ReadContext`, then the
    parts. Only the context travels with the reader to every task; each task gets its own part."""

    def __init__(self, plan_path: str):
        with open(plan_path, "rb") as fh:
            self.ctx = pickle.load(fh)
            self._parts = pickle.load(fh)

    def __getstate__(self):
        return {"ctx": self.ctx}

    def partitions(self):
        return self._parts

    def read(self, partition) -> Iterator:
        return read_part(self.ctx, partition)


def read_part(ctx: ReadContext, part) -> Iterator:
    """The rows of one part as Arrow record batches; its summary goes to ``ctx.summaries``."""
    from amqtool.engines.export.local import count_paged, journal_message_rows
    from amqtool.engines.export.parse import LargeBodies
    from amqtool.engines.export.schema import arrow_schema
    from amqtool.engines.paging import paged_export_rows

    if not isinstance(part, (JournalPart, PagedPart)):  # Spark's stand-in for an empty plan
        return
    summary = ExportSummary(ENGINE, "artemis")
    large = LargeBodies(ctx.large_dir)
    opts = ctx.options
    fds: dict[int, int] = {}

    def journal_rows():
        for mid, fi, off, length, utype, refs in part.messages:
            body = b""
            if length:
                fd = fds.get(fi)
                if fd is None:
                    fd = fds[fi] = os.open(ctx.paths[fi], os.O_RDONLY | os.O_CLOEXEC)
                body = os.pread(fd, length, off)
            yield from journal_message_rows(mid, utype, body, refs, bindings=ctx.bindings, large=large,
                                            safe=opts.safe, summary=summary)

    if isinstance(part, JournalPart):
        rows = journal_rows()
    else:
        rows = count_paged(paged_export_rows(
            ctx.store, bindings=ctx.bindings, large=large, safe=opts.safe, wants=opts.wants, view=part.view,
            problem=summary.problem, count_row=summary.count_row, pages=part.pages), summary)
    try:
        yield from arrow_batches(rows, arrow_schema(MESSAGE_COLUMNS))
    finally:
        for fd in fds.values():
            os.close(fd)
    ctx.summaries.add({part.index: summary})


def arrow_batches(rows: Iterator[tuple], schema, max_rows: int = BATCH_ROWS, max_bytes: int = BATCH_BYTES):
    """Rows (``MESSAGE_COLUMNS`` tuples) as ``pyarrow.RecordBatch`` es of at most ``max_rows`` rows, cut
    earlier when their bodies pass ``max_bytes``."""
    import pyarrow as pa

    types = [f.type for f in schema]
    body = [f.name for f in schema].index("body")

    def batch(buf):
        return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(zip(*buf), types)], schema=schema)

    buf, size = [], 0
    for row in rows:
        buf.append(row)
        b = row[body]
        if b is not None:
            size += len(b)
        if len(buf) >= max_rows or size >= max_bytes:
            yield batch(buf)
            buf, size = [], 0
    if buf:
        yield batch(buf)


# --- the engine (driver) ----------------------------------------------------------------------------------


class SparkArtemisExport:
    """Export an Artemis store with Spark. Build (the driver loads and plans), then :meth:`binding_rows`,
    and :meth:`write_tables` or :meth:`iter_rows_for_xml`; :meth:`rows_df` is the rows as a DataFrame.
    :meth:`unpersist` removes the plan file."""

    def __init__(self, spark, store, options: ExportOptions,
                 progress: Callable[[int, int], None] | None = None):
        from amqtool.engines.export.local import LocalArtemisExport
        from amqtool.engines.paging import store_pages

        self.spark = spark
        self.sc = spark.sparkContext
        self.options = options
        self.progress = progress
        self.summary = ExportSummary(ENGINE, "artemis")
        self.summaries = self.sc.accumulator({}, _PerPart())
        self._plan_dir = tempfile.mkdtemp(prefix="amqtool-export-plan-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._plan_dir, True)
        cores = max(1, self.sc.defaultParallelism)
        if self.sc not in _WARMED:  # once per SparkContext: its Python processes then stay up
            _WARMED.add(self.sc)
            threading.Thread(target=_warm_up, args=(spark, self._plan_dir, cores), name="amqtool-spark-warm-up",
                             daemon=True).start()
        large = getattr(store, "large_messages_dir", None)
        large_dir = os.path.abspath(large) if large else None
        journal_items, journal_costs, pages, view, paths = [], [], [], None, {}
        with LocalArtemisExport(store, options) as ex:
            self.summary.bytes_scanned = ex.summary.bytes_scanned
            self._binding_problems = list(ex.summary.problems)  # the bindings' (decoded on the driver)
            self._binding_rows = ex.binding_rows()
            self.bindings = ex.bindings
            if ex.messages_result is not None:  # as the local engine: no message journal, no rows
                paths = {i: os.path.abspath(f.path) for i, f in enumerate(ex.messages_result.files)}
                lb = ex.large
                for mid, rec, refs in ex.message_refs():
                    journal_items.append((mid, rec.file_index, rec.body_offset, rec.body_len, rec.user_record_type,
                                          refs))
                    large = (lb.size(mid) or 0) if rec.user_record_type == 30 else 0  # body: its .msg file
                    journal_costs.append(journal_cost(rec.body_len, len(refs), large))
                view = ex.paging_view()
                pages = store_pages(store)
        jruns, pruns = plan_partitions(journal_costs, _page_costs(pages), cores)
        parts = [JournalPart(i, journal_items[a:b]) for i, (a, b) in enumerate(jruns)]
        parts += _paged_parts(pages, pruns, view, len(parts))
        self.parts = {"journal": len(jruns), "paged": len(pruns)}
        ctx = ReadContext(paths, self.bindings, large_dir, options, store, self.summaries)
        self.plan_path = _write_plan(self._plan_dir, "plan.pickle", ctx, parts)
        self._rows = None

    def unpersist(self) -> None:
        """Remove the plan file (the rows can no longer be read)."""
        self._cleanup()

    def binding_rows(self) -> list[tuple]:
        self.summary.bindings = len(self._binding_rows)
        return self._binding_rows

    def rows_df(self):
        """The export rows (``MESSAGE_COLUMNS``) as a DataFrame: the journal's messages in id order, then the
        paged ones in page order, one Spark partition per part."""
        if self._rows is None:
            self.spark.dataSource.register(ExportSource)
            self._rows = _source_df(self.spark, self.plan_path)
        return self._rows

    def _collect_counts(self) -> None:
        """The summary: the bindings' problems, then each part's counts and problems in part order."""
        s = self.summary
        s.rows = s.messages = s.prepared_rows = 0
        s.rows_by_queue = {}
        s.problems, s.problem_count = list(self._binding_problems), len(self._binding_problems)
        parts = self.summaries.value
        for index in sorted(parts):
            p = parts[index]
            s.rows += p.rows
            s.messages += p.messages
            s.prepared_rows += p.prepared_rows
            for q, n in p.rows_by_queue.items():
                s.rows_by_queue[q] = s.rows_by_queue.get(q, 0) + n
            s.problems += p.problems[:max(0, MAX_PROBLEM_EXAMPLES - len(s.problems))]
            s.problem_count += p.problem_count

    def write_tables(self, out_dir: str, fmt: str) -> None:
        """``messages`` and ``bindings`` tables under ``out_dir`` (``parquet``: messages partitioned by queue;
        ``jsonl``: one JSON object per line, binary as URL-safe base64)."""
        write_frames(self.spark, self.rows_df(), self.binding_rows(), out_dir, fmt, self.progress)
        self._collect_counts()

    def iter_rows_for_xml(self):
        """Rows (tuples in ``MESSAGE_COLUMNS`` order) in the local engine's order, pulled by the driver one
        part at a time."""
        with _Progress(self.sc, self.progress):
            for r in self.rows_df().toLocalIterator(prefetchPartitions=True):
                row = tuple(r)
                if row[12] is not None:
                    row = row[:12] + ([p.asDict() for p in row[12]],) + row[13:]
                yield row
        self._collect_counts()


def write_frames(spark, rows, binding_rows: list[tuple], out_dir: str, fmt: str,
                 progress: Callable[[int, int], None] | None = None) -> None:
    """Write the ``messages`` DataFrame and the bindings under ``out_dir`` as Spark writes the export's
    tables (``parquet``: messages partitioned by queue; ``jsonl``: binary as URL-safe base64 text)."""
    from pyspark.sql import functions as F

    bindings = spark.createDataFrame(arrow_table(binding_rows, BINDING_COLUMNS)).coalesce(1)
    with _Progress(spark.sparkContext, progress):
        if fmt == "parquet":
            # no dictionary encoding: bodies, digests, ids, timestamps and property values are mostly distinct,
            # and trying cost the JVM ~30% of its Parquet writing (measured on the 1 GiB demo store)
            (rows.write.mode("errorifexists").partitionBy("queue").option("parquet.enable.dictionary", "false")
             .parquet(os.path.join(out_dir, "messages")))
            bindings.write.parquet(os.path.join(out_dir, "bindings"))
        else:
            rows = rows.withColumn("body", F.translate(F.base64("body"), "+/", "-_"))
            opts = {"ignoreNullFields": "false", "compression": "none"}
            rows.write.options(**opts).json(os.path.join(out_dir, "messages"))
            bindings.write.options(**opts).json(os.path.join(out_dir, "bindings"))


def arrow_table(rows: list[tuple], columns):
    """``rows`` (tuples in ``columns`` order) as a pyarrow Table: what ``createDataFrame`` takes without
    pickling every row or starting a Python worker."""
    import pyarrow as pa

    from amqtool.engines.export.schema import arrow_schema

    schema = arrow_schema(columns)
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)


class SparkKahaDBExport:
    """A KahaDB store through the Spark engine. The journal replay is sequential by nature (every record's
    effect depends on all before it), so the driver replays it with the KahaDB engine and builds the rows
    (:class:`amqtool.engines.export.kahadb.KahaDBExport`, the local engine's code); Spark distributes them
    and writes the tables. The driver holds the rows of the store until Spark has them."""

    def __init__(self, spark, store, options: ExportOptions, progress: Callable[[int, int], None] | None = None):
        from amqtool.engines.export.kahadb import KahaDBExport

        self.spark = spark
        self.progress = progress
        self.ex = KahaDBExport(store, options, engine=ENGINE)
        self.summary = self.ex.summary
        self._rows = None

    def binding_rows(self) -> list[tuple]:
        return self.ex.binding_rows()

    def rows_df(self):
        """The rows (``MESSAGE_COLUMNS``) as a DataFrame, handed to the JVM as Arrow (a partition per
        ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows)."""
        if self._rows is None:
            self._rows = self.spark.createDataFrame(arrow_table(list(self.ex.rows()), MESSAGE_COLUMNS))
        return self._rows

    def write_tables(self, out_dir: str, fmt: str) -> None:
        write_frames(self.spark, self.rows_df(), self.binding_rows(), out_dir, fmt, self.progress)

    def unpersist(self) -> None:
        pass
