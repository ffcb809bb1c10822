"""A damaged run inside a journal file that begins inside an acknowledgement's body (wiped_run.py with
lost_ack.py): the record's header survives -- type, the file's tag, the message id, its user record type -- and
names a message the load still delivers, so the broker consumed it before the damage and delivers it again
(fault campaign seed 4890, demo-s1: 4890014670000094). The zeros over its queue id read queue 0, which no
binding has: the damage's, not a queue the acknowledgement was for. main read such runs WARNING, "what they held
cannot be told"; an acknowledgement sweep over two demos and seven JournalImpl hold-outs (seed 4900, 231
faults) read 52 losses so, 16 after. An acknowledgement the verifier rebuilds as one record with one damaged field
(evidence.py, ``effect_of_loss``) whose queue id no binding has is judged likewise."""
from __future__ import annotations

from tests.faults.model import Fault
from tests.faults.runner import Campaign


def _judged(demo, fault: Fault):
    with Campaign("demo-s1", demo) as c:
        return c.judge_findings(fault)


def test_zeros_over_an_acknowledgements_queue_id_and_the_delete_after_it_bring_its_message_back(demo):
    # activemq-data-16.amq@3210: an ACKNOWLEDGE_REF update (31 bytes) and the DELETE after it (18), zeroed from
    # the queue id's third byte on
    o, found = _judged(demo, Fault("zero", "data/journal/activemq-data-16.amq", 3231, 16))
    assert o.truth == "loss" and o.diff["back"] == 1
    assert (o.verdict, o.codes) == ("CRITICAL", ("damaged-record",))
    (run,) = [f for f in found if f.code == "damaged-record"]
    assert run.offset == 3210 and "acknowledgement" in run.message


def test_a_run_whose_first_header_lost_its_id_stays_untold(demo):
    # activemq-data-9.amq@8191: the zeros begin inside the first record's message id, so nothing names it
    o = _judged(demo, Fault("zero", "data/journal/activemq-data-9.amq", 8202, 64))[0]
    assert o.truth == "loss" and o.verdict == "WARNING"


def test_an_acknowledgement_rebuilt_with_its_queue_id_zeroed_consumed_a_reference_of_its_message(demo):
    # activemq-data-16.amq@3615: an ACKNOWLEDGE_REF update of message 482 whose queue id and checksize were
    # zeroed, rebuilt as one record with its checksize damaged; queue 0, which no binding has, read as "no
    # reference of the message on that queue": its loss "changes nothing"
    o, found = _judged(demo, Fault("zero", "data/journal/activemq-data-16.amq", 3636, 10))
    assert o.truth == "loss" and o.diff["back"] == 1
    assert (o.verdict, o.codes) == ("CRITICAL", ("damaged-record",))
