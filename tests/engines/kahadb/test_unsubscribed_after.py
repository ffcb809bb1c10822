"""Damage to a topic message pending only for a durable subscription an UNSUBSCRIBE after the index checkpoint
removes (amqtool/engines/kahadb/after_acks.py ``unsubscribed_after``), on a store a real 5.17.2 broker left when
SIGKILLed (tests/data/kahadb/r3-unsub-groups-ttl-kill: u2 was removed after lastUpdate 9:6358 with 171 messages
pending; db-1.log's send at 524 is pending for u2 alone in the index, the one at 2014 for u2 and k2).

``MessageDatabase.recover`` replays the SUBSCRIPTION record without info before anything is dispatched, and
``updateIndex(KahaSubscriptionCommand)`` deletes u2's ack positions: the send at 524 is never read (the real
broker restarted on the store hands u2 nothing). It was CRITICAL (campaign seed 52052 on the kl52 hold-out,
520522000080: truth same)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect
from tests.support import flip_byte

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "r3-unsub-groups-ttl-kill" / "kahadb"


def _verdict(tmp_path: Path, offset: int | None = None) -> str:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    if offset is not None:
        flip_byte(root / "db-1.log", offset, 0x20)
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name


def test_pristine_store_is_a_warning(tmp_path):
    assert _verdict(tmp_path) == "WARNING"


@pytest.mark.parametrize("offset, verdict", [(524 + 5, "WARNING"), (2014 + 5, "CRITICAL")])
def test_a_send_pending_only_for_the_removed_subscription_is_latent(tmp_path, offset, verdict):
    assert _verdict(tmp_path, offset) == verdict
