"""A fileID gap is a removed journal file only on evidence that the missing ids held live records (issue 25,
amqtool/engines/artemis/add_placement.py, lost_deletes.discarded_deletes).

Real JournalImpl stores written with a bounded pool (journal-pool-files 10, what ``artemis create`` writes)
have fileIDs missing between data files: the reclaimer's freed files the pool did not keep, deleted ids and
all. verify called them a WARNING ``missing-journal-file`` (small-s61, small-s62, k64k-s6 of the 33 stores in
/work/artemis-fresh), and one more damaged record escalated them to CRITICAL while the broker delivers the
same messages (15 of the 31 same/CRITICAL of campaign seed 8888 over those stores): an update whose id flipped,
or a transaction dropped for its count, leaves updates without their add, which verify took for a removed file's
trace wherever their add had been. On tests/data/artemis/reclaimed-pool2 (a pool of 2; ids 17 to 21 missing).
"""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.add_placement import bracket, missing_between
from tests.engines.artemis.pool2 import STORE, flipped
from tests.faults.runner import verify_verdict


def test_the_bracket_is_the_files_of_the_nearest_adds_below_and_above():
    ids, files = [10, 20, 30, 40], [1, 2, 5, 6]
    assert bracket(ids, files, 25) == (2, 5)
    assert bracket(ids, files, 5) == (None, 1) and bracket(ids, files, 45) == (6, None)
    assert bracket([10, 20], [7, 3], 15) == (3, 7)  # a compaction's output under a lower fileID: either way


def test_missing_between_counts_only_ids_no_file_carries_below_the_newest():
    missing = missing_between([1, 2, 5, 6, 9], 9)
    assert missing(2, 5) and not missing(1, 2) and not missing(5, 6)
    assert not missing(None, 2) and missing(None, 5) and missing(6, None)  # 3, 4; 7, 8
    assert missing_between([2, 3], 3)(None, 2)  # id 1, below the oldest file
    assert not missing_between([1, 2, 3], 3)(2, None)  # nothing between the newest two


# activemq-data-1.amq@3726: an UPDATE (ACKNOWLEDGE_REF) of message 0x80000070, deleted later in the journal
ACK_ID_AT = 3726 + 6


def test_an_orphan_whose_add_lay_in_a_file_still_there_is_no_removed_file(tmp_path):
    # 0x80000074, an id the journal issued in file 1 (the adds of the ids around it are there), whose add is
    # gone since its message was deleted: the damaged acknowledgement applies to nothing. main: CRITICAL
    root, diff = flipped(tmp_path, "activemq-data-1.amq", ACK_ID_AT + 7, 0x04,
                         lambda d: d[ACK_ID_AT:ACK_ID_AT + 8] == (0x80000070).to_bytes(8, "big") or pytest.fail())
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())


def test_a_transaction_dropped_for_its_count_deletes_no_add_of_a_removed_file(tmp_path):
    # tx 2147484526 commits in activemq-data-22.amq; its DELETE_TX @3750 deletes message 2147484517, whose add
    # the reclaimer freed (in the ids 17-21 the pool deleted). One bit of that record's transaction id flipped:
    # the commit counts a record the transaction no longer holds, the load drops the transaction, and the
    # message's updates read as live without their add; the broker drops them too. main: CRITICAL
    at = 3750

    def check(d):
        assert d[at] == 15 and d[at + 6:at + 14] == (2147484526).to_bytes(8, "big")
        assert d[at + 14:at + 22] == (2147484517).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-22.amq", at + 13, 0x08, check)
    assert not diff["lost"] and not diff["back"]
    verdict, codes = verify_verdict(root)
    assert "missing-journal-file" not in codes and "commit-count-mismatch" in codes


def test_a_removed_file_whose_adds_have_live_updates_elsewhere_stays_critical(tmp_path, run_json):
    # activemq-data-45.amq (not the newest) holds adds of live messages whose references lie in later files
    import shutil

    root = tmp_path / "journal"
    shutil.copytree(STORE / "journal", root)
    (root / "activemq-data-45.amq").unlink()
    code, doc, _ = run_json("verify", str(root))
    (gap,) = [f for f in doc["findings"] if f["code"] == "missing-journal-file"]
    assert (code, gap["severity"]) == (2, "critical") and gap["details"]["liveUpdatesWithoutAdd"] > 0
    assert 45 in gap["details"]["missingFileIds"]


def test_a_reference_whose_id_was_damaged_onto_an_old_id_is_no_removed_file(run_json, tmp_path):
    # tests/data/artemis/compacted-dead: fileIDs missing below and between its data files (a compaction's and the
    # reclaimer's). The ADD_REF of message 2147484673 (deleted since) at activemq-data-48.amq@3847 with a bit of
    # its id flipped names 2147483649, whose add's bracket lies among the missing fileIDs: verify called it a
    # removed file, CRITICAL missing-journal-file, while the broker loads the same. But the broker writes a
    # message's references as it stores it (PostOfficeImpl.processRoute), so its add lay in the reference's file or
    # after the present file before it, where no fileID is missing (campaign seeds 8311031933021008 on
    # /work/artemis-fresh/a08, 8341065023120012 on e-n7151).
    from tests.support import flipped_test_journal

    journal = flipped_test_journal(tmp_path, "compacted-dead", "activemq-data-48.amq", 3847, (12, 2147484673),
                                   3847 + 12, 0x04)
    code, doc, _ = run_json("verify", str(journal))
    assert not [f for f in doc["findings"] if f["code"] == "missing-journal-file"]
    (gap,) = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert gap["details"]["liveUpdatesWithoutAdd"] == 0
    assert (code, doc["verdict"]) == (0, "OK")
