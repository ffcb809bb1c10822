"""Damage in a killed store whose index pages are ahead of its checkpoint, on
tests/data/kahadb/q1-prio-rollback-kill (a real 5.17.2 broker, indexWriteBatchSize=10, SIGKILLed during a burst of
sends: lastUpdate 8:6750, db-14.log the newest; index pages written after the checkpoint hold its sends up to the
last batch, 14316, and no longer hold what the committed ack transaction at db-11.log took out).

* A last batch that no longer checks out, with nothing written after it, is what a crash tearing that write
  leaves: ``Journal.recoveryCheck`` ends the file before it and ``recoverIndex`` rolls back the index entries at or
  past that end -- the torn write's loss (the truth's ``torn``: WARNING; verify.py ``_torn_by_a_crash``). It was
  CRITICAL (``kahadb-reference-past-end``; hold-out campaign seed 510510000045, 4 such faults in 300).
* An older file's ack of that committed transaction whose message id is damaged is replayed as an ack that finds
  nothing, and the ack as written found nothing either: the index already took the message out
  (superseded._same_effect with after_acks.spent_acks; truth ``latent``, CRITICAL before: seeds 510510000145,
  510510000210).
* An older file's batch control record whose length reads 0x2000 longer makes the walk step over db-9.log's sends
  after 6720, among them a topic message of fx.q1.t pending only for subscriptions whose selectors reject it:
  ``TopicStorePrefetch.recoverMessage`` never hands it to them (replay_skips ``rejects``; truth ``latent``, it was
  CRITICAL ``kahadb-replay-skips``: seed 510510000261)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.engines.kahadb.judged import flipped, verdict
from tests.faults.kahadb import KahaCampaign
from tests.faults.model import Fault

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "q1-prio-rollback-kill" / "kahadb"
LAST = 14316  # db-14.log: the last batch (its ADD at 14344, the index holds it), the end marker at 14824


def test_pristine_store_is_a_warning(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index", "kahadb-open-transaction"})


@pytest.mark.parametrize("offset, mask", [(LAST + 28 + 26, 0x28), (LAST + 20, 0x40), (LAST + 28 + 300, 0x01)],
                         ids=["message-id", "checksum", "body"])
def test_torn_last_write_the_index_holds_is_a_warning(tmp_path, offset, mask):
    said, codes = flipped(STORE, tmp_path, "db-14.log", offset, mask)
    assert said == "WARNING", codes
    assert {"kahadb-truncated-tail", "kahadb-reference-past-end"} <= codes


def test_the_truth_of_that_tear_is_a_crashs(tmp_path):
    o = KahaCampaign("q1", STORE, tmp_path / "scratch").run_fault(Fault("flip", "db-14.log", LAST + 28 + 26, 0x28,
                                                                        "", "record 1 message id"))
    assert (o.truth, o.verdict) == ("torn", "WARNING")


def test_a_damaged_batch_before_the_last_stays_critical(tmp_path):
    # the batch at 11320 (sends the index holds at 11348, 13002, 13753) with a batch written after it: no crash
    # tears a write and goes on writing; the index's sends there are read from damaged bytes at dispatch
    assert flipped(STORE, tmp_path, "db-14.log", 11320 + 28 + 300, 0x01)[0] == "CRITICAL"


@pytest.mark.parametrize("offset, mask", [(6090, 0x2b), (6473, 0x47)])
def test_an_older_files_committed_ack_under_a_damaged_id_the_index_took_out_is_latent(tmp_path, offset, mask):
    o = KahaCampaign("q1", STORE, tmp_path / "scratch").run_fault(Fault("flip", "db-11.log", offset, mask, "",
                                                                        "record message id"))
    assert (o.truth, o.verdict) == ("latent", "WARNING"), o.codes
    assert "kahadb-checksum-mismatch" in o.codes


def test_an_older_files_committed_ack_the_index_took_read_as_its_prepare_is_latent(tmp_path):
    # the ack at 6386 (...-3:4:-1:1:109, which the index no longer holds) with its type byte REMOVE 2 ^ 1 = PREPARE
    # 3: the replay reads a PREPARE of the committed transaction, and the ack as written found nothing anyway
    # (superseded._spent; sweep of type bytes over q1: CRITICAL before)
    o = KahaCampaign("q1", STORE, tmp_path / "scratch").run_fault(Fault("flip", "db-11.log", 6386 + 5, 0x01, "",
                                                                        "record entry type"))
    assert (o.truth, o.verdict) == ("latent", "WARNING"), o.codes


def test_an_older_files_committed_ack_of_a_message_the_index_holds_stays_critical(tmp_path):
    # the same transaction's ack at 4826 names ...-3:1:-1:1:35, which the index on disk still holds: read under a
    # damaged id it takes nothing, and the message comes back (truth: loss)
    o = KahaCampaign("q1", STORE, tmp_path / "scratch").run_fault(Fault("flip", "db-11.log", 4826 + 94, 0x2b, "",
                                                                        "record message id"))
    assert (o.truth, o.verdict) == ("loss", "CRITICAL"), o.codes


def test_a_walk_stepping_over_a_topic_message_no_selector_takes_is_latent(tmp_path):
    o = KahaCampaign("q1", STORE, tmp_path / "scratch").run_fault(Fault("flip", "db-9.log", 6720, 0x20, "",
                                                                        "batch length"))
    assert (o.truth, o.verdict) == ("latent", "WARNING"), o.codes
    assert "kahadb-replay-skips" not in o.codes
