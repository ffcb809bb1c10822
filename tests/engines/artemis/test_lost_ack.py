"""A damaged end whose first lost record is an acknowledgement the header of which survives (lost_ack.py).

In the campaign's demo-s1, activemq-data-15.amq ends with a burst of consumption: ACKNOWLEDGE_REF updates and
DELETEs of older messages, whose loss brings those messages back, while no new id is issued there. Cut inside
message 529's acknowledgement (at 65166), the window of new ids is empty and verify called the cut a warning
("acknowledgements or deletes of older messages written there carry no new id and cannot be seen"), while the
broker delivers five consumed messages again. The cut record's own header names the acknowledgement."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault

FILE = "data/journal/activemq-data-15.amq"
ACK_529 = 65166  # UPDATE, ACKNOWLEDGE_REF of message 529 (31 bytes), then its DELETE
ACK_373_TX = 65393  # UPDATE_TX, ACKNOWLEDGE_REF of message 373 in transaction 562, whose COMMIT follows it


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    store = campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)
    with Campaign("demo-s1", store) as c:
        yield c


def _tail(campaign, cut: int):
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect

    fault = Fault("truncate", FILE, cut, label="truncation")
    outcome = campaign.judge(fault)
    undo = fault.apply(campaign.root)
    try:
        (tail,) = [f for f in verify_store(detect(campaign.root)).findings if f.code == "damaged-tail"]
    finally:
        undo()
    return outcome, tail


@pytest.mark.parametrize("cut, queue", [(ACK_529 + 19, None), (ACK_529 + 27, True)])
def test_an_acknowledgement_whose_header_survives_proves_the_loss(campaign, cut, queue):
    # 19 bytes keep the header up to the user record type; 27 the queue id of the body too
    outcome, tail = _tail(campaign, cut)
    assert (outcome.truth, outcome.diff["back"]) == ("loss", 5)
    assert (outcome.verdict, tail.severity.name) == ("CRITICAL", "CRITICAL")
    ack = tail.details["lostAck"]
    assert (ack["recordType"], ack["messageId"], ack["txId"]) == (12, 529, -1)
    assert (ack["queueId"] is not None) is bool(queue)


def test_an_open_transactions_acknowledgement_proves_nothing(campaign):
    # transaction 562's COMMIT was lost with it: the broker discards its acknowledgements anyway
    outcome, tail = _tail(campaign, ACK_373_TX + 27)
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    assert "lostAck" not in tail.details


def test_a_delete_of_a_message_acknowledged_everywhere_proves_nothing(campaign):
    # message 337's DELETE (65112) follows its acknowledgement in committed transaction 561: the broker deletes
    # a message with no reference left at load (loadMessageJournal), so losing that DELETE costs nothing by
    # itself -- the five acknowledgements lost after it do, which no header shows
    outcome, tail = _tail(campaign, 65112 + 14)
    assert outcome.truth == "loss"
    assert "lostAck" not in tail.details
