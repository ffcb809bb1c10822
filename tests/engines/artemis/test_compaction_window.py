"""A journal file written while a compaction ran, removed before its switch-over ended
(amqtool/engines/artemis/compaction_window.py): the reclaimer gives up while the compactor runs
(JournalImpl.checkReclaimStatus), so no file issued since the compaction's inputs can have been freed."""
from __future__ import annotations

import shutil

from tests.faults.runner import verify_verdict
from tests.support import REPO, oracle_load

STORE = REPO / "tests" / "data" / "artemis" / "committed-cmp"


def test_a_file_written_during_an_unfinished_compaction_deleted_is_critical(tmp_path):
    # seed 9102065306114024 (e-m7172, activemq-data-15.amq deleted: 7 rows lost, 10 back): verify said WARNING
    # interrupted-compaction, the fileID gap "explained" by the compaction. The same on e-m7175's journal: the
    # real JournalImpl loads 6 records fewer without activemq-data-7.amq.
    records, _ = oracle_load(STORE / "oracle-load.jsonl")
    without, _ = oracle_load(STORE / "oracle-load-deleted-7.jsonl")
    assert len(without) < len(records)
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    (journal / "activemq-data-7.amq").unlink()
    assert verify_verdict(journal) == ("CRITICAL", ("interrupted-compaction", "missing-journal-file"))


def test_the_unfinished_compaction_itself_is_a_warning(tmp_path):
    # its inputs (2-6) gone and its output renamed in memory: every id issued since (7, 8 the output's name, 9)
    # is carried by a file
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    assert verify_verdict(journal) == ("WARNING", ("interrupted-compaction",))
