"""A damaged DELETE whose message's add the reclaimer freed long ago is no removed journal file (issue 25,
amqtool/engines/artemis/lost_deletes.py).

Its message's updates, dead too and still in the journal, read as live updates without their add once the
DELETE is unreadable; the broker drops them (no message for them) and delivers what it delivered. verify took
them for the trace of a removed file, CRITICAL missing-journal-file; the fault campaign over real JournalImpl
stores found it (6 at seed 7171 over new-c64k-s73 and new-small-s74: flips of a DELETE's check size or tag).

On tests/data/artemis/reclaimed-pool2 (a pool of 2: fileIDs missing between data files, an INFO file-id-gap untouched):
message 2147484495 has its delivery count (@1132) and acknowledgement (@1167) updates and its DELETE (@1198,
18 bytes) in activemq-data-22.amq, its add in a file the reclaimer freed and the pool deleted.

A DELETE whose id was damaged (one bit) deletes another id, which no other record carries, and leaves the same
trace; it follows the acknowledgement of the message it belonged to (lost_deletes.moved_deletes).
"""
from __future__ import annotations


import pytest

from tests.engines.artemis.pool2 import flipped
from tests.faults.runner import verify_verdict
from tests.support import flipped_test_journal

DELETE_AT, MID = 1198, 2147484495


def _damaged(tmp_path, offset: int, mask: int):
    def check(data):
        assert data[DELETE_AT] == 16 and data[DELETE_AT + 6:DELETE_AT + 14] == MID.to_bytes(8, "big")
        assert data[DELETE_AT + 14:DELETE_AT + 18] == (18).to_bytes(4, "big")
    return flipped(tmp_path, "activemq-data-22.amq", offset, mask, check)


@pytest.mark.parametrize("offset,mask", [(DELETE_AT + 17, 0x01), (DELETE_AT + 2, 0x10)], ids=["checksize", "tag"])
def test_a_damaged_delete_of_a_reclaimed_message_is_no_removed_file(tmp_path, run_json, offset, mask):
    root, diff = _damaged(tmp_path, offset, mask)
    assert not diff["lost"] and not diff["back"]  # the broker delivers the same messages
    code, doc, _ = run_json("verify", str(root))
    (gap,) = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert (gap["severity"], gap["details"]["liveUpdatesWithoutAdd"]) == ("info", 0)  # the pool's, as untouched
    (damaged,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (damaged["severity"], damaged["offset"], str(MID) in damaged["message"]) == ("warning", DELETE_AT, True)
    assert (code, doc["verdict"]) == (1, "WARNING")


@pytest.mark.parametrize("byte,mask", [(1, 0x10), (4, 0x01), (5, 0xda)], ids=["bit-52", "bit-24", "byte-2"])
def test_a_delete_whose_id_moved_right_after_the_ack_is_no_removed_file(tmp_path, byte, mask):
    # the DELETE at @1198 follows the acknowledgement of its message (@1167): with one byte of its id damaged it
    # deletes an id no other record carries, and leaves the message's updates live without their add
    root, diff = _damaged(tmp_path, DELETE_AT + 6 + byte, mask)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())  # the pool's gap, as untouched


def test_an_acknowledgement_whose_id_moved_right_before_its_delete_is_no_removed_file(tmp_path):
    # the acknowledgement's id moved (bit 2 of its low byte) names no message: an update live without its add,
    # which this test took for the trace of a removed file (CRITICAL missing-journal-file) while the broker drops
    # it and delivers the same. The DELETE of the message one damaged bit away follows it, as storeAcknowledge
    # deletes a message right after its last acknowledgement: it was that message's (own_acks.py)
    root, diff = _damaged(tmp_path, 1167 + 13, 0x04)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())  # the pool's gap, as untouched


def test_a_delete_moved_onto_a_message_written_after_it_is_no_removed_file(tmp_path):
    # bit 5 of the id's low byte: 2147484527, an id the journal's other records carry -- all of them after the
    # DELETE (its ADD @3871). This test took it for a DELETE that cannot be told from one of its own, and the
    # message's live updates without their add for the trace of a removed file (CRITICAL missing-journal-file),
    # while the broker delivers the same. In the broker's write order a record is deleted after it is written
    # (lost_deletes.moved_deletes, campaign sweep seed 9132). The message is added after that DELETE and
    # deleted again after its ADD: the damage drops nothing live, a warning (deleted_first.py)
    root, diff = _damaged(tmp_path, DELETE_AT + 6 + 7, 0x20)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("WARNING", ("add-of-deleted-id",))


def test_a_delete_moved_onto_a_message_deleted_before_it_is_no_removed_file(tmp_path):
    # 0x05 (two bits): 2147484490, acknowledged and deleted @1083/@1114, right before: deleted twice now. A record
    # is deleted once, and the second DELETE follows the acknowledgement of the message one byte away
    root, diff = _damaged(tmp_path, DELETE_AT + 6 + 7, 0x05)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())


def _cut(tmp_path, size: int):
    from tests.engines.artemis.pool2 import changed

    return changed(tmp_path, "activemq-data-22.amq", lambda data: bytes(data[:size]))


@pytest.mark.parametrize("size", [DELETE_AT + 5, DELETE_AT + 17], ids=["in-header", "in-size"])
def test_a_file_cut_inside_the_delete_of_a_reclaimed_message_is_its_own_loss_not_a_removed_file(tmp_path, size):
    # activemq-data-22.amq cut inside the DELETE of message 2147484495 (lost_deletes.cut_deletes): its updates,
    # before the cut, read as live without their add (reclaimed in the ids 17-21 the pool deleted). The cut loses
    # the records after it (the damaged tail weighs that), not a journal file; main added missing-journal-file
    root, diff = _cut(tmp_path, size)
    assert diff["lost"] and diff["back"]
    assert verify_verdict(root) == ("CRITICAL", ("damaged-tail",))


def test_a_file_cut_between_records_leaves_the_updates_without_their_add_as_evidence(tmp_path):
    # cut at 10181, exactly before a DELETE record: no damaged byte tells the cut (the file's length does:
    # clean_end.py), and the updates its lost DELETEs leave without their add stay the evidence of lost records
    # (2 messages lost, 3 come back)
    root, diff = _cut(tmp_path, 10181)
    assert (diff["lost"], diff["back"]) == (2, 3)
    assert verify_verdict(root) == ("CRITICAL", ("damaged-tail", "missing-journal-file"))


@pytest.mark.parametrize("offset,mask", [(7766, 0x20), (13182, 0x08)], ids=["update-tx", "update"])
def test_an_acknowledgement_whose_id_moved_right_before_its_messages_delete_is_no_removed_file(tmp_path, offset,
                                                                                              mask):
    # campaign seed 8484045452060018 (small-s24): an acknowledgement's id flipped one bit, right before the DELETE of
    # its message, whose reference on that queue the journal holds and no other acknowledgement does
    # (lost_deletes.moved_updates): it acknowledges nothing, the DELETE removes the message all the same. With the
    # pool's fileID gaps it read as a live update whose add a removed file held: CRITICAL missing-journal-file
    root, diff = flipped(tmp_path, "activemq-data-16.amq", offset, mask)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())


@pytest.mark.parametrize("offset", [6104, 7713], ids=["delete-6093", "delete-7702"])
def test_a_delete_whose_id_moved_after_two_updates_of_a_reclaimed_message_is_no_lost_message(tmp_path, offset):
    # campaign seed 8484046452063032 (small-s25): the DELETE of a message whose add was reclaimed long ago, right
    # after its acknowledgement, with one byte of its id damaged: the message's reference and acknowledgement read
    # as two live records of a message never deleted, whose record was lost: CRITICAL message-record-missing. The
    # DELETE read whole one byte away with no other record of its id (lost_deletes.moved_deletes) says it was
    # deleted: the broker delivers the same messages
    root, diff = flipped(tmp_path, "activemq-data-22.amq", offset, 0x80)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())


# tests/data/artemis/restart-orphan: message 2147484253's DELETE at activemq-data-13.amq@2348, its add reclaimed;
# message 2147484131 has one live acknowledgement without its add, which a restart left (restart_orphans.py)
ORPHAN_DELETE_AT, ORPHAN_MID = 2348, 2147484253


def _restart_orphan_flipped(tmp_path, offset: int, mask: int):
    return flipped_test_journal(tmp_path, "restart-orphan", "activemq-data-13.amq", ORPHAN_DELETE_AT,
                                (16, ORPHAN_MID), offset, mask)


def test_a_delete_the_damage_took_leaves_no_lost_message_record(tmp_path, run_json):
    # its type byte damaged: the damaged-record finding reads it as that DELETE (harmless), but the message-
    # record evidence took its updates, with the restart's lone orphan, for two messages whose records were
    # lost: CRITICAL message-record-missing while the broker delivers the same (campaign seed 8311064933120001
    # on /work/artemis-fresh/e-n7151, the same workload). The ids whose DELETE damage took are explained there
    # as they are for missing-journal-file.
    journal = _restart_orphan_flipped(tmp_path, ORPHAN_DELETE_AT, 0x40)
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (1, "WARNING")
    assert not [f for f in doc["findings"] if f["code"] == "message-record-missing"]
    (region,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert f"delete of record {ORPHAN_MID}" in region["message"]


def test_a_moved_delete_no_longer_vouches_for_a_lone_orphan(tmp_path, run_json):
    # its id's low byte damaged: the DELETE deletes an id nothing else carries (lost_deletes.moved_deletes), and
    # its message's acknowledgement read live with the restart's orphan made two records, enough for
    # message-record-missing; once the moved DELETE explains its own, one record is left, which lost_adds never
    # takes alone (campaign seed 8301064903120015 on /work/artemis-fresh/e-n7151: CRITICAL, the broker delivering
    # the same)
    journal = _restart_orphan_flipped(tmp_path, ORPHAN_DELETE_AT + 13, 0x04)
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (0, "OK")
    assert not [f for f in doc["findings"] if f["code"] == "message-record-missing"]


def test_an_update_id_the_broker_never_issued_does_not_vouch_for_a_lone_orphan(tmp_path, run_json):
    # the acknowledgement of message 2147484253 (deleted since) at activemq-data-13.amq@2317, one bit of its id's
    # third byte flipped: an id 65536 above every id the journal holds, one bit from one it holds (damaged_ids.py),
    # which with the restart's lone orphan made two records without a message: CRITICAL message-record-missing
    # while the broker loads the same (campaign seed 8331064993121 on /work/artemis-fresh/e-n7151, an ADD_REF's)
    journal = flipped_test_journal(tmp_path, "restart-orphan", "activemq-data-13.amq", 2317, (12, ORPHAN_MID),
                                   2317 + 11, 0x01)
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (0, "OK")
    assert not [f for f in doc["findings"] if f["code"] == "message-record-missing"]


def test_a_reference_damaged_onto_an_old_id_where_no_file_went_missing_is_no_lost_message_record(tmp_path, run_json):
    # the ADD_REF of message 2147484464 (deleted since) at activemq-data-12.amq@565, its id's bit 10 flipped:
    # it names 2147483440, with no add anywhere, and with the restart's lone orphan made two records without a
    # message: CRITICAL message-record-missing while the broker loads the same (campaign seed 8341065023120012
    # on /work/artemis-fresh/e-n7151). The broker writes a message's references as it stores it, so that add
    # would lie in the reference's file or the present file before it (add_placement.in_present_files): no
    # file holding it went missing.
    journal = flipped_test_journal(tmp_path, "restart-orphan", "activemq-data-12.amq", 565, (12, 2147484464),
                                   565 + 12, 0x04)
    code, doc, _ = run_json("verify", str(journal))
    assert not [f for f in doc["findings"] if f["code"] == "message-record-missing"]
    assert (code, doc["verdict"]) == (0, "OK")
