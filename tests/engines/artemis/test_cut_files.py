"""A message-journal file the broker moved on from, cut through a record (``verify``'s ``damaged-tail`` with
``cutRecordBytes``): records were lost there, and what they held is weighed as any damaged end's
(``tails.reweigh``).

Cutting each older file of the 48 stores written by the real JournalImpl inside one of its last four records
(seed 9621, 431 cuts) found 211 cuts verify called CRITICAL while the broker delivers exactly what it did: a cut
stayed CRITICAL whenever what the lost records held could not be told, though all that could not be told was
whether a transaction without an end, open in the healthy store too, lost its COMMIT there. Weighed as a zeroed
end is, 49 remain (ids no surviving record carries, judged by the odds), against 34 more losses called WARNING
(acknowledgements lost with the cut, which carry no new id). In ``tests/data/artemis/rolled-back-tail`` (README)
transactions 2147483797 and later stay open."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def campaign(rolled_back):
    return rolled_back  # conftest: the rolled-back-tail store


def _tail(campaign, fault):
    return campaign.judge_findings(fault, "damaged-tail")


def test_a_cut_whose_only_doubt_is_an_open_transaction_is_a_warning(campaign):
    outcome, (tail,) = _tail(campaign, Fault("truncate", "journal/activemq-data-4.amq", 15452, 0))
    assert outcome.truth == "same"
    assert outcome.verdict == tail.severity.name == "WARNING"
    assert tail.details["cutRecordBytes"] > 0
    assert "have no end record" in tail.message


def test_a_cut_after_a_transaction_with_no_end_is_critical(campaign):
    outcome, (tail,) = _tail(campaign, Fault("truncate", "journal/activemq-data-26.amq", 15968, 0))
    assert outcome.truth == "loss"
    assert outcome.verdict == tail.severity.name == "CRITICAL"
    assert tail.details["cutOffTransaction"] == 2147484348
