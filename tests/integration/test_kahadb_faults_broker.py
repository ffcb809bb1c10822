"""The KahaDB fault harness's truth against the real ActiveMQ 5.17 broker (Debian's ``activemq``), default
KahaDB settings: a handful of damaged copies of the ``basic`` fixture, each restarted by the broker and its
three queues browsed over STOMP on loopback. Where the harness (tests/faults/kahadb.py) calls the damage
``same`` or ``latent``, the broker must start and deliver exactly what it delivers from the pristine copy;
where it calls it ``loss``, the broker must refuse to start, stop, or deliver something else. verify's
verdict follows the rule on each. Processes are started and stopped by PID, every wait is bounded.
"""
from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest

from tests.engines.kahadb.test_verdicts_kahadb import body_offset, find_record, flip
from tests.faults.kahadb import LATENT, LOSS, SAME, classify, delivered, expected, judge, rebuilt
from tests.integration.test_activemq_broker import JAR, Broker, Stomp, brokers  # noqa: F401 - the fixture
from tests.support import KAHADB
from amqtool.formats.kahadb.commands import EntryType

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not JAR.exists() or not KAHADB.is_dir(),
                                 reason="Debian activemq broker or KahaDB fixtures not present")]

DEFAULTS = Broker.config.replace('checkForCorruptJournalFiles="true" ', "")
QUEUES = ("fx.audit", "fx.bulk", "fx.orders")


class DefaultBroker(Broker):
    config = DEFAULTS

    def try_start(self, timeout: float = 90) -> bool:
        """Start; False when the broker refuses (its log says why), never a skip."""
        try:
            self.start(timeout)
        except pytest.skip.Exception:
            return False
        return True


def browse(port: int) -> dict | str:
    """Per queue, the sorted (fx_id, body SHA-256) the broker delivers to a browser; or why it stopped."""
    out = {}
    try:
        c = Stomp(port)
        for i, q in enumerate(QUEUES):
            frames = list(c.request("SUBSCRIBE", {"destination": f"/queue/{q}", "id": f"b{i}", "browser": "true"}))
            got = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if any(f[0] == "MESSAGE" and f[1].get("browser") == "end" for f in frames):
                    break
                frames.append(c.read())
            for f in frames:
                if f[0] == "MESSAGE" and f[1].get("browser") != "end":
                    got.append((f[1].get("fx_id"), hashlib.sha256(f[2]).hexdigest()))
            out[q] = sorted(got)
        c.sock.close()
    except (OSError, ConnectionError, AssertionError) as err:
        return f"stopped: {err}"
    return out


def faults():
    """(name, function damaging a copy of basic) for the cases the harness's model rests on."""
    def live_add(c, live):
        return c.type is EntryType.ADD_MESSAGE and live and c.destination.name == "fx.orders"

    def acked_add(c, live):
        return c.type is EntryType.ADD_MESSAGE and not live and c.destination.name == "fx.bulk"

    def ack(c, live):
        return c.type is EntryType.REMOVE_MESSAGE and c.destination.name == "fx.bulk" and c.transaction is None

    def body(pred):
        def do(root):
            log, _b, rec = find_record(root, pred)
            flip(log, body_offset(log, rec))
        return do

    def priority(root):
        log, _b, rec = find_record(root, live_add)
        flip(log, rec.offset + rec.length - 3)  # the command's priority fields, after the message

    def header_type(root):
        log, _b, rec = find_record(root, live_add)
        flip(log, rec.offset + 4, 0x04)

    def command_id(root):
        log, _b, rec = find_record(root, live_add)
        flip(log, rec.offset + 5 + 12, 0x01)  # inside the command's messageId string ("ID:...")

    def ack_payload(root):
        log, _b, rec = find_record(root, ack)
        flip(log, rec.offset + 8)

    def delete_last(root):
        (root / "kahadb" / "db-12.log").unlink()

    return [("acked message body", body(acked_add)), ("live message body", body(live_add)),
            ("live command priority", priority), ("live record header type", header_type), ("live command messageId", command_id),
            ("ack record", ack_payload), ("newest file deleted", delete_last)]


def test_harness_truth_agrees_with_the_broker(tmp_path, brokers):
    fx = KAHADB / "basic"

    def fresh(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(fx, root, ignore=shutil.ignore_patterns("broker.log", "*.json"))
        for p in root.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        (root / "kahadb" / "lock").unlink(missing_ok=True)
        return root

    pristine = fresh("pristine")
    pr = rebuilt(pristine)
    pd = delivered(pristine, pr)
    b = DefaultBroker(pristine)
    brokers.append(b)
    assert b.try_start(), b.log.read_text()[-2000:]
    want = browse(b.port)
    b.stop()
    assert isinstance(want, dict) and len(want["fx.bulk"]) == 13 and len(want["fx.orders"]) == 93

    rows = []
    for i, (name, damage) in enumerate(faults()):
        root = fresh(f"f{i}")
        damage(root)
        verdict = judge(root)[0]
        truth = classify(pd, pr, root)
        r = DefaultBroker(root)
        brokers.append(r)
        got = browse(r.port) if r.try_start() else "refused to start"
        r.kill()
        rows.append((name, truth, verdict, got == want, got if isinstance(got, str) else ""))
    table = "\n".join(f"{n:<28} truth={t:<8} verdict={v:<9} broker-same={s} {why}" for n, t, v, s, why in rows)
    print(table)
    for name, truth, verdict, same, _why in rows:
        assert truth in (SAME, LATENT, LOSS), table
        assert same == (truth != LOSS), table
        assert expected(truth, verdict), table
