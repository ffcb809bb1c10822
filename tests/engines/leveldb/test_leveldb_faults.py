"""A fault campaign over LevelDB stores (the harness of tests/faults, issue 25's rule): every fault's verdict
is what the truth of the damaged store deserves (zero misses), on the broker-written fixture;
``AMQTOOL_LEVELDB_FAULT_STORES=1`` runs it on every store found (the generated ones too, below 64 MiB: misses
remain there, see the branch's report), ``AMQTOOL_LEVELDB_FAULTS`` sets the faults per store (default 60)."""
from __future__ import annotations

import random
import shutil

import pytest

import os

from tests.engines.leveldb.stores import CASE_IDS, CASES, FIXTURE
from tests.faults.leveldb import LevelDBSites, delivered, verify_verdict
from tests.faults.model import Outcome, classify, confusion
from tests.support import copy_tree

FAULTS = int(os.environ.get("AMQTOOL_LEVELDB_FAULTS", "60"))


_ALL = os.environ.get("AMQTOOL_LEVELDB_FAULT_STORES") == "1"
_PICK = [(c, i) for c, i in zip(CASES, CASE_IDS) if _ALL or c == FIXTURE]


@pytest.mark.skipif(not _PICK, reason="no LevelDB fixture")
@pytest.mark.parametrize("case", [c for c, _ in _PICK], ids=[i for _, i in _PICK])
def test_fault_campaign_has_no_misses(case, tmp_path):
    if sum(p.stat().st_size for p in (case / "store").glob("*.log")) > 64 << 20:
        pytest.skip("a campaign is for small stores")
    root = copy_tree(case / "store", tmp_path / "store")
    sites = LevelDBSites.read(root)
    pristine = delivered(root)
    outcomes = []
    for i in range(FAULTS):
        seed = 25 * 1_000_003 + i
        fault = sites.draw(random.Random(seed))
        undo = fault.apply(root)
        try:
            verdict, codes = verify_verdict(root)
            damaged = delivered(root)
        finally:
            undo()
        truth, diff = classify(pristine, damaged, lambda d, f=fault: sites.torn(f))
        outcomes.append(Outcome(case.name, seed, fault, truth, verdict, diff, codes))
    shutil.rmtree(tmp_path / ".store.aside", ignore_errors=True)
    table = confusion(outcomes)
    assert all(o.ok for o in outcomes), table
