"""The Spark export engine against the local engine and the loader: the live list its joins compute is the
one ``JournalImpl.load`` builds (in order, with prepared transactions) on every fixture, and its rows, tables
and XML equal the local engine's. One SparkSession (local[2]) serves the whole module."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.engines.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.engines.export_store import build_store, normalise, read_jsonl_table, read_parquet_table
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS, oracle_manifest

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from amqtool.engines.export.spark import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log_path=str(log))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("broker"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from amqtool.engines.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return path


def spark_export(spark, path, **opts):
    from amqtool.engines.export.spark import SparkArtemisExport

    return SparkArtemisExport(spark, detect(path), ExportOptions(**opts))


def loader_view(path) -> tuple[list, list]:
    """load_journal's live list and prepared records, in the shape SparkArtemisExport reports them."""
    live, prepared = [], []
    for jd in detect(path).journals():
        with open_journal(jd) as opened:
            res = load_journal(opened)
        live += [(jd.kind, r.id, r.user_record_type, r.is_update, r.compact_count, r.file_index, r.body_offset,
                  r.body_len) for r in res.live]
        for tx in sorted(res.prepared, key=lambda t: t.tx_id):
            prepared += [(jd.kind, tx.tx_id, r.id, r.user_record_type, r.is_update, r.file_index, r.body_offset)
                         for r in tx.records]
    return live, prepared


def _fixture_journals() -> dict[str, Path]:
    out = {s: ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({p.relative_to(p.parents[2]).as_posix(): p for p in PUBLIC_JOURNALS})
    return out


class _Named:
    """One fixture journal under its own name: the Spark engine keys everything by journal name, so all
    fixtures go through one job (a fleet of stores, as a cluster would take them)."""

    def __init__(self, name: str, jd):
        self.kind, self.jd, self.directory, self.spec = name, jd, jd.directory, jd.spec

    def journal_files(self):
        return self.jd.journal_files()


class _Fleet:
    large_messages_dir = None

    def __init__(self, journals):
        self._journals = journals

    def journals(self):
        return self._journals


def test_live_list_equals_load_on_every_fixture(spark):
    from amqtool.engines.export.spark import SparkArtemisExport

    named, want_live, want_prepared = [], [], []
    for name, path in _fixture_journals().items():
        (jd,) = detect(path).journals()
        named.append(_Named(name, jd))
        live, prepared = loader_view(path)
        want_live += [(name,) + r[1:] for r in live]
        want_prepared += [(name,) + r[1:] for r in prepared]
        if path.parent.parent == ORACLE:  # the loader itself equals what the real JournalImpl returned
            want = oracle_manifest(path.parent.name)["expectedAfterLoad"]["live"]
            assert [(r[1], r[2], r[3], r[4], r[7]) for r in live] == [
                (e["id"], e["type"], e["isUpdate"], e["compactCount"], e["len"]) for e in want]
    ex = SparkArtemisExport(spark, _Fleet(named), ExportOptions())
    key = lambda r: r[0]  # noqa: E731 - journals sort by name, each keeps its live order
    assert sorted(ex.live_records(), key=key) == sorted(want_live, key=key)
    assert sorted(ex.prepared_records(), key=key) == sorted(want_prepared, key=key)
    assert {r[0] for r in want_live} == set(_fixture_journals())  # every fixture has live records
    ex.unpersist()


def test_live_list_equals_load_on_built_store_and_demo(spark, store, demo):
    for path in (store, demo):
        ex = spark_export(spark, path)
        live, prepared = loader_view(path)
        assert ex.live_records() == live
        assert ex.prepared_records() == prepared
        ex.unpersist()


def _local_rows(path, **opts):
    from amqtool.engines.export.local import LocalArtemisExport

    with LocalArtemisExport(detect(path), ExportOptions(**opts)) as ex:
        return ex.binding_rows(), list(ex.rows()), ex.summary


@pytest.mark.parametrize("opts", [{}, {"safe": True, "queues": ("events.*", "Undefined*")}])
def test_rows_equal_local_engine(spark, store, opts):
    ex = spark_export(spark, store, **opts)
    bindings, rows, summary = _local_rows(store, **opts)
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
