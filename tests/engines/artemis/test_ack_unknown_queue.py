"""An acknowledgement whose queue id was damaged into an id no binding holds, of a message still live on a
queue one byte away: the broker drops the acknowledgement and delivers the message again there
(amqtool/engines/artemis/ack_queue.py). The fault campaign over real JournalImpl stores (bench/fuzz_verdicts.py
--stores /work/artemis-fresh/* --seed 2511) found it on small-s11 (seed 2511020533039003: queue 11 read as
216): OK with no finding, while the message came back on events.billing."""
from __future__ import annotations

from tests.engines.artemis.pool2 import flipped
from tests.faults.runner import verify_verdict

# activemq-data-45.amq@12856: an UPDATE (ACKNOWLEDGE_REF) of message 2147485344 on queue 9 (events.audit); the
# message stays live on queue 11 (events.billing). The body (the queue id, 8 bytes) starts 19 bytes in.
ACK = 12856
QUEUE_AT = ACK + 19


def _check(data):
    assert data[ACK] == 12 and data[ACK + 18] == 33  # an update, ACKNOWLEDGE_REF
    assert data[ACK + 6:ACK + 14] == (2147485344).to_bytes(8, "big")
    assert data[QUEUE_AT:QUEUE_AT + 8] == (9).to_bytes(8, "big")


def test_an_ack_moved_onto_no_queue_brings_its_message_back_and_is_critical(tmp_path):
    # 9 ^ 0xd3 = 218: one byte from both events queues (9 and 11), so no single queue it came from
    root, diff = flipped(tmp_path, "activemq-data-45.amq", QUEUE_AT + 7, 0xD3, _check)
    assert diff["back"] == 1 and not diff["lost"]  # the truth: message 2147485344 on queue 9 again
    assert verify_verdict(root) == ("CRITICAL", ("ack-without-ref",))  # the pool's gap is INFO file-id-gap


def test_an_ack_of_a_message_deleted_since_moved_onto_no_queue_changes_nothing(tmp_path):
    # activemq-data-1.amq@3726: the acknowledgement on queue 9 of message 0x80000070, deleted later: the same
    # flip leaves what the broker delivers as it was, and the verdict as the pristine store's (the pool's gap)
    def check(data):
        assert data[3726 + 6:3726 + 14] == (0x80000070).to_bytes(8, "big")
        assert data[3726 + 19:3726 + 27] == (9).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-1.amq", 3726 + 26, 0xD3, check)
    assert not diff["back"] and not diff["lost"]
    assert verify_verdict(root) == ("OK", ())  # the pool's gap is INFO file-id-gap
