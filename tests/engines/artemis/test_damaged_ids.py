"""A lone update id the broker never issued is a damaged id, not a removed file (issue 25,
amqtool/engines/artemis/damaged_ids.py). On the real JournalImpl store reclaimed-pool2 (fileIDs missing
between data files, nothing lost), an acknowledgement of a message acknowledged and deleted since, with one
bit of its id flipped, made verify CRITICAL missing-journal-file while the broker delivers the same messages
(the fault campaign found 20 such misses over real JournalImpl stores k128k-s5, k64k-s6, seed 1002)."""
from __future__ import annotations

import json

import pytest

from tests.engines.artemis.pool2 import STORE, flipped
from tests.faults.runner import verify_verdict

# activemq-data-1.amq@3726: an UPDATE (ACKNOWLEDGE_REF) of message 0x80000070, deleted later in the journal;
# its id's 8 bytes start 6 bytes in (type, fileID, compactCount)
ACK, ID_AT = 3726, 3726 + 6


def _flipped(tmp_path, byte: int, mask: int):
    def check(data):
        assert data[ID_AT:ID_AT + 8] == (0x80000070).to_bytes(8, "big")
    return flipped(tmp_path, "activemq-data-1.amq", ID_AT + byte, mask, check)


@pytest.mark.parametrize("byte,mask", [(3, 0x01), (0, 0x80)], ids=["far-above", "negative"])
def test_an_ack_whose_id_the_broker_never_issued_is_no_removed_file(tmp_path, byte, mask):
    root, diff = _flipped(tmp_path, byte, mask)
    assert not diff["lost"] and not diff["back"]  # the broker delivers the same messages
    assert verify_verdict(root) == ("OK", ())  # the pool's gap, as pristine


def test_an_orphan_id_among_the_journals_ids_whose_add_lay_in_a_file_still_there_is_no_lost_file(tmp_path):
    # 0x80000074: an id the journal issued, whose add is gone; but the adds of the ids around it are in file 1,
    # still there, so no missing fileID held it (add_placement.py; tests/engines/artemis/test_add_placement.py)
    root, diff = _flipped(tmp_path, 7, 0x04)
    assert not diff["lost"] and not diff["back"]
    assert verify_verdict(root) == ("OK", ())


def test_journalimpl_loads_the_far_above_flip_as_one_update_of_an_unknown_id(tmp_path):
    # oracle-load-ack-id-bit32.jsonl: what the real JournalImpl loads from the far-above copy (bit 32 of the
    # id flipped; README there): the pristine load's records and data files, plus that one acknowledgement of
    # an id with no message record, which the broker's load drops (journalCannotFindMessage)
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    root, _ = _flipped(tmp_path, 3, 0x01)
    lines = [json.loads(x) for x in (STORE / "oracle-load-ack-id-bit32.jsonl").read_text().splitlines()]
    pristine = [json.loads(x) for x in (STORE / "oracle-load.jsonl").read_text().splitlines()]
    extra = [r for r in lines[:-1] if r not in pristine[:-1]]
    assert extra == [dict(extra[0], id=0x180000070, userRecordType=33, isUpdate=True)]
    assert lines[-1]["dataFileNames"] == pristine[-1]["dataFileNames"]
    with open_journal(detect(root / "journal").journals()[0]) as opened:
        result = load_journal(opened)
        mine = [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
                 "compactCount": r.compact_count, "len": r.body_len, "sha256": result.body_sha256(r)}
                for r in result.live]
    assert mine == lines[:-1]
