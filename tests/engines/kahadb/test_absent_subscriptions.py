"""A durable subscription whose cursor a killed store's index no longer holds under its key
(amqtool/engines/kahadb/absent_subscriptions.py).

k2-priority-subs-kill (a real 5.17.2 broker, SIGKILLed: records after the checkpoint 4:19532) with one bit of
db.data flipped in k2-green:green's key in subscriptionAcks (index sweep seed 5721287: "k2-greel:green"). Its
SUBSCRIPTION record lies before the checkpoint, so the replay does not re-create it, and the broker has no
cursor for the real subscriber: the messages the journal leaves waiting for it are lost. verify said WARNING."""
from __future__ import annotations

from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.store.layout import detect
from tests.engines.kahadb.judged import flip
from tests.faults.kahadb import KahaCampaign
from tests.faults.model import Fault

K2 = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k2-priority-subs-kill"
KEY_AT = 36936  # db.data: a byte of "k2-green:green" in subscriptionAcks; ^0x02 makes it "k2-greel:green"


def test_a_subscription_key_damaged_in_a_killed_store_is_a_loss(tmp_path):
    c = KahaCampaign("k2", K2, tmp_path / "scratch")
    o = c.run_fault(Fault("flip", "kahadb/db.data", KEY_AT, 0x02, label="db.data page payload"))
    assert o.truth == "loss"
    assert o.verdict == "CRITICAL" and "kahadb-index-journal-mismatch" in o.codes


def test_the_finding_names_the_subscription(tmp_path):
    c = KahaCampaign("k2", K2, tmp_path / "scratch")
    flip(c.root / "kahadb", "db.data", KEY_AT, 0x02)
    findings, _ = verify_store(detect(c.root))
    f = next(f for f in findings if f.code == "kahadb-index-journal-mismatch")
    assert [(s["subscription"], s["index"]) for s in f.details["subscriptions"]] == [("k2-green:green", "absent")]
