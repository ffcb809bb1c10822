"""The export's ``subscriptions`` table (ActiveMQ Classic durable subscriptions) on every KahaDB fixture,
against its manifest: one row per durable subscription the broker was given (client id, name, topic), its
record where the manifest's journal record counts put it, its last acknowledged message the newest one the
manifest says it acknowledged, and ``pending`` the number of messages rows exported for it (and the
manifest's pending count). An Artemis store's export has the table, empty. Fleets and Spark:
test_export_fleet.py, test_export_fleet_spark.py, test_export_spark.py."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.schema import SUBSCRIPTION_COLUMNS
from tests.engines.export_store import read_jsonl_table, read_parquet_table
from tests.support import KAHADB

pytestmark = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
DATASETS = ["basic", "gc", "mkahadb", "tx"]


def manifest(ds: str) -> dict:
    return json.loads((KAHADB / ds / "manifest.json").read_text())


def expected_subscriptions(ds: str) -> dict[str, dict]:
    """``clientId:subscriptionName`` -> what the manifest says of it: topic, pending messages (live and not
    acknowledged by it), the OpenWire id of the newest message it acknowledged (acks are sent in the order
    received, which is the send order), the directory and journal file its record is in."""
    m = manifest(ds)
    out = {}
    for e in m["events"]:
        if e["event"] == "durable_subscribed" or e["event"] == "consume" and e.get("durable"):
            topic = e["destination"].split("/topic/", 1)[1]
            out[f"{e['client_id']}:{e.get('subscription') or e['durable']}"] = {"topic": topic}
    for key, sub in out.items():
        name = key.split(":", 1)[1]
        msgs = sorted((x for x in m["messages"] if x["destination"] == f"/topic/{sub['topic']}"),
                      key=lambda x: x["seq"])
        if any("acked_by" in x for x in msgs):  # several subscriptions: who acknowledged what
            acked = [x for x in msgs if name in x.get("acked_by", ())]
            sub["pending"] = sum(1 for x in msgs if name in x.get("pending_for", ()))
        else:  # the topic's only subscription
            acked = [x for x in msgs if x.get("acked")]
            sub["pending"] = sum(1 for x in msgs if x["live"])
        sub["last_ack"] = acked[-1]["message_id"] if acked else None
        # the file holding the topic's KAHA_SUBSCRIPTION_COMMAND records
        where = [(path, c) for path, c in m["journal_record_counts"].items()  # "<dir>[/<child>]/db-N.log"
                 if c.get("user_records", {}).get("KAHA_SUBSCRIPTION_COMMAND")
                 and (ds != "mkahadb" or sub["topic"] in path.replace("#2f", "/").replace("#3a", ":"))]
        assert len(where) == 1, where
        path = where[0][0].split("/")
        sub["directory"] = "." if len(path) == 2 else path[1]
        sub["file"] = int(path[-1][3:-4])
    return out


def _export(ds: str, out, fmt: str = "parquet", **kw) -> tuple[dict, list[dict], list[dict]]:
    doc, _ = run_export(ExportRequest(str(KAHADB / ds), str(out), fmt, engine="local", safe=True, **kw))
    read = read_parquet_table if fmt == "parquet" else read_jsonl_table
    return doc, read(out / "subscriptions"), read(out / "messages")


@pytest.mark.parametrize("ds", DATASETS)
def test_subscriptions_equal_manifest(ds, tmp_path):
    want = expected_subscriptions(ds)
    assert (ds in ("basic", "mkahadb")) == bool(want)  # the fixtures with durable subscriptions
    doc, subs, messages = _export(ds, tmp_path / "out")
    rows_for = Counter(str(r["queue"]) for r in messages)
    by_queue = {r["queue"]: r for r in subs}
    assert len(by_queue) == len(subs) and set(by_queue) == set(want)
    assert doc["subscriptions"] == len(want)  # the export document counts the table's rows
    for q, w in want.items():
        r = by_queue[q]
        assert list(r) == [c[0] for c in SUBSCRIPTION_COLUMNS]
        assert (r["address"], f"{r['client_id']}:{r['subscription_name']}") == (w["topic"], q)
        assert r["pending"] == rows_for[q] == doc["rowsByQueue"].get(q, 0) == w["pending"]
        assert r["last_ack_store_message_id"] == w["last_ack"]
        assert (r["last_ack_message_id"] is None) == (w["last_ack"] is None)
        assert r["directory"] == w["directory"]
        assert r["subscribed_at"] >> 32 == r["subscription_record"] >> 32 == w["file"]
        assert r["subscribed_at"] == r["subscription_record"]  # never re-written (no GC of its file)
        # STOMP durable subscriptions without selector or noLocal, not retroactive
        assert (r["selector"], r["no_local"], r["retroactive"]) == (None, False, False)
    if ds == "basic":
        # sub-a's last acknowledged message is still pending for sub-b: the same message_id in its row
        a = by_queue["fx-durable-a:sub-a"]
        hit = [m for m in messages if m["queue"] == "fx-durable-b:sub-b"
               and m["store_message_id"] == a["last_ack_store_message_id"]]
        assert [m["message_id"] for m in hit] == [a["last_ack_message_id"]]
        assert by_queue["fx-durable-b:sub-b"]["last_ack_message_id"] is None  # never acknowledged one


def test_jsonl_and_queue_filter(tmp_path):
    """JSON Lines gives the Parquet rows; ``--queue`` selects subscriptions as it selects messages rows, so
    ``pending`` stays the count of the rows written."""
    _, pq, _ = _export("basic", tmp_path / "pq")
    _, js, _ = _export("basic", tmp_path / "js", "jsonl")
    assert sorted(js, key=lambda r: r["queue"]) == sorted(pq, key=lambda r: r["queue"])
    doc, only, messages = _export("basic", tmp_path / "q", queues=("fx-durable-b:*",))
    assert [r["queue"] for r in only] == ["fx-durable-b:sub-b"] and only[0]["pending"] == len(messages) == 100
    assert doc["subscriptions"] == 1


def test_artemis_export_has_an_empty_table(tmp_path):
    from tests.support import PUBLIC_JOURNALS

    if not PUBLIC_JOURNALS:
        pytest.skip("no Artemis fixture")
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        run_export(ExportRequest(str(PUBLIC_JOURNALS[0]), str(out), fmt, engine="local"))
        read = read_parquet_table if fmt == "parquet" else read_jsonl_table
        assert (out / "subscriptions").is_dir() and read(out / "subscriptions") == []
    import pyarrow.parquet as pq

    names = pq.read_schema(next((tmp_path / "parquet" / "subscriptions").glob("*.parquet"))).names
    assert names == [c[0] for c in SUBSCRIPTION_COLUMNS]
