"""Issue 25: a damaged run that took the PAGE_TRANSACTION record of a paged transaction every queue has since
consumed (tails.settled_page_txs). The transaction's id and its record's are carried by no surviving
record, which read as "live records stored there, or ..." and made the loss CRITICAL by the odds; but the
paged messages carrying that transaction id are all acknowledged, so the broker, which now skips them ("Could
not locate page transaction"), delivers the same. Fresh seed 9644 of ``make fuzz``'s default corpus found two
(same/CRITICAL): demo-s1 9644028933000072 and demo-s4 9644031933009044, a 4 KiB zeroed range each; a sweep of
faults aimed at PAGE_TRANSACTION records (seed 9424) found the same at damaged ends (demo-s5)."""
from __future__ import annotations

import shutil

import pytest

from amqtool.engines.artemis.tails import settled_page_txs
from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    base = tmp_path_factory.mktemp("demos")
    return {seed: (root, delivered(root)) for seed in (1, 4, 5)
            for root in [campaign_demo(base / f"demo-s{seed}", seed)]}


@pytest.mark.parametrize("seed, rel, offset, length, code, settled", [
    # the ADD and reference of message 313 (deleted since), transaction 314's PAGE_TRANSACTION 315 and COMMIT
    # (its four paged messages 316..319 acknowledged), and the head of message 320 (deleted since)
    (1, "data/journal/activemq-data-9.amq", 34493, 4096, "damaged-record", [314, 315]),
    # transactions 116 and 119 with their PAGE_TRANSACTION records 117 and 120 and COMMITs, between messages
    # whose DELETEs survive; every paged message of both acknowledged
    (4, "data/journal/activemq-data-2.amq", 34676, 4096, "damaged-record", [116, 117, 119, 120]),
    # the end of a file that is not the newest, from inside message 292's ADD (deleted since): transaction 293's
    # PAGE_TRANSACTION 294 and COMMIT, every paged message of it acknowledged
    (5, "data/journal/activemq-data-10.amq", 61409, 4127, "damaged-tail", [293, 294]),
])
def test_a_lost_page_transaction_whose_messages_were_all_consumed_is_a_warning(run_json, demos, tmp_path, seed,
                                                                               rel, offset, length, code, settled):
    root, before = demos[seed]
    store = shutil.copytree(root, tmp_path / "store")
    Fault("zero", rel, offset, length).apply(store)
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    rc, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == code]
    assert (rc, doc["verdict"], f["severity"]) == (1, "WARNING", "warning")
    lost = f["details"]["lostIds"]
    assert lost["settledPageTransactionIds"] == settled
    assert lost["unaccountedIds"] == [] and lost["liveIds"] == [] and lost["pageTransactionsLost"] == {}


def test_a_settled_page_transaction_takes_its_record_id_only_when_no_bare_delete_may_be_its_record():
    # the broker deletes a PAGE_TRANSACTION once every message of it is consumed (PageTransactionInfoImpl):
    # a DELETE above the transaction's id that nothing else carries may be that record's, so no other id of
    # the window is taken for it; a transaction no queue acknowledged may have rolled back (no record at all);
    # one with messages still to consume is not settled
    delivery = {10: (2, 0), 20: (1, 3), 30: (0, 0)}
    window = {10, 12, 13, 20, 21, 30, 31}
    assert settled_page_txs(delivery, window, set()) == {10: 12, 30: None}
    assert settled_page_txs(delivery, window, {11}) == {10: None, 30: None}
    assert settled_page_txs(delivery, window, {5}) == {10: 12, 30: None}
