"""Durable subscriptions on a prioritized topic, handed what the real broker hands them (last_acks.py).

tests/data/kahadb/k2-priority-subs-kill was written by a real ActiveMQ 5.17.2 broker with
prioritizedMessages=true on fx.k2.t (six durable subscriptions, four with selectors, acked partly, explicit
priorities 0-9, SIGKILLed with no checkpoint in its second run); broker-delivered.json is what that broker,
restarted on a copy, handed each resumed subscription (broker-delivered-noindex.json: the same without db.data).
The broker starts a subscription whose ack positions hold nothing below its LastAck at LastAck + 1, and its
LastAck is its last ack in time (MessageDatabase.updateIndex(KahaRemoveMessageCommand)): dispatched by priority,
``red`` (color = 'red') acked high sequences before low ones and is handed again 11 messages it had
acknowledged, which other subscriptions keep stored. The journal's ack positions alone gave red 1 message (and
the fault harness's truth 16 for red, 31 for ``all``, 8 for ``blue``).

tests/data/kahadb/k8-priority-topic-kill is the other side: sub ``a`` there acknowledged everything too, its
priority-9 message first, and the broker hands it nothing: its ack positions hold no message, so the store
cursor never asks the store (``getMessageCount`` 0)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from amqtool.engines.kahadb.load import load_store
from amqtool.store.layout import detect

DATA = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k2-priority-subs-kill"
K8 = DATA.parent / "k8-priority-topic-kill"
TOPIC = "1:fx.k2.t"


def _broker(name: str) -> dict:
    """{subscription key: (count the broker handed, the message ids of those the manifest knows the id of)}"""
    delivered = json.loads((DATA / name).read_text())
    ids = {m["fx_id"]: m["message_id"] for m in json.loads((DATA / "manifest.json").read_text())["messages"]}
    out = {}
    for dest, (n, fx_ids) in delivered.items():
        if dest.startswith("/topic/fx.k2.t:"):
            out[":".join(dest.split(":")[1:3])] = (n, {ids[f] for f in fx_ids if ids.get(f)})
    return out


def _pending(root: Path, reconcile: bool, topic: str = TOPIC) -> dict:
    (d,) = load_store(detect(root), reconcile=reconcile)
    st = d.replay.destinations[topic]
    return {sk: {mid for mid, m in st.messages.items() if m.waiting and sk in m.waiting} for sk in st.subscriptions}


@pytest.fixture()
def store(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "kahadb", root)
    return root


@pytest.mark.parametrize("reconcile", [False, True], ids=["rebuilt-from-journal", "with-index"])
def test_each_subscription_is_handed_what_the_real_broker_hands_it(store, reconcile):
    for name in ("broker-delivered.json", "broker-delivered-noindex.json"):
        pending = _pending(store, reconcile)
        for sk, (n, known) in _broker(name).items():
            assert len(pending[sk]) == n, (name, sk)
            assert known <= pending[sk], (name, sk)


def test_red_is_handed_again_what_it_acknowledged_before_its_last_ack(store):
    # the manifest counts nothing live for red (it acknowledged every message it was given); the broker hands
    # it 11, stored for the other subscriptions, after its LastAck
    manifest = json.loads((DATA / "manifest.json").read_text())
    assert manifest["destinations"]["red"]["live"] == 0
    assert len(_pending(store, reconcile=False)["k2-red:red"]) == 11


@pytest.mark.parametrize("reconcile", [False, True], ids=["rebuilt-from-journal", "with-index"])
def test_a_subscription_whose_ack_positions_hold_nothing_is_handed_nothing(tmp_path, reconcile):
    root = tmp_path / "kahadb"
    shutil.copytree(K8 / "kahadb", root)
    broker = json.loads((K8 / "broker-delivered.json").read_text())
    assert broker == json.loads((K8 / "broker-delivered-noindex.json").read_text())
    pending = _pending(root, reconcile, "1:fx.k8.t")
    assert len(pending["k8-a:a"]) == broker["/topic/fx.k8.t:k8-a:a"][0] == 0
    assert len(pending["k8-b:b"]) == broker["/topic/fx.k8.t:k8-b:b"][0] == 12
