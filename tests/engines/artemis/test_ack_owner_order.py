"""A lone acknowledgement whose message id was damaged (``ack-moved``): the candidates it could have belonged to
are only the messages that could have written it where it stands (write_order.not_owners_at: a message's ADD
comes before its acknowledgement, nothing of it after its DELETE)."""
from __future__ import annotations

import pytest

from tests.faults.stores import campaign_demo, messages_files
from tests.support import flip_byte


@pytest.fixture(scope="module")
def pristine4(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("pristine") / "store", 4)


def test_an_acknowledgement_moved_near_messages_deleted_later_still_brings_its_message_back(run_json, pristine4,
                                                                                             tmp_path):
    # make fuzz seed 5151 (loss/OK, seed 5151018459009144): a bit of the id of message 57's ACKNOWLEDGE_REF in
    # committed transaction 287 flipped (57 -> 313, no record has it). 57 comes back on queue 23. Verify said OK:
    # 313 is one bit from messages 305 and 441, deleted since, which were taken for its possible owners -- but
    # both were added after the acknowledgement was written, so neither wrote it. Of the live messages on that
    # queue, 57 and 281 are one bit away: whichever it was, an acknowledged message comes back.
    import shutil

    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    store = shutil.copytree(pristine4, tmp_path / "store")
    path, tag, version = next(f for f in messages_files(store) if f[0].name == "activemq-data-8.amq")
    recs, _ = scan_records_py(path.read_bytes(), tag, version)
    (r,) = [r for r in recs if r[1] <= 62641 < r[1] + r[2]]
    assert (r[0], r[4], r[5], r[6]) == (14, 287, 57, R.ACKNOWLEDGE_REF)  # UPDATE_TX: tx 287 acknowledges 57
    flip_byte(path, 62641, 0x01)  # the id's second-lowest byte: 57 -> 313
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "ack-moved"]
    assert (code, doc["verdict"], f["severity"], f["details"]["count"]) == (2, "CRITICAL", "critical", 1)
    assert sorted(f["details"]["messageIds"]) == [57, 281]
