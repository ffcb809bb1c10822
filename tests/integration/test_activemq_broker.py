"""amqtool against a real ActiveMQ Classic broker (Debian's ``activemq`` package) on loopback.

Install: ``apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y activemq``.
The test skips with the reason when the broker is not installed or will not start.

1. Clean stop: durable subscription + queue traffic over STOMP, some acks, SIGTERM; amqtool's live set must
   equal what was sent minus what was acked, and verify must be clean.
2. SIGKILL with the index never checkpointed and an open transaction: amqtool must report the journal
   ahead of the index and the open transaction, and its live set must equal what the broker itself
   recovers when restarted on a copy (browsed over STOMP).
Processes are started and stopped by PID, ports are 127.0.0.1 only, every wait is bounded.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from amqtool.errors import Severity
from amqtool.engines.kahadb import print_document, verify_store
from amqtool.store.layout import detect

JAR = Path("/usr/share/activemq/bin/activemq.jar")
JAVA = shutil.which("java") or "/usr/bin/java"

pytestmark = pytest.mark.skipif(not JAR.exists() or not os.path.exists(JAVA),
                                reason="Debian activemq broker not installed (apt-get install -y activemq)")

CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"/>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="it-broker" useJmx="false"
          persistent="true" schedulerSupport="false" dataDirectory="${it.data}">
    <persistenceAdapter>
      <kahaDB directory="${it.data}/kahadb" journalMaxFileLength="131072" checksumJournalFiles="true"
              checkForCorruptJournalFiles="true" %(extra)s/>
    </persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="64 mb"/></memoryUsage>
      <storeUsage><storeUsage limit="1 gb"/></storeUsage>
      <tempUsage><tempUsage limit="1 gb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:${it.port}"/>
    </transportConnectors>
  </broker>
</beans>
"""

LOG4J = """log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d %-5p %c{1} - %m%n
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    config = CONFIG       # activemq.xml template (``%(extra)s`` filled from ``extra``)
    classpath = ""        # extra class path entries (":"-separated), e.g. a JDBC driver

    def __init__(self, data: Path, extra: str = ""):
        self.data = data
        self.port = free_port()
        self.extra = extra
        self.proc: subprocess.Popen | None = None
        self.log = data / "broker.log"

    def start(self, timeout: float = 90) -> None:
        conf = self.data / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j.properties").write_text(LOG4J)
        xml = conf / "activemq.xml"
        xml.write_text(self.config % {"extra": self.extra})
        d = str(self.data)
        cmd = [JAVA, "-Xms128M", "-Xmx256M", "--add-reads=java.xml=java.logging",
               "--add-opens", "java.base/java.security=ALL-UNNAMED", "--add-opens", "java.base/java.net=ALL-UNNAMED",
               "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.util=ALL-UNNAMED",
               "--add-opens", "java.naming/javax.naming.spi=ALL-UNNAMED",
               "--add-opens", "java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
               "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
               "--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
               f"-Dactivemq.classpath={conf}{self.classpath}", "-Dactivemq.home=/usr/share/activemq", f"-Dactivemq.base={d}",
               f"-Dactivemq.conf={conf}", f"-Dactivemq.data={d}",
               f"-Dlog4j.configuration=file:{conf}/log4j.properties",
               f"-Dit.data={d}", f"-Dit.port={self.port}",
               "-jar", str(JAR), "start", f"xbean:file:{xml}"]
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if ") started" in text:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = self.log.read_text(errors="replace")[-1500:]
        self.kill()
        pytest.skip(f"ActiveMQ broker did not start within {timeout}s: {tail}")

    def stop(self, timeout: float = 60) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("broker did not stop on SIGTERM")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def brokers():
    started: list[Broker] = []
    yield started
    for b in started:
        b.kill()


class Stomp:
    """A tiny STOMP 1.2 client: frames, receipts, MESSAGE reading. Enough for this test."""

    def __init__(self, port: int, client_id: str | None = None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        self.rid = 0
        h = {"accept-version": "1.2", "host": "localhost", "heart-beat": "0,0"}
        if client_id:
            h["client-id"] = client_id
        self.write("CONNECT", h)
        f = self.read()
        assert f[0] == "CONNECTED", f

    def write(self, cmd: str, headers: dict, body: bytes = b"") -> None:
        head = cmd + "\n" + "".join(f"{k}:{v}\n" for k, v in headers.items()) + "\n"
        self.sock.sendall(head.encode() + body + b"\x00")

    def read(self, timeout: float = 20):
        self.sock.settimeout(timeout)
        while True:
            while self.buf.startswith(b"\n"):
                self.buf = self.buf[1:]
            i = self.buf.find(b"\n\n")
            if i >= 0:
                lines = self.buf[:i].decode().split("\n")
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers.setdefault(k, v)
                start = i + 2
                if "content-length" in headers:
                    n = int(headers["content-length"])
                    if len(self.buf) >= start + n + 1:
                        body = self.buf[start:start + n]
                        self.buf = self.buf[start + n + 1:]
                        return lines[0], headers, body
                else:
                    j = self.buf.find(b"\x00", start)
                    if j >= 0:
                        body = self.buf[start:j]
                        self.buf = self.buf[j + 1:]
                        return lines[0], headers, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.buf += chunk

    def request(self, cmd: str, headers: dict, body: bytes = b"") -> list:
        """Send with a receipt; return MESSAGE frames that arrived meanwhile."""
        self.rid += 1
        rid = f"r{self.rid}"
        self.write(cmd, dict(headers, receipt=rid), body)
        early = []
        while True:
            f = self.read()
            if f[0] == "RECEIPT" and f[1].get("receipt-id") == rid:
                return early
            if f[0] == "ERROR":
                raise AssertionError(f"STOMP error: {f[1]} {f[2][:200]!r}")
            early.append(f)

    def close(self) -> None:
        try:
            self.request("DISCONNECT", {})
        finally:
            self.sock.close()


def send(c: Stomp, dest: str, ident: str, n_bytes: int, as_bytes: bool = False, tx: str | None = None,
         receipt: bool = True):
    body = (ident + "|" + "x" * n_bytes)[:max(n_bytes, len(ident) + 1)].encode()
    h = {"destination": dest, "persistent": "true", "it_id": ident}
    if as_bytes:
        h["content-length"] = str(len(body))
    if tx:
        h["transaction"] = tx
    if receipt:
        c.request("SEND", h, body)
    else:
        c.write("SEND", h, body)


def consume(c: Stomp, dest: str, n: int, early=None, **extra) -> list:
    got = list(early or [])
    got += c.request("SUBSCRIBE", dict({"destination": dest, "id": "s1", "ack": "client-individual",
                                        "activemq.prefetchSize": "1000"}, **extra))
    while len(got) < n:
        got.append(c.read())
    return [f for f in got if f[0] == "MESSAGE"]


def amq_live(root: Path) -> tuple[dict, dict]:
    doc = print_document(detect(root), safe=True)
    live, subs = {}, {}
    for st in doc["stores"]:
        for d in st["destinations"]:
            live[f"/{d['type']}/{d['name']}"] = {m["properties"].get("it_id") for m in d["live"]}
            for s in d["subscriptions"]:
                subs[f"{s['clientId']}/{s['subscriptionName']}"] = {m["properties"].get("it_id") for m in s["live"]}
    return live, subs


def test_clean_stop_live_set(tmp_path, brokers):
    b = Broker(tmp_path / "clean")
    brokers.append(b)
    b.start()
    sub = Stomp(b.port, client_id="it-durable")
    sub.request("SUBSCRIBE", {"destination": "/topic/it.t", "id": "d1", "ack": "client-individual",
                              "activemq.subscriptionName": "it-sub"})
    sub.close()
    p = Stomp(b.port)
    for i in range(40):
        send(p, "/queue/it.q", f"q-{i:03d}", 50 + 97 * i, as_bytes=i % 5 == 0)
    for i in range(12):
        send(p, "/topic/it.t", f"t-{i:03d}", 300)
    p.close()
    c = Stomp(b.port)
    msgs = consume(c, "/queue/it.q", 40)
    acked = set()
    for f in msgs:
        ident = f[1]["it_id"]
        if int(ident[2:]) % 3 == 0:
            c.request("ACK", {"id": f[1]["ack"]})
            acked.add(ident)
    c.close()
    b.stop()
    live, subs = amq_live(b.data)
    assert live["/queue/it.q"] == {f"q-{i:03d}" for i in range(40)} - acked
    assert subs["it-durable/it-sub"] == {f"t-{i:03d}" for i in range(12)}
    findings, summary = verify_store(detect(b.data))
    assert [f for f in findings if f.severity is not Severity.INFO] == []
    assert summary["live"] == len(live["/queue/it.q"]) + 12


def test_sigkill_matches_broker_recovery(tmp_path, brokers):
    b = Broker(tmp_path / "kill", extra='checkpointInterval="600000" cleanupInterval="600000"')
    brokers.append(b)
    b.start()
    p = Stomp(b.port)
    for i in range(30):
        send(p, "/queue/it.k", f"k-{i:03d}", 200 + 31 * i)
    c = Stomp(b.port)
    msgs = consume(c, "/queue/it.k", 30)
    acked = set()
    for f in msgs[:8]:
        c.request("ACK", {"id": f[1]["ack"]})
        acked.add(f[1]["it_id"])
    p.request("BEGIN", {"transaction": "open-1"})
    for i in range(3):
        send(p, "/queue/it.k", f"tx-{i}", 100, tx="open-1")
    time.sleep(0.3)
    b.kill()
    store = b.data / "kahadb"
    before = {q.name: q.read_bytes() for q in store.iterdir() if q.is_file()}
    live, _ = amq_live(b.data)
    findings, _ = verify_store(detect(b.data))
    assert {q.name: q.read_bytes() for q in store.iterdir() if q.is_file()} == before
    codes = {f.code for f in findings}
    assert "kahadb-journal-ahead-of-index" in codes and "kahadb-open-transaction" in codes
    assert not [f for f in findings if f.severity is Severity.CRITICAL]
    assert live["/queue/it.k"] == {f"k-{i:03d}" for i in range(30)} - acked

    # What does the broker itself recover from a copy?
    copy = tmp_path / "recovered"
    copy.mkdir()
    shutil.copytree(store, copy / "kahadb")
    r = Broker(copy)
    brokers.append(r)
    r.start()
    c = Stomp(r.port)
    got = c.request("SUBSCRIBE", {"destination": "/queue/it.k", "id": "b1", "browser": "true"})
    seen = set()
    frames = list(got)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = [f for f in frames if f[0] == "MESSAGE" and f[1].get("browser") == "end"]
        for f in frames:
            if f[0] == "MESSAGE" and "it_id" in f[1]:
                seen.add(f[1]["it_id"])
        if done:
            break
        frames = [c.read()]
    c.sock.close()
    r.stop()
    assert seen == live["/queue/it.k"]
