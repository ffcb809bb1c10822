"""``export --engine spark``, of one store or a fleet: the data source's partitions, read by the data source's
reader code in Spark tasks, written by those tasks with amqtool's own table writers, committed by the driver.

One read path. The driver surveys the stores (:func:`.fleet.survey`: listing, ``stat``, the node id; no
journal is read) and cuts them into the data source's partitions (:func:`.datasource.plan_partitions`: a
large Artemis store into ``n`` slices, the others grouped). A task reads its slices and stores exactly as
``spark.read.format("amqtool")`` does (:func:`.datasource._open_store` and the source classes of
:data:`.datasource.STORE_SOURCES`: the store's load and liveness run in the task, a worker's plan kept for its
next slice of the same store), and writes the rows it reads, as Arrow batches from the C column decoder, with
:func:`~.writers.table_writer` into a directory of its own task attempt (``store-<index>-<slice>``); slice 0
of a store also writes its bindings (and a Classic store's subscriptions) and brings back the store's base
summary (verify's findings on the load, the bindings' problems). Every task returns one small
:class:`SliceResult` a slice: its counts and problems, or why it failed. The driver adds a store's slices up
in order (so the counts, problems and rows are the local engine's), and commits (:func:`.spark.commit_attempts`)
the attempts of every store whose slices all came back; a store one of whose slices failed becomes a
``stores`` row with verdict UNKNOWN (CRITICAL when verify refused it) and leaves no other row (fleet), or
fails the export with its own error and exit code (one store). The XML document (one Artemis store) is pulled
by the driver slice by slice, in order (:class:`XmlRows`).

Why amqtool's writers in the tasks and not Spark's DataFrame writer
(``spark.read.format("amqtool").load(...).write.parquet(...)``): the export's guarantees would not hold.

* Modes and durability: Spark writes through Hadoop's local file system, which creates files with the
  process's umask (0644) beside ``.crc`` checksum files and a ``_SUCCESS`` marker, and closes them without
  ``fsync``; the export's files are 0600 (or ``--mode``) from their creation and each is fsynced when its
  writer closes it (:class:`~.writers.DurableFile`).
* A fleet store that fails halfway (damaged, vanished, refused by verify) must leave no row at all: the rows
  a DataFrame job has handed to Spark's writer cannot be taken back, the job commits every task's files.
* The summary document needs each store's counts, problems and verdict: a DataFrame write brings nothing back
  but rows written, so a second read of every store would be needed for them.
* Cost: Arrow batches turned into JVM rows and written by the JVM's Parquet writer (~18 s of JVM CPU on the
  1 GiB demo store, measured with the first engines) against pyarrow's writer in the task that made the rows.

The atomic output (work directory, rename), modes and abort are :class:`~.writers.OutputTarget`'s, as for
the local engine.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from amqtool.engines.export.fleet import (
    FleetProgress, FleetStore, StoreOutcome, describe_failure, is_output_error, message_writer, refused_summary,
    with_store_column, write_bindings, write_subscriptions,
)
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.schema import BINDING_COLUMNS, MESSAGE_COLUMNS
from amqtool.engines.export.writers import FileMaker, table_writer, write_subscription_table, write_table
from amqtool.errors import AmqtoolError

ENGINE = "spark"
# A store's slices: about 1/(SHARE x cores) of the stores' bytes each, within [MIN_SLICE_BYTES,
# MAX_SLICE_BYTES]: enough slices for the cores to finish close together, none so small that the load of
# the store (once per worker that reads a slice of it) outweighs it.
SHARE = 2
MIN_SLICE_BYTES = 16 << 20
MAX_SLICE_BYTES = 128 << 20


def slice_bytes(stores: list[FleetStore], cores: int) -> int:
    """The journal bytes of a slice for ``stores`` on ``cores`` (see :data:`SHARE`)."""
    total = sum(s.bytes for s in stores if s.error is None)
    return max(MIN_SLICE_BYTES, min(MAX_SLICE_BYTES, total // (SHARE * max(1, cores))))


def plan(stores: list[FleetStore], cores: int) -> list:
    """The data source's partitions of ``stores`` (those that can be exported) for ``cores``."""
    from amqtool.engines.export.datasource import ReadSettings, plan_partitions

    ok = [s for s in stores if s.error is None]
    if not ok:
        return []
    return plan_partitions(ok, ReadSettings(paths=(), slice_bytes=slice_bytes(stores, cores)))


# --- what the tasks run ------------------------------------------------------------------------------------


@dataclass
class SliceResult:
    """What a task returns for slice ``k`` of ``n`` of a store (``n`` = 1: the whole store)."""

    index: int  # the store's
    k: int
    n: int
    directory: str  # its files, in the task attempt's directory
    summary: ExportSummary | None  # with an error: a store refused as CRITICAL (fleet.refused_summary), or None
    error: str | None
    seconds: float
    failure: AmqtoolError | None = None  # a single store's export: the error to raise as it is


def _attempt_dir(attempts: str) -> str:
    from pyspark import TaskContext

    return os.path.join(attempts, f"attempt-{TaskContext.get().taskAttemptId()}")


def export_slice(fs: FleetStore, k: int, n: int, options: ExportOptions, fmt: str, files, fleet: bool,
                 part: int) -> ExportSummary:
    """Slice ``k`` of ``n`` of the store ``fs`` read by the data source's reader and written through ``files``
    (a :class:`~.writers.FileMaker`): its ``messages`` rows (files ``part-<part>``, a number no other slice's
    files in the dataset have), and, for slice 0, its ``bindings`` and ``subscriptions`` (``part-<store
    index>``); the tables of a fleet (``store`` column first) or of a single store. Returns the slice's
    summary (slice 0: the store's base, see :meth:`.datasource.ArtemisSource.export_base`)."""
    from amqtool.engines.export.datasource import READ, _open_store

    source, store = _open_store(fs)
    src = source(store, options)
    try:
        if k == 0:
            bindings, summary = src.export_base(n)
        else:
            summary = ExportSummary(ENGINE, fs.kind or "")
        writer = (message_writer(files, fmt, part) if fleet else
                  table_writer(files, fmt, "messages", MESSAGE_COLUMNS, partition_by="queue", part=part,
                               write_empty=False))
        try:
            for batch in src.message_batches(k, n, READ, summary):
                writer.write_batch(with_store_column(fs.name, batch) if fleet else batch)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        if k == 0:
            subscriptions = src.subscription_rows()
            if fleet:
                write_bindings(files, fmt, fs.name, bindings, fs.index)
                write_subscriptions(files, fmt, fs.name, subscriptions, fs.index, summary)
            else:
                write_table(files, fmt, "bindings", BINDING_COLUMNS, bindings)
                write_subscription_table(files, fmt, subscriptions, summary)
    finally:
        src.close()
    return summary


def _write_task(options: ExportOptions, fmt: str, attempts: str, file_mode: int, fleet: bool,
                marks: str | None, numbers: dict[tuple[int, int], int]):
    """Task function (``mapPartitions`` over the data source's partitions): each slice or store written into
    this attempt's directory; one :class:`SliceResult` each. ``numbers``: a sliced store's (index, slice) ->
    the number of its files (a whole store's files are numbered by its index)."""

    def run(partitions):
        attempt = _attempt_dir(attempts)
        for partition in partitions:
            for fs in partition.stores:
                r = _write_one(fs, partition.k, partition.n, attempt)
                _mark_done(marks, r, os.path.basename(attempt))
                yield r

    def _write_one(fs: FleetStore, k: int, n: int, attempt: str) -> SliceResult:
        started = time.monotonic()
        out = os.path.join(attempt, f"store-{fs.index}-{k}")
        try:
            summary = export_slice(fs, k, n, options, fmt, FileMaker(out, file_mode), fleet,
                                   numbers.get((fs.index, k), fs.index))
            return SliceResult(fs.index, k, n, out, summary, None, time.monotonic() - started)
        except Exception as err:  # noqa: BLE001 - a store that cannot be exported is a row (fleet)
            shutil.rmtree(out, ignore_errors=True)
            if is_output_error(err):
                raise
            if not fleet:
                if not isinstance(err, AmqtoolError):
                    raise  # fails the task, then the job: one line (spark._task_errors)
                return SliceResult(fs.index, k, n, out, None, describe_failure(err), time.monotonic() - started, err)
            return SliceResult(fs.index, k, n, out, refused_summary(err, ENGINE, fs.kind), describe_failure(err),
                               time.monotonic() - started)

    return run


def _mark_done(marks: str | None, r: SliceResult, attempt: str) -> None:
    """Tell the driver's :class:`_StoreWatcher` that a slice is done: a small file ``<store>-<k>.<attempt>``
    holding its rows and seconds (written aside, renamed)."""
    if marks is None:
        return
    name = f"{r.index}-{r.k}.{attempt}"
    rows = r.summary.rows if r.summary is not None and r.error is None else 0
    tmp = os.path.join(marks, f".{name}")
    try:
        with open(tmp, "w") as fh:
            fh.write(f"{rows} {r.seconds:.3f}\n")
        os.rename(tmp, os.path.join(marks, name))
    except OSError:  # progress must never fail the export
        pass


class _StoreWatcher:
    """Reports each store to ``track`` (:class:`~.fleet.FleetProgress`) as soon as the tasks have done all its
    slices, from their marker files (:func:`_mark_done`), polled by a daemon thread; :meth:`store_done`
    reports a store now (the driver's: one that failed, or at the end), each store once."""

    def __init__(self, directory: str, track: FleetProgress, by_index: dict[int, FleetStore]):
        self.directory, self.track, self.by_index = directory, track, by_index
        self.expected: dict[int, int] = {}  # store -> its slices (default 1)
        self.seen: dict[int, dict[str, tuple[int, float]]] = {}
        self.reported: set[int] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.track.callback is not None:
            self._thread = threading.Thread(target=self._run, name="amqtool-fleet-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)

    def _run(self):
        while not self._stop.wait(0.5):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - progress must never break the export
                pass

    def poll(self) -> None:
        for name in os.listdir(self.directory):
            if name.startswith("."):
                continue
            key, _attempt = name.rsplit(".", 1)
            index, part = key.split("-", 1)
            index = int(index)
            with self.lock:
                got = self.seen.setdefault(index, {})
                if part in got or index in self.reported:
                    continue
                try:
                    with open(os.path.join(self.directory, name)) as fh:
                        rows, seconds = fh.read().split()
                except (OSError, ValueError):
                    continue
                got[part] = (int(rows), float(seconds))
                if len(got) >= self.expected.get(index, 1):
                    self._report(index, sum(r for r, _ in got.values()), sum(t for _, t in got.values()))

    def _report(self, index: int, rows: int, seconds: float) -> None:
        self.reported.add(index)
        self.track.store_done(self.by_index[index], rows, seconds)

    def store_done(self, index: int, rows: int, seconds: float) -> None:
        with self.lock:
            if index not in self.reported:
                self._report(index, rows, seconds)


# --- the driver ----------------------------------------------------------------------------------------------


def run_job(sc, partitions: list, func, progress) -> list:
    """One Spark partition per data source partition, in the given order; the tasks' results."""
    from amqtool.engines.export.spark import watched_job

    if not partitions:
        return []
    with watched_job(sc, progress):
        return sc.parallelize(partitions, len(partitions)).mapPartitions(func).collect()


def _cost(partition) -> int:
    return sum(s.bytes for s in partition.stores) // max(1, partition.n)


def export_stores(spark, stores: list[FleetStore], options: ExportOptions, fmt: str, target, *, fleet: bool = True,
                  task_progress: Callable[[int, int], None] | None = None,
                  store_progress: Callable[[dict], None] | None = None) -> list[StoreOutcome]:
    """Export ``stores`` (surveyed and named) into ``target`` (an :class:`~.writers.OutputTarget` being
    written) with Spark, as the module docstring says; one outcome per store, in their order. ``fleet``:
    the fleet's tables (``store`` column first), else one store's (its failure is raised, not a row)."""
    from amqtool.engines.export.spark import commit_attempts

    sc = spark.sparkContext
    attempts = str(target.side("task-attempts"))
    marks = str(target.side("progress")) if fleet else None
    for d in filter(None, (attempts, marks)):
        os.makedirs(d, mode=0o700, exist_ok=True)
    partitions = plan(stores, max(1, sc.defaultParallelism))
    # file numbers: a whole store's is its index; slices take the numbers after every store's (JSON Lines
    # tables are not partitioned by store: names must not meet across stores)
    numbers: dict[tuple[int, int], int] = {}
    for p in partitions:
        for s in p.stores:
            if p.n > 1:
                numbers[(s.index, p.k)] = len(numbers) + (len(stores) if fleet else 0)
    partitions.sort(key=lambda p: -_cost(p))  # largest first (the longest processing time rule)
    track = FleetProgress(len(stores), sum(s.bytes for s in stores), store_progress)
    by_index = {s.index: s for s in stores}
    watcher = _StoreWatcher(marks or attempts, track, by_index)
    for p in partitions:
        for s in p.stores:
            watcher.expected[s.index] = p.n
    with watcher:
        results = run_job(sc, partitions, _write_task(options, fmt, attempts, target.file_mode, fleet, marks,
                                                      numbers), task_progress)
    slices: dict[int, dict[int, SliceResult]] = {}
    for r in results:
        slices.setdefault(r.index, {})[r.k] = r
    outcomes, committed = [], []
    for fs in stores:
        got = slices.get(fs.index, {})
        seconds = sum(r.seconds for r in got.values())
        failed = [got[k] for k in sorted(got) if got[k].error is not None]
        if fs.error is not None or failed:
            if failed and failed[0].failure is not None:
                raise failed[0].failure
            outcomes.append(StoreOutcome(fs, failed[0].summary if failed else None,
                                         failed[0].error if failed else fs.error))
            watcher.store_done(fs.index, 0, seconds)
            continue
        n = watcher.expected.get(fs.index, 1)
        if sorted(got) != list(range(n)):  # collect() returns every partition's results
            raise AmqtoolError(f"{fs.path}: {n - len(got)} slice result(s) missing")
        summary = got[0].summary
        for k in range(1, n):
            summary.add(got[k].summary)
        outcomes.append(StoreOutcome(fs, summary))
        committed += [got[k].directory for k in range(n) if os.path.isdir(got[k].directory)]
        watcher.store_done(fs.index, summary.rows, seconds)
    commit_attempts(committed, attempts, str(target.path))
    if marks:
        shutil.rmtree(marks, ignore_errors=True)
    return outcomes


def single_store(store, path: str) -> FleetStore:
    """The one store of a single-store export as the engine plans it (surveyed from the store the driver
    detected, which the tasks use as it is)."""
    from amqtool.engines.export import store_file_sizes

    sizes = store_file_sizes(store)
    return FleetStore(0, os.path.abspath(path), name=os.path.basename(os.path.abspath(path)), kind=store.kind,
                      files=len(sizes), bytes=sum(sizes), detected=store)


def export_store(spark, store, path: str, options: ExportOptions, fmt: str, target,
                 progress: Callable[[int, int], None] | None = None) -> ExportSummary:
    """One store's ``messages``, ``bindings`` and ``subscriptions`` tables into ``target`` (see
    :func:`export_stores`); returns its summary, or raises what the store's reading raised."""
    (outcome,) = export_stores(spark, [single_store(store, path)], options, fmt, target, fleet=False,
                               task_progress=progress)
    if outcome.summary is None:  # (a failure is raised above; this is a store without a summary at all)
        raise AmqtoolError(outcome.error or "the store could not be exported", path=path)
    if not os.path.isdir(os.path.join(target.path, "messages")):
        table_writer(target, fmt, "messages", MESSAGE_COLUMNS, partition_by="queue").close()  # empty table
    return outcome.summary


# --- the XML document (one Artemis store) ----------------------------------------------------------------------


class _Bindings:
    """A slice 0's first item: the store's binding rows and base summary."""

    def __init__(self, rows: list[tuple], summary: ExportSummary):
        self.rows, self.summary = rows, summary


class _Failure:
    """A store that could not be read: the error to raise on the driver as it is."""

    def __init__(self, error: AmqtoolError):
        self.error = error


def _rows_task(options: ExportOptions):
    """Task function: each slice's rows as tuples (slice 0's binding rows first), then its summary."""

    def run(partitions):
        from amqtool.engines.export.datasource import READ, _open_store

        for partition in partitions:
            for fs in partition.stores:
                k, n = partition.k, partition.n
                try:
                    source, store = _open_store(fs)
                    src = source(store, options)
                    try:
                        if k == 0:
                            bindings, summary = src.export_base(n)
                            yield _Bindings(bindings, summary)
                        else:
                            summary = ExportSummary(ENGINE, "artemis")
                        yield from src.message_rows(k, n, READ, summary)
                    finally:
                        src.close()
                except AmqtoolError as err:
                    yield _Failure(err)
                    return
                yield summary

    return run


class XmlRows:
    """The rows of one Artemis store for its XML document, in the local engine's order, pulled by the driver
    one slice at a time (``toLocalIterator``): :meth:`binding_rows` first, then :meth:`rows`; :attr:`summary`
    once they are all read."""

    def __init__(self, spark, store, path: str, options: ExportOptions,
                 progress: Callable[[int, int], None] | None = None):
        fs = single_store(store, path)
        self.sc = spark.sparkContext
        self.partitions = plan([fs], max(1, self.sc.defaultParallelism))  # in slice order: rows in order
        self.options = options
        self.progress = progress
        self.summary = ExportSummary(ENGINE, "artemis")
        self._items = self._pull()
        self._first = None

    def _pull(self) -> Iterator:
        from amqtool.engines.export.spark import watched_job

        rdd = self.sc.parallelize(self.partitions, len(self.partitions))
        with watched_job(self.sc, self.progress):
            for item in rdd.mapPartitions(_rows_task(self.options)).toLocalIterator(prefetchPartitions=True):
                if isinstance(item, _Failure):
                    raise item.error
                yield item

    def binding_rows(self) -> list[tuple]:
        first = next(self._items)
        assert isinstance(first, _Bindings), "slice 0 comes first"
        self.summary = first.summary
        return first.rows

    def rows(self) -> Iterator[tuple]:
        first = True
        for item in self._items:
            if isinstance(item, ExportSummary):
                if first:  # slice 0's: the base, its own rows counted in
                    self.summary, first = item, False
                else:
                    self.summary.add(item)
            else:
                yield item
