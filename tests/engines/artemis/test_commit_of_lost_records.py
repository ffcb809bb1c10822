"""A COMMIT whose own records lie in damaged bytes of its file, read back under its transaction id, lost them;
it was not split from another transaction by a damaged id (verify's commit-damaged, unknown_commits.py)."""
from __future__ import annotations

import shutil

import pytest

from tests.faults import artemis
from tests.faults.runner import verify_verdict
from tests.support import MESSAGES, REPO

STORE = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"
# transaction 2147483858: one acknowledgement (UPDATE_TX) at activemq-data-3.amq@14406, its COMMIT at @14445
ACK, COMMIT, TX = 14406, 14445, 2147483858
OPEN = 2147483912  # a transaction the store leaves open (the broker rolls it back)


def test_a_commit_whose_record_was_damaged_commits_no_other_transaction(tmp_path):
    # seed 9102041306042030 (b05, activemq-data-69.amq@46457 ^0x10: the type of a transaction's only record): its
    # COMMIT then names a transaction with no records, and an open transaction one bit from its id was taken for
    # the one it committed (CRITICAL commit-damaged, "the broker rolls it back and loses what it held"); the
    # broker rolls that one back anyway, and the damaged record, read back under the COMMIT's id, is what the
    # COMMIT lost. Made here: the committed transaction given an id one bit from the open one's.
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    root = tmp_path / "s"
    shutil.copytree(STORE / "journal", root / "journal")
    shutil.copytree(BINDINGS, root / "bindings")
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    path = root / "journal" / "activemq-data-3.amq"
    data = bytearray(path.read_bytes())
    assert (data[ACK], data[COMMIT], int.from_bytes(data[ACK + 6:ACK + 14], "big")) == (14, 18, TX)
    near = (OPEN ^ 1 << 20).to_bytes(8, "big")
    data[ACK + 6:ACK + 14] = data[COMMIT + 6:COMMIT + 14] = near
    path.write_bytes(bytes(data))
    assert verify_verdict(root) == ("OK", ())
    pristine = artemis.delivered(root)
    data[ACK] ^= 0x10
    path.write_bytes(bytes(data))
    assert artemis.delivered(root) == pristine
    assert verify_verdict(root) == ("WARNING", ("damaged-record",))
