"""Classic JDBC stores in a throwaway PostgreSQL: rows written from the KahaDB ``basic`` fixture (its live
messages' own OpenWire bytes), so the live sets are checked against the fixture's manifest; then damaged rows,
prepared XA rows, table prefixes, credentials and bad input, through the CLI (JSON and exit codes)."""
from __future__ import annotations

import json

import pytest

from tests.classic_jdbc_writer import (
    add_subscription,
    encoded_xid,
    kahadb_messages,
    record_destination,
    schema,
    write_messages,
)
from tests.pg_cluster import PASSWORD, USER, jdbc_env, pg_cluster  # noqa: F401
from tests.support import KAHADB

BASIC = KAHADB / "basic"


@pytest.fixture(scope="module")
def manifest():
    if not BASIC.is_dir():
        pytest.skip("KahaDB fixtures not found")
    return json.loads((BASIC / "manifest.json").read_text())


@pytest.fixture(scope="module")
def fixture_messages(manifest):
    return kahadb_messages(BASIC / "kahadb")


def build(pg, db: str, messages, prefix: str = "", sub_a_after: int = 40):
    """A store holding ``messages``; fx.events gets sub-b (nothing acked) and sub-a (acked through the
    ``sub_a_after``-th topic row). Returns (url, row ids per container)."""
    url = pg.create_database(db)
    with pg.connect(db) as c:
        if "." in prefix:
            c.execute(f"CREATE SCHEMA {prefix.split('.')[0]}")
        for s in schema(prefix):
            c.execute(s)
        ids = write_messages(c, messages, prefix)
        topic = ids["topic://fx.events"]
        add_subscription(c, "topic://fx.events", "fx-durable-b", "sub-b", -1, prefix)
        add_subscription(c, "topic://fx.events", "fx-durable-a", "sub-a", topic[sub_a_after - 1], prefix)
        record_destination(c, "queue://fx.empty", prefix)
    return url, ids


def run(run_cli, *args):
    code, out, err = run_cli(*args, "--format", "json")
    return code, json.loads(out), err


def fx_sets(doc):
    live, subs = {}, {}
    for d in doc["destinations"]:
        live[f"/{d['type']}/{d['name']}"] = {m["properties"]["fx_id"] for m in d["live"]}
        for s in d["subscriptions"]:
            subs[f"{s['clientId']}/{s['subscriptionName']}"] = [m["properties"]["fx_id"] for m in s["live"]]
    return live, subs


def test_live_sets_match_fixture_manifest(pg_cluster, jdbc_env, run_cli, manifest, fixture_messages):
    url, ids = build(pg_cluster, "basic", fixture_messages)
    code, doc, _ = run(run_cli, "print", "--jdbc-url", url)
    assert code == 0 and doc["verdict"] == "OK" and doc["kind"] == "classic-jdbc"
    live, subs = fx_sets(doc)
    for dest, info in manifest["destinations"].items():
        assert live[dest] == set(info["live_fx_ids"]), dest
    assert live["/queue/fx.empty"] == set()
    topic_order = [m["fx_id"] for m in sorted((m for m in manifest["messages"]
                                               if m["destination"] == "/topic/fx.events" and m["live"]),
                                              key=lambda m: m["send_order"])]
    assert subs["fx-durable-b/sub-b"] == topic_order
    assert subs["fx-durable-a/sub-a"] == topic_order[40:]
    by_fx = {m["fx_id"]: m for m in manifest["messages"]}
    for d in doc["destinations"]:
        for m in d["live"]:
            want = by_fx[m["properties"]["fx_id"]]
            assert (m["messageId"], m["bodySize"], m["bodySha256"]) == (want["message_id"], want["size"],
                                                                        want["body_sha256"])
    assert doc["summary"]["rows"] == len(fixture_messages) == doc["summary"]["live"]
    assert doc["lock"]["state"] == "free"
    code, vdoc, _ = run(run_cli, "verify", "--jdbc-url", url)
    assert code == 0 and [f["code"] for f in vdoc["findings"]] == ["classic-jdbc-lock"]


def test_damaged_and_prepared_rows(pg_cluster, jdbc_env, run_cli, fixture_messages):
    msgs = [m for m in fixture_messages if m.container == "queue://fx.bulk"]  # 13 live
    url = pg_cluster.create_database("damaged")
    with pg_cluster.connect("damaged") as c:
        for s in schema():
            c.execute(s)
        write_messages(c, msgs, xid={2: encoded_xid(b"+"), 3: encoded_xid(b"-")})
        c.execute("UPDATE ACTIVEMQ_MSGS SET MSG = substring(MSG from 1 for 40) WHERE ID = 5")
        c.execute("UPDATE ACTIVEMQ_LOCK SET BROKER_NAME = 'old-broker', TIME = 1000 WHERE ID = 1")
    code, doc, _ = run(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 2 and doc["verdict"] == "CRITICAL"
    q = next(d for d in doc["destinations"] if d["key"] == "queue://fx.bulk")
    assert q["rows"] == 13 and q["liveCount"] == 11  # the prepared add and the prepared remove are not live
    assert {m["id"] for m in q["live"]} == set(range(1, 14)) - {2, 3}
    assert next(m for m in q["live"] if m["id"] == 5)["error"]
    assert all("body" not in m and "bodyBase64" not in m for m in q["live"])
    [tx] = doc["transactions"]
    assert (tx["sends"], tx["acks"], tx["state"]) == (1, 1, "prepared")
    assert tx["xid"] == "XID:[7,globalId=" + b"gtx-1".hex() + ",branchId=" + b"b1".hex() + "]"
    assert doc["lock"]["state"] == "lease-expired" and doc["lock"]["holder"] == "old-broker"
    code, vdoc, _ = run(run_cli, "verify", "--jdbc-url", url)
    codes = [f["code"] for f in vdoc["findings"]]
    assert code == 2 and codes.count("classic-jdbc-undecodable") == 1
    assert "classic-jdbc-prepared-transaction" in codes
    bad = next(f for f in vdoc["findings"] if f["code"] == "classic-jdbc-undecodable")
    assert bad["path"] == "ACTIVEMQ_MSGS:5"

    with pg_cluster.connect("damaged") as c:
        c.execute("UPDATE ACTIVEMQ_MSGS SET XID = 'not base64!' WHERE ID = 2")
        c.execute("DELETE FROM ACTIVEMQ_MSGS WHERE ID = 5")
    code, vdoc, _ = run(run_cli, "verify", "--jdbc-url", url)
    assert code == 2 and "classic-jdbc-bad-xid" in {f["code"] for f in vdoc["findings"]}
    with pg_cluster.connect("damaged") as c:
        c.execute("UPDATE ACTIVEMQ_MSGS SET XID = NULL WHERE ID = 2")
    code, vdoc, _ = run(run_cli, "verify", "--jdbc-url", url)
    assert code == 1 and vdoc["summary"]["live"] == 11  # 13 - deleted 5 - prepared remove 3


def test_table_prefix_from_activemq_xml_and_option(pg_cluster, jdbc_env, run_cli, fixture_messages, tmp_path):
    msgs = [m for m in fixture_messages if m.container == "queue://fx.orders"]
    url, _ = build(pg_cluster, "prefixed", msgs + [m for m in fixture_messages
                                                  if m.container == "topic://fx.events"], prefix="amq.X_")
    code, doc, err = run(run_cli, "print", "--jdbc-url", url)
    assert code == 3 and "ACTIVEMQ_MSGS" in doc["error"]
    code, doc, _ = run(run_cli, "print", "--jdbc-url", url, "--jdbc-table-prefix", "amq.X_", "--safe")
    assert code == 0 and doc["summary"]["live"] == len(msgs) + 100
    xml = tmp_path / "conf" / "activemq.xml"
    xml.parent.mkdir()
    xml.write_text(f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <bean id="ds" class="org.apache.commons.dbcp2.BasicDataSource">
    <property name="url" value="{url}"/>
    <property name="username" value="{USER}"/>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="b" dataDirectory="${{unknown.dir}}">
    <persistenceAdapter>
      <jdbcPersistenceAdapter dataSource="#ds">
        <statements><statements tablePrefix="amq.X_"/></statements>
      </jdbcPersistenceAdapter>
    </persistenceAdapter>
  </broker>
</beans>""")
    code, doc, _ = run(run_cli, "verify", "--activemq-xml", str(xml))
    assert code == 0 and doc["summary"]["live"] == len(msgs) + 100
    code, doc, _ = run(run_cli, "print", "--jdbc-table-prefix", "x;drop", "--jdbc-url", url)
    assert code == 3 and "identifier" in doc["error"]


def test_credentials_never_from_argv(pg_cluster, run_cli, monkeypatch, tmp_path):
    url = pg_cluster.create_database("creds")
    monkeypatch.delenv("AMQTOOL_JDBC_PASSWORD", raising=False)
    monkeypatch.setenv("AMQTOOL_JDBC_USER", USER)
    code, doc, _ = run(run_cli, "verify", "--jdbc-url", url + f"?password={PASSWORD}")
    assert code == 3 and "ps" in doc["error"]
    code, doc, _ = run(run_cli, "verify", "--jdbc-url", url)  # no password at all: the server refuses
    assert code == 3 and "cannot connect" in doc["error"]
    pw = tmp_path / "pw"
    pw.write_text(PASSWORD + "\n")
    code, doc, _ = run(run_cli, "verify", "--jdbc-url", url, "--jdbc-password-file", str(pw))
    assert code == 3 and "no broker store here" in doc["error"]  # connected: the tables are not there
    pw.write_text("wrong\n")
    code, doc, _ = run(run_cli, "verify", "--jdbc-url", url, "--jdbc-password-file", str(pw))
    assert code == 3 and "password authentication failed" in doc["error"]


def test_sessions_are_read_only(pg_cluster, jdbc_env):
    from amqtool.engines.jdbc.connection import apply_credentials, parse_jdbc_url, read_only_session

    target = apply_credentials(parse_jdbc_url(pg_cluster.url))
    with read_only_session(target) as conn:
        with conn.cursor() as cur:
            cur.execute("SHOW transaction_read_only")
            assert cur.fetchone()[0] == "on"
            cur.execute("SHOW transaction_isolation")
            assert cur.fetchone()[0] == "repeatable read"


def test_jsonl_rows(pg_cluster, jdbc_env, run_cli, fixture_messages):
    msgs = [m for m in fixture_messages if m.container in ("queue://fx.bulk", "topic://fx.events")]
    url, _ = build(pg_cluster, "jsonl", msgs, sub_a_after=90)
    code, out, _ = run_cli("print", "--jdbc-url", url, "--format", "jsonl", "--safe")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and rows[-1]["record"] == "summary" and rows[-1]["verdict"] == "OK"
    assert sum(r["record"] == "message" for r in rows) == 13 + 100
    subs = {r["clientId"]: r for r in rows if r["record"] == "subscription"}
    assert subs["fx-durable-a"]["pendingCount"] == 10 and len(subs["fx-durable-b"]["pending"]) == 100


def test_prioritized_subscription(pg_cluster, jdbc_env, run_cli, fixture_messages):
    """``prioritizedMessages``: a durable subscription has an ACKS row per priority (0..9) and each priority's
    LAST_ACKED_ID applies to that priority's messages only (``getDurableSubscriberMessageCountStatementWithPriority``)."""
    topic = [m for m in fixture_messages if m.container == "topic://fx.events"]
    url = pg_cluster.create_database("prio")
    with pg_cluster.connect("prio") as c:
        for s in schema():
            c.execute(s)
        ids = write_messages(c, topic)["topic://fx.events"]
        prios = {rid: m.priority for rid, m in zip(ids, topic)}
        top = max(prios.values())
        for p in range(10):  # the top priority acked through its last message, the others nothing
            last = max(r for r, q in prios.items() if q == top) if p == top else -1
            add_subscription(c, "topic://fx.events", "c-prio", "s-prio", last, priorities=range(p, p + 1))
    assert len(set(prios.values())) > 1  # the fixture has messages of more than one priority
    code, doc, _ = run(run_cli, "print", "--jdbc-url", url, "--safe")
    [sub] = next(d for d in doc["destinations"] if d["key"] == "topic://fx.events")["subscriptions"]
    assert code == 0 and sub["prioritized"] is True
    assert {m["id"] for m in sub["live"]} == {r for r, q in prios.items() if q != top}
