"""Acknowledgements without their reference (``ack-without-ref``) that the store's own evidence explains as
damage to no effect: seed 5151 found two verify called CRITICAL while the broker delivers the same."""
from __future__ import annotations

import pytest

from tests.faults.model import SAME


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    root = tmp_path_factory.mktemp("demos")
    return {n: campaign_demo(root / f"demo-s{n}", n) for n in (2, 4)}


def test_an_ack_whose_id_is_one_bit_from_a_deleted_message_is_no_loss(demos):
    # demo-s2: the ACKNOWLEDGE_REF of message 496 on queue 11 (in a transaction; 496 is deleted right after)
    # has its id flipped to 480 (one bit), a live message on queue 23 only. The other reading -- 480's own
    # acknowledgement on 23 with its queue id damaged to 11 -- takes three bits: the one-bit reading is nearer,
    # and the broker drops an acknowledgement for a queue without the reference
    from tests.faults.campaign import reproduce

    o = reproduce(demos[2], 5151016454003175)
    assert "record 14 id" in o.fault.label
    assert (o.truth, o.verdict, o.codes) == (SAME, "OK", ())


def test_a_reference_whose_id_is_one_byte_from_its_acked_message_is_no_loss(demos):
    # demo-s4: the ADD_REF of message 57 on queue 23, where 57 was acknowledged since, has its id's low byte
    # damaged (57 -> 194, seven bits: a random byte), an id added only later: the reference, written before its
    # add, is 57's, which lost a reference it had been acknowledged on anyway
    from tests.faults.campaign import reproduce

    o = reproduce(demos[4], 5151018459009232)
    assert o.fault.label == "random byte"
    assert (o.truth, o.verdict, o.codes) == (SAME, "OK", ())
