"""A fleet export (:mod:`.fleet`) with Spark: every store's work, its liveness load included, runs in tasks;
the driver only schedules and commits.

The driver knows each store by its survey (:func:`.fleet.survey`: its kind, file count and bytes, found by
listing and ``stat``; no journal is read) and never loads one: its memory holds a few small records per
store and per part, whatever the stores' sizes.

1. **Split or group.** A store's work is about its journal bytes (the local engine's ~25 s a GiB). An
   Artemis store larger than a task's fair share (:func:`fair_share`: the fleet's bytes over
   ``GUIDED_SHARE x cores``, at least ``MIN_GROUP_BYTES``) is *split*; the others are *grouped*, largest
   first, into groups of up to ``MIN_GROUP_BYTES``, so that a task is worth its overhead (a demo store of a
   few MiB exports in ~0.1 s, a Spark task costs a few ms and a Python worker call more) while the tasks
   stay many and small enough for the cores to finish together (groups as large as a fair share, 5 of them
   on 2 cores, left one core a whole group behind: 1.68x from one core to two instead of ~1.9x). KahaDB
   stores are never split (the replay is sequential: each record's effect depends on every record before
   it); a large one is a task of its own.
2. **Plan job** (split stores only; one task each): :func:`~.spark.plan_export` loads the store with the
   local engine's code and cuts its rows' work into guided parts, as the single-store Spark engine does; the
   task writes the store's bindings and pickles the read context and each part into the work directory
   (``plans/<store>/``), and returns only their file names and costs.
3. **Export job**: one Spark partition per group and per part of a split store, largest estimated cost first
   (the longest processing time rule). A group's task exports each of its stores exactly as the local engine
   does (:func:`.fleet.export_store_aside`); a part's task reads its pickled part and writes its rows
   (:func:`~.spark.part_batches`, the store column added). Every task writes under a directory of its own
   attempt and returns a small result per store or part: its summary, or why it failed.
4. **Commit** (driver): the directories of the results it received are moved into the output (the
   FileOutputCommitter's job commit, :func:`~.spark.commit_attempts`), except those of a store whose plan or
   any part failed: that store becomes a ``stores`` row with verdict UNKNOWN and no other row. Failed and
   retried attempts are never committed; their directories go with the work directory.

Paths are absolute, on storage every worker mounts (``file://`` URIs decoded by :func:`.fleet.expand_stores`);
the output's work directory must be on such storage too (it is beside the output).
"""
from __future__ import annotations

import os
import pickle
import shutil
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from amqtool.engines.export.fleet import (
    FleetProgress, FleetStore, StoreOutcome, describe_failure, export_store_aside, is_output_error, message_writer,
    write_bindings, write_store_messages, refused_summary,
)
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.writers import FileMaker
from amqtool.errors import AmqtoolError

# A store's estimated export cost a journal byte, in ns of one core: the local engine's ~25 s a GiB (the unit
# the split parts' costs are estimated in, spark.MESSAGE_NS and the rest).
NS_PER_BYTE = 25.0e9 / 2**30
GUIDED_SHARE = 2
# A group is worth a task from this many bytes of journal (~0.4 s of work).
MIN_GROUP_BYTES = 16 << 20


@dataclass
class SplitSettings:
    """How the fleet's work is cut: ``fair``: a task's fair share of bytes (a larger Artemis store is split);
    ``group_bytes``: what a group of small stores fills up to; ``min_part_cost``: the floor of a split store's
    parts (:func:`~.spark.guided_runs`)."""

    fair: int
    cores: int
    min_part_cost: int | None = None
    group_bytes: int | None = None


def fair_share(stores: list[FleetStore], cores: int) -> int:
    """A task's fair share of the fleet's bytes (see the module docstring)."""
    total = sum(s.bytes for s in stores if s.error is None)
    return max(MIN_GROUP_BYTES, int(total / (GUIDED_SHARE * max(1, cores))))


def split_and_group(stores: list[FleetStore], fair: int,
                    group_bytes: int | None = None) -> tuple[list[FleetStore], list[list[FleetStore]]]:
    """``(split, groups)``: the Artemis stores larger than ``fair``, and the others (that can be exported)
    in groups of up to ``group_bytes`` (default ``MIN_GROUP_BYTES``; first fit, largest first; a larger
    store alone)."""
    group_bytes = MIN_GROUP_BYTES if group_bytes is None else group_bytes
    split = [s for s in stores if s.error is None and s.kind == "artemis" and s.bytes > fair]
    rest = sorted((s for s in stores if s.error is None and s not in split), key=lambda s: (-s.bytes, s.index))
    groups: list[list[FleetStore]] = []
    sizes: list[int] = []
    for s in rest:
        for i, size in enumerate(sizes):
            if size + s.bytes <= group_bytes:
                groups[i].append(s)
                sizes[i] += s.bytes
                break
        else:
            groups.append([s])
            sizes.append(s.bytes)
    return split, groups


# --- what the tasks run ----------------------------------------------------------------------------------


def _attempt_dir(attempts: str) -> str:
    from pyspark import TaskContext

    return os.path.join(attempts, f"attempt-{TaskContext.get().taskAttemptId()}")


def _plan_task(options: ExportOptions, fmt: str, attempts: str, plans: str, file_mode: int, cores: int,
               min_part_cost: int | None):
    """Task function: plan each split store (load, bindings, parts pickled); yields one
    :class:`PlanResult` a store."""

    def run(stores: Iterator[FleetStore]):
        from amqtool.engines.export.spark import ENGINE, plan_export
        from amqtool.store.layout import detect

        attempt = _attempt_dir(attempts)
        for fs in stores:
            started = time.monotonic()
            out = os.path.join(attempt, f"store-{fs.index}")
            try:
                store = detect(fs.path)
                plan = plan_export(store, options, cores, min_part_cost)
                base = ExportSummary(ENGINE, "artemis")
                base.bytes_scanned = plan.bytes_scanned
                for p in plan.binding_problems:
                    base.problem(p.message_id, p.message)
                base.set_bindings(plan.binding_rows)
                base.findings, base.files = plan.findings, plan.files  # verify's, on the load it planned from
                write_bindings(FileMaker(out, file_mode), fmt, fs.name, plan.binding_rows, fs.index)
                where = os.path.join(plans, str(fs.index))
                os.makedirs(where, mode=0o700, exist_ok=True)
                ctx_file = os.path.join(where, f"ctx-{os.getpid()}-{id(plan)}.pickle")
                _dump(plan.ctx, ctx_file)
                parts = []
                for part in plan.parts:
                    f = os.path.join(where, f"part-{part.index}-{os.getpid()}-{id(plan)}.pickle")
                    _dump(part, f)
                    parts.append((part.index, f, part.cost))
                yield PlanResult(fs.index, out, ctx_file, parts, base, None, time.monotonic() - started)
            except Exception as err:  # noqa: BLE001 - a damaged store is a row, not a failed job
                if is_output_error(err):
                    raise
                yield PlanResult(fs.index, out, None, [], refused_summary(err, ENGINE, fs.kind),
                                 describe_failure(err), time.monotonic() - started)

    return run


def _dump(obj, path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)


def _load(path: str):
    with open(path, "rb") as fh:
        return pickle.load(fh)


@dataclass
class PlanResult:
    """What a plan task returns for a split store (small: file names, costs, the bindings' summary)."""

    index: int
    directory: str  # its bindings files, in the task attempt's directory
    ctx_file: str | None
    parts: list[tuple[int, str, int]]  # (part index, pickle file, cost)
    summary: ExportSummary | None  # with an error: the summary of a store refused as CRITICAL, or None
    error: str | None
    seconds: float


@dataclass
class WorkItem:
    """One partition of the export job: a group of whole stores, or one part of a split store."""

    cost: int
    stores: list[FleetStore] | None = None  # a group
    store: FleetStore | None = None  # a part's store
    ctx_file: str | None = None
    part_file: str | None = None
    part_index: int = 0  # within its store
    file_part: int = 0  # the part-NNNNN its files are named by (unique in the dataset)


@dataclass
class WorkResult:
    """What an export task returns for a store of a group, or for a part."""

    index: int  # the store's
    part_index: int | None  # None: a whole store
    directory: str
    summary: ExportSummary | None
    error: str | None
    seconds: float


def _mark_done(progress_dir: str | None, r: "WorkResult", attempt: str) -> None:
    """Tell the driver's :class:`_StoreWatcher` that a store of a group or a part is done: a small file
    ``<store>-<part>.<attempt>`` holding its rows and seconds (written aside, renamed)."""
    if progress_dir is None:
        return
    name = f"{r.index}-{'all' if r.part_index is None else r.part_index}.{attempt}"
    rows = r.summary.rows if r.summary is not None else 0
    tmp = os.path.join(progress_dir, f".{name}")
    try:
        with open(tmp, "w") as fh:
            fh.write(f"{rows} {r.seconds:.3f}\n")
        os.rename(tmp, os.path.join(progress_dir, name))
    except OSError:  # progress must never fail the export
        pass


def _export_task(options: ExportOptions, fmt: str, attempts: str, file_mode: int, progress_dir: str | None = None):
    """Task function: export each work item (see :class:`WorkItem`) into this attempt's directory."""

    def run(items: Iterator[WorkItem]):
        for r in _export_items(items):
            _mark_done(progress_dir, r, os.path.basename(os.path.dirname(r.directory)))
            yield r

    def _export_items(items: Iterator[WorkItem]):
        from amqtool.engines.export.spark import ENGINE, part_batches

        attempt = _attempt_dir(attempts)
        for item in items:
            if item.stores is not None:
                for fs in item.stores:
                    started = time.monotonic()
                    out = os.path.join(attempt, f"store-{fs.index}")
                    summary, error = export_store_aside(fs, options, fmt, out, file_mode, fs.index, engine=ENGINE)
                    yield WorkResult(fs.index, None, out, summary, error, time.monotonic() - started)
                continue
            fs = item.store
            started = time.monotonic()
            out = os.path.join(attempt, f"part-{item.file_part}")
            summary = ExportSummary(ENGINE, "artemis")
            try:
                ctx, part = _load(item.ctx_file), _load(item.part_file)
                writer = message_writer(FileMaker(out, file_mode), fmt, item.file_part)
                write_store_messages(writer, fs.name, part_batches(ctx, part, summary))
                writer.close()
                yield WorkResult(fs.index, item.part_index, out, summary, None, time.monotonic() - started)
            except Exception as err:  # noqa: BLE001
                if is_output_error(err):
                    raise
                yield WorkResult(fs.index, item.part_index, out, None, describe_failure(err),
                                 time.monotonic() - started)

    return run


# --- the driver ----------------------------------------------------------------------------------------------


class _StoreWatcher:
    """Reports each store to ``track`` (:class:`~.fleet.FleetProgress`) as soon as its tasks have done it,
    from the tasks' marker files (:func:`_mark_done`), polled by a daemon thread; :meth:`store_done` reports
    a store now (the driver's, e.g. one that failed before any task), each store once."""

    def __init__(self, directory: str, track: FleetProgress, by_index: dict[int, FleetStore]):
        import threading

        self.directory, self.track, self.by_index = directory, track, by_index
        self.expected: dict[int, int] = {}  # store -> markers that make it done (its parts; 1 for a whole store)
        self.seen: dict[int, dict[str, tuple[int, float]]] = {}
        self.reported: set[int] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        import threading

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



def _run_job(sc, items: list, func, progress) -> list:
    """One partition per item, in the given order; the tasks' results."""
    from amqtool.engines.export.spark import watched_job

    if not items:
        return []
    with watched_job(sc, progress):
        return sc.parallelize(items, len(items)).mapPartitions(func).collect()


def export_fleet_spark(spark, stores: list[FleetStore], options: ExportOptions, fmt: str, target, *,
                       task_progress: Callable[[int, int], None] | None = None,
                       store_progress: Callable[[dict], None] | None = None,
                       settings: SplitSettings | None = None) -> list[StoreOutcome]:
    """Export ``stores`` into ``target`` with Spark (see the module docstring); one outcome per store, in
    their order. ``settings``: how to cut the work (default: :func:`fair_share` of the session's cores)."""
    from amqtool.engines.export.spark import commit_attempts

    sc = spark.sparkContext
    cores = max(1, sc.defaultParallelism)
    settings = settings or SplitSettings(fair_share(stores, cores), cores)
    attempts = str(target.side("task-attempts"))
    plans = str(target.side("plans"))
    marks = str(target.side("progress"))
    for d in (attempts, plans, marks):
        os.makedirs(d, mode=0o700, exist_ok=True)
    split, groups = split_and_group(stores, settings.fair, settings.group_bytes)
    track = FleetProgress(len(stores), sum(s.bytes for s in stores), store_progress)
    by_index = {s.index: s for s in stores}
    watcher = _StoreWatcher(marks, track, by_index)
    errors: dict[int, str] = {s.index: s.error for s in stores if s.error is not None}
    refused: dict[int, ExportSummary] = {}  # stores refused as CRITICAL (fleet.refused_summary)
    for s in stores:
        if s.error is not None:
            watcher.store_done(s.index, 0, 0.0)

    # 2. the plan job: split stores, largest first
    planned = _run_job(sc, sorted(split, key=lambda s: -s.bytes),
                       _plan_task(options, fmt, attempts, plans, target.file_mode, settings.cores,
                                  settings.min_part_cost), task_progress)
    base: dict[int, ExportSummary] = {}
    dirs: dict[int, list[str]] = {}
    seconds: dict[int, float] = {}
    items = [WorkItem(int(sum(s.bytes for s in g) * NS_PER_BYTE), stores=g) for g in groups]
    next_part = len(stores)
    for r in planned:
        seconds[r.index] = r.seconds
        if r.error is not None:
            errors[r.index] = r.error
            if r.summary is not None:
                refused[r.index] = r.summary
            watcher.store_done(r.index, 0, r.seconds)
            continue
        watcher.expected[r.index] = len(r.parts)
        base[r.index] = r.summary
        dirs.setdefault(r.index, []).append(r.directory)
        for part_index, part_file, cost in r.parts:
            items.append(WorkItem(cost, store=by_index[r.index], ctx_file=r.ctx_file, part_file=part_file,
                                  part_index=part_index, file_part=next_part))
            next_part += 1
    expected_parts = {r.index: len(r.parts) for r in planned if r.error is None}

    # 3. the export job: groups and parts, largest first
    items.sort(key=lambda it: -it.cost)
    with watcher:
        results = _run_job(sc, items, _export_task(options, fmt, attempts, target.file_mode, marks), task_progress)
    parts: dict[int, dict[int, ExportSummary]] = {}
    for r in sorted(results, key=lambda r: (r.index, -1 if r.part_index is None else r.part_index)):
        seconds[r.index] = seconds.get(r.index, 0.0) + r.seconds
        if r.error is not None:
            errors.setdefault(r.index, r.error)
            if r.summary is not None and r.part_index is None:
                refused[r.index] = r.summary
            continue
        if r.part_index is None:
            base[r.index] = r.summary
        else:
            parts.setdefault(r.index, {})[r.part_index] = r.summary
        if os.path.isdir(r.directory):
            dirs.setdefault(r.index, []).append(r.directory)

    # 4. commit: every store that exported whole
    outcomes, committed = [], []
    for fs in stores:
        if fs.index in errors:
            outcomes.append(StoreOutcome(fs, refused.get(fs.index), errors[fs.index]))
            watcher.store_done(fs.index, 0, seconds.get(fs.index, 0.0))
            continue
        summary = base[fs.index]
        got = parts.get(fs.index, {})
        if fs.index in expected_parts:
            if len(got) != expected_parts[fs.index]:  # collect() returns every partition's results
                raise AmqtoolError(f"{fs.path}: {expected_parts[fs.index] - len(got)} part result(s) missing")
            for i in sorted(got):
                summary.add(got[i])
        outcomes.append(StoreOutcome(fs, summary))
        committed += dirs.get(fs.index, [])
        watcher.store_done(fs.index, summary.rows, seconds.get(fs.index, 0.0))
    commit_attempts(committed, attempts, str(target.path))
    shutil.rmtree(plans, ignore_errors=True)
    shutil.rmtree(marks, ignore_errors=True)
    return outcomes
