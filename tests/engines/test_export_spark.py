"""The Spark export engine (the data source's partitions and reader, written in the tasks) against the local
engine: on every fixture, the built store and a demo store, its rows (in the local engine's order), tables,
XML and counts equal the local engine's, however the store is cut into slices; and the planner's cutting
itself. One SparkSession (local[2]) serves the whole module."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.model import ExportOptions
from amqtool.errors import AmqtoolError
from amqtool.store.layout import detect
from tests.engines.export_store import normalise, read_jsonl_table, read_parquet_table
from tests.engines.export_store import demo, store  # noqa: F401 - fixtures
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from amqtool.engines.export.spark import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log_path=str(log))
    yield session
    session.stop()


def spark_export(spark, path, **opts):
    from amqtool.engines.export.spark_export import XmlRows

    # salvage: the engines are compared on every store, CRITICAL ones too (the built store is, on purpose)
    return XmlRows(spark, detect(path), str(path), ExportOptions(salvage=True, **opts))


def _fixture_stores() -> dict[str, Path]:
    """Every Artemis fixture: the oracle journals (a journal directory each) and the public broker stores."""
    out = {s: ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({p.parent.relative_to(p.parents[3]).as_posix(): p.parent for p in PUBLIC_JOURNALS})
    return out


def _local_export(path, **opts):
    from amqtool.engines.export.local import LocalArtemisExport

    with LocalArtemisExport(detect(path), ExportOptions(salvage=True, **opts)) as ex:
        bindings = ex.binding_rows()
        return bindings, list(ex.rows()), ex.summary


def _spark_rows(ex) -> list[tuple]:
    """The rows as the XML path pulls them: in the slices' order, as tuples (properties as dicts)."""
    return list(ex.rows())


def _same_summary(got, want) -> None:
    a, b = got.to_json(), want.to_json()
    assert (a.pop("engine"), b.pop("engine")) == ("spark", "local")
    assert a == b


def test_rows_equal_local_engine_on_every_fixture(spark):
    stores = _fixture_stores()
    assert len(stores) >= 20
    bindings_seen = 0
    for name, path in stores.items():
        bindings, rows, summary = _local_export(path)
        ex = spark_export(spark, path)
        assert ex.binding_rows() == bindings, name
        assert _spark_rows(ex) == rows, name
        _same_summary(ex.summary, summary)
        bindings_seen += len(bindings)
    assert bindings_seen > 100  # the public stores' addresses and queues


@pytest.mark.parametrize("opts", [{}, {"safe": True, "queues": ("telemetry.*", "orders")}])
def test_rows_in_order_however_the_store_is_sliced(spark, demo, monkeypatch, opts):
    """Many small slices (each task loads the store and reads its own runs of messages and pages, each run
    with only its pages' cursor acks): the same rows in the same order as the local engine, the same counts."""
    from amqtool.engines.export import spark_export as E

    bindings, rows, summary = _local_export(demo, **opts)
    assert any(r[17] for r in rows) and any(not r[17] for r in rows)  # paged and journal rows
    for size in (1 << 20, E.MIN_SLICE_BYTES):
        monkeypatch.setattr(E, "MIN_SLICE_BYTES", size)
        ex = spark_export(spark, demo, **opts)
        if size == 1 << 20:  # a slice a MiB of journal: several slices, journal and paged rows in them
            assert len(ex.partitions) >= 4 and {p.n for p in ex.partitions} == {len(ex.partitions)}
        else:  # by default this small store is one partition
            assert [(p.k, p.n) for p in ex.partitions] == [(0, 1)]
        assert ex.binding_rows() == bindings
        assert _spark_rows(ex) == rows
        _same_summary(ex.summary, summary)


def test_task_failure_is_the_tasks_exception_line():
    from amqtool.engines.export.spark import task_failure

    jvm = ("An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: Job aborted\n"
           "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
           '  File "x.py", line 1, in run\n    raise ValueError(1)\nKeyError: 1\n\nDuring handling of the above '
           "exception, another exception occurred:\n\nTraceback (most recent call last):\n"
           '  File "x.py", line 3, in run\namqtool.errors.FormatError: file "a.amq" at offset 8: bad\n'
           "\tat org.apache.spark.api.python.BasePythonRunner.read(PythonRunner.scala:1)\n")
    assert task_failure(jvm) == 'amqtool.errors.FormatError: file "a.amq" at offset 8: bad'
    assert task_failure("Job aborted: no traceback\nmore") == "Job aborted: no traceback"
    assert task_failure("") == "unknown error"


def test_guided_runs_and_plan_partitions(monkeypatch):
    from amqtool.engines.export import spark as S

    second = 1_000_000_000
    monkeypatch.setattr(S, "MIN_PART_COST", second)
    costs = [second] * 40  # 40 s of work for 2 cores: parts of 1/4 of what is left, never below 1 s
    runs = S.guided_runs(costs, cores=2)
    assert runs[0][0] == 0 and runs[-1][1] == len(costs) and all(a < b for a, b in runs)
    assert all(r[1] == n[0] for r, n in zip(runs, runs[1:]))
    sizes = [b - a for a, b in runs]
    assert sizes == [10, 8, 6, 4, 3, 3, 2, 1, 1, 1, 1]  # 40/4, 30/4, 22/4, ... then the 1 s floor
    assert S.guided_runs(costs, cores=1)[0] == (0, 20) and S.guided_runs(costs, cores=8)[0] == (0, 3)
    assert S.guided_runs([], 4) == [] and S.guided_runs([3], 4) == [(0, 1)]
    monkeypatch.setattr(S, "MAX_PART_COST", 3 * second)
    assert max(b - a for a, b in S.guided_runs(costs, cores=1)) == 3  # a ceiling on a part's work
    monkeypatch.setattr(S, "MAX_PART_COST", 60 * second)
    # the journal's runs are sized by all the work left (pages included), the pages' runs come last
    jr, pr = S.plan_partitions([second] * 30, [second] * 10, cores=2)
    assert jr[0] == (0, 10) and pr[0] == (0, 3) and pr[-1][1] == 10
    assert S.plan_partitions([1] * 30, [1] * 3, cores=2) == ([(0, 30)], [(0, 3)])  # tiny: one of each kind
    assert S.plan_partitions([], [], cores=2) == ([], [])


@pytest.mark.parametrize("opts", [{}, {"safe": True, "queues": ("events.*", "Undefined*")}])
def test_rows_equal_local_engine(spark, store, opts):
    ex = spark_export(spark, store, **opts)
    bindings, rows, summary = _local_export(store, **opts)
    assert ex.binding_rows() == bindings
    assert _spark_rows(ex) == rows and len(rows) > 0
    _same_summary(ex.summary, summary)
    assert [p.message_id for p in ex.summary.problems] == [p.message_id for p in summary.problems]


def test_commit_takes_only_the_committed_attempts(tmp_path):
    """The job commit: the files of the attempts whose results came back move into the output tree; a
    failed or superseded attempt of the same part (here part 0's first) leaves nothing; a name clash is an
    error, not an overwrite."""
    from amqtool.engines.export.spark import commit_attempts

    attempts, out = tmp_path / "attempts", tmp_path / "out"
    files = {"attempt-1/messages/queue=a/part-00000.parquet": b"half",  # part 0, failed
             "attempt-2/messages/queue=a/part-00000.parquet": b"part 0",
             "attempt-2/messages/queue=b/part-00000.parquet": b"part 0 b",
             "attempt-3/messages/queue=a/part-00001.parquet": b"part 1"}
    for rel, data in files.items():
        (attempts / rel).parent.mkdir(parents=True, exist_ok=True)
        (attempts / rel).write_bytes(data)
    out.mkdir()
    commit_attempts([str(attempts / "attempt-2"), str(attempts / "attempt-3")], str(attempts), str(out))
    got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert got == {"messages/queue=a/part-00000.parquet": b"part 0", "messages/queue=b/part-00000.parquet": b"part 0 b",
                   "messages/queue=a/part-00001.parquet": b"part 1"}
    assert not attempts.exists()
    (attempts / "attempt-4/messages/queue=a").mkdir(parents=True)
    (attempts / "attempt-4/messages/queue=a/part-00001.parquet").write_bytes(b"again")
    with pytest.raises(FileExistsError):
        commit_attempts([str(attempts / "attempt-4")], str(attempts), str(out))
    assert (out / "messages/queue=a/part-00001.parquet").read_bytes() == b"part 1"


def test_a_store_gone_after_planning_leaves_no_output(spark, demo, tmp_path):
    """A store that vanishes between the driver's survey and its tasks fails the export with one line naming
    it (the data source's own check): nothing is committed under the output name, and the abort leaves no
    work directory or attempt behind."""
    import shutil

    from amqtool.engines.export import spark_export as E
    from amqtool.engines.export.writers import OutputTarget

    copy = tmp_path / "store"
    shutil.copytree(demo, copy)
    fs = E.single_store(detect(str(copy)), str(copy))
    shutil.rmtree(copy)
    out = tmp_path / "out"
    target = OutputTarget(out, is_dir=True)
    target.begin()
    with pytest.raises(AmqtoolError) as err:
        E.export_stores(spark, [fs], ExportOptions(), "parquet", target, fleet=False)
    assert str(err.value) == f"{copy}: the store is gone (it was there when the query was planned)"
    assert err.value.exit_code == 3
    target.abort()
    assert not out.exists() and list(tmp_path.iterdir()) == []



def test_a_refused_store_exits_as_the_local_engine_does(spark, store, tmp_path):  # noqa: F811
    """The built store (verify calls it CRITICAL) read in the tasks without --salvage: the export is refused
    with the local engine's error and exit code (2), and leaves nothing behind."""
    errors = {}
    for engine in ("local", "spark"):
        with pytest.raises(AmqtoolError) as err:
            run_export(ExportRequest(str(store), str(tmp_path / engine), "parquet", engine=engine),
                       spark_session=spark if engine == "spark" else None)
        errors[engine] = (type(err.value).__name__, str(err.value), err.value.exit_code)
    assert errors["spark"] == errors["local"] and errors["local"][2] == 2
    assert not (tmp_path / "spark").exists() and not (tmp_path / "local").exists()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "xml"])
def test_outputs_equal_local_engine(spark, demo, tmp_path, fmt):
    """Same store, both engines, each writing its own output: identical rows (and an identical XML file)."""
    docs = {}
    for engine in ("local", "spark"):
        docs[engine], _ = run_export(ExportRequest(str(demo), str(tmp_path / engine), fmt, engine=engine),
                                     spark_session=spark if engine == "spark" else None)
    for key in ("rows", "messages", "bindings", "rowsByQueue", "preparedRows", "problemCount"):
        assert docs["spark"][key] == docs["local"][key], key
    if fmt == "xml":
        assert (tmp_path / "spark").read_bytes() == (tmp_path / "local").read_bytes()
        return
    reader = read_parquet_table if fmt == "parquet" else read_jsonl_table
    for table in ("messages", "bindings"):
        a = normalise(reader(tmp_path / "local" / table))
        b = normalise(reader(tmp_path / "spark" / table))
        assert a == b and (table == "bindings" or len(a) == docs["local"]["rows"])
    for engine in ("local", "spark"):  # an Artemis store has no durable subscriptions: the table is empty
        assert reader(tmp_path / engine / "subscriptions") == []
    manifest = json.loads((demo / "manifest.json").read_text())
    committed: dict[str, int] = {}
    for r in reader(tmp_path / "spark" / "messages"):
        if r["transaction_state"] == "committed" and not r["paged"]:  # paged rows: test_export_paged.py
            committed[str(r["queue"])] = committed.get(str(r["queue"]), 0) + 1
    assert committed == {q: n for q, n in manifest["expected"]["messageCounts"].items() if n}
    paged: dict[str, list] = {}
    for r in sorted((r for r in reader(tmp_path / "spark" / "messages") if r["paged"]),
                    key=lambda r: (r["page"], r["page_position"])):
        if r["transaction_state"] == "committed":
            paged.setdefault(str(r["queue"]), []).append(r["message_id"])
    want = {q: ids for q, ids in manifest["expected"]["paging"]["pendingByQueue"].items() if ids}
    assert paged == want and want  # the demo store has paged messages: live + paged per queue


def test_a_sliced_export_keeps_the_output_rules(spark, demo, tmp_path, monkeypatch):
    """Slices written by several tasks: every file has the export's mode (--mode 640: files 0640, directories
    0750), no Spark bookkeeping file (_SUCCESS, .crc) is in the output, nothing is left beside it, and the
    rows are the local engine's."""
    from amqtool.engines.export import spark_export as E

    monkeypatch.setattr(E, "MIN_SLICE_BYTES", 1 << 20)
    doc, _ = run_export(ExportRequest(str(demo), str(tmp_path / "out"), "parquet", engine="spark", mode=0o640),
                        spark_session=spark)
    run_export(ExportRequest(str(demo), str(tmp_path / "local"), "parquet", engine="local"))
    out = tmp_path / "out"
    entries = [out, *out.rglob("*")]
    assert {oct(p.stat().st_mode & 0o777) for p in entries if p.is_file()} == {"0o640"}
    assert {oct(p.stat().st_mode & 0o777) for p in entries if p.is_dir()} == {"0o750"}
    assert not [p for p in entries if p.name == "_SUCCESS" or p.name.endswith(".crc")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "out"]
    assert len({p.name for p in (out / "messages").rglob("part-*.parquet")}) >= 4  # several slices' files
    for table in ("messages", "bindings"):
        assert normalise(read_parquet_table(out / table)) == normalise(read_parquet_table(tmp_path / "local" / table))
    assert doc["engine"] == "spark" and doc["rows"] > 0


@pytest.mark.parametrize("ds", ["basic", "mkahadb"])
def test_kahadb_rows_equal_local_engine(spark, tmp_path, ds):
    """KahaDB: the Spark engine (rows built on the driver by the KahaDB replay, written by Spark) gives the
    local engine's rows; the counts per destination/subscription are checked against the manifests in
    test_export_kahadb.py."""
    from tests.support import KAHADB

    if not KAHADB.is_dir():
        pytest.skip("KahaDB fixtures not present")
    fmt = "parquet" if ds == "basic" else "jsonl"
    docs = {}
    for engine in ("local", "spark"):
        docs[engine], _ = run_export(ExportRequest(str(KAHADB / ds), str(tmp_path / engine), fmt, engine=engine),
                                     spark_session=spark if engine == "spark" else None)
    for key in ("rows", "messages", "bindings", "subscriptions", "rowsByQueue", "preparedRows", "problemCount",
                "storeKind"):
        assert docs["spark"][key] == docs["local"][key], key
    assert docs["spark"]["engine"] == "spark" and docs["local"]["rows"] > 0
    reader = read_parquet_table if fmt == "parquet" else read_jsonl_table
    for table in ("messages", "bindings"):
        a = normalise(reader(tmp_path / "local" / table))
        b = normalise(reader(tmp_path / "spark" / table))
        assert a == b and len(a) == (docs["local"]["rows"] if table == "messages" else docs["local"]["bindings"])
    # the durable subscriptions (checked against the manifests in test_export_subscriptions.py)
    a = normalise(reader(tmp_path / "local" / "subscriptions"))
    b = normalise(reader(tmp_path / "spark" / "subscriptions"))
    assert a == b and len(a) == {"basic": 2, "mkahadb": 1}[ds] == docs["spark"]["subscriptions"]
    assert sum(r["pending"] for r in b) == sum(n for q, n in docs["spark"]["rowsByQueue"].items() if ":" in q)


def test_spark_sql_filters_the_parquet_by_a_property(spark, store, tmp_path):  # noqa: F811
    """Schema 2's ``properties`` map answers an analyst's query in Spark SQL; ``text`` holds the text."""
    run_export(ExportRequest(str(store), str(tmp_path / "out"), "parquet", engine="spark", salvage=True),
               spark_session=spark)
    _, rows, _ = _local_export(store)
    want = sorted((r[0], r[1]) for r in rows if any(p["name"] == "l" and p["value"] == "1099511627776"
                                                    for p in r[12] or ()))
    assert want  # the built store's message 101 carries l=1099511627776
    spark.read.parquet(str(tmp_path / "out" / "messages")).createOrReplaceTempView("messages")
    got = spark.sql("SELECT message_id, queue, text FROM messages WHERE properties['l'] = '1099511627776'").collect()
    assert sorted((r.message_id, r.queue) for r in got) == want
    texts = {r.message_id: r.text for r in spark.sql("SELECT message_id, text FROM messages WHERE type = 'text'")
             .collect()}
    assert texts and all(t is not None for t in texts.values())


def test_damaged_pages_and_missing_bodies_are_problems_in_tasks_too(spark, demo, tmp_path):  # noqa: F811
    """The Spark tasks report what the local engine reports: a page that ends in damage, a missing large body."""
    import os
    import random
    import shutil

    store = tmp_path / "store"
    shutil.copytree(demo, store)
    page = sorted(p for p in (store / "data" / "paging").glob("*/*.page") if p.stat().st_size > 100)[0]
    page.write_bytes(random.Random(9).randbytes(page.stat().st_size))
    body = sorted((store / "data" / "large-messages").glob("*.msg"))[0]
    os.unlink(body)
    docs, verdicts = {}, {}
    for engine in ("local", "spark"):  # (--salvage: verify calls the damaged page CRITICAL, issue 25)
        docs[engine], verdicts[engine] = run_export(
            ExportRequest(str(store), str(tmp_path / engine), "parquet", engine=engine, salvage=True),
            spark_session=spark if engine == "spark" else None)
    assert docs["local"]["problemCount"] >= 2
    assert verdicts["spark"] == verdicts["local"] and docs["spark"]["findings"] == docs["local"]["findings"]
    for key in ("rows", "problemCount"):
        assert docs["spark"][key] == docs["local"][key], key
    assert sorted(p["message"] for p in docs["spark"]["problems"]) == \
        sorted(p["message"] for p in docs["local"]["problems"])


def test_task_failure_of_the_jvm_is_its_innermost_cause():
    # Issue 26 item 10: a JDBC failure inside the JVM was reported as py4j's "An error occurred while
    # calling o64.load." with the cause only in Spark's log.
    from amqtool.engines.export.spark import task_failure

    jvm = ("An error occurred while calling o64.load.\n"
           ": org.postgresql.util.PSQLException: Connection to 127.0.0.1:5432 refused. Check that the hostname "
           "and port are correct.\n\tat org.postgresql.core.v3.ConnectionFactoryImpl.openConnectionImpl(X.java:1)\n"
           "Caused by: java.net.ConnectException: Connection refused\n\tat java.base/sun.nio.ch.Net.connect0(N)\n")
    assert task_failure(jvm) == "java.net.ConnectException: Connection refused"
    no_cause = ("An error occurred while calling o64.load.\n"
                ": org.postgresql.util.PSQLException: FATAL: terminating connection due to administrator command\n"
                "\tat org.postgresql.Foo.bar(Foo.java:1)\n")
    assert task_failure(no_cause) == ("org.postgresql.util.PSQLException: FATAL: terminating connection due to "
                                      "administrator command")


class _FakeTracker:
    """A status tracker with one running stage of ``total`` tasks, ``done`` of them completed."""

    def __init__(self, done: int, total: int):
        from types import SimpleNamespace

        self.stage = SimpleNamespace(numCompletedTasks=done, numTasks=total)

    def getJobIdsForGroup(self, group):
        return []

    def getActiveStageIds(self):
        return [1]

    def getStageInfo(self, sid):
        return self.stage


class _FakeContext:
    """A cluster's SparkContext as the watch sees it: its master and how many executors it has now."""

    def __init__(self, executors: int):
        self.master = "spark://127.0.0.1:7077"
        self.executors = executors
        self.cancelled = 0

    @property
    def _jsc(self):
        from types import SimpleNamespace

        infos = ["driver"] + ["executor"] * self.executors
        tracker = SimpleNamespace(getExecutorInfos=lambda: infos)
        return SimpleNamespace(sc=lambda: SimpleNamespace(statusTracker=lambda: tracker))

    def cancelAllJobs(self):
        self.cancelled += 1


def test_a_job_left_without_executors_is_cancelled_with_its_cause():
    # Issue 29: a standalone cluster whose only worker was killed gave 167 s of silence, then a py4j
    # traceback; Spark waits for new executors forever.
    from amqtool.engines.export.spark import _Progress, _task_errors

    sc = _FakeContext(executors=1)
    reports = []
    watch = _Progress(sc, lambda d, t: reports.append((d, t)), no_executor_seconds=30)
    watch.poll(_FakeTracker(1, 4), now=0.0)
    sc.executors = 0  # the worker is killed
    watch.poll(_FakeTracker(1, 4), now=1.0)
    watch.poll(_FakeTracker(1, 4), now=30.0)
    assert (watch.cause, sc.cancelled) == (None, 0)  # not yet: a worker may come back
    sc.executors = 1
    watch.poll(_FakeTracker(2, 4), now=31.0)  # it did: the wait starts again
    sc.executors = 0
    watch.poll(_FakeTracker(2, 4), now=32.0)
    watch.poll(_FakeTracker(2, 4), now=62.0)
    assert sc.cancelled == 1 and watch.cause.startswith("Spark has had no executor for 30 s with tasks to run")
    assert reports[-1] == (2, 4)

    class Py4JJavaError(Exception):  # what collect() raises once the job is cancelled
        __module__ = "py4j.protocol"

    with pytest.raises(AmqtoolError) as err:
        with _task_errors(watch):
            raise Py4JJavaError("An error occurred while calling o41.collectAndServe.\n: Job 3 cancelled")
    assert str(err.value) == watch.cause


def test_local_mode_is_never_cancelled_for_want_of_executors():
    from amqtool.engines.export.spark import _Progress

    sc = _FakeContext(executors=0)
    sc.master = "local[2]"  # the driver runs the tasks: no executor entry
    watch = _Progress(sc, None, no_executor_seconds=0)
    watch.poll(_FakeTracker(0, 4), now=0.0)
    watch.poll(_FakeTracker(0, 4), now=100.0)
    assert (watch.cause, sc.cancelled) == (None, 0)


def test_a_job_aborted_for_a_lost_executor_is_told_by_its_reason():
    from amqtool.engines.export.spark import task_failure

    text = ("An error occurred while calling o87.collectAndServe.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 2 in stage 1.0 failed 4 "
            "times, most recent failure: Lost task 2.3 in stage 1.0 (TID 11) (127.0.0.1 executor 3): "
            "ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: Command exited "
            "with code 137\n\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(...)")
    assert task_failure(text) == ("Lost task 2.3 in stage 1.0 (TID 11) (127.0.0.1 executor 3): ExecutorLostFailure "
                                  "(executor 3 exited caused by one of the running tasks) Reason: Command exited "
                                  "with code 137")
