"""Classic JDBC stores: what the rows prove was lost (issue 25), found by the row-fault campaign of
tests/faults/test_jdbc_faults.py; on main 66653ee verify said WARNING (or OK) for each CRITICAL below."""
from __future__ import annotations

import json

import pytest

from tests.engines.test_jdbc_classic import build, fixture_messages, manifest  # noqa: F401
from tests.pg_cluster import jdbc_env, pg_cluster  # noqa: F401


def verify(run_cli, url):
    code, out, _ = run_cli("verify", "--jdbc-url", url, "--format", "json")
    return code, [f for f in json.loads(out)["findings"] if f["severity"] != "info"]


def copy_row(c, rid: int) -> int:
    new = c.execute("SELECT MAX(ID) + 1 FROM ACTIVEMQ_MSGS").fetchone()[0]
    c.execute("INSERT INTO ACTIVEMQ_MSGS(ID, CONTAINER, MSGID_PROD, MSGID_SEQ, EXPIRATION, MSG, PRIORITY, XID) "
              "SELECT %s, CONTAINER, MSGID_PROD, MSGID_SEQ, EXPIRATION, MSG, PRIORITY, XID FROM ACTIVEMQ_MSGS "
              "WHERE ID = %s", (new, rid))
    return new


def test_a_copied_topic_row_an_acknowledging_subscription_gets_again_is_critical(pg_cluster, jdbc_env, run_cli,
                                                                                  fixture_messages):
    # sub-a acknowledged the first 40 topic rows: a copy of the first, with a new ID, is pending for it again
    url, ids = build(pg_cluster, "ev_dup_topic", fixture_messages)
    with pg_cluster.connect("ev_dup_topic") as c:
        copy_row(c, ids["topic://fx.events"][0])
    code, found = verify(run_cli, url)
    (f,) = [f for f in found if f["code"] == "classic-jdbc-duplicate-message"]
    assert code == 2 and f["severity"] == "critical" and "fx-durable-a:sub-a" in f["message"]


def test_a_copied_queue_row_is_dropped_by_the_cursor(pg_cluster, jdbc_env, run_cli, fixture_messages):
    url, ids = build(pg_cluster, "ev_dup_queue", fixture_messages)
    queue = next(k for k in ids if k.startswith("queue://"))
    with pg_cluster.connect("ev_dup_queue") as c:
        copy_row(c, ids[queue][0])
    code, found = verify(run_cli, url)
    assert code == 1 and [f["severity"] for f in found if f["code"] == "classic-jdbc-duplicate-message"] == ["warning"]


def test_a_container_that_is_no_destination_is_critical(pg_cluster, jdbc_env, run_cli, fixture_messages, tmp_path):
    url, ids = build(pg_cluster, "ev_container", fixture_messages)
    queue = next(k for k in ids if k.startswith("queue://"))
    with pg_cluster.connect("ev_container") as c:
        c.execute("UPDATE ACTIVEMQ_MSGS SET CONTAINER = %s WHERE ID = %s", (queue.replace("://", ":/"), ids[queue][0]))
    code, found = verify(run_cli, url)
    assert code == 2 and [f["severity"] for f in found if f["code"] == "classic-jdbc-unknown-container"] == ["critical"]
    # every command that judges says so (one rule): print and stat had the scan's own verdict (WARNING: the
    # prepared transaction only), and export exported the store with exit 0
    for argv in (("print", "--safe"), ("stat",)):
        code, out, _ = run_cli(*argv, "--jdbc-url", url, "--format", "json")
        assert (code, json.loads(out)["verdict"]) == (2, "CRITICAL"), argv
    out = tmp_path / "out"
    code, _, err = run_cli("export", "--jdbc-url", url, "-o", str(out), "--format", "jsonl")
    assert code == 2 and "classic-jdbc-unknown-container" in err and not out.exists()
    code, doc, _ = run_cli("export", "--jdbc-url", url, "-o", str(out), "--format", "jsonl", "--salvage",
                           "--report", "json")
    doc = json.loads(doc)
    assert code == 2 and doc["verdict"] == "CRITICAL"
    assert "classic-jdbc-unknown-container" in [f["code"] for f in doc["findings"]]


@pytest.fixture(autouse=True)
def _fixtures_present(manifest):  # noqa: F811 - skips without the KahaDB fixtures
    return manifest
