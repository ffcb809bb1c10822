"""The transaction id in a damaged record's own header is a transaction's, not a lost record's (tails.damaged_tx).

make fuzz seed 8302 (demo-s4, fault 8302027906009126): activemq-data-7.amq cut at 24973, 62 bytes into the
ADD_TX at 24909 that opens transaction 250 (messages 251-253, all deleted since). The window of ids the lost
records may have carried was 250..256, every one accounted for (deleted since) but 250, the transaction's own
id, which no surviving record carries: verify called the cut CRITICAL, while the broker delivers exactly what
it did. The cut record's header names transaction 250."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault

FILE = "data/journal/activemq-data-7.amq"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    store = campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s4", 4)
    with Campaign("demo-s4", store) as c:
        yield c


def _judged(campaign, cut: int):
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


def test_the_cut_records_transaction_id_is_accounted_for(campaign):
    outcome, tail = _judged(campaign, 24973)
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    ids = tail.details["lostIds"]
    assert (ids["idsAfter"], ids["idsBefore"], ids["unaccountedCount"]) == (249, 257, 0)
    assert ids["deletedIds"] == [251, 252, 253, 254, 256]


def test_a_header_cut_before_its_transaction_id_names_none(campaign):
    # 10 bytes keep the type, the tag and one byte of the id: the transaction cannot be named, and 250 stays
    # unaccounted for (the cut is judged by the odds, CRITICAL, as before)
    outcome, tail = _judged(campaign, 24909 + 10)
    assert outcome.truth == "same"
    assert tail.details["lostIds"]["unaccountedIds"] == [250]
    assert tail.severity.name == "CRITICAL"
