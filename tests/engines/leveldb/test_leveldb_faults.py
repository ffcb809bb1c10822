"""A fault campaign over LevelDB stores (the harness of tests/faults, issue 25's rule): every fault's verdict
is what the truth of the damaged store deserves (zero misses), on the fixture and every generated store below
64 MiB. ``AMQTOOL_LEVELDB_FAULTS`` sets the number of faults per store (default 60)."""
from __future__ import annotations

import random
import shutil

import pytest

import os

from tests.engines.leveldb.stores import CASE_IDS, CASES
from tests.faults.leveldb import LevelDBSites, delivered, verify_verdict
from tests.faults.model import Outcome, classify, confusion
from tests.support import copy_tree

FAULTS = int(os.environ.get("AMQTOOL_LEVELDB_FAULTS", "60"))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
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
