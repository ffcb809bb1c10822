"""Damaged records of a transaction rolled back after the index checkpoint (amqtool/engines/kahadb/superseded.py
``_undone``), on a store a real 5.17.2 broker left when SIGKILLed (tests/data/kahadb/k5-rollback-kill:
lastUpdate 1:6136; after it, in db-1.log, a transaction of two sends rolled back at 13937 and one committed at
16170; in db-2.log, the newest, a transaction acking two messages rolled back at 802, then a plain ack of
another at 874).

``process(KahaRollbackCommand)`` drops a transaction's operations whether they were replayed or not, and
``MessageDatabase.recover`` rolls back (local) or discards (XA) a transaction still in flight at its end: losing
one of these records changes nothing the broker delivers. The campaign's truth for each fault below is ``same``;
verify said CRITICAL before (hold-out mKahaDB store k3, campaign seed 7646: 11 such faults in 1,500)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.engines.kahadb.judged import flip, flipped, verdict, zero

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k5-rollback-kill" / "kahadb"


def test_pristine_store_is_a_warning(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index"})


@pytest.mark.parametrize("name, offset, mask", [
    ("db-2.log", 0 + 28 + 100, 0x04),  # a body byte of the rolled-back transaction's first ack (newest file)
    ("db-2.log", 0 + 20, 0x40),  # that batch's stored checksum
    ("db-1.log", 11745 + 28 + 200, 0x04),  # a body byte of the rolled-back transaction's first send (older file)
], ids=["ack-body", "ack-checksum", "older-send-body"])
def test_damaged_operation_of_a_rolled_back_transaction_is_latent(tmp_path, name, offset, mask):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, name, offset, mask)
    said, codes = verdict(root)
    assert said == "WARNING", codes
    assert "kahadb-checksum-mismatch" in codes


@pytest.mark.parametrize("offset, mask", [(774 + 20, 0x40), (774 + 28 + 10, 0x01)], ids=["checksum", "tx-id"])
def test_damaged_rollback_of_an_unprepared_transaction_is_latent(tmp_path, offset, mask):
    # the ROLLBACK lost, the acks' transaction is still in flight at the end of the replay: the broker rolls it back
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db-2.log", offset, mask)
    said, codes = verdict(root)
    assert said == "WARNING", codes
    assert {"kahadb-checksum-mismatch", "kahadb-open-transaction"} <= codes


@pytest.mark.parametrize("name, offset", [("db-2.log", 846 + 20), ("db-1.log", 13981 + 28 + 200)],
                         ids=["plain-ack", "committed-send"])
def test_damaged_plain_ack_or_committed_send_stays_critical(tmp_path, name, offset):
    # the ack outside a transaction lost brings its message back; the committed send's body is read as damaged
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, name, offset, 0x40 if name == "db-2.log" else 0x04)
    assert verdict(root)[0] == "CRITICAL"


# the second ack of the rolled-back transaction: batch 387, record 415; its transaction_info runs 423..459
@pytest.mark.parametrize("offset, length", [(471, 84), (461, 40), (500, 200)], ids=["id", "head-kept", "to-ack"])
def test_zeroed_ack_whose_head_names_a_rolled_back_transaction_is_latent(tmp_path, offset, length):
    # the record no longer decodes, but its head (type, length, transaction_info first) is whole: the broker
    # skips the corrupted batch in the newest file, and the ROLLBACK after it drops the ack anyway (campaign
    # seed 49049000178: CRITICAL before)
    assert _zeroed(tmp_path, "db-2.log", offset, length) == "WARNING"


@pytest.mark.parametrize("name, offset, length", [("db-2.log", 440, 20), ("db-2.log", 930, 84)],
                         ids=["transaction-zeroed", "plain-ack"])
def test_zeroed_ack_without_a_rolled_back_head_stays_critical(tmp_path, name, offset, length):
    # the zeros hit the transaction id itself: whose ack it was is unknown; a plain ack lost brings its message back
    assert _zeroed(tmp_path, name, offset, length) == "CRITICAL"


def _zeroed(tmp_path: Path, name: str, offset: int, length: int) -> str:
    """verify's verdict of the store with ``length`` zeros at ``offset`` of ``name`` (a damaged batch found)."""
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    zero(root, name, offset, length)
    said, codes = verdict(root)
    assert "kahadb-checksum-mismatch" in codes
    return said


@pytest.mark.parametrize("offset, mask", [(14009 + 5, 0x02), (15087 + 5, 0x02)], ids=["first-send", "second-send"])
def test_committed_send_read_as_its_transactions_prepare_is_critical(tmp_path, offset, mask):
    # db-1.log is not the newest: the replay loads the record as it reads, a PREPARE of the committed transaction
    # (ADD_MESSAGE 1 ^ 2 = PREPARE 3) with the send's destination and message id as fields no PREPARE has; the send
    # is lost to the COMMIT at 16170 (truth: loss; verify said WARNING: "prepares of transactions whose outcome
    # follows"; found as a committed ack read as a PREPARE on hold-out q4-big-tx-kill, campaign seed 510513000046)
    said, codes = flipped(STORE, tmp_path, "db-1.log", offset, mask)
    assert said == "CRITICAL", codes
    assert "kahadb-checksum-mismatch" in codes


def _control_length(root: Path, batch: int, length: int) -> None:
    # the batch control record's own length (its first int32, 28 as written): the broker's replay walk steps over
    # the control record by the length it reads
    p = root / "db-1.log"
    data = bytearray(p.read_bytes())
    data[batch:batch + 4] = length.to_bytes(4, "big")
    p.write_bytes(bytes(data))


def test_walk_stepping_over_a_rolled_back_transactions_sends_is_latent(tmp_path):
    # db-1.log is not the newest: the control record of the rolled-back transaction's first send (batch 11745)
    # reads 2164 long, so the walk lands on the ROLLBACK's batch at 13909 and skips both sends; the ROLLBACK
    # drops them anyway (truth: same; hold-out q4-big-tx-kill, campaign seed 510513000057: CRITICAL before)
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    _control_length(root, 11745, 13909 - 11745)
    said, codes = verdict(root)
    assert said == "WARNING", codes
    assert "kahadb-corrupt-range" in codes


def test_walk_stepping_over_a_committed_send_stays_critical(tmp_path):
    # the committed transaction's first send (batch 13981) skipped the same way: its COMMIT at 16170 is read
    # without it, the message is lost (truth: loss)
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    _control_length(root, 13981, 15059 - 13981)
    assert verdict(root)[0] == "CRITICAL"


@pytest.mark.parametrize("mask", [0x01, 0x04], ids=["rollback", "trace"])
def test_committed_transactions_commit_read_as_another_command_is_critical(tmp_path, mask):
    # db-1.log (not the newest): the COMMIT at 16170 with its type byte COMMIT 4 ^ 1 = ROLLBACK 5, or 4 ^ 4 = TRACE
    # 0. The replay drops the committed transaction's two sends, which nothing else holds (truth: loss). It was a
    # WARNING: the rule took the ROLLBACK as one of a transaction the start rolls back anyway, the trace as a record
    # that only moves lastUpdate (hold-out q4-big-tx-kill, sweep of type bytes: db-7.log@1654, db-3.log@33802)
    said, codes = flipped(STORE, tmp_path, "db-1.log", 16170 + 5, mask)
    assert said == "CRITICAL", codes
    assert "kahadb-checksum-mismatch" in codes


@pytest.mark.parametrize("offset", [11773 + 5, 12855 + 5], ids=["first-send", "second-send"])
def test_rolled_back_transactions_send_read_as_its_rollback_is_latent(tmp_path, offset):
    # db-1.log (not the newest): a send of the transaction rolled back at 13937 with its type byte ADD 1 ^ 4 =
    # ROLLBACK 5: the replay drops the transaction early, which its ROLLBACK does anyway (truth: same; hold-out
    # q4-big-tx-kill, campaign seed 510773000165: CRITICAL before). The committed transaction's send read so
    # (14009) stays CRITICAL: test_committed_send_read_as_its_transactions_prepare_is_critical's kind of loss
    said, codes = flipped(STORE, tmp_path, "db-1.log", offset, 0x04)
    assert said == "WARNING", codes
    assert flipped(STORE, tmp_path / "committed", "db-1.log", 14009 + 5, 0x04)[0] == "CRITICAL"
