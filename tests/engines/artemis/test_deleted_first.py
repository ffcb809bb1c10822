"""A DELETE whose id was damaged onto a message written after it (issue 25, deleted_first.py).

``JournalImpl.load`` applies a DELETE to the whole load (``recordsToDelete``), so a DELETE read before the ADD of
its id drops that message, while the broker deletes a record only once it was added. verify read such a DELETE
as a routine ``delete-unknown-id`` (its record reclaimed) and said OK while the message was lost from its queues.
The field sweep of DELETE ids over real JournalImpl hold-out stores found it (bench/fuzz_fields.py --fields
delete-id, seed 9615, h11 9615010006: 2 rows lost, OK).

On tests/data/artemis/reclaimed-pool2: the DELETE of message 2147484320 at activemq-data-16.amq@7964; bit 10 of
its id makes it 2147485344, a message added at activemq-data-45.amq@9777, live to the end.
"""
from __future__ import annotations

from tests.engines.artemis.pool2 import flipped

DELETE_AT = 7964


def test_a_delete_moved_onto_a_later_live_message_drops_it(tmp_path, run_json):
    def check(data):
        assert data[DELETE_AT] == 16 and data[DELETE_AT + 6:DELETE_AT + 14] == (2147484320).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-16.amq", DELETE_AT + 12, 0x04, check)
    assert diff["lost"] > 0 and not diff["back"]
    code, doc, _ = run_json("verify", str(root))
    (found,) = [f for f in doc["findings"] if f["code"] == "add-of-deleted-id"]
    assert (found["severity"], found["details"]["id"]) == ("critical", 2147485344)
    assert found["details"]["deleteAt"] == "activemq-data-16.amq@7964"
    assert found["path"].endswith("activemq-data-45.amq")
    assert code == 2


def test_a_delete_moved_onto_an_earlier_live_message_drops_it(tmp_path, run_json):
    # tests/data/artemis/reclaimed-room: message 2147484220 is acknowledged and deleted at activemq-data-39.amq
    # @11517 (its ADD reclaimed); bit 6 of the DELETE's id makes it 2147484284, a message stored before it and
    # live to the end. The load deletes that message, as the broker does, and leaves the acknowledgement without
    # its message: verify said OK (field sweep delete-id seed 9616, h13 9616000004: 2 rows lost, OK)
    from tests.support import REPO

    at = 11517

    def check(data):
        assert data[at] == 16 and data[at + 6:at + 14] == (2147484220).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-39.amq", at + 13, 0x40, check,
                         store=REPO / "tests" / "data" / "artemis" / "reclaimed-room")
    assert diff["lost"] > 0 and not diff["back"]
    code, doc, _ = run_json("verify", str(root))
    (found,) = [f for f in doc["findings"] if f["code"] == "delete-moved"]
    assert (found["severity"], found["details"]["id"], found["details"]["acknowledgedId"]) == (
        "critical", 2147484284, 2147484220)
    assert found["offset"] == at and code == 2
