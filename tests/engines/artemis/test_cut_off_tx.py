"""A transaction a damaged end cut off: its records run up to the damage and its end is nowhere (cut_off_tx.py).

The zeros lane's campaign (seed 9102 over the 48 JournalImpl stores) and its sweep of zeroed ranges in files
before the current one (seed 9301, 2,120 faults) found zeroed ends read as warnings ("a commit lost there rolls
them back, a rollback lost there changes nothing") where the broker lost messages: of those whose last record
before the damage is of a transaction with no end record anywhere that held live records, 58 lost messages and
one lost nothing (a sender rolled back: a message sent after its own was acknowledged on its queue, which
tests/cli/test_verify_tails_cli.py's lost rollback shows too; such a sender is left a warning). Here the same on
the campaign's demo-s2: its file 12 zeroed from transaction 404's COMMIT to the end of its data."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    root = tmp_path_factory.mktemp("demos")
    with Campaign("demo-s1", campaign_demo(root / "demo-s1", 1)) as s1, \
            Campaign("demo-s2", campaign_demo(root / "demo-s2", 2)) as s2:
        yield {1: s1, 2: s2}


def _from_commit(campaign, rel: str, tx_id: int) -> Fault:
    (jf,) = [f for f in campaign.sites.journals["messages"] if f.rel == rel]
    rec = next(r for r in jf.records if r[0] == 18 and r[4] == tx_id)
    return Fault("zero", jf.rel, rec[1], jf.data_end - rec[1], label="zeroed from a commit to the end")


def _tails(campaign, fault):
    return campaign.judge_findings(fault, "damaged-tail")[1]


def test_a_consuming_transaction_cut_off_by_a_zeroed_end_is_critical(demos):
    fault = _from_commit(demos[2], "data/journal/activemq-data-12.amq", 404)
    outcome = demos[2].judge(fault)
    # the broker discards transaction 404 and delivers again the messages it acknowledged
    assert (outcome.truth, outcome.diff["back"], outcome.verdict, outcome.codes) == (
        "loss", 9, "CRITICAL", ("damaged-tail",))
    (found,) = _tails(demos[2], fault)
    assert (found.severity.value, found.offset, found.details["cutOffTransaction"], found.details["recordsLost"]) == (
        "critical", fault.offset, 404, True)


def test_a_cut_off_transaction_whose_discard_changes_nothing_stays_a_warning(demos):
    # transaction 189's messages were delivered and deleted since: discarding it loses nothing, and nothing else
    # shows what the lost records held
    fault = _from_commit(demos[1], "data/journal/activemq-data-6.amq", 189)
    outcome = demos[1].judge(fault)
    assert (outcome.truth, outcome.verdict, outcome.codes) == ("same", "WARNING", ("damaged-tail",))
    (found,) = _tails(demos[1], fault)
    assert "cutOffTransaction" not in found.details
