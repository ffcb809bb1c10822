"""A journal file written while a compaction ran, removed before its switch-over ended
(amqtool/engines/artemis/compaction_window.py): the reclaimer gives up while the compactor runs
(JournalImpl.checkReclaimStatus), so no file issued since the compaction's inputs can have been freed. Each store
is a real JournalImpl's, SIGKILLed in a compaction's switch-over (tests/data/artemis/README.md)."""
from __future__ import annotations

import shutil

from tests.faults.runner import verify_verdict
from tests.support import REPO, loaded_like_oracle, oracle_load

DATA = REPO / "tests" / "data" / "artemis"
STORE = DATA / "committed-cmp"
REINIT = DATA / "switchover-reinit"
POOL = DATA / "switchover-pool"
POOL_REINIT = DATA / "switchover-pool-reinit"
BOTH = ("interrupted-compaction", "missing-journal-file")


def _untouched(store, tmp_path) -> tuple:
    """verify's verdict of the store's journal, after checking amqtool loads what JournalImpl does."""
    records, _ = oracle_load(store / "oracle-load.jsonl")
    _, live = loaded_like_oracle(store / "journal")
    assert live == records
    return verify_verdict(shutil.copytree(store / "journal", tmp_path / "journal"))


def _deleted(store, name: str, tmp_path) -> tuple[int, tuple]:
    """(records JournalImpl loads without file ``name`` minus those it loads with it, verify's verdict then)."""
    records, _ = oracle_load(store / "oracle-load.jsonl")
    without, _ = oracle_load(store / f"oracle-load-deleted-{name.split('-')[-1].split('.')[0]}.jsonl")
    journal = shutil.copytree(store / "journal", tmp_path / "journal")
    (journal / name).unlink()
    return len(without) - len(records), verify_verdict(journal)


def test_a_file_written_during_an_unfinished_compaction_deleted_is_critical(tmp_path):
    # seed 9102065306114024 (e-m7172, activemq-data-15.amq deleted: 7 rows lost, 10 back): verify said WARNING
    # interrupted-compaction, the fileID gap "explained" by the compaction. The same on e-m7175's journal: the
    # real JournalImpl loads 6 records fewer without activemq-data-7.amq.
    change, verdict = _deleted(STORE, "activemq-data-7.amq", tmp_path)
    assert change < 0
    assert verdict == ("CRITICAL", BOTH)


def test_the_unfinished_compaction_itself_is_a_warning(tmp_path):
    # its inputs (2-6) gone and its output renamed in memory: every id issued since (7, 8 the output's name, 9)
    # is carried by a file
    assert _untouched(STORE, tmp_path) == ("WARNING", ("interrupted-compaction",))


def test_an_input_reinitialised_under_a_higher_id_carries_that_id(tmp_path):
    # /work/holdout6/h54 and this store, untouched, read CRITICAL missing-journal-file: the input
    # activemq-data-141.amq was freed earlier and reinitialised as fileID 142 under its old name, then compacted;
    # the window counted ids above the inputs' names, and the load leaves the inputs out, so 142 was carried by
    # no file
    assert _untouched(REINIT, tmp_path) == ("WARNING", ("interrupted-compaction",))


def test_the_file_current_since_the_compaction_began_deleted_is_still_critical(tmp_path):
    # activemq-data-143.amq became current when the compaction began: JournalImpl loads 24 records fewer
    assert _deleted(REINIT, "activemq-data-143.amq", tmp_path) == (-24, ("CRITICAL", BOTH))


def test_outputs_taken_from_the_pool_account_for_the_ids_they_took(tmp_path):
    # an unbounded pool: the compactor took six free files (named 3, 14, 7, 74, 15, 1) whose ids 94, 96-100
    # went with their headers; the untouched store read CRITICAL missing-journal-file
    assert _untouched(POOL, tmp_path) == ("WARNING", ("interrupted-compaction",))


def test_a_pooled_file_written_during_the_compaction_deleted_is_one_id_too_many(tmp_path):
    # activemq-data-4.amq (fileID 93, the free file the journal moved to when the compaction began): JournalImpl
    # loads 21 records fewer without it
    assert _deleted(POOL, "activemq-data-4.amq", tmp_path) == (-21, ("CRITICAL", BOTH))


def test_ids_the_switch_over_gave_its_inputs_do_not_close_the_window(tmp_path):
    # the switch-over had reinitialised three inputs (fileIDs 114-116, above the newest file's 113); counted as
    # the inputs' ids they left no window, and the window of names alone (above 49) read the pool's ids as lost
    assert _untouched(POOL_REINIT, tmp_path) == ("WARNING", ("interrupted-compaction",))


def test_the_file_written_during_the_compaction_deleted_when_only_outputs_hold_records(tmp_path):
    # activemq-data-6.amq (fileID 105, from the pool) held acknowledgements: without it JournalImpl loads 9
    # records more (messages back); the compactor's outputs were then the only files holding records, so no
    # gap lay below the newest of them and the window was never weighed
    assert _deleted(POOL_REINIT, "activemq-data-6.amq", tmp_path) == (9, ("CRITICAL", BOTH))
