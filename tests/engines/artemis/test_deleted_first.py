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

