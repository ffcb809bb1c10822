"""The fault campaign of ``make test`` (issue 25): a fixed-seed sample of 2,100 faults over two small demo
stores (paging, large messages, XA) and the broker-written fixture, each judged by ``verify`` and held to the
rule against the truth the broker-equal loaders give (tests/faults/model.py). ``make fuzz`` runs the same at
scale with other seeds, and prints each miss with the seed that reproduces it.

The rule's target is no miss at all. What this sample still misses is pinned, class by class, so that a
change can only lower it (a ratchet): each figure below is the exact count on this seed today, with what
those faults are. Lower a figure when a fix removes its misses; never raise one.
"""
from __future__ import annotations

from collections import Counter

import pytest

from tests.faults import campaign
from tests.faults.model import CONTENT, LOSS, SAME, TORN, confusion

FAULTS_PER_STORE = 700
SEED = 25

# (truth, verdict) -> the misses this seed still has. What they are (bench/fuzz_verdicts.py lists them):
# - loss/OK: a page file deleted (the broker deletes consumed pages the same way: nothing proves it held
#   unconsumed messages but counters the broker rebuilds), the first or last data file deleted (no fileID
#   gap), an ack's message id moved to another message routed to the same queue (a consistent store), a byte
#   inside a paged message's properties;
# - loss/WARNING: a zeroed or cut tail of a file that is not the newest (what a crash after a restart leaves
#   there too), an emptied file that was the first or last data file;
# - same/CRITICAL: false CRITICALs where the broker loses nothing: an emptied first data file or bindings file
#   (short-file), a cut or zeroed tail of a file whose lost records were all dead (damaged-tail,
#   damaged-record), a damaged header fileID or an ack's id that no longer names a live ref (bad-file-id,
#   file-id-damaged, ack-without-ref), a damaged user record type of a dead binding. Until the truth was read
#   without verify's judgement (tests/faults/test_truth.py) these counted as loss: the export engine refused
#   a CRITICAL store, so the truth said "nothing delivered";
# - torn/CRITICAL: a cut tail of the newest file whose lost records other records still need is CRITICAL by
#   design when the dependants show (tests/faults/model.py DEPENDANTS); a few are judged so without them.
KNOWN_MISSES = {("loss", "OK"): 39, ("loss", "WARNING"): 26, ("same", "CRITICAL"): 34, ("torn", "CRITICAL"): 3,
                ("content", "UNKNOWN"): 0}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    stores = campaign.pristine_stores(tmp_path_factory.mktemp("pristine"), demos=2)
    return campaign.run(stores, FAULTS_PER_STORE, SEED)


def test_sample_is_large_and_covers_every_truth(outcomes):
    assert len(outcomes) >= 2000
    truths = Counter(o.truth for o in outcomes)
    assert all(truths[t] > 0 for t in (SAME, CONTENT, LOSS, TORN)), truths


def test_misses_only_go_down(outcomes):
    misses = Counter((o.truth, o.verdict) for o in outcomes if not o.ok)
    over = {k: (n, KNOWN_MISSES.get(k, 0)) for k, n in misses.items() if n > KNOWN_MISSES.get(k, 0)}
    print(confusion(outcomes))
    assert not over, f"more misses than pinned {over}\n" + confusion(outcomes)


def test_no_verdict_is_unknown_on_a_readable_store(outcomes):
    # every damaged copy is readable: UNKNOWN would mean the check itself broke
    assert not [o for o in outcomes if o.verdict == "UNKNOWN"], confusion(outcomes)
