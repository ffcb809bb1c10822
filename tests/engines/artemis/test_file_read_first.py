"""A file whose header fileID became negative is read first by the broker (``bad-file-id``), and its records
then come before those of the files written earlier: an acknowledgement of a message those files stored comes
before the message's record and applies to nothing (``loadMessageJournal`` walks ``JournalImpl.load``'s list
in order: load_walk.py). ``verify`` compared the two loads' live pairs whatever their order, and so called
WARNING what brings an acknowledged message back (``make fuzz`` seed 9481, 9481029445003066)."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demo_s2(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s2", campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s2", 2)) as c:
        yield c


def test_an_acknowledgement_read_before_its_message_brings_it_back(demo_s2):
    outcome, findings = demo_s2.judge_findings(Fault("flip", "data/journal/activemq-data-8.amq", 8, 0x80),
                                               "bad-file-id")
    assert outcome.truth == "loss" and outcome.diff["back"] == 1 and outcome.diff["lost"] == 0
    (found,) = findings
    assert outcome.verdict == found.severity.name == "CRITICAL"
    assert "read first" in found.message


def test_a_file_read_first_that_changes_nothing_stays_a_warning(demo):
    from tests.faults.runner import Campaign

    with Campaign("demo-s1", demo) as c:
        outcome, (found,) = c.judge_findings(Fault("flip", "data/journal/activemq-data-1.amq", 8, 0x80),
                                             "bad-file-id")
    assert outcome.truth == "same"
    assert outcome.verdict == found.severity.name == "WARNING"
