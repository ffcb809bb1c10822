"""LevelDB through the Spark export engine: the rows the driver's recovery builds (the local engine's code),
written by Spark tasks, equal the local engine's tables, on the fixture."""
from __future__ import annotations

import pytest

from amqtool.engines.export import ExportRequest, run_export
from tests.engines.export_store import normalise, read_parquet_table
from tests.engines.leveldb.stores import FIXTURE

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not (FIXTURE / "store").is_dir(), reason="no fixture")]


def test_spark_rows_equal_local_engine(tmp_path):
    from amqtool.engines.export.spark import get_session

    spark = get_session("local[2]", log_path=str(tmp_path / "spark.log"))
    try:
        docs = {}
        for engine in ("local", "spark"):
            docs[engine], _ = run_export(ExportRequest(str(FIXTURE / "store"), str(tmp_path / engine), "parquet",
                                                       engine=engine),
                                         spark_session=spark if engine == "spark" else None)
    finally:
        spark.stop()
    for key in ("rows", "messages", "bindings", "subscriptions", "rowsByQueue", "problemCount", "storeKind"):
        assert docs["spark"][key] == docs["local"][key], key
    assert docs["local"]["rows"] == 31 and docs["local"]["storeKind"] == "leveldb"
    for table in ("messages", "bindings", "subscriptions"):
        a = normalise(read_parquet_table(tmp_path / "local" / table))
        b = normalise(read_parquet_table(tmp_path / "spark" / table))
        assert a == b and a
