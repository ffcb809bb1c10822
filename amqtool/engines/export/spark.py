"""The Spark export engine: journal files parsed in parallel, liveness resolved with joins, output by Spark.

Pipeline (each step a DataFrame; nothing is collected on the driver but the bindings and the file list):

1. **Files.** The driver orders each journal's files as ``JournalImpl.load`` does (:func:`open_journal`: header
   fileIDs, a committed compaction rolled forward in memory) and ships ``(journal, file_seq, path, ...)`` rows.
2. **Parse** (``mapPartitions`` over the file list): every worker runs
   :func:`amqtool.engines.export.parse.parse_file` on its files - the same parser the local engine uses -
   giving one row per record (``schema.RECORD_COLUMNS``), message bodies left in the files.
3. **Liveness**, the rules of ``JournalImpl.load`` (artemis-journal-format.md §3.2) as joins:

   * transactions: records of one tx id are split into *generations* ended by its COMMIT or ROLLBACK (a
     window sum over scan order), because a holder lives from its first record to its completion;
   * a COMMIT is healthy when its ``numberOfRecords`` equals the number of the generation's ADD_TX/UPDATE_TX/
     DELETE_TX records *in the commit's own file* (the counter resets whenever the transaction moves to
     another file, so that is what it holds at the commit); a PREPARE when it equals those in its file
     *before* it (a running window count); a failed PREPARE makes the transaction invalid;
   * healthy commits put their adds/updates into the live list *at the commit's position* and their
     DELETE_TXs into the delete set; rolled-back, unhealthy and never-completed generations are dropped;
     never-completed generations with a valid PREPARE are the prepared transactions;
   * the live list is the non-transactional ADD/UPDATEs plus committed ones, minus every record whose id is
     in the delete set (``left_anti`` join), ordered by (position or commit position, record position).
4. **Broker state** as ``data exp`` reads it: message records (45/30/31, the last of an id wins), ADD_REFs
   minus ACKNOWLEDGE_REFs per (message, queue) (``left_anti``), last delivery-count and scheduled-delivery
   update per pair (``max`` of a struct led by the live position), prepared ADD_REFs for pairs not live.
5. **Decode** (``mapPartitions`` again, sorted by location): the workers read each surviving message body by
   its location and build rows with :func:`parse.decode_message` / :func:`parse.message_row`.
   **Paged messages** (``data/paging``): one task runs :func:`amqtool.engines.paging.paged_export_rows`, the
   function the local engine calls (it loads the journals' page transactions and cursors itself and reads
   the page files one at a time); its rows are unioned with the journal's.
6. **Write**: Parquet partitioned by queue, or JSON Lines, written by Spark; XML streamed by the driver from
   the journal rows sorted by message id (``toLocalIterator``), then the paged rows in page order.

The session: ``local[*]`` by default, tuned for a small machine (driver memory, few shuffle partitions, no
UI, bound to 127.0.0.1); ``master`` (or ``spark-submit --master``) takes the same job to a cluster, where
every worker must see the store at the same path and have amqtool installed. The JVM's own stdout/stderr
(log4j start-up chatter) go to a log file, never to the user's terminal.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable

from amqtool.engines.export import parse as P
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.schema import (
    BINDING_COLUMNS,
    MESSAGE_COLUMN_NAMES,
    MESSAGE_COLUMNS,
    RECORD_COLUMNS,
    REF_COLUMNS,
    spark_schema,
)
from amqtool.errors import CapabilityError

ENGINE = "spark"
DEFAULT_MASTER = "local[*]"
# Internal ordering columns carried next to the row columns (the first ADD_REF's live position), so the
# driver can list a message's queues in data exp's order; dropped before Parquet/JSON output.
ORDER_COLUMNS = (("_k1", "long", False), ("_k2", "long", False))

DATA_TX = (13, 14, 15)


# --- the session -----------------------------------------------------------------------------------------


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _loopback_master(master: str) -> bool:
    host = master.split("://", 1)[-1].split(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1")


def session_conf(master: str, *, local_dir: str | None = None, cores: int | None = None) -> dict[str, str]:
    """The Spark settings of an export session (see the module docstring)."""
    ncores = cores or os.cpu_count() or 2
    conf = {
        "spark.master": master,
        "spark.app.name": "amqtool-export",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("AMQTOOL_SPARK_DRIVER_MEMORY", "6g"),
        # few, fixed shuffle partitions: the tables of the liveness joins are metadata (tens of bytes a
        # record); adaptive re-planning cost more than it saved on small machines (measured: liveness of a
        # 64 MiB store 20 s -> 13 s on 2 cores with AQE off and 2 partitions)
        "spark.sql.shuffle.partitions": str(max(2, ncores)),
        "spark.default.parallelism": str(max(2, ncores)),
        "spark.sql.adaptive.enabled": "false" if _is_local(master) else "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
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
                for sid in tracker.getActiveStageIds():
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


# --- worker functions (shipped to the executors by cloudpickle) -------------------------------------------


def _parse_partition(check_tag: bool):
    """mapPartitions body: (journal, file_seq, path, file_id, version, tag) -> record tuples."""
    names = [c[0] for c in RECORD_COLUMNS]

    def run(files):
        for journal, seq, path, file_id, version, tag in files:
            cols = P.parse_file(P.read_file(path), journal=journal, file_seq=seq, file_id=file_id, version=version,
                                tag=tag, check_tag=check_tag)
            yield from zip(*(cols[n] for n in names))
    return run


def _decode_partition(paths: dict, queues: dict, large_dir, options: ExportOptions, problems, counts):
    """mapPartitions body: ref rows (``REF_COLUMNS`` + ``_k1``/``_k2``), sorted by message location ->
    export row tuples (``MESSAGE_COLUMNS`` + ``_k1``/``_k2``). Each message body is read and decoded once."""
    def run(refs):
        from pyspark import TaskContext

        from amqtool.errors import FormatError

        pid = TaskContext.get().partitionId()
        local_problems: list = []
        large = P.LargeBodies(large_dir)
        fds: dict[int, int] = {}
        local_counts: dict = {}
        cache_key = cache_msg = counted = None
        try:
            for (fseq, off, ln, utype, mid, qid, dc, sched, state, txid, k1, k2) in refs:
                name, routing = queues.get(qid) or (f"{options.undefined_prefix}{qid}", None)
                if not options.wants(name):
                    continue
                key = (fseq, off)
                if key != cache_key:
                    cache_key = key
                    fd = fds.get(fseq)
                    if fd is None:
                        fd = fds[fseq] = os.open(paths[fseq], os.O_RDONLY | os.O_CLOEXEC)
                    body = os.pread(fd, ln, off)
                    try:
                        cache_msg = P.decode_message(utype, body, message_id=mid, large=large, safe=options.safe)
                    except FormatError as err:
                        cache_msg = None
                        if len(local_problems) < 100:
                            local_problems.append((mid, err.message))
                if cache_msg is None:
                    continue
                row = P.message_row(cache_msg, queue=name, queue_id=qid, routing_type=routing, delivery_count=dc,
                                    scheduled_time=sched, transaction_state=state, transaction_id=txid)
                for k in (("q", name), ("m",) if counted != key else None, ("p",) if state == "prepared" else None):
                    if k is not None:
                        local_counts[k] = local_counts.get(k, 0) + 1
                counted = key
                yield row + (k1, k2)
        finally:
            for fd in fds.values():
                os.close(fd)
            counts.add({pid: local_counts})
            problems.add({pid: local_problems})
    return run


def _paged_partition(store, bindings: P.Bindings, large_dir, options: ExportOptions, problems, counts):
    """mapPartitions body over one element: the store's paged messages as export rows
    (``MESSAGE_COLUMNS`` + ``_k1`` = sequence in ``data exp`` order, ``_k2`` = 0), built by
    :func:`amqtool.engines.paging.paged_export_rows` - the function the local engine calls - so both engines
    give the same paged rows. It loads the journals' page transactions, cursors and counters itself and reads
    the page files one at a time, in the task (not the driver)."""
    def run(_):
        from amqtool.engines.paging import paged_export_rows

        local_problems: list = []
        local_counts: dict = {}

        def problem(mid, msg):
            if len(local_problems) < 100:
                local_problems.append((mid, msg))
            local_counts[("x",)] = local_counts.get(("x",), 0) + 1

        def count_row(queue, state):
            for k in (("q", queue), ("p",) if state == "prepared" else None):
                if k is not None:
                    local_counts[k] = local_counts.get(k, 0) + 1
        last = None
        try:
            rows = paged_export_rows(store, bindings=bindings, large=P.LargeBodies(large_dir), safe=options.safe,
                                     wants=options.wants, problem=problem, count_row=count_row)
            for seq, row in enumerate(rows):
                key = (row[0], row[3], row[18], row[19])  # message id, address, page, position
                if key != last:
                    last = key
                    local_counts[("m",)] = local_counts.get(("m",), 0) + 1
                yield row + (seq, 0)
        finally:
            counts.add({"paged": local_counts})
            problems.add({"paged": local_problems})
    return run


# --- the engine -------------------------------------------------------------------------------------------


def _accumulators(sc):
    from pyspark.accumulators import AccumulatorParam

    class PerPartition(AccumulatorParam):
        """partition index -> that partition's value; a re-evaluated partition (Spark samples before a
        global sort, retries failed tasks) overwrites its earlier value instead of adding to it."""

        def zero(self, value):
            return {}

        def addInPlace(self, a, b):
            a.update(b)
            return a

    return sc.accumulator({}, PerPartition()), sc.accumulator({}, PerPartition())


class SparkArtemisExport:
    """Export an Artemis store with Spark. :meth:`binding_rows` (driver-side list), :meth:`rows_df` (the
    message rows with the internal ordering columns), :meth:`write_table`, :meth:`iter_rows_for_xml`."""

    def __init__(self, spark, store, options: ExportOptions,
                 progress: Callable[[int, int], None] | None = None):
        from amqtool.store.journal_files import open_journal

        self.spark = spark
        self.sc = spark.sparkContext
        self.options = options
        self.progress = progress
        self.summary = ExportSummary(ENGINE, "artemis")
        large = getattr(store, "large_messages_dir", None)
        self.large_dir = os.path.abspath(large) if large else None
        files = []
        self.paths: dict[str, dict[int, str]] = {}
        for jd in store.journals():
            with open_journal(jd) as opened:
                self.summary.bytes_scanned += opened.bytes_total()
                for seq, f in enumerate(opened.files):
                    path = os.path.abspath(f.path)  # workers may run elsewhere: no relative paths
                    files.append((jd.kind, seq, path, f.file_id, f.version, f.tag))
                    self.paths.setdefault(jd.kind, {})[seq] = path
        self.files = files
        self._records = None
        self._live = None
        self._bindings = None
        self._rows = None
        self._paged = None
        self.store = store
        self.problems_acc, self.counts_acc = _accumulators(self.sc)

    # --- step 2: parse ------------------------------------------------------------------------------------

    def unpersist(self) -> None:
        """Drop the cached tables (records, live list)."""
        for df in (self._records, *(self._live or ())):
            if df is not None:
                df.unpersist()

    def records(self):
        """One row per scanned record (``RECORD_COLUMNS``), cached (no message bodies in it)."""
        if self._records is None:
            from pyspark import StorageLevel

            n = max(1, len(self.files))
            rdd = self.sc.parallelize(self.files, min(n, max(self.sc.defaultParallelism * 4, 1)))
            recs = self.spark.createDataFrame(rdd.mapPartitions(_parse_partition(self.options.check_tag)),
                                              spark_schema(RECORD_COLUMNS), verifySchema=False)
            self._records = recs.persist(StorageLevel.MEMORY_AND_DISK)
        return self._records

    # --- step 3: liveness ---------------------------------------------------------------------------------

    def liveness(self):
        """``(live, prepared)``: the committed live list and the records of prepared transactions, each with
        ``k1 = (position or commit position)`` and ``k2 = record position`` (file_seq << 32 | offset)."""
        if self._live is not None:
            return self._live
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        recs = self.records()
        pos = (F.col("file_seq").cast("long") * F.lit(1 << 32) + F.col("offset").cast("long"))
        base = recs.withColumn("k2", pos)

        nontx = (base.filter(F.col("type").isin(11, 12)).withColumn("k1", F.col("k2"))
                 .withColumn("tx_id", F.lit(None).cast("long")))

        txr = base.filter(F.col("type").isin(13, 14, 15, 17, 18, 19))
        terminal = F.col("type").isin(18, 19)
        is_data = F.col("type").isin(*DATA_TX)
        w_gen = (Window.partitionBy("journal", "tx_id").orderBy("file_seq", "offset")
                 .rowsBetween(Window.unboundedPreceding, -1))
        txr = txr.withColumn("gen", F.coalesce(F.sum(F.when(terminal, 1).otherwise(0)).over(w_gen), F.lit(0)))
        w_file = (Window.partitionBy("journal", "tx_id", "gen", "file_seq").orderBy("offset")
                  .rowsBetween(Window.unboundedPreceding, -1))
        txr = txr.withColumn("before_in_file",
                             F.coalesce(F.sum(F.when(is_data, 1).otherwise(0)).over(w_file), F.lit(0)))
        gkeys = ["journal", "tx_id", "gen"]
        groups = txr.groupBy(*gkeys).agg(
            F.max(F.when(terminal, F.col("type"))).alias("term_type"),
            F.max(F.when(terminal, F.col("file_seq"))).alias("term_file"),
            F.max(F.when(terminal, F.col("k2"))).alias("term_k"),
            F.max(F.when(F.col("type") == 18, F.col("number_of_records"))).alias("term_nrec"),
            F.max(F.when(F.col("type") == 17, 1).otherwise(0)).alias("has_prepare"),
            F.max(F.when((F.col("type") == 17) & (F.col("before_in_file") != F.col("number_of_records")), 1)
                  .otherwise(0)).alias("invalid"),
        )
        per_file = (txr.filter(is_data).groupBy(*gkeys, "file_seq").agg(F.count(F.lit(1)).alias("n_in_file"))
                    .withColumnRenamed("file_seq", "term_file"))
        groups = groups.join(per_file, on=[*gkeys, "term_file"], how="left")
        groups = groups.withColumn(
            "outcome",
            F.when((F.col("term_type") == 18) & (F.coalesce(F.col("n_in_file"), F.lit(0)) == F.col("term_nrec")),
                   F.lit("committed"))
            .when(F.col("term_type").isNull() & (F.col("has_prepare") == 1) & (F.col("invalid") == 0),
                  F.lit("prepared"))
            .otherwise(F.lit("dropped")))
        tx_data = (txr.filter(is_data).join(groups.select(*gkeys, "outcome", "term_k"), on=gkeys)
                   .withColumn("k1", F.col("term_k")))
        committed = tx_data.filter(F.col("outcome") == "committed")
        deletes = (base.filter(F.col("type") == 16).select("journal", "record_id")
                   .unionByName(committed.filter(F.col("type") == 15).select("journal", "record_id")))
        cols = ["journal", "record_id", "type", "user_record_type", "compact_count", "file_seq", "offset",
                "body_offset", "body_len", "queue_id", "value", "body", "k1", "k2", "tx_id"]
        entries = nontx.select(*cols).unionByName(committed.filter(F.col("type").isin(13, 14)).select(*cols))
        live = entries.join(deletes.distinct(), on=["journal", "record_id"], how="left_anti")
        live = live.withColumn("is_update", F.col("type").isin(12, 14))
        prepared = tx_data.filter((F.col("outcome") == "prepared") & F.col("type").isin(13, 14)).select(*cols)
        # Materialised once: the broker-state step reads the live list in many branches (messages, refs,
        # acks, counters, bindings), which would each re-run the windows and joins above.
        from pyspark import StorageLevel

        self._live = (live.persist(StorageLevel.MEMORY_AND_DISK), prepared.persist(StorageLevel.MEMORY_AND_DISK))
        return self._live

    def live_records(self) -> list[tuple]:
        """The live list as ``load_journal`` returns it, per journal: ``(journal, id, user_record_type,
        is_update, compact_count, file_index, body_offset, body_len)`` in live order (for verification)."""
        from pyspark.sql import functions as F

        live, _ = self.liveness()
        rows = (live.select("journal", "record_id", "user_record_type", "is_update", "compact_count", "file_seq",
                            "body_offset", "body_len", "k1", "k2")
                .orderBy("journal", "k1", "k2").collect())
        return [tuple(r)[:8] for r in rows]

    def prepared_records(self) -> list[tuple]:
        """``(journal, tx_id, id, user_record_type, is_update, file_index, body_offset)`` of prepared
        transactions' adds/updates, by tx id then position."""
        from pyspark.sql import functions as F

        _, prepared = self.liveness()
        rows = (prepared.select("journal", "tx_id", "record_id", "user_record_type", (F.col("type") == 14),
                                "file_seq", "body_offset", "k2").orderBy("journal", "tx_id", "k2").collect())
        return [tuple(r)[:7] for r in rows]

    # --- step 4: broker state -----------------------------------------------------------------------------

    def bindings(self) -> P.Bindings:
        if self._bindings is None:
            from pyspark.sql import functions as F

            live, _ = self.liveness()
            recs = (live.filter((F.col("journal") == "bindings") & F.col("user_record_type").isin(21, 44))
                    .select("record_id", "user_record_type", "body", "k1", "k2").orderBy("k1", "k2").collect())
            self._bindings = P.Bindings([(r[0], r[1], r[2]) for r in recs], self.options.undefined_prefix)
        return self._bindings

    def binding_rows(self) -> list[tuple]:
        rows = self.bindings().rows()
        self.summary.bindings = len(rows)
        return rows

    def refs(self):
        """One row per live (message, queue) pair with the message record's location (``REF_COLUMNS`` +
        ``_k1``/``_k2``, the first ADD_REF's live position)."""
        from pyspark.sql import functions as F

        live, prepared = self.liveness()
        m_live = live.filter(F.col("journal") == "messages")
        m_prep = prepared.filter(F.col("journal") == "messages")
        msg_types = (30, 31, 45)
        loc = F.struct("k1", "k2", "file_seq", "body_offset", "body_len", "user_record_type")
        msgs_c = (m_live.filter(F.col("user_record_type").isin(*msg_types)).groupBy(F.col("record_id").alias("mid"))
                  .agg(F.max(loc).alias("m")))
        msgs_p = (m_prep.filter(F.col("user_record_type").isin(*msg_types)).groupBy(F.col("record_id").alias("mid"))
                  .agg(F.max(loc).alias("m")).join(msgs_c.select("mid"), on="mid", how="left_anti"))
        msgs_any = msgs_c.unionByName(msgs_p)

        pair = [F.col("record_id").alias("mid"), F.col("queue_id").alias("qid")]
        refs_c = (m_live.filter((F.col("user_record_type") == 32) & F.col("queue_id").isNotNull())
                  .groupBy(*pair).agg(F.min(F.struct("k1", "k2")).alias("first")))
        acks_c = (m_live.filter((F.col("user_record_type") == 33) & F.col("queue_id").isNotNull())
                  .select(*pair).distinct())
        live_c = (refs_c.join(acks_c, on=["mid", "qid"], how="left_anti")
                  .withColumn("state", F.lit("committed")).withColumn("txid", F.lit(None).cast("long"))
                  .join(msgs_c, on="mid"))
        refs_p = (m_prep.filter((F.col("user_record_type") == 32) & F.col("queue_id").isNotNull())
                  .groupBy(*pair).agg(F.min(F.struct("k1", "k2", "tx_id")).alias("first"))
                  .join(live_c.select("mid", "qid"), on=["mid", "qid"], how="left_anti")
                  .withColumn("state", F.lit("prepared")).withColumn("txid", F.col("first.tx_id"))
                  .withColumn("first", F.struct("first.k1", "first.k2"))
                  .join(msgs_any, on="mid"))
        pairs = live_c.unionByName(refs_p)

        def last_value(utype: int, name: str):
            return (m_live.filter((F.col("user_record_type") == utype) & F.col("queue_id").isNotNull())
                    .groupBy(*pair).agg(F.max(F.struct("k1", "k2", "value")).alias("v"))
                    .select("mid", "qid", F.col("v.value").alias(name)))

        pairs = (pairs.join(last_value(34, "dc"), on=["mid", "qid"], how="left")
                 .join(last_value(36, "sched"), on=["mid", "qid"], how="left"))
        return pairs.select(
            F.col("m.file_seq").alias("file_seq"), F.col("m.body_offset").alias("body_offset"),
            F.col("m.body_len").alias("body_len"), F.col("m.user_record_type").alias("user_record_type"),
            F.col("mid").alias("message_id"), F.col("qid").alias("queue_id"),
            F.coalesce(F.col("dc").cast("int"), F.lit(0)).alias("delivery_count"),
            F.col("sched").alias("scheduled_time"), F.col("state").alias("transaction_state"),
            F.col("txid").alias("transaction_id"), F.col("first.k1").alias("_k1"), F.col("first.k2").alias("_k2"))

    # --- step 5: decode -----------------------------------------------------------------------------------

    def rows_df(self):
        """The export rows (``MESSAGE_COLUMNS`` + ``_k1``, ``_k2``) as a DataFrame: the journal's messages and
        the paged ones."""
        return self.journal_rows_df().unionByName(self.paged_df())

    def paged_df(self):
        """The paged messages' rows (``_k1``: their order in ``data exp``), computed by one task."""
        if self._paged is None:
            fn = _paged_partition(self.store, self.bindings(), self.large_dir, self.options, self.problems_acc,
                                  self.counts_acc)
            self._paged = self.spark.createDataFrame(self.sc.parallelize([0], 1).mapPartitions(fn),
                                                     spark_schema(MESSAGE_COLUMNS + ORDER_COLUMNS), verifySchema=False)
        return self._paged

    def journal_rows_df(self):
        """The journal's message rows (``MESSAGE_COLUMNS`` + ``_k1``, ``_k2``)."""
        if self._rows is None:
            refs = self.refs()
            n = self.spark.conf.get("spark.sql.shuffle.partitions")
            refs = refs.repartition(int(n), "file_seq").sortWithinPartitions("file_seq", "body_offset")
            fn = _decode_partition(self.paths.get("messages", {}), self.bindings().queue_map(), self.large_dir,
                                   self.options, self.problems_acc, self.counts_acc)
            self._rows = self.spark.createDataFrame(refs.rdd.map(tuple).mapPartitions(fn),
                                                    spark_schema(MESSAGE_COLUMNS + ORDER_COLUMNS), verifySchema=False)
        return self._rows

    def _collect_counts(self) -> None:
        total: dict = {}
        for part in self.counts_acc.value.values():
            for key, n in part.items():
                total[key] = total.get(key, 0) + n
        s = self.summary
        s.rows = s.messages = s.prepared_rows = 0
        s.rows_by_queue = {}
        s.problems, s.problem_count = [], 0
        for rid, msg in self.bindings().problems:
            s.problem(rid, f"binding record does not decode: {msg}")
        for key, n in sorted(total.items()):
            if key[0] == "x":  # paged problems beyond the examples kept
                continue
            if key[0] == "q":
                self.summary.rows_by_queue[key[1]] = n
                self.summary.rows += n
            elif key[0] == "m":
                self.summary.messages += n
            elif key[0] == "p":
                self.summary.prepared_rows += n
        for part in self.problems_acc.value.values():
            for mid, msg in part:
                self.summary.problem(mid, msg)
        extra = total.get(("x",), 0) - len(self.problems_acc.value.get("paged", ()))
        self.summary.problem_count += max(0, extra)

    # --- step 6: write ------------------------------------------------------------------------------------

    def write_tables(self, out_dir: str, fmt: str) -> None:
        """``messages`` and ``bindings`` tables under ``out_dir`` (``parquet``: messages partitioned by queue;
        ``jsonl``: one JSON object per line, binary as URL-safe base64)."""
        write_frames(self.spark, self.rows_df().drop("_k1", "_k2"), self.binding_rows(), out_dir, fmt, self.progress)
        self._collect_counts()

    def iter_rows_for_xml(self):
        """Rows (tuples in ``MESSAGE_COLUMNS`` order) sorted by message id, each message's queues in data
        exp's order: the driver pulls them one partition at a time."""
        ordered = self.journal_rows_df().orderBy("message_id", "_k1", "_k2")
        names = MESSAGE_COLUMN_NAMES
        group: list[tuple] = []
        keys: list[int] = []
        current = None
        with _Progress(self.sc, self.progress):
            for r in ordered.toLocalIterator(prefetchPartitions=True):
                row = tuple(r[n] for n in names)
                props = row[12]
                if props is not None:
                    row = row[:12] + ([p.asDict() for p in props],) + row[13:]
                if row[0] != current:
                    yield from _xml_group(group, keys)
                    group, keys, current = [], [], row[0]
                group.append(row)
                keys.append(row[2])
            yield from _xml_group(group, keys)
            # then the paged messages, store by store and page by page, as data exp writes them (§6.2)
            for r in self.paged_df().orderBy("_k1").toLocalIterator():
                row = tuple(r[n] for n in names)
                if row[12] is not None:
                    row = row[:12] + ([p.asDict() for p in row[12]],) + row[13:]
                yield row
        self._collect_counts()


def write_frames(spark, rows, binding_rows: list[tuple], out_dir: str, fmt: str,
                 progress: Callable[[int, int], None] | None = None) -> None:
    """Write the ``messages`` DataFrame and the bindings under ``out_dir`` as Spark writes the export's
    tables (``parquet``: messages partitioned by queue; ``jsonl``: binary as URL-safe base64 text)."""
    from pyspark.sql import functions as F

    bindings = spark.createDataFrame(binding_rows, spark_schema(BINDING_COLUMNS)).coalesce(1)
    with _Progress(spark.sparkContext, progress):
        if fmt == "parquet":
            rows.write.mode("errorifexists").partitionBy("queue").parquet(os.path.join(out_dir, "messages"))
            bindings.write.parquet(os.path.join(out_dir, "bindings"))
        else:
            rows = rows.withColumn("body", F.translate(F.base64("body"), "+/", "-_"))
            opts = {"ignoreNullFields": "false", "compression": "none"}
            rows.write.options(**opts).json(os.path.join(out_dir, "messages"))
            bindings.write.options(**opts).json(os.path.join(out_dir, "bindings"))


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
        """The rows (``MESSAGE_COLUMNS``) as a DataFrame, spread over the default parallelism."""
        if self._rows is None:
            sc = self.spark.sparkContext
            rows = list(self.ex.rows())
            self._rows = self.spark.createDataFrame(sc.parallelize(rows, max(1, min(len(rows), sc.defaultParallelism))),
                                                    spark_schema(MESSAGE_COLUMNS), verifySchema=False)
        return self._rows

    def write_tables(self, out_dir: str, fmt: str) -> None:
        write_frames(self.spark, self.rows_df(), self.binding_rows(), out_dir, fmt, self.progress)

    def unpersist(self) -> None:
        pass


def _xml_group(group: list[tuple], qids: list[int]):
    if not group:
        return
    by_q = {}
    for row in group:
        by_q.setdefault((row[2], row[22]), row)
    committed = [q for q, row in zip(qids, group) if row[22] == "committed"]
    for q in P.xml_queue_order(committed):
        yield by_q[(q, "committed")]
    for row in group:
        if row[22] != "committed":
            yield row
