"""A batch after the index checkpoint whose control record is damaged but whose records still check out against
its size and Adler-32 (amqtool/engines/kahadb/superseded.py ``_as_written``), and an emptied journal file that
is not the newest, on stores real 5.17.2 brokers wrote (tests/data/kahadb: f5-kill SIGKILLed, checkpoint
4:47110, newest file db-9.log; f4-gc stopped cleanly, its newest file db-15.log the ack compaction of db-4)."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect

DATA = Path(__file__).resolve().parents[2] / "data" / "kahadb"


def _verdict(root: Path) -> tuple[str, set]:
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, {f.code for f in findings if f.severity.value != "info"}


def _damaged(tmp_path: Path, store: str, name: str, offset: int, mask: int) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / store / "kahadb", root)
    p = root / name
    data = bytearray(p.read_bytes())
    data[offset] ^= mask
    p.write_bytes(bytes(data))
    return root


def test_newest_file_batch_magic_over_sends_an_open_transaction_rolls_back_is_a_warning(tmp_path):
    # campaign seed 52524000171: db-9.log@5 ^0x02 breaks the magic of the batch at 0, which holds one send of
    # the open transaction f5-open; its size and checksum still match its records. The broker's recoveryCheck
    # of the newest file skips the corrupted block, and the transaction is rolled back at start anyway
    root = _damaged(tmp_path, "f5-kill", "db-9.log", 5, 0x02)
    verdict, codes = _verdict(root)
    assert verdict == "WARNING"
    assert "kahadb-corrupt-range" in codes


def test_older_file_batch_length_damaged_stays_critical(tmp_path):
    # campaign seed 52524000175: db-6.log@55094 ^0x01 turns the control record's own length 28 into 16777244:
    # Journal.getNextLocation (no recoveryCheck outside the newest file by default) jumps past the end of
    # db-6.log and never replays the rest of it
    root = _damaged(tmp_path, "f5-kill", "db-6.log", 55094, 0x01)
    assert _verdict(root)[0] == "CRITICAL"


def test_compaction_file_batch_type_damaged_is_a_warning(tmp_path):
    # campaign seed 52523000140: db-15.log@4 ^0x40 (the only batch's type): its records are the compaction
    # marker and 20 forwarded acks of messages the index no longer holds; db-15 is the newest file, so the
    # broker skips the block, and what it skips changes nothing
    root = _damaged(tmp_path, "f4-gc", "db-15.log", 4, 0x40)
    verdict, codes = _verdict(root)
    assert (verdict, codes) == ("WARNING", {"kahadb-not-a-journal"})


def test_an_emptied_file_before_the_newest_is_damage_not_an_index_mismatch(tmp_path):
    # campaign seed 52523000142: db-5.log emptied in f4-gc. The index holds nothing there, but a rebuild
    # would lose the acks it held (25 acknowledged messages back): latent damage, a WARNING, not the
    # CRITICAL kahadb-index-journal-mismatch of an intact journal
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "f4-gc" / "kahadb", root)
    (root / "db-5.log").write_bytes(b"")
    assert _verdict(root) == ("WARNING", {"kahadb-rebuild-would-differ"})
