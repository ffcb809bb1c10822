"""The fault campaign of ``make test``: a fixed-seed sample of faults over small demo stores and the
broker-written fixtures, each judged by ``verify`` and held to the rule of issue 25 against the truth the
broker-equal loaders give (tests/faults/model.py). ``make fuzz`` runs the same at scale with other seeds."""
from __future__ import annotations

import pytest

from tests.faults import campaign
from tests.faults.model import CONTENT, LOSS, SAME, TORN, confusion

FAULTS_PER_STORE = 700
SEED = 25


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    stores = campaign.pristine_stores(tmp_path_factory.mktemp("pristine"), demos=2)
    return campaign.run(stores, FAULTS_PER_STORE, SEED)


def test_sample_is_large_and_covers_every_truth(outcomes):
    assert len(outcomes) >= 2000
    truths = {o.truth for o in outcomes}
    assert {SAME, CONTENT, LOSS, TORN} <= truths


def test_every_verdict_follows_the_rule(outcomes):
    misses = [o for o in outcomes if not o.ok]
    assert not misses, "\n" + confusion(outcomes)
