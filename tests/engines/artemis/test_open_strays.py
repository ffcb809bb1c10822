"""A record of a committed transaction whose transaction id was damaged onto an id one byte away
(open_strays.py): the broker rolls the "open transaction" back at load and the message, or its reference, is
lost (make fuzz seed 1126: demo-s1 1126003386000203; seed 2027: demo-s1 2027006087000097 and
2027006090000074; each loss/OK, with no finding, since the COMMIT sits in another file and counts no
shortfall)."""
from __future__ import annotations

import os

import pytest

from tests.faults.artemis import broker_could_write, delivered
from tests.support import copy_tree, flip_byte

VICTIM = "data/journal/activemq-data-12.amq"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


@pytest.mark.parametrize("offset,kind", [
    (62701, "the ADD_REF of message 468"),  # transaction 461 -> 453: its reference, in an UPDATE_TX
    (62383, "the ADD_TX of a message"),  # a message's own add moved out of its transaction
])
def test_a_record_whose_transaction_id_moved_one_byte_is_a_lost_record(run_json, demo, tmp_path, offset, kind):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    flip_byte(store / VICTIM, offset, 0x08)  # the low byte of the record's transaction id
    assert before.diff(delivered(store))["lost"] == 1, kind
    assert broker_could_write(store)  # the truth: a proven loss
    code, doc, _ = run_json("verify", store)
    found = [f for f in doc["findings"] if f["code"] == "tx-id-damaged"]
    assert code == 2 and len(found) == 1 and found[0]["severity"] == "critical", kind
    assert found[0]["details"]["committedTx"] ^ found[0]["details"]["txId"] == 0x08


@pytest.fixture(scope="module")
def demo2(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo2") / "demo-s2", 2)


@pytest.mark.parametrize("size", [18107, 23880])
def test_a_transaction_left_open_by_a_cut_of_the_current_file_is_a_torn_tail(run_json, demo2, tmp_path, size):
    # make fuzz seed 3303: demo-s2 3303010913003045 and 3303010913003167, torn/CRITICAL: the cut drops the
    # COMMIT of a transaction that acknowledges messages the transaction before it (ids one byte apart) added
    store = copy_tree(demo2, tmp_path / "s")
    before = delivered(store)
    os.truncate(store / "data/journal/activemq-data-16.amq", size)
    assert before.diff(delivered(store))["lost"] == 3
    code, doc, _ = run_json("verify", store)
    assert [f for f in doc["findings"] if f["code"] == "tx-id-damaged"] == []
    assert code == 1 and "torn-tail" in {f["code"] for f in doc["findings"]}
