"""``amqtool compact`` on a KahaDB store written by a real ActiveMQ 5.17 broker, restarted on the result.

The broker (Debian's ``activemq``, loopback only, stopped by PID) writes a store whose files are pinned by a
slow queue, an idle durable subscription, a busy one at another position and a DLQ-like queue nobody reads.
It is stopped, compacted in place, and started again: it must deliver exactly the messages it held before,
per queue and per subscription, in order, log no lost or corrupt data, go on writing, and free its files
again with its own cleanup once they are consumed.
"""
from __future__ import annotations

import json
import re
import time

import pytest

from tests.integration.test_activemq_broker import Broker, Stomp, amq_live, brokers, send  # noqa: F401

FILE = 131072  # the test broker's journalMaxFileLength
EXTRA = 'cleanupInterval="1000" checkpointInterval="1000"'


def _drain_queue(port: int, dest: str, expect: int) -> list[str]:
    c = Stomp(port)
    got = c.request("SUBSCRIBE", {"destination": dest, "id": "q", "ack": "client-individual",
                                  "activemq.prefetchSize": "1"})
    ids = []
    frames = list(got)
    while len(ids) < expect:
        f = frames.pop(0) if frames else c.read(timeout=20)
        if f[0] != "MESSAGE":
            continue
        ids.append(f[1]["it_id"])
        c.request("ACK", {"id": f[1]["ack"]})
    # nothing more is owed
    c.request("UNSUBSCRIBE", {"id": "q"})
    c.close()
    return ids


def _drain_subscription(port: int, client_id: str, name: str, expect: int, ack_first: int | None = None) -> list[str]:
    c = Stomp(port, client_id=client_id)
    got = c.request("SUBSCRIBE", {"destination": "/topic/it.events", "id": "d", "ack": "client-individual",
                                  "activemq.subscriptionName": name, "activemq.prefetchSize": "1"})
    ids = []
    frames = list(got)
    n = expect if ack_first is None else ack_first
    while len(ids) < n:
        f = frames.pop(0) if frames else c.read(timeout=20)
        if f[0] != "MESSAGE":
            continue
        ids.append(f[1]["it_id"])
        c.request("ACK", {"id": f[1]["ack"]})
    c.close()
    return ids


def _no_more(port: int, dest: str) -> bool:
    c = Stomp(port)
    c.request("SUBSCRIBE", {"destination": dest, "id": "z", "ack": "auto"})
    try:
        c.read(timeout=2)
        return False
    except (TimeoutError, OSError):
        return True
    finally:
        c.sock.close()


def _log_files(store) -> list[str]:
    return sorted(p.name for p in store.glob("db-*.log"))


def test_compacted_store_restarts_with_exactly_its_messages(tmp_path, brokers, run_cli):  # noqa: F811
    b = Broker(tmp_path / "fleet", extra=EXTRA)
    brokers.append(b)
    b.start()
    for cid, name in (("it-idle", "idle"), ("it-busy", "busy")):
        s = Stomp(b.port, client_id=cid)
        s.request("SUBSCRIBE", {"destination": "/topic/it.events", "id": "d", "ack": "client-individual",
                                "activemq.subscriptionName": name})
        s.close()
    p = Stomp(b.port)
    for i in range(240):  # interleaved, so every file holds a little of everything
        send(p, "/queue/it.bulk", f"b-{i:03d}", 1500)
        if i % 4 == 0:
            send(p, "/queue/it.slow", f"s-{i // 4:03d}", 400)
        if i % 12 == 0:
            send(p, "/queue/it.DLQ", f"d-{i // 12:03d}", 700)
        if i % 3 == 0:
            send(p, "/topic/it.events", f"t-{i // 3:03d}", 300)
    p.close()
    assert _drain_queue(b.port, "/queue/it.bulk", 240) == [f"b-{i:03d}" for i in range(240)]
    assert _drain_queue(b.port, "/queue/it.slow", 10) == [f"s-{i:03d}" for i in range(10)]
    assert _drain_subscription(b.port, "it-busy", "busy", 80, ack_first=50) == [f"t-{i:03d}" for i in range(50)]
    time.sleep(2.5)  # let the broker's own cleanup free what it can
    b.stop()

    store = b.data / "kahadb"
    live_before, subs_before = amq_live(b.data)
    assert len(live_before["/queue/it.slow"]) == 50 and len(live_before["/queue/it.DLQ"]) == 20
    assert len(subs_before["it-idle/idle"]) == 80 and len(subs_before["it-busy/busy"]) == 30
    files_before = _log_files(store)

    code, out, _ = run_cli("compact", b.data, "--format", "json")
    doc = json.loads(out)
    assert code == 0, out
    (rep,) = doc["stores"]
    assert rep["action"] == "compacted" and rep["before"]["files"] == len(files_before)
    files_after = _log_files(store)
    assert len(files_after) == rep["after"]["files"]
    live_bytes = rep["after"]["bytes"]
    assert len(files_after) <= -(-live_bytes // FILE) + 2  # within 2 files of the live bytes
    assert len(files_after) < len(files_before)
    assert not (store / "db.data").exists()
    live_after, subs_after = amq_live(b.data)  # amqtool reads the same live state back
    assert {k: v for k, v in live_after.items() if v} == {k: v for k, v in live_before.items() if v}
    assert subs_after == subs_before

    b.log.rename(b.data / "broker-before.log")  # the restart's log is read to tell when it is up
    r = Broker(b.data, extra=EXTRA)
    brokers.append(r)
    r.start()
    assert _drain_queue(r.port, "/queue/it.slow", 50) == [f"s-{i:03d}" for i in range(10, 60)]
    assert _drain_queue(r.port, "/queue/it.DLQ", 20) == [f"d-{i:03d}" for i in range(20)]
    assert _drain_subscription(r.port, "it-busy", "busy", 30) == [f"t-{i:03d}" for i in range(50, 80)]
    assert _drain_subscription(r.port, "it-idle", "idle", 80) == [f"t-{i:03d}" for i in range(80)]
    for dest in ("/queue/it.slow", "/queue/it.DLQ", "/queue/it.bulk"):
        assert _no_more(r.port, dest), dest
    # the broker goes on writing on the compacted journal
    p = Stomp(r.port)
    for i in range(5):
        send(p, "/queue/it.slow", f"n-{i}", 200)
    p.close()
    assert _drain_queue(r.port, "/queue/it.slow", 5) == [f"n-{i}" for i in range(5)]
    # and its own cleanup frees the compacted files once nothing in them is owed
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_log_files(store)) > 2:
        time.sleep(0.5)
    assert len(_log_files(store)) <= 2, _log_files(store)
    r.stop()
    log = r.log.read_text(errors="replace")
    assert "Recovering from the journal" in log
    assert not re.search(r"(?i)corrupt|lost|failed to recover|duplicate message add", log), log[-3000:]


def _index_destinations(store) -> tuple[set, set]:
    """The destinations and durable subscriptions in the broker's own index (db.data, written at its clean
    stop): what the broker has, as opposed to what amqtool reads from the journal."""
    from amqtool.formats.kahadb.pagefile import decode_index

    view = decode_index((store / "db.data").read_bytes())
    subs = {f"{k}/{s}" for k, by_sub in view.sub_locations.items() for s in by_sub}
    return set(view.destinations), subs


def test_compacted_store_keeps_every_destination_and_subscription(tmp_path, brokers, run_cli):  # noqa: F811
    # Issue 26 item 8: a queue holding 0 messages was gone once the broker restarted on the compacted store.
    b = Broker(tmp_path / "dests", extra=EXTRA)
    brokers.append(b)
    b.start()
    s = Stomp(b.port, client_id="it-keep")
    s.request("SUBSCRIBE", {"destination": "/topic/it.idle", "id": "d", "ack": "client-individual",
                            "activemq.subscriptionName": "keep"})
    s.close()
    p = Stomp(b.port)
    for i in range(30):
        send(p, "/queue/orders.fast", f"f-{i:03d}", 500)
        if i % 3 == 0:
            send(p, "/queue/orders.slow", f"s-{i // 3:03d}", 500)
    send(p, "/topic/it.nobody", "t-0", 100)  # a topic without durable subscriptions: nothing stored
    p.close()
    assert _drain_queue(b.port, "/queue/orders.fast", 30) == [f"f-{i:03d}" for i in range(30)]
    b.stop()
    store = b.data / "kahadb"
    dests_before, subs_before = _index_destinations(store)
    assert "0:orders.fast" in dests_before and "0:orders.slow" in dests_before
    assert any(k.endswith("keep") for k in subs_before)

    code, out, _ = run_cli("compact", b.data, "--format", "json")
    assert code == 0, out
    assert not (store / "db.data").exists()

    b.log.rename(b.data / "broker-before.log")
    r = Broker(b.data, extra=EXTRA)
    brokers.append(r)
    r.start()
    assert _drain_queue(r.port, "/queue/orders.slow", 10) == [f"s-{i:03d}" for i in range(10)]
    r.stop()
    dests_after, subs_after = _index_destinations(store)
    assert dests_after == dests_before
    assert subs_after == subs_before
