"""Replicated LevelDB: given the node directories, verify names the node holding the latest log position and
whether the nodes agree up to the shortest log, as the generator's manifest records (each node's log a
prefix of the latest's)."""
from __future__ import annotations

import json

import pytest

from amqtool.engines.leveldb.verify import verify_store
from amqtool.store.layout import detect
from tests.engines.leveldb.stores import replica_sets
from tests.support import tree_hashes

SETS = replica_sets()


@pytest.mark.skipif(not SETS, reason="no replica node sets")
@pytest.mark.parametrize("nodes", SETS, ids=[s.name for s in SETS])
def test_latest_node_and_agreement(nodes):
    man = json.loads((nodes / "manifest.json").read_text())
    before = tree_hashes(nodes)
    store = detect(nodes)
    assert store.kind == "replicated-leveldb" and len(store.nodes) == len(man["nodes"])
    findings, summary = verify_store(store)
    latest = man["latest"]
    assert summary["latestNode"].split("/")[-2:][0] == latest or summary["latestNode"].endswith(latest)
    assert summary["latestPosition"] == man["nodes"][latest]["logEnd"]
    assert summary["replicasAgree"] is all(n["logIsPrefixOfLatest"] for n in man["nodes"].values())
    assert summary["commonRange"][1] == man["agreeUpTo"]
    behind = [f for f in findings if f.code == "leveldb-replica-behind"]
    assert len(behind) == sum(1 for n in man["nodes"].values() if n["lagBytes"] > 0)
    assert tree_hashes(nodes) == before
