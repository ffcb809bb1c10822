"""What the Spark engine's jobs share: the session (its driver JVM's lifetime), the watch over a job (progress,
a job without executors cancelled, a failure in one line), the job commit, and an Artemis store's plan.

Where the work is. An export's bulk work is reading and decoding message bodies: Python decoding
(:func:`parse.decode_message`) cost ~100-150 us a message (the C columns now take a few), while the liveness
of a 1 GiB journal costs ~2 s (the C loader, then the broker state). The first Spark engine parsed every
journal record into a Python Row in the workers and resolved liveness with DataFrame joins: 5x the local
engine. So liveness is computed once per store by the local engine's own code (memory in proportion to the
live records, as there), and what Spark distributes is the work that costs: bodies, decoding and writing.
Both the data source (:mod:`.datasource`) and ``export --engine spark`` (:mod:`.spark_export`, on the data
source's partitions and reader) run the plan below in their tasks; the driver never loads a store.

**The plan** (:func:`plan_export`, in a task). :class:`~amqtool.engines.export.local.LocalArtemisExport`
loads the journals exactly as the local engine does and lists every journal message with rows
(:meth:`~amqtool.engines.export.local.LocalArtemisExport.message_refs`: its record's location and its rows'
queue, state, transaction, delivery count and scheduled time) in message-id order; for the paged messages,
the journals' paging facts (:class:`~amqtool.engines.artemis.paging.PagingJournalView`, from the same load)
and the store's pages (:func:`~amqtool.engines.artemis.paging.store_pages`). The plan is cut into
:class:`JournalPart` runs of messages and :class:`PagedPart` runs of whole pages (each with only the cursor
acks and page-complete records of its own pages); the data source cuts them into the slices of a store's
Spark partitions (:func:`.datasource.slice_cut`). :func:`part_batches` reads a part's bodies (by their
locations) or walks its pages and decodes them with the local engine's own record batches (the C decoder);
:func:`part_rows` gives row tuples (the XML document). Rows and order are the local engine's: the parts in
message-id order, then the pages in exploring order.

**The commit** (:func:`commit_attempts`): tasks write under a directory of their own attempt; the driver
moves the files of the attempts whose results it received into the output tree, as Hadoop's
FileOutputCommitter does, and discards the others (failed or retried attempts). :func:`write_parts` and
:func:`write_rdd_parts` are that for the database stores' rows (:mod:`.jdbc`: rows made on the driver, or
read by Spark's JDBC source).

The session: ``local[*]`` by default, tuned for a small machine (driver memory, no UI, bound to
127.0.0.1, the JVM's C1 compiler only: the JVM only schedules tasks whose rows never enter it);
``master`` (or ``spark-submit --master``) takes the same job to a cluster, where every worker must see the
stores and the output directory at the same paths (shared storage) and have amqtool (or get it shipped:
:mod:`.ship`). The JVM's own stdout/stderr (log4j start-up chatter) go to a log file, never to the user's
terminal.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.schema import MESSAGE_COLUMNS
from amqtool.engines.export.writers import FileMaker, table_writer
from amqtool.errors import AmqtoolError, CapabilityError
from amqtool.gcpause import gc_paused

ENGINE = "spark"
DEFAULT_MASTER = "local[*]"

# Planning: parts are sized by estimated cost, in nanoseconds of one core. Measured in the tasks on the 1 GiB
# demo store (2 cores): a journal message (3.2 KB body, 1.2 rows) and a paged one (1.3 KB, 1.5 rows) cost
# about the same, decoding and writing together; so mostly a fixed cost a message, plus one a row and a
# little a body byte (read, hashed, copied, compressed).
MESSAGE_NS = 200_000
ROW_NS = 50_000
BYTE_NS = 5
# Guided parts (as OpenMP's guided schedule): each part takes 1/(GUIDED_SHARE x cores) of the work not yet
# in a part, so the parts shrink as the plan goes on, never below MIN_PART_COST (a part's own cost, a task
# and a file a queue, is a few ms) nor above MAX_PART_COST (what a retried task redoes, and its part's
# memory). Started largest first (write_parts), the last to start are the shortest and the cores finish
# within one small part of each other: with parts of equal size (2 s each on the 1 GiB demo store) one
# core sat idle for up to a whole part at the end.
GUIDED_SHARE = 2
MIN_PART_COST = 250_000_000
MAX_PART_COST = 60_000_000_000


# --- the session -----------------------------------------------------------------------------------------


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _loopback_master(master: str) -> bool:
    host = master.split("://", 1)[-1].split(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1")


def session_conf(master: str, *, local_dir: str | None = None, jars: list[str] | None = None) -> dict[str, str]:
    """The Spark settings of an export session (see the module docstring). No shuffle or SQL settings: the
    export has no shuffle and no DataFrame (the driver plans, each task reads its own part and writes it)."""
    conf = {
        "spark.master": master,
        "spark.app.name": "amqtool-export",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("AMQTOOL_SPARK_DRIVER_MEMORY", "6g"),
        "spark.python.worker.faulthandler.enabled": "true",  # a crashed task worker's traceback in the log
        "spark.python.worker.reuse": "true",
        # the tasks' Python: PYSPARK_PYTHON when the user names one (workers with amqtool elsewhere), else this
        # one; a shipped environment replaces it (ship.ship_conf)
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON") or sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    if _is_local(master):
        # The JVM only schedules the tasks and passes their parts to Python; it lives for one export, and
        # its C2 JIT compiler would spend seconds of CPU on start-up code it never runs again (measured when
        # the JVM still converted and wrote the rows: 13 s of compiler threads, gone with C1 only).
        conf["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1"
    if _is_local(master) or _loopback_master(master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if local_dir:
        os.makedirs(local_dir, mode=0o700, exist_ok=True)
        conf["spark.local.dir"] = local_dir
    if jars:  # JDBC drivers for the database stores' JDBC source
        conf["spark.jars"] = ",".join(jars)
    return conf


# --- the driver JVM's lifetime ----------------------------------------------------------------------------
#
# pyspark starts the driver JVM (spark-submit, then java) as a child that is meant to exit when its stdin
# pipe from Python closes. That does not hold while the JVM is still starting: a SIGTERM 1-1.4 s into an
# export left a -Xmx6g JVM running under init, which went on to recreate spark.local.dir after amqtool had
# removed it. So the JVM is started in a process group of its own whose leader is a tiny watchdog process:
# the watchdog blocks on a pipe from amqtool and, when that pipe closes (amqtool exits, however: normally,
# on an error, on SIGTERM, on SIGKILL, or kill_driver_jvm closes it as soon as the session ends, before the
# export's work directory is removed), it SIGKILLs every other member of its group, again and again until
# none is left, and only then exits. A single killpg was not enough: a child that joins the group a moment
# later (a process forked before the kill whose setpgid comes after it: the group lives on while its dead
# leader waits to be reaped) escaped it, and ~1 trial in 55 of tests/cli/test_export_spark_kill.py found
# the JVM running under init. While the watchdog lives, the group does, and whoever joins it is killed;
# once it has exited and been reaped, nothing can join it any more.

_WATCHDOG = (
    "import os, signal, sys, time\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
    "while sys.stdin.buffer.read(4096): pass\n"
    "me = os.getpid()\n"
    "def members():\n"
    "    out = []\n"
    "    for p in os.listdir('/proc'):\n"
    "        if not p.isdigit() or int(p) == me: continue\n"
    "        try:\n"
    "            with open('/proc/' + p + '/stat', 'rb') as fh: f = fh.read().rsplit(b')', 1)[1].split()\n"
    "        except OSError: continue\n"
    "        if int(f[2]) == me and f[0] != b'Z': out.append(int(p))\n"
    "    return out\n"
    "quiet, deadline = 0, time.monotonic() + 60\n"
    "while quiet < 3 and time.monotonic() < deadline:\n"
    "    left = members()\n"
    "    for p in left:\n"
    "        try: os.kill(p, signal.SIGKILL)\n"
    "        except OSError: pass\n"
    "    quiet = 0 if left else quiet + 1\n"
    "    time.sleep(0.02)\n"
)


class DriverJvm:
    """The watchdog and process group the driver JVM is started in (see above)."""

    def __init__(self):
        import subprocess

        # A group of its own in this session (a JVM can only join a group of its own session).
        self.watchdog = subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0,
                                         close_fds=True)
        self.pgid = self.watchdog.pid

    def popen_kwargs(self) -> dict:
        return {"process_group": self.pgid}

    def kill(self) -> None:
        """SIGKILL the JVM and every other process of its group; returns once the watchdog has seen the group
        empty (a member killed but not yet reaped by its parent, a zombie, counts as gone) and exited."""
        import signal
        import subprocess

        try:
            self.watchdog.stdin.close()
        except OSError:
            pass
        try:
            self.watchdog.wait(timeout=90)
        except subprocess.TimeoutExpired:  # the watchdog itself stuck: the group as it is, leader and all
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.watchdog.wait()


_driver: DriverJvm | None = None


def kill_driver_jvm() -> None:
    """End the driver JVM that :func:`get_session` started (and its watchdog), if any: after ``stop()``, or
    instead of it when the export was interrupted. Safe to call more than once."""
    global _driver
    drv, _driver = _driver, None
    if drv is not None:
        drv.kill()
        _forget_gateway()


def _forget_gateway() -> None:
    """pyspark keeps the dead gateway as its class state: forget it, so a later session starts a new JVM."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def _launch_gateway(conf: dict) -> bool:
    """pyspark's own ``launch_gateway`` with the JVM in :class:`DriverJvm`'s process group; the gateway is
    handed to SparkContext before the session is built, so the builder uses this JVM. False when a gateway
    (a JVM) is already there: it is used as it is."""
    global _driver
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return False
    _driver = DriverJvm()
    sconf = SparkConf(loadDefaults=False)
    for k, v in conf.items():
        sconf.set(k, v)
    gateway = launch_gateway(sconf, popen_kwargs=_driver.popen_kwargs())
    SparkContext._ensure_initialized(gateway=gateway, conf=sconf)
    return True


class _DropPy4jRecords:
    """py4j reports an interrupted call with ``logging.exception`` on the root logger ("KeyboardInterrupt
    while sending command", a traceback on stderr with no handler set): amqtool says "interrupted" itself."""

    def filter(self, record) -> bool:
        return "py4j" not in (record.pathname or "")


_PY4J_FILTER = _DropPy4jRecords()


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


def get_session(master: str | None = None, *, log_path: str | None = None, local_dir: str | None = None,
                jars: list[str] | None = None, ship: bool | None = None, status: Callable[[str], None] | None = None):
    """A SparkSession for the export (an active one is reused, as under spark-submit). ``jars``: added to the
    session's class path (``spark.jars``), e.g. a JDBC driver. ``ship``: pack this environment for the workers
    (:mod:`.ship`; by default for a cluster master, never for ``local``). ``status``: told which archive is
    shipped and what the cache's pruning removed."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as err:  # pragma: no cover - pyspark is a dependency
        raise CapabilityError(f"the Spark engine needs pyspark: {err}") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or os.environ.get("MASTER") or DEFAULT_MASTER
    if _is_local(master) or _loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver and block manager bind loopback only
    conf = session_conf(master, local_dir=local_dir, jars=jars)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from amqtool.engines.export.ship import pack_environment, ship_conf, shipped_python, wants_ship

    if wants_ship(master, ship):
        conf.update(ship_conf(pack_environment(status=status)))
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    import logging

    logging.getLogger().addFilter(_PY4J_FILTER)
    launching = SparkContext._gateway is None
    try:
        with _jvm_output_to(log_path), shipped_python(conf):
            _launch_gateway(conf)
            spark = builder.getOrCreate()
        spark._amqtool_owns_jvm = launching  # stop_session ends the JVM only when this call started it
    except BaseException as err:  # JVM missing, master unreachable, interrupted while it starts...
        if launching:
            kill_driver_jvm()
        if not isinstance(err, Exception):
            raise
        where = f" (see {log_path})" if log_path else ""
        raise CapabilityError(f"cannot start Spark with master {master}: {str(err).splitlines()[0]}{where}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_session(spark, *, interrupted: bool = False) -> None:
    """End a session :func:`get_session` started: ``stop()`` (skipped when the export was interrupted: the
    JVM may be in any state and a py4j call could hang), then, when that call launched the driver JVM, the
    JVM killed for certain, so that none outlives amqtool or writes into a work directory removed after
    this. A JVM that was already there (a test process's shared one) is left to its owner."""
    try:
        if not interrupted:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - a JVM already gone: it is killed below all the same
                pass
    finally:
        if getattr(spark, "_amqtool_owns_jvm", False):
            kill_driver_jvm()


# A job that has had no executor for this long while it has work is cancelled (a standalone cluster whose
# workers died waits for new ones forever, silently: "Lost executor" only reaches Spark's log).
NO_EXECUTOR_SECONDS = float(os.environ.get("AMQTOOL_SPARK_NO_EXECUTOR_SECONDS", "30"))


def _executors(sc) -> int | None:
    """The executors the driver has now (the driver's own entry left out), or None in local mode (the
    driver runs the tasks) and when the JVM cannot say."""
    if _is_local(sc.master):
        return None
    try:
        return len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1
    except Exception:  # noqa: BLE001
        return None


class _Progress:
    """Watches a job from a daemon thread, every half second: reports (completed tasks, total tasks) of its
    running stages to ``callback`` (Spark's status tracker), and cancels the job when it has had work but no
    executor for ``no_executor_seconds`` (:attr:`cause` then says why, for :func:`_task_errors`)."""

    def __init__(self, sc, callback: Callable[[int, int], None] | None, no_executor_seconds: float | None = None):
        self.sc = sc
        self.callback = callback
        self.no_executor_seconds = NO_EXECUTOR_SECONDS if no_executor_seconds is None else no_executor_seconds
        self.cause: str | None = None
        self._stop = threading.Event()
        self._thread = None
        self._alone_since: float | None = None

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, name="amqtool-spark-progress", daemon=True)
        self._thread.start()
        return self

    def _run(self):
        tracker = self.sc.statusTracker()
        while not self._stop.wait(0.5):
            try:
                self.poll(tracker)
            except Exception:  # noqa: BLE001 - watching must never break the export
                pass

    def poll(self, tracker, now: float | None = None) -> None:
        import time

        done = total = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        if total and self.callback is not None:
            self.callback(done, total)
        now = time.monotonic() if now is None else now
        if total > done and _executors(self.sc) == 0:
            if self._alone_since is None:
                self._alone_since = now
            elif now - self._alone_since >= self.no_executor_seconds and self.cause is None:
                self.cause = (f"Spark has had no executor for {self.no_executor_seconds:.0f} s with tasks to run "
                              f"(its workers were lost, or none has the resources the job asks); job cancelled")
                self.sc.cancelAllJobs()
        else:
            self._alone_since = None

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)


@contextmanager
def watched_job(sc, progress: Callable[[int, int], None] | None = None):
    """Run a Spark job under :class:`_Progress` and :func:`_task_errors`: progress reported, a job left
    without executors cancelled, and a failure told in one line."""
    with _Progress(sc, progress) as watch, _task_errors(watch):
        yield watch


# --- the plan --------------------------------------------------------------------------------------------


class JournalPart:
    """A run of journal messages in message-id order: ``(message id, file index, body offset, body length,
    user record type, refs)`` each, ``refs`` as :meth:`LocalArtemisExport.message_refs` gives them.
    ``cost``: the estimate it was cut by (every part has one)."""

    def __init__(self, index: int, messages: list[tuple], cost: int = 0):
        self.index = index
        self.messages = messages
        self.cost = cost


class PagedPart:
    """A run of whole pages in exploring order (``(PageStore, page id)``, each PageStore trimmed to the
    run's pages) and the paging facts they need: the journals' view with only these pages' cursor acks and
    page-complete records."""

    def __init__(self, index: int, pages: list[tuple], view, cost: int = 0):
        self.index = index
        self.pages = pages
        self.view = view
        self.cost = cost


class RowsPart:
    """Rows already made (KahaDB: the driver's journal replay builds them), written by a task as any part."""

    def __init__(self, index: int, rows: list[tuple], cost: int = 0):
        self.index = index
        self.rows = rows
        self.cost = cost


@dataclass
class ReadContext:
    """What every part's task needs besides its part: the message journal's files (absolute paths by file
    index), the bindings, where large-message bodies are, the options and the store."""

    paths: dict[int, str]
    bindings: object  # parse.Bindings
    large_dir: str | None
    options: ExportOptions
    store: object


def guided_runs(costs: list[int], cores: int, remaining: int | None = None,
                min_cost: int | None = None) -> list[tuple[int, int]]:
    """``[start, end)`` runs of consecutive items, each about ``remaining / (GUIDED_SHARE * cores)`` of the cost
    still unassigned (within ``MIN_PART_COST`` and ``MAX_PART_COST``): large runs first, smaller and smaller
    after. ``remaining``: the work still to assign, these items included (default: their sum); ``min_cost``:
    the floor instead of ``MIN_PART_COST``."""
    n = len(costs)
    floor = MIN_PART_COST if min_cost is None else min_cost
    remaining = sum(costs) if remaining is None else remaining
    runs, start = [], 0
    while start < n:
        target = min(MAX_PART_COST, max(floor, remaining / (GUIDED_SHARE * max(1, cores))))
        acc, end = 0, start
        while end < n and (end == start or acc < target):
            acc += costs[end]
            end += 1
        runs.append((start, end))
        remaining -= acc
        start = end
    return runs


def plan_partitions(journal_costs: list[int], page_costs: list[int], cores: int,
                    min_cost: int | None = None) -> tuple[list, list]:
    """The runs of journal messages and of pages the parts take (:func:`guided_runs`, the journal's first:
    the pages' runs are the plan's last and smallest)."""
    return (guided_runs(journal_costs, cores, sum(journal_costs) + sum(page_costs), min_cost),
            guided_runs(page_costs, cores, min_cost=min_cost))


def journal_cost(body_len: int, rows: int, large_size: int = 0) -> int:
    """Estimated cost of a journal message (see :data:`MESSAGE_NS`)."""
    return MESSAGE_NS + ROW_NS * rows + BYTE_NS * (body_len + large_size)


def _page_costs(pages: list[tuple]) -> list[int]:
    """Estimated cost of each page: its messages, estimated from its size and the average record size of the
    first page of its store (framed in C, not decoded), with a row each, and its bytes."""
    from amqtool.engines.artemis.paging import PageFile, page_framing

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
    """A :class:`~amqtool.engines.artemis.paging.PagingJournalView`'s cursor acks and page-complete records indexed
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
        from amqtool.engines.artemis.paging import PagingJournalView

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


def _paged_parts(pages: list[tuple], costs: list[int], runs: list[tuple[int, int]], view,
                 first_index: int) -> list[PagedPart]:
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
        parts.append(PagedPart(first_index + i, run, by_page.slice({pid for _, pid in run}), sum(costs[a:b])))
    return parts


def task_failure(text: str) -> str:
    """The exception line of the last Python traceback in a Spark error's text (what the task raised: the
    frames, Spark's wrapping and the JVM's stack are left out); else the reason Spark aborted the job for
    (``most recent failure: ...``: a lost executor, a task killed); else the text's first line."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Traceback (most recent call last):"]
    if starts:
        for line in lines[starts[-1] + 1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    for line in lines:
        if "most recent failure:" in line:
            return line.split("most recent failure:", 1)[1].strip()
    # A failure inside the JVM (Spark's JDBC source: the database refused or dropped the connection): the
    # innermost "Caused by:" that carries a message says what happened; py4j's first line ("An error
    # occurred while calling o64.load.") does not.
    causes = [line.strip()[len("Caused by: "):] for line in lines if line.strip().startswith("Caused by: ")]
    causes = [c for c in causes if ": " in c] or causes
    if causes:
        return causes[-1].strip()
    for line in lines[1:]:
        line = line.strip().lstrip(": ")
        cls, sep, msg = line.partition(": ")
        if sep and msg and "." in cls and cls.endswith(("Exception", "Error")) and " " not in cls:
            return line
    for line in lines:
        if "Job aborted" in line or "SparkException:" in line:
            return line.strip()
    return lines[0].strip() if lines else "unknown error"


@contextmanager
def _task_errors(watch: "_Progress | None" = None):
    """A failed Spark job becomes one line (an :class:`AmqtoolError`, exit 3): the cause the ``watch`` found
    (a job without executors), else the exception the failing task raised, not the pages of Python and JVM
    stack pyspark reports."""
    try:
        yield
    except AmqtoolError:
        raise
    except Exception as err:
        if not type(err).__module__.startswith(("pyspark", "py4j")):
            raise
        if watch is not None and watch.cause is not None:
            raise AmqtoolError(watch.cause) from None
        line = task_failure(str(err))
        cause = _java_root_cause(err)
        if cause and cause not in line:
            line = f"{line}; cause: {cause}"
        raise AmqtoolError(f"a Spark task failed: {line}") from None


def _java_root_cause(err) -> str | None:
    """The innermost cause of the JVM exception behind a pyspark/py4j error ("org.postgresql.util.
    PSQLException: Connection to 127.0.0.1:5432 refused. ..."), first line; None when there is none or the
    JVM cannot be asked. Spark's own error classes ([FAILED_JDBC.CONNECTION] ...) say what failed, not why."""
    java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
    try:
        depth = 0
        while java is not None and depth < 32:
            nxt = java.getCause()
            if nxt is None:
                break
            java, depth = nxt, depth + 1
        text = str(java.toString()) if java is not None and depth else None
    except Exception:  # noqa: BLE001 - the JVM is gone or the object is not a Java throwable
        return None
    return text.strip().splitlines()[0] if text and text.strip() else None


# --- what Spark tasks run --------------------------------------------------------------------------------


def part_rows(ctx: ReadContext | None, part, summary: ExportSummary, pread: Callable = os.pread) -> Iterator[tuple]:
    """The rows of one part (``MESSAGE_COLUMNS`` tuples, in the local engine's order), counted in
    ``summary`` as the local engine counts them (a :class:`RowsPart` was counted where it was made)."""
    from amqtool.engines.export.local import message_rows
    from amqtool.engines.export.parse import LargeBodies

    if isinstance(part, RowsPart):
        yield from part.rows
        return
    yield from message_rows(part_messages(ctx, part, summary, pread), large=LargeBodies(ctx.large_dir),
                            safe=ctx.options.safe, summary=summary)


def part_messages(ctx: ReadContext, part, summary: ExportSummary, pread: Callable = os.pread) -> Iterator[tuple]:
    """The messages of a journal or paged part as ``(user record type, body, message id, rows, where)``
    (:class:`~amqtool.engines.export.columns.MessageBatch`'s input), in the local engine's order; pages that
    end in damage are problems in ``summary``. ``pread``: how a journal body is read (the data source counts
    the bytes)."""
    from amqtool.engines.artemis.paging import paged_export_messages
    from amqtool.engines.export.columns import row

    opts = ctx.options
    if isinstance(part, PagedPart):
        yield from paged_export_messages(ctx.store, bindings=ctx.bindings, wants=opts.wants, view=part.view,
                                         pages=part.pages, problem=summary.problem)
        return
    b = ctx.bindings
    fds: dict[int, int] = {}
    try:
        for mid, fi, off, length, utype, refs in part.messages:
            body = b""
            if length:
                fd = fds.get(fi)
                if fd is None:
                    fd = fds[fi] = os.open(ctx.paths[fi], os.O_RDONLY | os.O_CLOEXEC)
                body = pread(fd, length, off)
            rows = [row(b.queue_name(q), q, b.routing_type(q), delivery_count=dc, scheduled_time=sched,
                        transaction_state=state, transaction_id=tx) for q, state, tx, dc, sched in refs]
            yield utype, body, mid, rows, ""
    finally:
        for fd in fds.values():
            os.close(fd)


def part_batches(ctx: ReadContext | None, part, summary: ExportSummary, pread: Callable = os.pread) -> Iterator:
    """The rows of one part as Arrow record batches (the local engine's :func:`~.local.message_batches`),
    counted in ``summary``; a :class:`RowsPart`'s rows as they are (counted where it was made)."""
    from amqtool.engines.export.local import message_batches
    from amqtool.engines.export.parse import LargeBodies

    if isinstance(part, RowsPart):
        yield from part.rows
        return
    yield from message_batches(part_messages(ctx, part, summary, pread), safe=ctx.options.safe,
                               large=LargeBodies(ctx.large_dir), summary=summary)


def _write_task(ctx: ReadContext | None, fmt: str, attempts: str, file_mode: int):
    """Task function (``mapPartitions``): each part's rows written as ``messages`` table files
    (``part-<part index>``) under a directory of this task attempt's own, ``attempts/attempt-<id>``; yields
    ``(part index, that directory, the part's summary)`` for the driver to commit."""

    def run(parts):
        from pyspark import TaskContext

        attempt = os.path.join(attempts, f"attempt-{TaskContext.get().taskAttemptId()}")
        files = FileMaker(attempt, file_mode)
        for part in parts:
            summary = ExportSummary(ENGINE, "artemis")
            writer = table_writer(files, fmt, "messages", MESSAGE_COLUMNS, partition_by="queue", part=part.index,
                                  write_empty=False)
            for item in part_batches(ctx, part, summary):
                if isinstance(item, tuple):
                    writer.write(item)  # a RowsPart's row
                else:
                    writer.write_batch(item)
            writer.close()
            yield part.index, attempt, summary

    return run


def _rdd_write_task(make_rows: Callable, fmt: str, attempts: str, file_mode: int):
    """Task function (``mapPartitionsWithIndex``): ``make_rows(index, rows, summary)`` yields the partition's
    export rows, streamed into its part's writer as :func:`_write_task` writes a part (no list of them)."""

    def run(index, it):
        from pyspark import TaskContext

        summary = ExportSummary(ENGINE, "jdbc")
        attempt = os.path.join(attempts, f"attempt-{TaskContext.get().taskAttemptId()}")
        writer = table_writer(FileMaker(attempt, file_mode), fmt, "messages", MESSAGE_COLUMNS, partition_by="queue",
                              part=index, write_empty=False)
        for row in make_rows(index, it, summary):
            writer.write(row)
        writer.close()
        yield index, attempt, summary

    return run


def write_rdd_parts(rdd, make_rows: Callable, target, fmt: str,
                    progress: Callable[[int, int], None] | None = None) -> dict[int, ExportSummary]:
    """As :func:`write_parts`, for an RDD whose partitions are the parts (a JDBC source's ranges): each task
    turns its partition into rows with ``make_rows`` and writes them as ``part-<partition index>``; the
    driver commits the attempts whose results it received."""
    attempts = str(target.side("task-attempts"))
    os.makedirs(attempts, mode=0o700, exist_ok=True)
    with watched_job(rdd.context, progress):
        results = rdd.mapPartitionsWithIndex(_rdd_write_task(make_rows, fmt, attempts, target.file_mode)).collect()
    commit_attempts([a for _, a, _ in sorted(results)], attempts, str(target.path))
    if not os.path.isdir(os.path.join(target.path, "messages")):
        table_writer(target, fmt, "messages", MESSAGE_COLUMNS, partition_by="queue").close()  # empty table
    return {index: summary for index, _, summary in results}


def write_parts(sc, parts: list, ctx: ReadContext | None, target, fmt: str,
                progress: Callable[[int, int], None] | None = None) -> dict[int, ExportSummary]:
    """Write the ``messages`` table of ``parts`` into ``target`` (an :class:`~.writers.OutputTarget`) in Spark
    tasks, a part per task, and commit it: the files of the task attempts whose results came back are
    renamed into ``target.path``, every other attempt's are removed (a failed or retried task leaves no
    file behind, none twice). The bindings table is the driver's (a few rows an address and a queue). Returns each
    part's summary by part index."""
    attempts = str(target.side("task-attempts"))
    os.makedirs(attempts, mode=0o700, exist_ok=True)
    results = []
    if parts:
        # one part a Spark partition; tasks start in partition order, so the largest first (the longest
        # processing time rule): the last to start are the shortest, and the cores finish close together
        parts = sorted(parts, key=lambda p: -p.cost)
        with watched_job(sc, progress):
            rdd = sc.parallelize(parts, len(parts))
            results = rdd.mapPartitions(_write_task(ctx, fmt, attempts, target.file_mode)).collect()
    commit_attempts([a for _, a, _ in sorted(results)], attempts, str(target.path))
    if not os.path.isdir(os.path.join(target.path, "messages")):
        table_writer(target, fmt, "messages", MESSAGE_COLUMNS, partition_by="queue").close()  # empty table
    return {index: summary for index, _, summary in results}


def commit_attempts(committed: list[str], attempts: str, out: str) -> None:
    """The job commit: move the files of the ``committed`` attempt directories (those whose results the
    driver received, one per part) into the tree ``out``, then remove ``attempts`` with every other attempt
    in it. Part files are named by part index, so no two committed attempts hold the same name; a name
    already in ``out`` is an error, never overwritten. A directory ``out`` does not have yet (a store's or a
    queue's partition the first attempt brings) is renamed in whole, not made again and filled file by file:
    a fleet's tree has hundreds of them."""
    for attempt in dict.fromkeys(committed):
        for dirpath, dirs, names in os.walk(attempt):
            dest = os.path.join(out, os.path.relpath(dirpath, attempt))
            os.makedirs(dest, exist_ok=True)
            for d in list(dirs):
                target = os.path.join(dest, d)
                if not os.path.lexists(target):
                    os.rename(os.path.join(dirpath, d), target)
                    dirs.remove(d)  # moved with everything in it
            for n in names:
                src, dst = os.path.join(dirpath, n), os.path.join(dest, n)
                os.link(src, dst)  # fails if dst exists
                os.unlink(src)
    shutil.rmtree(attempts)


# --- the engine (driver) ----------------------------------------------------------------------------------


@dataclass
class ExportPlan:
    """What the driver works out before any task runs (:func:`plan_export`): the parts, what their tasks
    share (``ctx``), and the bindings' rows and problems (decoded on the driver)."""

    ctx: ReadContext
    parts: list
    journal_parts: int
    paged_parts: int
    binding_rows: list[tuple]
    binding_problems: list
    bytes_scanned: int
    findings: list = field(default_factory=list)  # verify's, on the load planned from (engines.verdicts)
    files: int | None = None  # journal files read


def plan_export(store, options: ExportOptions, cores: int, min_cost: int | None = None,
                cut: Callable[[list[int], list[int]], tuple[list, list]] | None = None) -> ExportPlan:
    """Load an Artemis store with the local engine's code and cut its rows' work into parts for ``cores``
    (step 1 of the module docstring; ``min_cost``: see :func:`guided_runs`). A fleet export runs this in a
    Spark task (:mod:`.fleet_spark`). ``cut(journal costs, page costs)``: the runs of journal messages and of
    pages instead of :func:`plan_partitions`' (the data source cuts a store into a number of slices known
    before its load)."""
    from amqtool.engines.export.local import LocalArtemisExport
    from amqtool.engines.artemis.paging import store_pages

    large = getattr(store, "large_messages_dir", None)
    large_dir = os.path.abspath(large) if large else None
    journal_items, journal_costs, pages, view, paths = [], [], [], None, {}
    with gc_paused(), LocalArtemisExport(store, options) as ex:  # the plan is acyclic: see amqtool.gcpause
        bytes_scanned = ex.summary.bytes_scanned
        findings, files = ex.summary.findings, ex.summary.files
        binding_problems = list(ex.summary.problems)
        binding_rows = ex.binding_rows()
        bindings = ex.bindings
        if ex.messages_result is not None:  # as the local engine: no message journal, no rows
            paths = {i: os.path.abspath(f.path) for i, f in enumerate(ex.messages_result.files)}
            lb = ex.large
            for mid, rec, refs in ex.message_refs():
                journal_items.append((mid, rec.file_index, rec.body_offset, rec.body_len, rec.user_record_type, refs))
                large = (lb.size(mid) or 0) if rec.user_record_type == 30 else 0  # body: its .msg file
                journal_costs.append(journal_cost(rec.body_len, len(refs), large))
            view = ex.paging_view()
            pages = store_pages(store)
    page_costs = _page_costs(pages)
    jruns, pruns = (cut(journal_costs, page_costs) if cut is not None
                    else plan_partitions(journal_costs, page_costs, cores, min_cost))
    parts = [JournalPart(i, journal_items[a:b], sum(journal_costs[a:b])) for i, (a, b) in enumerate(jruns)]
    parts += _paged_parts(pages, page_costs, pruns, view, len(parts))
    return ExportPlan(ReadContext(paths, bindings, large_dir, options, store), parts, len(jruns), len(pruns),
                      binding_rows, binding_problems, bytes_scanned, findings, files)
