"""``export`` of database stores: the Classic JDBC store written from the KahaDB ``basic`` fixture exports the
same queue rows as the KahaDB export of that fixture (same OpenWire messages, one store kind each); prepared
XA rows; the Artemis database store written from a demo store exports the demo manifest's messages; and the
Spark engine (Spark's JDBC source, ``ID`` ranges in 2 partitions) gives the local engine's rows."""
from __future__ import annotations

import json
import shutil

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.errors import Verdict
from tests.classic_jdbc_writer import encoded_xid, kahadb_messages
from tests.engines.export_store import normalise, read_jsonl_table
from tests.engines.test_jdbc_artemis import write_demo
from tests.engines.test_jdbc_artemis import demo  # noqa: F401 - fixture
from tests.engines.test_jdbc_classic import build
from tests.pg_cluster import jdbc_env, pg_cluster  # noqa: F401
from tests.support import KAHADB

BASIC = KAHADB / "basic"
DRIVER = "/usr/share/java/postgresql.jar"


@pytest.fixture(scope="module")
def classic_url(pg_cluster):
    if not BASIC.is_dir():
        pytest.skip("KahaDB fixtures not found")
    msgs = kahadb_messages(BASIC / "kahadb")
    # fx.audit's first message becomes a prepared XA send: a "prepared" row, not a committed one
    url, ids = build(pg_cluster, "export_basic", msgs, sub_a_after=60)
    with pg_cluster.connect("export_basic") as c:
        c.execute("UPDATE ACTIVEMQ_MSGS SET XID = %s WHERE ID = %s", (encoded_xid(b"+"), ids["queue://fx.audit"][0]))
    return url


def export(tmp_path, name, **kw) -> tuple[dict, Verdict, list]:
    out = tmp_path / name
    doc, verdict = run_export(ExportRequest(path=".", out=str(out), fmt="jsonl", **kw))
    return doc, verdict, read_jsonl_table(out / "messages")


def _key(r):
    return {k: v for k, v in r.items() if k != "message_id"}


def test_classic_local_rows_equal_kahadb_export(tmp_path, classic_url, jdbc_env):
    doc, verdict, rows = export(tmp_path, "jdbc", jdbc_url=classic_url, engine="local")
    assert doc["storeKind"] == "classic-jdbc" and doc["engine"] == "local"
    # verify's verdict on the snapshot exported (one rule): the prepared XA transaction is its WARNING
    assert verdict is Verdict.WARNING, doc["findings"]
    assert [f["code"] for f in doc["findings"]] == ["classic-jdbc-prepared-transaction"]
    kdoc, _ = run_export(ExportRequest(path=str(BASIC / "kahadb"), out=str(tmp_path / "k"), fmt="jsonl",
                                       engine="local"))
    krows = read_jsonl_table(tmp_path / "k" / "messages")
    queue_rows = lambda rs: sorted((_key(r) for r in rs if r["routing_type"] == "ANYCAST"),  # noqa: E731
                                   key=lambda r: (r["queue"], r["store_message_id"]))
    jq, kq = queue_rows(rows), queue_rows(krows)
    prepared = [r for r in jq if r["transaction_state"] == "prepared"]
    assert len(prepared) == 1
    for r in prepared:
        r["transaction_state"] = "committed"
    assert jq == kq and len(jq) == 120 + 13 + 93
    subs = {}
    for r in rows:
        if r["routing_type"] == "MULTICAST":
            subs[r["queue"]] = subs.get(r["queue"], 0) + 1
    assert subs == {"fx-durable-a:sub-a": 40, "fx-durable-b:sub-b": 100}
    # the subscriptions table, from ACTIVEMQ_ACKS: sub-a acknowledged through the 60th topic row, sub-b none
    table = {r["queue"]: r for r in read_jsonl_table(tmp_path / "jdbc" / "subscriptions")}
    topic_ids = sorted(r["message_id"] for r in rows if r["queue"] == "fx-durable-b:sub-b")
    assert set(table) == set(subs)
    for q, r in table.items():
        assert (r["address"], r["client_id"], r["subscription_name"]) == ("fx.events", *q.split(":"))
        assert r["pending"] == subs[q] and r["selector"] is None and r["no_local"] is None
        assert r["subscribed_at"] is None and r["last_ack_store_message_id"] is None
    assert table["fx-durable-a:sub-a"]["last_ack_message_id"] == topic_ids[59]
    assert table["fx-durable-b:sub-b"]["last_ack_message_id"] is None
    assert [r["message_id"] for r in rows] == sorted(r["message_id"] for r in rows)  # ID order
    bindings = read_jsonl_table(tmp_path / "jdbc" / "bindings")
    assert {(b["kind"], b["name"]) for b in bindings} >= {("queue", "fx-durable-a:sub-a"), ("queue", "fx.audit"),
                                                           ("address", "fx.events"), ("queue", "fx.empty")}


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    import os

    if not os.path.isfile(DRIVER):
        pytest.skip("PostgreSQL JDBC driver not installed")
    from amqtool.engines.export.spark import get_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = get_session("local[2]", log_path=str(log), jars=[DRIVER])
    yield session
    session.stop()


@pytest.mark.spark
def test_classic_spark_jdbc_source_equals_local(tmp_path, classic_url, jdbc_env, spark):
    _, _, local = export(tmp_path, "local", jdbc_url=classic_url, engine="local")
    doc, verdict = run_export(ExportRequest(path=".", out=str(tmp_path / "s"), fmt="jsonl", engine="spark",
                                            jdbc_url=classic_url, jdbc_partitions=2), spark_session=spark)
    assert verdict is Verdict.WARNING and doc["engine"] == "spark"  # verify's: the prepared XA transaction
    parts = sorted((tmp_path / "s" / "messages").glob("part-*"))
    assert len(parts) == 2  # two ID ranges, two tasks, two part files
    got = read_jsonl_table(tmp_path / "s" / "messages")
    assert got == local  # the parts in index order hold the local rows in the local order
    subs = read_jsonl_table(tmp_path / "s" / "subscriptions")  # pending summed over the tasks' parts
    assert subs == read_jsonl_table(tmp_path / "local" / "subscriptions") and len(subs) == 2
    assert doc["rows"] == len(local) and doc["preparedRows"] == 1
    doc1, _ = run_export(ExportRequest(path=".", out=str(tmp_path / "s1"), fmt="parquet", engine="spark",
                                       jdbc_url=classic_url, jdbc_partitions=1), spark_session=spark)
    assert doc1["rows"] == doc["rows"] and doc1["rowsByQueue"] == doc["rowsByQueue"]


def test_artemis_jdbc_export_equals_manifest(tmp_path, pg_cluster, jdbc_env, demo):
    manifest = json.loads((demo / "manifest.json").read_text())
    url = write_demo(pg_cluster, "export_demo", demo)
    doc, verdict, rows = export(tmp_path, "a", jdbc_url=url, engine="local")
    assert verdict is Verdict.OK and doc["storeKind"] == "artemis-jdbc"
    got: dict[str, list] = {}
    for r in rows:
        if r["transaction_state"] == "committed":
            got.setdefault(r["queue"], []).append((r["message_id"], r["body_sha256"], r["delivery_count"],
                                                   r["scheduled_time"]))
    want = {q: [(e["messageId"], e["bodySha256"], e.get("deliveryCount", 0), e.get("scheduledDeliveryTime"))
                for e in v] for q, v in manifest["expected"]["liveByQueue"].items() if v}
    assert got == want
    # the file store's own export gives the same rows
    fdoc, _ = run_export(ExportRequest(path=str(demo), out=str(tmp_path / "f"), fmt="jsonl", engine="local"))
    assert normalise(rows) == normalise(read_jsonl_table(tmp_path / "f" / "messages"))
    assert any(r["large"] for r in rows) and all(r["body"] is not None for r in rows)
    xml = tmp_path / "a.xml"
    xdoc, _ = run_export(ExportRequest(path=".", out=str(xml), fmt="xml", engine="local", jdbc_url=url))
    fxml = tmp_path / "f.xml"
    run_export(ExportRequest(path=str(demo), out=str(fxml), fmt="xml", engine="local"))
    assert xml.read_bytes() == fxml.read_bytes()
    shutil.rmtree(tmp_path / "f")
