"""A reference whose message id was damaged onto a message of another address (strayed_refs.py): the broker
delivers that message on a queue it was never routed to, and drops the owner's acknowledgement there to no
effect. Found by the hold-out campaign seed 7788 on demo d45 (create --demo 12MiB --seed 7785 --live-ratio 0.8
--file-size 1MiB, compacted twice; seed 7788027364012135: message 1776's reference on queue 21 read as 1712's,
a message of queue 11's address: loss/OK); reproduced here on the campaign's demo."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s1", campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)) as c:
        yield c


def _record_at(campaign, rel: str, offset: int):
    (jf,) = [f for f in campaign.sites.journals["messages"] if f.rel == rel]
    (r,) = [r for r in jf.records if r[1] == offset]
    return r


def test_an_acknowledged_reference_moved_onto_a_message_of_another_address_delivers_it_there(demo_s1):
    # message 74's reference on queue 19 (acknowledged there later), its id's lowest byte ^0x02: 74 -> 72, a live
    # message whose other references name queues of an address no message shares with queue 19's. The broker
    # drops 74's acknowledgement (no reference to remove) and hands 72 out on queue 19.
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    rel = "data/journal/activemq-data-1.amq"
    r = _record_at(demo_s1, rel, 34487)
    assert (r[0], r[5], r[6]) == (12, 74, R.ADD_REF)
    outcome, found = demo_s1.judge_findings(Fault("flip", rel, 34487 + 13, 0x02, label="ref-id"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert outcome.diff["back"] == 1
    (f,) = [f for f in found if f.code == "ref-moved"]
    assert f.details["messageIds"] == [74]
    assert "message 74 on queue 19 (its reference now names message 72)" in f.message

