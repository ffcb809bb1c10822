"""amqtool against a real ActiveMQ 5.17 broker (Debian's ``activemq``) persisting to a real PostgreSQL
(Debian's ``postgresql``, a throwaway cluster, ``tests/pg_cluster.py``) through ``jdbcPersistenceAdapter``
with Debian's JDBC driver (``libpostgresql-jdbc-java``).

1. Clean stop: two queues, a topic with two durable subscriptions (one acks part of what it got), queue acks,
   a committed and a rolled-back STOMP transaction; SIGTERM. amqtool's live sets (``print --activemq-xml``
   and ``--jdbc-url``) equal what was sent minus what was acked, ``verify`` is OK, and the restarted broker
   delivers exactly amqtool's live sets (queue browsers, durable subscribers).
2. SIGKILL under the lease locker with a transaction left open: amqtool reports the lease still held by the
   killed broker, its live sets equal what the restarted broker delivers.
Ports are 127.0.0.1 only, processes stopped by PID, every wait bounded.
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.integration.test_activemq_broker import JAR, JAVA, Broker, Stomp, brokers, send  # noqa: F401
from tests.pg_cluster import PASSWORD, USER, jdbc_env, pg_cluster  # noqa: F401

DRIVER = Path("/usr/share/java/postgresql.jar")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not JAR.exists() or not os.path.exists(JAVA), reason="Debian activemq broker not installed"),
    pytest.mark.skipif(not DRIVER.exists(), reason="PostgreSQL JDBC driver not installed "
                                                   "(apt-get install -y libpostgresql-jdbc-java)"),
]

CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"/>
  <bean id="pg-ds" class="org.postgresql.ds.PGSimpleDataSource">
    <property name="serverName" value="127.0.0.1"/>
    <property name="portNumber" value="%(pg_port)d"/>
    <property name="databaseName" value="%(db)s"/>
    <property name="user" value="%(user)s"/>
    <property name="password" value="%(password)s"/>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="%(name)s" useJmx="false"
          persistent="true" schedulerSupport="false" dataDirectory="${it.data}">
    <persistenceAdapter>
      <jdbcPersistenceAdapter dataSource="#pg-ds" cleanupPeriod="600000" %(adapter_extra)s>
        %(locker)s
      </jdbcPersistenceAdapter>
    </persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:${it.port}"/>
    </transportConnectors>
  </broker>
</beans>
"""
LEASE = '<locker><lease-database-locker lockAcquireSleepInterval="3000"/></locker>'


class JdbcBroker(Broker):
    """The integration test's broker, configured for the JDBC store and given the JDBC driver."""

    def __init__(self, data: Path, pg, db: str, name: str = "it-jdbc", lease: bool = False):
        super().__init__(data)
        self.pg, self.db, self.name, self.lease = pg, db, name, lease

        self.classpath = f":{DRIVER}"
        self.config = (CONFIG % {"pg_port": pg.port, "db": db, "user": USER, "password": PASSWORD, "name": name,
                                 "adapter_extra": 'lockKeepAlivePeriod="1000"' if lease else "",
                                 "locker": LEASE if lease else ""}).replace("%", "%%")

    @property
    def xml(self) -> Path:
        return self.data / "conf" / "activemq.xml"


def amq(run_cli, *args) -> tuple[int, dict]:
    code, out, err = run_cli(*args, "--format", "json")
    assert out, err
    return code, json.loads(out)


def live_sets(doc: dict) -> tuple[dict, dict]:
    live, subs = {}, {}
    for d in doc["destinations"]:
        if d["type"] == "queue":
            live[d["name"]] = {m["properties"].get("it_id") for m in d["live"]}
        for s in d["subscriptions"]:
            subs[f"{s['clientId']}/{s['subscriptionName']}"] = {m["properties"].get("it_id") for m in s["live"]}
    return live, subs


def browse(port: int, queue: str) -> set:
    c = Stomp(port)
    frames = c.request("SUBSCRIBE", {"destination": f"/queue/{queue}", "id": "b1", "browser": "true"})
    seen = set()
    while True:
        for f in frames:
            if f[0] == "MESSAGE" and f[1].get("browser") == "end":
                c.sock.close()
                return seen
            if f[0] == "MESSAGE":
                seen.add(f[1]["it_id"])
        frames = [c.read()]


def durable_drain(port: int, client: str, sub: str, topic: str, quiet: float = 3.0) -> set:
    """Everything the broker delivers to a durable subscriber until ``quiet`` seconds pass without a message
    (not acked: the store is left as it was)."""
    c = Stomp(port, client_id=client)
    frames = c.request("SUBSCRIBE", {"destination": f"/topic/{topic}", "id": "d", "ack": "client-individual",
                                     "activemq.subscriptionName": sub, "activemq.prefetchSize": "1000"})
    seen = {f[1]["it_id"] for f in frames if f[0] == "MESSAGE"}
    while True:
        try:
            f = c.read(timeout=quiet)
        except (socket.timeout, TimeoutError):
            break
        if f[0] == "MESSAGE":
            seen.add(f[1]["it_id"])
    c.sock.close()
    return seen


def subscribe_durable(port: int, client: str, sub: str, topic: str) -> Stomp:
    c = Stomp(port, client_id=client)
    c.request("SUBSCRIBE", {"destination": f"/topic/{topic}", "id": "d", "ack": "client-individual",
                            "activemq.subscriptionName": sub, "activemq.prefetchSize": "1000"})
    return c


def take(c: Stomp, n: int) -> list:
    got = []
    while len(got) < n:
        f = c.read()
        if f[0] == "MESSAGE":
            got.append(f)
    return got


def test_clean_stop_live_sets_match_broker(tmp_path, brokers, pg_cluster, jdbc_env, run_cli):
    db = "clean"
    url = pg_cluster.create_database(db)
    b = JdbcBroker(tmp_path / "b", pg_cluster, db)
    brokers.append(b)
    b.start()
    subscribe_durable(b.port, "it-d1", "s1", "jt").close()
    subscribe_durable(b.port, "it-d2", "s2", "jt").close()
    p = Stomp(b.port)
    for i in range(30):
        send(p, "/queue/jq", f"q-{i:03d}", 40 + 61 * i, as_bytes=i % 4 == 0)
    for i in range(7):
        send(p, "/queue/jq2", f"r-{i:03d}", 100)
    for i in range(12):
        send(p, "/topic/jt", f"t-{i:03d}", 250)
    p.request("BEGIN", {"transaction": "tx-c"})
    send(p, "/queue/jq2", "tx-commit-0", 80, tx="tx-c")
    send(p, "/queue/jq2", "tx-commit-1", 80, tx="tx-c")
    p.request("COMMIT", {"transaction": "tx-c"})
    p.request("BEGIN", {"transaction": "tx-a"})
    send(p, "/queue/jq2", "tx-abort-0", 80, tx="tx-a")
    p.request("ABORT", {"transaction": "tx-a"})
    p.close()
    c = Stomp(b.port)
    got = c.request("SUBSCRIBE", {"destination": "/queue/jq", "id": "s1", "ack": "client-individual",
                                  "activemq.prefetchSize": "1000"})
    msgs = [f for f in got if f[0] == "MESSAGE"] + take(c, 30 - len([f for f in got if f[0] == "MESSAGE"]))
    acked = set()
    for f in msgs:
        if int(f[1]["it_id"][2:]) % 3 == 0:
            c.request("ACK", {"id": f[1]["ack"]})
            acked.add(f[1]["it_id"])
    c.close()
    d1 = subscribe_durable(b.port, "it-d1", "s1", "jt")
    tmsgs = sorted(take(d1, 12), key=lambda f: f[1]["it_id"])
    for f in tmsgs[:5]:  # in order: LAST_ACKED_ID moves to the 5th message
        d1.request("ACK", {"id": f[1]["ack"]})
    d1.close()
    # While the broker runs: its default locker holds the lock; amqtool reads beside it (one read-only snapshot)
    code, live_doc = amq(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 0 and live_doc["lock"]["state"] == "held", live_doc["lock"]
    assert live_doc["lock"]["rowLockHolders"][0]["client"].startswith("127.0.0.1")
    b.stop()

    expect_q = {"jq": {f"q-{i:03d}" for i in range(30)} - acked,
                "jq2": {f"r-{i:03d}" for i in range(7)} | {"tx-commit-0", "tx-commit-1"}}
    expect_s = {"it-d1/s1": {f"t-{i:03d}" for i in range(5, 12)}, "it-d2/s2": {f"t-{i:03d}" for i in range(12)}}
    for args in (["--activemq-xml", str(b.xml)], ["--jdbc-url", url]):
        code, doc = amq(run_cli, "print", *args, "--safe")
        assert code == 0, doc
        assert doc["kind"] == "classic-jdbc" and doc["verdict"] == "OK"
        live, subs = live_sets(doc)
        assert live == expect_q
        assert subs == expect_s
        assert doc["lock"]["state"] == "free"
        topic = next(d for d in doc["destinations"] if d["key"] == "topic://jt")
        assert topic["rows"] == 12 and topic["liveCount"] == 12 and topic["ackedByAll"] == 0
    code, vdoc = amq(run_cli, "verify", "--jdbc-url", url)
    assert code == 0 and vdoc["verdict"] == "OK", vdoc
    assert vdoc["summary"]["live"] == len(expect_q["jq"]) + len(expect_q["jq2"]) + 12
    assert vdoc["summary"]["rows"] == vdoc["summary"]["live"]
    assert {f["code"] for f in vdoc["findings"]} == {"classic-jdbc-lock"}

    # The restarted broker delivers exactly amqtool's live sets.
    r = JdbcBroker(tmp_path / "r", pg_cluster, db)
    brokers.append(r)
    r.start()
    assert browse(r.port, "jq") == expect_q["jq"]
    assert browse(r.port, "jq2") == expect_q["jq2"]
    assert durable_drain(r.port, "it-d1", "s1", "jt") == expect_s["it-d1/s1"]
    assert durable_drain(r.port, "it-d2", "s2", "jt") == expect_s["it-d2/s2"]
    r.stop()


def test_sigkill_lease_and_broker_recovery(tmp_path, brokers, pg_cluster, jdbc_env, run_cli):
    db = "killed"
    url = pg_cluster.create_database(db)
    b = JdbcBroker(tmp_path / "k", pg_cluster, db, name="it-lease", lease=True)
    brokers.append(b)
    b.start()
    subscribe_durable(b.port, "it-k", "ks", "kt").close()
    p = Stomp(b.port)
    for i in range(20):
        send(p, "/queue/kq", f"k-{i:03d}", 150 + 17 * i)
    for i in range(6):
        send(p, "/topic/kt", f"kt-{i}", 90)
    c = Stomp(b.port)
    got = c.request("SUBSCRIBE", {"destination": "/queue/kq", "id": "s1", "ack": "client-individual",
                                  "activemq.prefetchSize": "1000"})
    msgs = [f for f in got if f[0] == "MESSAGE"]
    msgs += take(c, 20 - len(msgs))
    acked = set()
    for f in msgs[:6]:
        c.request("ACK", {"id": f[1]["ack"]})
        acked.add(f[1]["it_id"])
    p.request("BEGIN", {"transaction": "open-1"})
    for i in range(3):
        send(p, "/queue/kq", f"open-{i}", 60, tx="open-1")
    b.kill()

    code, doc = amq(run_cli, "print", "--activemq-xml", str(b.xml), "--safe")
    assert code == 0, doc
    assert doc["lock"]["holder"] and doc["lock"]["state"] in ("leased", "lease-expired")
    live, subs = live_sets(doc)
    assert live["kq"] == {f"k-{i:03d}" for i in range(20)} - acked
    assert subs == {"it-k/ks": {f"kt-{i}" for i in range(6)}}
    code, vdoc = amq(run_cli, "verify", "--activemq-xml", str(b.xml))
    assert code == 0 and not [f for f in vdoc["findings"] if f["severity"] != "info"]
    lock = next(f for f in vdoc["findings"] if f["code"] == "classic-jdbc-lock")
    assert "it-lease" in lock["message"] or "lease" in lock["message"]

    r = JdbcBroker(tmp_path / "kr", pg_cluster, db, name="it-lease-2", lease=True)
    brokers.append(r)
    r.start()
    assert browse(r.port, "kq") == live["kq"]
    assert durable_drain(r.port, "it-k", "ks", "kt") == subs["it-k/ks"]
    code, doc = amq(run_cli, "print", "--jdbc-url", url, "--safe")
    assert doc["lock"]["state"] == "leased" and doc["lock"]["holder"] == "it-lease-2"
    r.stop()
