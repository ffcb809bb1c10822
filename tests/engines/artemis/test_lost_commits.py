"""A transaction whose COMMIT is gone although its messages were delivered since (lost_commits.py).

Campaign seed 8902 on the JournalImpl store a07: activemq-data-76.amq deleted took the COMMIT of transaction
2147485164, whose ADD_TX and references lie in file 75, while file 90 acknowledges one of its messages: the
broker discards the transaction at load and loses its messages. verify said OK (the acknowledgement read as an
update whose add was reclaimed). The same with only the COMMIT zeroed, on the campaign's demo-s1."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s1", campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)) as c:
        yield c


def _commit(campaign, tx_id: int):
    jf, rec = next((jf, r) for jf in campaign.sites.journals["messages"] for r in jf.records
                   if r[0] == 18 and r[4] == tx_id)
    return Fault("zero", jf.rel, rec[1], rec[2], label="commit zeroed")


def test_a_delivered_transactions_commit_zeroed_is_a_loss(demo_s1):
    outcome = demo_s1.judge(_commit(demo_s1, 58))
    # its messages still live are discarded with it. The zeros between two records prove the damage
    # (load.file_gaps; once read as padding, the harness could not prove it), and they held that COMMIT
    assert (outcome.truth, outcome.diff["lost"] > 0, outcome.verdict, outcome.codes) == (
        "loss", True, "CRITICAL", ("damaged-record", "tx-commit-lost"))


def test_the_finding_names_the_transaction_and_the_delivered_message(demo_s1):
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect

    fault = _commit(demo_s1, 85)
    undo = fault.apply(demo_s1.root)
    try:
        (found,) = [f for f in verify_store(detect(demo_s1.root)).findings if f.code == "tx-commit-lost"]
    finally:
        undo()
    assert found.details["txId"] == 85 and found.details["messageId"] in (86, 87, 88)


def test_a_commit_lost_whose_messages_are_all_deleted_since_is_not_reported(demo_s1):
    # transaction 52's messages were delivered and deleted since: discarding it loses nothing (the zeros between
    # two records are damage all the same, load.file_gaps: what they held cannot be told, a warning)
    outcome = demo_s1.judge(_commit(demo_s1, 52))
    assert (outcome.truth, outcome.verdict, outcome.codes) == ("same", "WARNING", ("damaged-record",))
