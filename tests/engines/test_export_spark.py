"""The Spark export engine against the local engine: on every fixture, the built store and a demo store, its
rows (in the local engine's order), tables, XML and counts equal the local engine's, however the plan is cut
into parts; and the planner's cutting itself. One SparkSession (local[2]) serves the whole module."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
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
    from amqtool.engines.export.spark import SparkArtemisExport

    return SparkArtemisExport(spark, detect(path), ExportOptions(**opts))


def _fixture_stores() -> dict[str, Path]:
    """Every Artemis fixture: the oracle journals (a journal directory each) and the public broker stores."""
    out = {s: ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({p.parent.relative_to(p.parents[3]).as_posix(): p.parent for p in PUBLIC_JOURNALS})
    return out


def _local_export(path, **opts):
    from amqtool.engines.export.local import LocalArtemisExport

    with LocalArtemisExport(detect(path), ExportOptions(**opts)) as ex:
        bindings = ex.binding_rows()
        return bindings, list(ex.rows()), ex.summary


def _spark_rows(ex) -> list[tuple]:
    """The rows as the XML path pulls them: in the plan's order, as tuples (properties as dicts)."""
    return list(ex.iter_rows_for_xml())


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
        ex.unpersist()
        bindings_seen += len(bindings)
    assert bindings_seen > 100  # the public stores' addresses and queues


@pytest.mark.parametrize("opts", [{}, {"safe": True, "queues": ("telemetry.*", "orders")}])
def test_rows_in_order_however_the_plan_is_cut(spark, demo, monkeypatch, opts):
    """Many small parts (runs of messages; runs of pages, each with only its pages' cursor acks): the same
    rows in the same order as the local engine, the same counts."""
    from amqtool.engines.export import spark as S

    bindings, rows, summary = _local_export(demo, **opts)
    assert any(r[17] for r in rows) and any(not r[17] for r in rows)  # paged and journal rows
    for min_cost, per_core in ((1, 7), (S.MIN_PART_COST, S.PARTS_PER_CORE)):
        monkeypatch.setattr(S, "MIN_PART_COST", min_cost)
        monkeypatch.setattr(S, "PARTS_PER_CORE", per_core)
        ex = spark_export(spark, demo, **opts)
        if min_cost == 1:  # local[2], 7 parts a core: several of each kind
            assert ex.parts["journal"] >= 5 and ex.parts["paged"] >= 3, ex.parts
        else:  # by default this small store is one part of each kind
            assert ex.parts == {"journal": 1, "paged": 1}
        assert ex.binding_rows() == bindings
        assert _spark_rows(ex) == rows
        _same_summary(ex.summary, summary)
        ex.unpersist()


def test_split_runs_and_plan_partitions():
    from amqtool.engines.export.spark import MIN_PART_COST, plan_partitions, split_runs

    costs = [5, 1, 1, 1, 1, 1, 9, 1, 1, 1]
    for k in range(1, 12):
        runs = split_runs(costs, k)
        assert runs[0][0] == 0 and runs[-1][1] == len(costs) and len(runs) <= k
        assert all(a < b for a, b in runs) and all(r[1] == n[0] for r, n in zip(runs, runs[1:]))
    assert split_runs([], 4) == [] and split_runs([3], 4) == [(0, 1)]
    assert [b - a for a, b in split_runs([1] * 12, 3)] == [4, 4, 4]
    big = MIN_PART_COST
    # a few parts per core, shared by cost: a journal three times the paging's cost takes most of them
    assert [len(r) for r in plan_partitions([big] * 30, [big] * 10, cores=2)] == [4, 2]
    assert [len(r) for r in plan_partitions([big] * 30, [], cores=1)] == [3, 0]
    assert plan_partitions([1] * 30, [1] * 3, cores=2) == ([(0, 30)], [(0, 3)])  # tiny: one of each kind
    assert plan_partitions([], [], cores=2) == ([], [])


@pytest.mark.parametrize("opts", [{}, {"safe": True, "queues": ("events.*", "Undefined*")}])
def test_rows_equal_local_engine(spark, store, opts):
    ex = spark_export(spark, store, **opts)
    bindings, rows, summary = _local_export(store, **opts)
    assert ex.binding_rows() == bindings
    got = [tuple(r[n] for n in MESSAGE_COLUMN_NAMES) for r in ex.rows_df().collect()]
    got = [g[:12] + ([p.asDict() for p in g[12]] if g[12] is not None else None,) + g[13:] for g in got]
    assert sorted(got, key=lambda r: (r[0], r[1])) == sorted(rows, key=lambda r: (r[0], r[1]))
    ex._collect_counts()
    assert ex.summary.rows_by_queue == summary.rows_by_queue
    assert (ex.summary.rows, ex.summary.messages, ex.summary.prepared_rows) == (
        summary.rows, summary.messages, summary.prepared_rows)
    assert [p.message_id for p in ex.summary.problems] == [p.message_id for p in summary.problems]
    ex.unpersist()


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
    for key in ("rows", "messages", "bindings", "rowsByQueue", "preparedRows", "problemCount", "storeKind"):
        assert docs["spark"][key] == docs["local"][key], key
    assert docs["spark"]["engine"] == "spark" and docs["local"]["rows"] > 0
    reader = read_parquet_table if fmt == "parquet" else read_jsonl_table
    for table in ("messages", "bindings"):
        a = normalise(reader(tmp_path / "local" / table))
        b = normalise(reader(tmp_path / "spark" / table))
        assert a == b and len(a) == (docs["local"]["rows"] if table == "messages" else docs["local"]["bindings"])
