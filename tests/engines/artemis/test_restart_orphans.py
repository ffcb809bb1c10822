"""Live updates whose add and DELETE a restart let the reclaimer free (issue 25,
amqtool/engines/artemis/restart_orphans.py). tests/data/artemis/restart-orphan (README there) was written by the
real JournalImpl with Artemis' default pool, restarted every 300 operations, never compacted: message 2147484131
keeps a delivery count and an acknowledgement on queue 9 in activemq-data-4.amq (fileID 23) with neither its
add nor its DELETE anywhere, and JournalImpl loads exactly that (``onReadUpdateRecord``: "It's legal for this
to be null"). main called the healthy store CRITICAL missing-journal-file: a nightly check alarmed every night."""
from __future__ import annotations

import shutil

import pytest

from tests.engines.artemis.pool2 import changed, flipped
from tests.faults import artemis
from tests.faults.runner import verify_verdict
from tests.support import REPO, loaded_like_oracle, oracle_load

STORE = REPO / "tests" / "data" / "artemis" / "restart-orphan"
ORPHAN = 2147484131
# activemq-data-4.amq@16194: the UPDATE (ACKNOWLEDGE_REF, queue 9) of the orphan; its user record type at +18
# (type, fileID, compactCount, id, body size)
ACK_TYPE_AT = 16194 + 18


def _copy(tmp_path):
    return shutil.copytree(STORE / "journal", tmp_path / "journal")


def test_the_store_loads_like_journalimpl_with_the_orphan_updates_live():
    records, info = oracle_load(STORE / "oracle-load.jsonl")
    _result, mine = loaded_like_oracle(STORE / "journal")
    assert mine == records
    added = {r["id"] for r in records if not r["isUpdate"]}
    assert [(r["id"], r["userRecordType"]) for r in records if r["id"] not in added] == [(ORPHAN, 34), (ORPHAN, 33)]
    assert info["dataFiles"] == 38


def test_a_healthy_restarted_store_with_an_acknowledged_orphan_is_ok(run_json):
    code, doc, _ = run_json("verify", str(STORE / "journal"))
    assert (code, doc["verdict"]) == (0, "OK")
    gap = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert len(gap) == 1 and gap[0]["details"]["liveUpdatesWithoutAdd"] == 0
    assert gap[0]["details"]["missingCount"] == 34


@pytest.mark.parametrize(("name", "lost", "verdict"), [
    # fileID 55: it held adds of live messages whose updates follow in later files, more orphan ids than one
    ("activemq-data-17.amq", 15, "CRITICAL"),
    # fileID 64: the one file holding records of fileID 26, missing after the orphan's updates. Its 17 messages
    # leave no trace of their own, and the orphan still has room for its DELETE's file after it (fileID 26,
    # freed), which is all a restart needs to leave it (restart_orphans.restart_shaped: 7 of 17 healthy stores
    # written so read CRITICAL): a warning that names both readings. The harness calls it loss-unproven.
    ("activemq-data-26.amq", 17, "WARNING"),
])
def test_a_removed_file_beside_it_is_weighed(tmp_path, name, lost, verdict):
    root, diff = changed(tmp_path, name, None, STORE)
    assert diff["lost"] == lost
    found, codes = verify_verdict(root)
    assert found == verdict and "missing-journal-file" in codes


def test_an_orphan_still_counted_as_delivered_without_its_acknowledgement_is_critical(run_json, tmp_path):
    # the acknowledgement read as a delivery count (type 33 -> 34): a reference still live, its message's add
    # gone with its file, as a removed file leaves it
    journal = _copy(tmp_path)
    path = journal / "activemq-data-4.amq"
    data = bytearray(path.read_bytes())
    assert data[ACK_TYPE_AT] == 33
    data[ACK_TYPE_AT] = 34
    path.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    assert [f["details"]["liveUpdatesWithoutAdd"] for f in doc["findings"]
            if f["code"] == "missing-journal-file"] == [2]


@pytest.mark.parametrize(("name", "offset", "mask"), [
    ("activemq-data-7.amq", 10770, 0x02),  # campaign sweep seed 9111
    ("activemq-data-4.amq", 1483, 0x8A),  # the id's lowest byte: 2147484040 -> 2147483906
    ("activemq-data-8.amq", 10876, 0x71),
    ("activemq-data-72.amq", 9449, 0x2C),
    # the id's fourth byte: 2147484212 (0x8000..) -> 0x3A000434, far below every id the journal holds, beside the
    # restart's orphan: a damaged id (damaged_ids.never_issued_ids), no second lost add
    ("activemq-data-6.amq", 3854, 0xBA),
])
def test_one_damaged_acknowledgement_id_beside_it_makes_no_lost_message_record(tmp_path, name, offset, mask):
    # same/CRITICAL on main: the id of a deleted message's last acknowledgement, damaged, names no message.
    # With the restart's orphan that made two acknowledgements without their message, read as two lost message
    # records (message-record-missing), and the lone damaged one as the trace of a removed file
    # (missing-journal-file). The message's DELETE, written right after its last acknowledgement, one damaged
    # byte from the id it now names, says whose it was (own_acks.py): a damaged id, not a lost add, which leaves
    # the restart's orphan alone again.
    root, diff = flipped(tmp_path, name, offset, mask, store=STORE)
    assert diff == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    verdict, codes = verify_verdict(root)
    assert (verdict, codes) == ("OK", ())


@pytest.mark.parametrize(("name", "offset", "mask"), [
    ("activemq-data-4.amq", 9174, 0x46),
    ("activemq-data-6.amq", 16337, 0x71),
])
def test_a_deleted_messages_reference_with_a_damaged_id_is_no_removed_file(tmp_path, name, offset, mask):
    # same/CRITICAL on main (missing-journal-file): the id's lowest byte of the reference written right after
    # the ADD of a message deleted since names no message now; a live update without its add, taken for the
    # trace of a removed file while the broker drops it to no effect. The message whose ADD begins the run of
    # references it stands in, one damaged byte away, wrote it (ref_in_place.run_owned).
    root, diff = flipped(tmp_path, name, offset, mask, store=STORE)
    assert diff == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    assert verify_verdict(root) == ("OK", ())


@pytest.mark.parametrize(("offset", "mask"), [
    (1514, 0x0E),  # onto 2147484038, whose records all come after it
    (9313, 0x18),  # onto 2147484118, written before it and deleted by a DELETE of its own
], ids=["onto-a-later-message", "onto-a-message-deleted-twice"])
def test_a_delete_whose_id_moved_onto_another_messages_is_no_removed_file(tmp_path, offset, mask):
    # campaign sweep seed 9132 (same/CRITICAL, missing-journal-file and message-record-missing): the id of the
    # DELETE right after a message's last acknowledgement in activemq-data-4.amq, damaged onto the id of another
    # message that other records carry, leaves the message's acknowledgements live without their add. In the
    # broker's write order a record is deleted after it is written, and once (lost_deletes.moved_deletes).
    def check(data):  # the DELETE's type byte (its id ends 13 bytes on), or a DELETE_TX's (21: its tx id first)
        assert data[offset - 13] == 16 or data[offset - 21] == 15

    root, diff = flipped(tmp_path, "activemq-data-4.amq", offset, mask, check, store=STORE)
    assert diff == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    assert verify_verdict(root) == ("OK", ())


# tests/data/artemis/restart-shaped (README there): pool 1, restarted every 100 operations, never compacted. Two
# messages keep one acknowledgement each with neither their add nor their DELETE anywhere; 2147484127's add lay
# between adds still held (fileIDs 40 and 46), so its age does not tell a restart from a removal.
SHAPED = REPO / "tests" / "data" / "artemis" / "restart-shaped"
SHAPED_ORPHANS = [(2147483954, 33), (2147484127, 33)]


def test_the_restart_shaped_store_loads_like_journalimpl_with_two_orphan_acknowledgements():
    records, info = oracle_load(SHAPED / "oracle-load.jsonl")
    _result, mine = loaded_like_oracle(SHAPED / "journal")
    assert mine == records
    added = {r["id"] for r in records if not r["isUpdate"]}
    assert sorted((r["id"], r["userRecordType"]) for r in records if r["id"] not in added) == SHAPED_ORPHANS
    assert info["dataFiles"] == 67


def test_acknowledgements_a_restart_leaves_mid_journal_are_a_warning_not_critical(run_json):
    # main: CRITICAL missing-journal-file and message-record-missing on the healthy store
    code, doc, _ = run_json("verify", str(SHAPED / "journal"))
    assert (code, doc["verdict"]) == (1, "WARNING")
    [gap] = [f for f in doc["findings"] if f["code"] == "missing-journal-file"]
    assert gap["severity"] == "warning" and gap["details"]["restartMayExplain"] is True
    assert gap["details"]["liveUpdatesWithoutAdd"] == 2
    assert not [f for f in doc["findings"] if f["severity"] == "critical"]


def test_the_harness_takes_the_restart_shaped_store_for_one_a_broker_writes():
    # its oracle of proven loss (tests/faults/artemis.py), without the pristine's own orphans excused
    assert artemis.broker_could_write(SHAPED, journal_only=False) == ""


@pytest.mark.parametrize("name", ["activemq-data-53.amq", "activemq-data-73.amq"])
def test_a_removed_file_of_the_restart_shaped_store_is_still_critical(tmp_path, name):
    # the removed file held messages with references in later files: references without their add, which no
    # restart leaves (each of the store's 69 files removed in turn: 12 proven losses, all CRITICAL)
    root, diff = changed(tmp_path, name, None, SHAPED)
    assert diff["lost"] > 0
    verdict, codes = verify_verdict(root)
    assert verdict == "CRITICAL" and "missing-journal-file" in codes
    assert artemis.broker_could_write(root) != ""


def test_one_damaged_compact_count_does_not_make_the_journal_compacted(run_json, tmp_path):
    # a compaction raises the compactCount of every record it copies; one record's alone is a damaged byte (its
    # header: type, fileID, compactCount at +5), which the broker ignores (fault campaign seed 4960, h65 and
    # f9734: "record 11 cc" flips read CRITICAL)
    journal = shutil.copytree(SHAPED / "journal", tmp_path / "journal")
    path = journal / "activemq-data-61.amq"
    data = bytearray(path.read_bytes())
    assert (data[3103], data[3103 + 5]) == (12, 0)  # 2147484127's acknowledgement, an UPDATE
    data[3103 + 5] = 1
    path.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (1, "WARNING")


def test_two_files_swapped_by_name_do_not_make_the_journal_compacted(run_json, tmp_path):
    # a file named after a fileID above its own is what a compaction's output looks like by name; swapping two
    # files gives one too, and JournalImpl orders files by the fileID in their headers, so it loads the same
    # (fault campaign seed 4960, f9734: "swapped journal files" read CRITICAL)
    journal = shutil.copytree(SHAPED / "journal", tmp_path / "journal")
    a, b = journal / "activemq-data-88.amq", journal / "activemq-data-115.amq"
    first = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(first)
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (1, "WARNING")
