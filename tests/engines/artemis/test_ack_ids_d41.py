"""Acknowledgement ids damaged in hold-out demo d41 (``create --demo 4MiB --seed 7781 --live-ratio 0.9
--no-paging``: one journal file, never compacted), read by who could have written the record where it stands
(evidence._ack_misplaced).

- The broker writes a message's ADD before any reference or acknowledgement of it (``storeMessage``, then
  ``storeReference``, then ``storeAcknowledge``), so an ACKNOWLEDGE_REF standing before the ADD of the message it
  names had its id damaged. ``loadMessageJournal`` finds no reference of that pair when it reads it and drops
  it: the message that wrote it comes back on its queue, unless it was a message deleted since.
- A deleted message acknowledges each of its references before its DELETE (``storeAcknowledge``, then
  ``deleteMessage``), and the reclaimer frees a file whole: a deleted message whose reference on the queue and
  DELETE stand in the damaged acknowledgement's file, around it, without its own acknowledgement there, wrote
  it (own_acks.own_ack_wanted).
"""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def d41(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo
    from tests.faults.runner import Campaign

    path = tmp_path_factory.mktemp("demo") / "d41"
    create_demo(path, 4 << 20, seed=7781, live_ratio=0.9, paging=False)
    with Campaign("d41", path) as c:
        yield c


def _ack_at(campaign, rel: str, offset: int):
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    (jf,) = [f for f in campaign.sites.journals["messages"] if f.rel == rel]
    (r,) = [r for r in jf.records if r[1] <= offset < r[1] + r[2]]
    assert (r[0], r[6]) == (12, R.ACKNOWLEDGE_REF)
    return r


def test_an_acknowledgement_moved_onto_a_message_added_after_it_brings_its_message_back(d41):
    # field sweep seed 7789 (loss/OK, 7789040008): a random byte (^0xe1) of the id of message 317's
    # acknowledgement on queue 23 made it 476's: message 476 is added later in the file and routed to queue 11
    # only. 317 comes back on queue 23. Verify said OK: the two live messages of queue 23 one bit from 476 (412,
    # 468) were added after the acknowledgement, and the twenty deleted ones a byte away each have their own
    # acknowledgement of queue 23 or were added after it -- so no reading was left, where the one left is a
    # message of queue 23 one damaged byte away, written before it.
    rel = "data/journal/activemq-data-1.amq"
    r = _ack_at(d41, rel, 755046)
    assert r[5] == 317
    outcome = d41.judge(Fault("flip", rel, 755046, 0xE1, label="ack-id"))  # the id's lowest byte: 317 -> 476
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert "ack-without-ref" in outcome.codes



def test_a_deleted_messages_acknowledgement_moved_onto_a_live_message_one_queue_bit_away_is_no_loss(d41):
    # field sweep seed 7789 (same/CRITICAL, 7789040001): one bit (^0x10) of the id of message 732's
    # acknowledgement on queue 21 made it 716's; 716 is live on queue 29, one bit from 21, and 732 is deleted
    # since. Verify read it as 716's own acknowledgement with its queue damaged (a tie with 732's reading: one
    # bit each): ack-without-ref, CRITICAL. But 732's reference on queue 21 and its DELETE stand in that file,
    # around the record, with no acknowledgement of queue 21 of its own: the record is that acknowledgement, and
    # the broker drops it to no effect (the DELETE removes 732 all the same).
    rel = "data/journal/activemq-data-1.amq"
    r = _ack_at(d41, rel, 2041439)
    assert r[5] == 732
    outcome = d41.judge(Fault("flip", rel, 2041439, 0x10, label="ack-id"))  # 732 -> 716
    assert (outcome.truth, outcome.verdict) == ("same", "OK"), outcome.codes
