"""``amqtool check db`` against the throwaway PostgreSQL: a fresh database (tables absent, creatable), a
Classic store (tables, row counts, lease), an Artemis store (node manager), settings that break a broker, a
user who may not create tables, and a database that cannot be reached (JSON and exit codes)."""
from __future__ import annotations

import json

from tests.artemis_jdbc_writer import LARGE_DDL, NODE_MANAGER_DDL, JdbcJournalWriter
from tests.classic_jdbc_writer import schema
from tests.pg_cluster import PASSWORD, USER, jdbc_env, pg_cluster  # noqa: F401


def check(run_cli, *args):
    code, out, err = run_cli("check", "db", *args, "--format", "json")
    return code, json.loads(out)


def codes(doc):
    return {f["code"]: f for f in doc["findings"]}


def test_fresh_then_classic_database(pg_cluster, jdbc_env, run_cli):
    url = pg_cluster.create_database("chk_classic")
    code, doc = check(run_cli, "--jdbc-url", url)
    assert code == 0 and set(codes(doc)) == {"db-reachable", "db-tables-absent"}  # no db-table: none exists
    assert doc["checks"]["kind"] == "classic-jdbc" and doc["checks"]["database"]["canCreateTables"] is True
    with pg_cluster.connect("chk_classic") as c:
        for s in schema():
            c.execute(s)
        c.execute("INSERT INTO ACTIVEMQ_MSGS(ID, CONTAINER, MSG) VALUES (1, 'queue://a', '\\x00'), "
                  "(2, 'queue://a', '\\x00')")
        c.execute("UPDATE ACTIVEMQ_LOCK SET BROKER_NAME = 'b1', "
                  "TIME = (EXTRACT(EPOCH FROM now()) * 1000)::bigint + 600000")
    code, doc = check(run_cli, "--jdbc-url", url)
    assert code == 0
    t = doc["checks"]["tables"]
    assert (t["messages"]["rows"], t["acks"]["rows"], t["lock"]["rows"]) == (2, 0, 1)
    assert t["messages"]["bytes"] > 0
    assert {f["details"]["role"]: f["details"]["rows"] for f in doc["findings"] if f["code"] == "db-table"} == \
        {"messages": 2, "acks": 0, "lock": 1}
    assert doc["checks"]["lock"]["state"] == "leased" and "b1" in codes(doc)["db-lock"]["message"]
    with pg_cluster.connect("chk_classic") as c:
        c.execute("DROP TABLE ACTIVEMQ_ACKS")
        c.execute("ALTER DATABASE chk_classic SET idle_in_transaction_session_timeout = '30s'")
    code, doc = check(run_cli, "--jdbc-url", url, "--kind", "classic")
    found = codes(doc)
    assert code == 1 and {"db-tables-partial", "db-idle-in-transaction-timeout"} <= set(found)
    assert found["db-tables-partial"]["details"]["missing"] == ["ACTIVEMQ_ACKS"]


def test_artemis_database_and_node_manager(pg_cluster, jdbc_env, run_cli):
    url = pg_cluster.create_database("chk_artemis")
    with pg_cluster.connect("chk_artemis") as c:
        JdbcJournalWriter(c, "BINDINGS")
        JdbcJournalWriter(c, "MESSAGES")
        c.execute(NODE_MANAGER_DDL.format(t="NODE_MANAGER_STORE"))
        c.execute(LARGE_DDL.format(t="LARGE_MESSAGES"))
        c.execute("INSERT INTO NODE_MANAGER_STORE(ID, STATE) VALUES (0, 'N')")
        c.execute("INSERT INTO NODE_MANAGER_STORE(ID, HOLDER_ID, HOLDER_EXPIRATION_TIME) VALUES (1, 'old', 5)")
    code, doc = check(run_cli, "--jdbc-url", url)
    assert code == 0 and doc["checks"]["kind"] == "artemis-jdbc"
    nm = doc["checks"]["nodeManager"]
    assert nm["state"] == "NOT_STARTED" and nm["primaryLock"]["state"] == "expired"
    assert doc["checks"]["tables"]["large-messages"]["rows"] == 0
    with pg_cluster.connect("chk_artemis") as c:
        c.execute("DROP TABLE LARGE_MESSAGES")
    code, doc = check(run_cli, "--jdbc-url", url)
    assert code == 1 and codes(doc)["db-tables-partial"]["details"]["missing"] == ["LARGE_MESSAGES"]


def test_no_create_privilege_and_unreachable(pg_cluster, run_cli, monkeypatch):
    url = pg_cluster.create_database("chk_priv")
    with pg_cluster.connect("chk_priv") as c:
        c.execute("DROP ROLE IF EXISTS weak")
        c.execute("CREATE ROLE weak LOGIN PASSWORD 'weak-pw'")
        c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    monkeypatch.setenv("AMQTOOL_JDBC_USER", "weak")
    monkeypatch.setenv("AMQTOOL_JDBC_PASSWORD", "weak-pw")
    code, doc = check(run_cli, "--jdbc-url", url)
    assert code == 2 and "db-cannot-create-tables" in codes(doc)
    monkeypatch.setenv("AMQTOOL_JDBC_USER", USER)
    monkeypatch.setenv("AMQTOOL_JDBC_PASSWORD", PASSWORD)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, doc = check(run_cli, "--jdbc-url", f"jdbc:postgresql://127.0.0.1:{port}/x")
    assert code == 2 and set(codes(doc)) == {"db-unreachable"}
    code, _ = check(run_cli, "--jdbc-url", url, "--kind", "nonsense")
    assert code == 3
