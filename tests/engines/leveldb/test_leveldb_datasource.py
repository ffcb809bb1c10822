"""A fleet of LevelDB stores through the Spark data source (``from amqtool.spark import register``;
``spark.read.format("amqtool")``): every table (messages, bindings, subscriptions, stores) holds exactly the
rows the local fleet export writes for the same stores, store by store, and the inputs are never written."""
from __future__ import annotations

import pytest

from amqtool.engines.export.fleet import FleetRequest, run_fleet_export
from tests.engines.export_store import read_parquet_table
from tests.engines.leveldb.stores import FIXTURE
from tests.engines.test_datasource import TABLES, by_store, read, spark_rows
from tests.support import REPO, copy_tree, tree_hashes

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not (FIXTURE / "store").is_dir(), reason="no fixture")]

# the broker-written fixture and committed stores of each kind: XA prepared, snappy DATA records, logs the
# store's GC removed, a leveldbjni index, a SIGKILLed store (its cut unit of work a WARNING)
MEMBERS = {"site-a/basic": FIXTURE / "store"}
MEMBERS.update({f"site-{'b' if i % 2 else 'a'}/{n}": REPO / "tests" / "data" / "leveldb" / n / "store"
                for i, n in enumerate(("xa", "snappy", "gc", "jni-index", "killed"))})


def test_a_leveldb_fleet_gives_the_fleet_exports_rows(tmp_path):
    from amqtool.engines.export.spark import get_session
    from amqtool.spark import register

    paths = []
    for name, src in MEMBERS.items():
        dest = tmp_path / "fleet" / name
        copy_tree(src, dest)
        paths.append(dest)
    before = tree_hashes(tmp_path / "fleet")
    out = tmp_path / "export"
    doc, _verdict = run_fleet_export(FleetRequest(stores=[str(p) for p in paths], out=str(out), engine="local",
                                                  salvage=True))
    spark = get_session("local[2]", log_path=str(tmp_path / "spark.log"))
    try:
        register(spark)
        for table in (*TABLES, "stores"):
            want = by_store(read_parquet_table(out / table))
            got = by_store(spark_rows(read(spark, paths, table, salvage="true"), norm=False))
            assert got == want, table
            assert {r["store"] for r in got} == set(MEMBERS), table  # every member store has rows of each
        stores = {r["store"]: r for r in spark_rows(read(spark, paths, "stores", salvage="true"), norm=False)}
    finally:
        spark.stop()
    assert {r["kind"] for r in stores.values()} == {"leveldb"}
    assert {r["verdict"] for r in stores.values()} <= {"OK", "WARNING"}
    assert sum(r["messages"] for r in stores.values()) == doc["messages"] > 300
    assert tree_hashes(tmp_path / "fleet") == before
