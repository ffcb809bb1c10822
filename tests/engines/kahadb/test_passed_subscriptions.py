"""A durable subscription whose cursor in an index ahead of its checkpoint passed over a send the journal leaves
waiting for it (amqtool/engines/kahadb/index_ahead.passed_subscriptions).

The broker-written fixture k8-priority-topic-kill (one file, killed) with page 0's lastUpdate moved back to the
ADD at 1:3784: the index then holds the send at 1:4738 (seq 5, pending for k8-b:b) written after its
checkpoint, as a broker killed after flushing index pages between checkpoints leaves it (kl49 hold-out n2,
indexWriteBatchSize=30). k8-b:b's LastAck is set to 3 below its ackPositions (0..6): individual acks, the
same six messages pending. Damage to the range's end (0..4) takes seq 5 out of the subscription; the replay's
redo of its send adds no ack position back, and the message is lost for k8-b:b (found as n2, seed
49031000021, db.data@41406 ^0x04: read WARNING)."""
from __future__ import annotations

import struct
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect
from tests.engines.kahadb.judged import checkpoint_moved, flip
from tests.faults.kahadb import KahaCampaign
from tests.faults.model import Fault

K8 = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k8-priority-topic-kill" / "kahadb"
LAST_ACKS = struct.pack(">qBqB", 4, 0, -1, 0)  # subscriptionAcks leaf values: k8-a:a's LastAck, then k8-b:b's
RANGE = struct.pack(">iBqq", 1, 1, 0, 6)  # k8-b:b's ackPositions: one range, 0..6


def _index_ahead(tmp_path: Path) -> tuple[Path, int]:
    """The store, and the offset of the last byte of k8-b:b's ackPositions range end."""
    root = tmp_path / "src" / "kahadb"
    data = checkpoint_moved(K8, root, (1, 8236), (1, 3784))
    assert data.count(LAST_ACKS) == 1 and data.count(RANGE) == 1
    struct.pack_into(">q", data, data.find(LAST_ACKS) + 9, 3)
    (root / "db.data").write_bytes(bytes(data))
    return root, data.find(RANGE) + len(RANGE) - 1


def test_the_store_with_its_index_ahead_reads_as_replayed(tmp_path):
    root, _ = _index_ahead(tmp_path)
    findings, _ = verify_store(detect(root))
    assert overall_verdict(findings).name == "WARNING"
    assert {f.code for f in findings if f.severity.value != "info"} == {"kahadb-journal-ahead-of-index"}


def test_a_send_after_the_checkpoint_passed_by_a_subscription_is_a_loss(tmp_path):
    root, at = _index_ahead(tmp_path)
    c = KahaCampaign("k8-ahead", root.parent, tmp_path / "scratch")
    o = c.run_fault(Fault("flip", "kahadb/db.data", at, 0x02, label="ackPositions range end 6 -> 4"))
    assert o.truth == "loss"
    assert o.verdict == "CRITICAL" and "kahadb-index-journal-mismatch" in o.codes


def test_the_finding_names_the_subscription_and_the_message(tmp_path):
    root, at = _index_ahead(tmp_path)
    flip(root, "db.data", at, 0x02)
    findings, _ = verify_store(detect(root))
    f = next(f for f in findings if f.code == "kahadb-index-journal-mismatch")
    assert f.details["passedSubscriptions"] == [{"destination": "1:fx.k8.t", "subscription": "k8-b:b",
                                                 "messageIds": ["ID:vm-38197-1795803743777-3:3:-1:1:6"]}]
