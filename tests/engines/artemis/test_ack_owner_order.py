"""A lone acknowledgement whose message id was damaged (``ack-moved``): the candidates it could have belonged to
are only the messages that could have written it where it stands (write_order.not_owners_at: a message's ADD
comes before its acknowledgement, nothing of it after its DELETE), and among the deleted messages, only those
whose own acknowledgement of that queue is not found (own_acks.acked_elsewhere: the broker acknowledges a
reference once)."""
from __future__ import annotations

import pytest

from tests.faults.stores import campaign_demo, messages_files
from tests.support import flip_byte


@pytest.fixture(scope="module")
def pristine1(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("pristine") / "store", 1)


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


def test_an_acknowledgement_moved_near_deleted_messages_acknowledged_elsewhere_brings_its_message_back(
        run_json, pristine1, tmp_path):
    # fuzz seed 9101 (loss/OK, seed 9101027303000010): a random byte (^0x46) of the id of message 74's
    # ACKNOWLEDGE_REF on queue 19 turned it into 12, an id no message record has. 74 comes back on queue 19.
    # Verify said OK: 12 is one damaged byte from some thirty messages deleted since -- but each of those has
    # its own acknowledgement of queue 19 standing in the journal, or references on other queues only, so none
    # of them wrote this one. Of the live messages still on queue 19, seven are one byte away, 74 among them.
    import shutil

    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    store = shutil.copytree(pristine1, tmp_path / "store")
    path, tag, version = next(f for f in messages_files(store) if f[0].name == "activemq-data-16.amq")
    recs, _ = scan_records_py(path.read_bytes(), tag, version)
    (r,) = [r for r in recs if r[1] <= 183 < r[1] + r[2]]
    assert (r[0], r[5], r[6]) == (12, 74, R.ACKNOWLEDGE_REF)  # UPDATE: message 74 acknowledged
    flip_byte(path, 183, 0x46)  # the id's lowest byte: 74 -> 12
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "ack-moved"]
    assert (code, doc["verdict"], f["severity"], f["details"]["count"]) == (2, "CRITICAL", "critical", 1)
    assert 74 in f["details"]["messageIds"] and len(f["details"]["messageIds"]) == 7


def test_a_deleted_messages_acknowledgement_moved_onto_a_live_message_is_no_loss_when_its_delete_follows(
        run_json, pristine1, tmp_path):
    # sweep seed 9111 (same/CRITICAL): a random byte (^0x81) of the id of message 326's last acknowledgement, on
    # queue 11, made it 455's, a live message routed to queue 15 only. Verify read it as 455's own acknowledgement
    # with its queue damaged (15 -> 11, one bit), or as that of 451, live on queue 11: CRITICAL ack-without-ref.
    # The record right after it is 326's DELETE, as storeAcknowledge writes a message's last acknowledgement and
    # then deletes it: it was 326's, and the broker drops it to no effect.
    import shutil

    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    store = shutil.copytree(pristine1, tmp_path / "store")
    path, tag, version = next(f for f in messages_files(store) if f[0].name == "activemq-data-16.amq")
    recs, _ = scan_records_py(path.read_bytes(), tag, version)
    i = next(i for i, r in enumerate(recs) if r[1] <= 3432 < r[1] + r[2])
    assert [(r[0], r[5], r[6]) for r in recs[i:i + 2]] == [(12, 326, R.ACKNOWLEDGE_REF), (16, 326, 0)]
    flip_byte(path, 3432, 0x81)  # the id's lowest byte: 326 -> 455
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (0, "OK"), [f["code"] for f in doc["findings"]]


def test_a_deleted_page_cursor_acknowledgement_is_no_candidate_owner_of_a_message_acknowledgement(run_json, tmp_path):
    # ack-id sweep seed 7791 on hold-out demo d21 (create --demo 8MiB --seed 21 --live-ratio 0.1; loss/OK,
    # 7791000015): one bit (^0x04) of the id of message 1000's acknowledgement on queue 23 made it 2024, an id no
    # record has. 1000 comes back on queue 23. Verify said OK: 2024 is one bit from 1768 and 1512, deleted since
    # and written around it -- but their ADDs stand, and they are page cursor acknowledgements (user record type
    # 39), which the broker deletes too and which never acknowledge a message.
    from amqtool.engines.artemis.demo import create_demo
    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.artemis.userrecords import JournalRecordIds as R

    store = tmp_path / "d21"
    create_demo(store, 8 << 20, seed=21, live_ratio=0.1)
    path, tag, version = next(f for f in messages_files(store) if f[0].name == "activemq-data-1.amq")
    recs, _ = scan_records_py(path.read_bytes(), tag, version)
    (r,) = [r for r in recs if r[1] <= 2680500 < r[1] + r[2]]
    assert (r[0], r[5], r[6]) == (12, 1000, R.ACKNOWLEDGE_REF)
    assert {x[6] for x in recs if x[5] in (1768, 1512) and x[0] == 11} == {R.ACKNOWLEDGE_CURSOR}
    flip_byte(path, 2680500, 0x04)  # the id's second-lowest byte: 1000 -> 2024
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "ack-moved"]
    assert (code, doc["verdict"], f["details"]["count"]) == (2, "CRITICAL", 1)
    assert f["details"]["messageIds"] == [1000]
