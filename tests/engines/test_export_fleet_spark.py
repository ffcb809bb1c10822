"""A fleet export with ``--engine spark`` (one local[2] session for the module): each store's rows equal the
local engine's, whether the stores are grouped into tasks or split into parts; the stores table agrees; the
driver never loads a journal (every load runs in a task); a store failing in a task is a row."""
from __future__ import annotations

from pathlib import Path

import pytest

from amqtool.engines.export.fleet import FleetRequest, plan_stores, run_fleet_export
from amqtool.engines.export.fleet_spark import SplitSettings, fair_share, split_and_group
from tests.engines.fleet_stores import NODE_ID, build_fleet, fleet_rows_by_store, read_table

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from amqtool.engines.export.spark import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log_path=str(log))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, Path]:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def local_export(fleet, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    doc, verdict = run_fleet_export(FleetRequest(stores=[str(p) for p in fleet.values()], out=str(out),
                                                 engine="local"))
    return out, doc, verdict


def _spark_export(spark, fleet, out, monkeypatch=None, settings=None, fmt="parquet"):
    if settings is not None:
        from amqtool.engines.export import fleet_spark

        real = fleet_spark.export_fleet_spark
        monkeypatch.setattr(fleet_spark, "export_fleet_spark",
                            lambda *a, **kw: real(*a, **{**kw, "settings": settings}))
    return run_fleet_export(FleetRequest(stores=[str(p) for p in fleet.values()], out=str(out), fmt=fmt,
                                         engine="spark"), spark_session=spark)


def _same_as_local(out, doc, local_export):
    lout, ldoc, _ = local_export
    for table in ("messages", "bindings", "subscriptions"):
        got, want = fleet_rows_by_store(out, table, "parquet"), fleet_rows_by_store(lout, table, "parquet")
        assert set(got) == set(want)
        if table == "subscriptions":  # the Classic stores' durable subscriptions (the fixtures that have some)
            assert set(want) == {n for n in ("site-1/kaha-basic", "site-1/kaha-mkahadb", "site-1/leveldb-basic")
                                     if n in fleet_names(lout)}
        for name in want:
            assert got[name] == want[name], (table, name)
    assert read_table(out / "stores", "parquet") == read_table(lout / "stores", "parquet")
    assert doc["stores"] == ldoc["stores"] and doc["engine"] == "spark"
    assert {k: v for k, v in doc.items() if k not in ("engine", "output")} == \
        {k: v for k, v in ldoc.items() if k not in ("engine", "output")}


def fleet_names(out) -> set[str]:
    return {r["store"] for r in read_table(out / "stores", "parquet")}


def test_grouped_stores_equal_the_local_engine(spark, fleet, local_export, tmp_path, monkeypatch):
    # the default cut: these small stores are grouped, none split
    stores = plan_stores([str(p) for p in fleet.values()])
    split, groups = split_and_group(stores, fair_share(stores, 2))
    assert split == [] and 1 <= len(groups) < len(fleet) - 1
    doc, verdict = _spark_export(spark, fleet, tmp_path / "out")
    _same_as_local(tmp_path / "out", doc, local_export)
    assert verdict == local_export[2]


def test_split_stores_equal_the_local_engine(spark, fleet, local_export, tmp_path, monkeypatch):
    """Every Artemis store split into many parts (guided down to single messages), KahaDB ones grouped."""
    stores = plan_stores([str(p) for p in fleet.values()])
    split, groups = split_and_group(stores, 1, 1)
    assert {s.kind for s in split} == {"artemis"} and len(split) == 4  # three demos and the damaged one
    assert all(len(g) == 1 for g in groups)
    doc, _ = _spark_export(spark, fleet, tmp_path / "out", monkeypatch,
                           SplitSettings(1, 2, min_part_cost=1, group_bytes=1))
    _same_as_local(tmp_path / "out", doc, local_export)
    files = list((tmp_path / "out" / "messages" / f"store={NODE_ID}").glob("*/part-*.parquet"))
    assert len({f.name for f in files}) >= 4  # rows written by several parts' tasks


def test_the_driver_never_loads_a_journal(spark, fleet, local_export, tmp_path, monkeypatch):
    """Every load runs in a task (Spark's Python workers are other processes): the driver's loaders are
    made to fail here, and the export is still the local engine's."""
    from amqtool.engines.artemis import load
    from amqtool.engines.kahadb import load as kload

    def refuse(*a, **kw):
        raise AssertionError("the driver loaded a journal")

    from amqtool.engines.artemis import verify

    monkeypatch.setattr(load, "load_journal", refuse)
    monkeypatch.setattr(verify, "load_journal", refuse)  # the export loads through verify's judge (issue 25)
    monkeypatch.setattr(kload, "load_store", refuse)
    # the local engine, in this process, meets the refusal (a store that fails is a row)
    doc, _ = run_fleet_export(FleetRequest(stores=[str(fleet[NODE_ID])], out=str(tmp_path / "x"), engine="local"))
    assert "the driver loaded a journal" in doc["stores"][0]["problem"]
    doc, _ = _spark_export(spark, fleet, tmp_path / "out", monkeypatch, SplitSettings(8 << 20, 2))
    _same_as_local(tmp_path / "out", doc, local_export)


def test_split_and_group():
    from amqtool.engines.export.fleet import FleetStore

    def fs(i, size, kind="artemis", error=None):
        return FleetStore(i, f"/s/{i}", kind=kind, bytes=size, error=error)

    stores = [fs(0, 100), fs(1, 10), fs(2, 30), fs(3, 60, "kahadb"), fs(4, 0, None, "empty"), fs(5, 25), fs(6, 0)]
    split, groups = split_and_group(stores, 50, 50)
    assert [s.index for s in split] == [0]  # a KahaDB store is never split; a failed one is neither
    assert [[s.index for s in g] for g in groups] == [[3], [2, 1, 6], [5]]  # first fit, largest first
    split, groups = split_and_group(stores, 200, 40)
    assert split == [] and [[s.index for s in g] for g in groups] == [[0], [3], [2, 1, 6], [5]]
    # by default groups fill up to MIN_GROUP_BYTES: these tiny stores make one task, largest first
    assert [[s.index for s in g] for g in split_and_group(stores, 200)[1]] == [[0, 3, 2, 5, 1, 6]]
    assert fair_share(stores, 2) == 16 << 20  # at least MIN_GROUP_BYTES
    assert fair_share([fs(0, 400 << 20)], 2) == 100 << 20


@pytest.mark.parametrize("fair", [1, 1 << 30], ids=["split", "grouped"])
def test_a_store_failing_in_a_task_is_a_row(spark, fleet, tmp_path, fair):
    """A store gone between the driver's survey and its task (planned as split, or in a group): its row
    says why, no row of it is committed, the other stores are exported."""
    import shutil

    from amqtool.engines.export.fleet import FleetStore, finish_dataset, fleet_document, survey
    from amqtool.engines.export.fleet_spark import export_fleet_spark
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.writers import OutputTarget

    gone = tmp_path / "gone"
    shutil.copytree(fleet["site-0/broker-2"], gone)
    stores = [survey(0, str(gone)), survey(1, str(fleet["site-1/broker-1"]))]
    stores[0].name, stores[1].name = "gone", "kept"
    assert isinstance(stores[0], FleetStore) and stores[0].error is None and stores[0].bytes > 0
    shutil.rmtree(gone)
    target = OutputTarget(tmp_path / "out", is_dir=True)
    target.begin()
    seen = []
    outcomes = export_fleet_spark(spark, stores, ExportOptions(), "parquet", target,
                                  settings=SplitSettings(fair, 2), store_progress=seen.append)
    doc = fleet_document(outcomes, engine="spark", fmt="parquet", output=str(target.out))
    finish_dataset(target, "parquet", outcomes, doc)
    target.commit()
    rows = {s["store"]: s for s in doc["stores"]}
    assert rows["gone"]["verdict"] == "UNKNOWN" and "no such file or directory" in rows["gone"]["problem"]
    assert rows["kept"]["verdict"] == "OK" and rows["kept"]["rows"] > 0
    assert set(fleet_rows_by_store(tmp_path / "out", "messages", "parquet")) == {"kept"}
    assert set(fleet_rows_by_store(tmp_path / "out", "bindings", "parquet")) == {"kept"}
    assert [(f["done"], f["total"]) for f in seen] == [(1, 2), (2, 2)] and seen[-1]["rows"] == rows["kept"]["rows"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # work directory, attempts and plans gone


def test_jsonl_split_equals_the_local_engine(spark, fleet, tmp_path, monkeypatch):
    stores = [str(p) for p in fleet.values()]
    ldoc, _ = run_fleet_export(FleetRequest(stores=stores, out=str(tmp_path / "local"), fmt="jsonl", engine="local"))
    doc, _ = _spark_export(spark, fleet, tmp_path / "out", monkeypatch, SplitSettings(1, 2, min_part_cost=1),
                           fmt="jsonl")
    for table in ("messages", "bindings", "subscriptions"):
        assert fleet_rows_by_store(tmp_path / "out", table, "jsonl") == \
            fleet_rows_by_store(tmp_path / "local", table, "jsonl")
    assert read_table(tmp_path / "out" / "stores", "jsonl") == read_table(tmp_path / "local" / "stores", "jsonl")
    assert doc["stores"] == ldoc["stores"]
    names = {p.name for p in (tmp_path / "out" / "messages").iterdir()}
    assert len(names) > len(fleet)  # a file a part of each split (Artemis) store, one a KahaDB store


@pytest.mark.parametrize("split", [False, True])
def test_queue_names_reach_the_driver(spark, fleet, tmp_path, monkeypatch, split):
    """--queue's warning on Spark: split and grouped stores both bring their queue names back, so a pattern
    matching one store's queue does not warn and one matching none does."""
    from amqtool.engines.export import fleet_spark

    if split:
        real = fleet_spark.export_fleet_spark
        monkeypatch.setattr(fleet_spark, "export_fleet_spark",
                            lambda *a, **kw: real(*a, **{**kw, "settings": SplitSettings(1, 2, min_part_cost=1,
                                                                                         group_bytes=1)}))
    stores = [str(p) for p in fleet.values()]
    doc, verdict = run_fleet_export(FleetRequest(stores=stores, out=str(tmp_path / "a"), engine="spark",
                                                 queues=("nomatch*",)), spark_session=spark)
    assert "queueMismatch" in doc and doc["rows"] == 0
    name = doc["queueMismatch"].split("queues: ")[1].split(", ")[0]
    doc, _ = run_fleet_export(FleetRequest(stores=stores, out=str(tmp_path / "b"), engine="spark",
                                           queues=(name,)), spark_session=spark)
    assert "queueMismatch" not in doc and doc["rows"] > 0


@pytest.mark.parametrize("fair", [1, 1 << 30], ids=["split", "grouped"])
def test_a_store_that_lost_a_file_after_the_survey_is_judged_on_what_was_read(spark, fleet, tmp_path, fair):
    """Issue 25 case 16: a journal file deleted after the driver's survey: the row said OK with the surveyed
    files=N while N-1 were read. Now the row gives the files read, verify's verdict on them and
    store-changed, in split and grouped stores alike (the shared per-store code of both fleet engines)."""
    import shutil

    from amqtool.engines.artemis.verify import verify_store
    from amqtool.engines.export.fleet import fleet_document, survey
    from amqtool.engines.export.fleet_spark import export_fleet_spark
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.writers import OutputTarget
    from amqtool.errors import overall_verdict
    from amqtool.store.layout import detect

    shrunk = tmp_path / "shrunk"
    shutil.copytree(fleet["site-0/broker-2"], shrunk)
    stores = [survey(0, str(shrunk))]
    stores[0].name = "shrunk"
    files = sorted((shrunk / "data" / "journal").glob("*.amq"),
                   key=lambda p: int.from_bytes(p.read_bytes()[8:16], "big"))
    files[len(files) // 2].unlink()
    judged = overall_verdict(verify_store(detect(str(shrunk))).findings)
    target = OutputTarget(tmp_path / "out", is_dir=True)
    target.begin()
    outcomes = export_fleet_spark(spark, stores, ExportOptions(salvage=True), "parquet", target,
                                  settings=SplitSettings(fair, 2))
    doc = fleet_document(outcomes, engine="spark", fmt="parquet", output=str(target.out))
    target.abort()
    (row,) = doc["stores"]
    assert row["files"] == stores[0].files - 1 and row["verdict"] == judged.name != "OK"
    assert "store-changed" in {f.code for f in outcomes[0].summary.findings}
