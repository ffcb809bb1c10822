"""A lone update id the broker never issued is a damaged id, not a removed file (issue 25,
amqtool/engines/artemis/damaged_ids.py). On the real JournalImpl store reclaimed-pool2 (fileIDs missing
between data files, nothing lost), an acknowledgement of a message acknowledged and deleted since, with one
bit of its id flipped, made verify CRITICAL missing-journal-file while the broker delivers the same messages
(the fault campaign found 20 such misses over real JournalImpl stores k128k-s5, k64k-s6, seed 1002)."""
from __future__ import annotations

import shutil

import pytest

from tests.faults import artemis
from tests.faults.runner import verify_verdict
from tests.support import MESSAGES, REPO

STORE = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"
# activemq-data-1.amq@3726: an UPDATE (ACKNOWLEDGE_REF) of message 0x80000070, deleted later in the journal;
# its id's 8 bytes start 6 bytes in (type, fileID, compactCount)
ACK, ID_AT = 3726, 3726 + 6


def _flipped(tmp_path, byte: int, mask: int):
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    root = tmp_path / "store"
    shutil.copytree(STORE / "journal", root / "journal")
    shutil.copytree(BINDINGS, root / "bindings")
    reader = artemis.DeliveredReader(root)
    path = root / "journal" / "activemq-data-1.amq"
    data = bytearray(path.read_bytes())
    assert data[ID_AT:ID_AT + 8] == (0x80000070).to_bytes(8, "big")
    data[ID_AT + byte] ^= mask
    path.write_bytes(bytes(data))
    return root, reader.pristine.diff(reader.damaged(root))


@pytest.mark.parametrize("byte,mask", [(3, 0x01), (0, 0x80)], ids=["far-above", "negative"])
def test_an_ack_whose_id_the_broker_never_issued_is_no_removed_file(tmp_path, byte, mask):
    root, diff = _flipped(tmp_path, byte, mask)
    assert not diff["lost"] and not diff["back"]  # the broker delivers the same messages
    assert verify_verdict(root) == ("WARNING", ("missing-journal-file",))  # the pool's gap, as pristine


def test_an_orphan_id_among_the_journals_ids_is_still_a_lost_file(tmp_path):
    # 0x80000074: an id the journal issued, whose add is gone: a removed file may have held it
    root, _ = _flipped(tmp_path, 7, 0x04)
    assert verify_verdict(root) == ("CRITICAL", ("missing-journal-file",))
