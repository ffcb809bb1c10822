"""A batch after the index checkpoint whose control record is damaged but whose records still check out against
its size and Adler-32 (amqtool/engines/kahadb/superseded.py ``as_written``), and an emptied journal file that
is not the newest, on stores real 5.17.2 brokers wrote (tests/data/kahadb: f5-kill SIGKILLed, checkpoint
4:47110, newest file db-9.log; f4-gc stopped cleanly, its newest file db-15.log the ack compaction of db-4)."""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.engines.kahadb.judged import verdict

DATA = Path(__file__).resolve().parents[2] / "data" / "kahadb"


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
    said, codes = verdict(root)
    assert said == "WARNING"
    assert "kahadb-corrupt-range" in codes


def test_older_file_batch_length_damaged_stays_critical(tmp_path):
    # campaign seed 52524000175: db-6.log@55094 ^0x01 turns the control record's own length 28 into 16777244:
    # Journal.getNextLocation (no recoveryCheck outside the newest file by default) jumps past the end of
    # db-6.log and never replays the rest of it
    root = _damaged(tmp_path, "f5-kill", "db-6.log", 55094, 0x01)
    assert verdict(root)[0] == "CRITICAL"


def test_compaction_file_batch_type_damaged_is_a_warning(tmp_path):
    # campaign seed 52523000140: db-15.log@4 ^0x40 (the only batch's type): its records are the compaction
    # marker and 20 forwarded acks of messages the index no longer holds; db-15 is the newest file, so the
    # broker skips the block, and what it skips changes nothing (the file's one batch, after the checkpoint:
    # what a crash tearing its write leaves, test_the_newest_files_one_batch_torn_is_a_torn_tail)
    root = _damaged(tmp_path, "f4-gc", "db-15.log", 4, 0x40)
    said, codes = verdict(root)
    assert (said, codes) == ("WARNING", {"kahadb-truncated-tail"})


def test_the_newest_files_one_batch_torn_is_a_torn_tail(tmp_path):
    # campaign seeds 7201 and 7202 (f5-kill, db-9.log@4 ^0x02, the type byte of the newest file's only batch):
    # CRITICAL kahadb-not-a-journal. A broker killed while writing the first batch of a file it had just
    # preallocated leaves exactly that: the one batch, past the checkpoint, torn, and the rest of the file as
    # preallocated. Here f7-kill-gc's db-9.log (wholly after lastUpdate 8:22057) as it stood after its first
    # batch: that batch, zeros, and the end marker in its last five bytes (Journal.doPreallocationSparseFile)
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "f7-kill-gc" / "kahadb", root)
    p = root / "db-9.log"
    data = p.read_bytes()
    first = 28 + 280
    p.write_bytes(data[:first] + bytes(len(data) - first - 5) + b"-qMa4")
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index"})
    raw = bytearray(p.read_bytes())
    raw[4] ^= 0x02
    p.write_bytes(bytes(raw))
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index", "kahadb-truncated-tail"})


def test_an_emptied_file_before_the_newest_is_damage_not_an_index_mismatch(tmp_path):
    # campaign seed 52523000142: db-5.log emptied in f4-gc. The index holds nothing there, but a rebuild
    # would lose the acks it held (25 acknowledged messages back): latent damage, a WARNING, not the
    # CRITICAL kahadb-index-journal-mismatch of an intact journal
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "f4-gc" / "kahadb", root)
    (root / "db-5.log").write_bytes(b"")
    assert verdict(root) == ("WARNING", {"kahadb-rebuild-would-differ"})


def test_older_file_batch_size_damaged_over_acked_sends_is_a_warning(tmp_path):
    # campaign seed 52524000195: db-6.log@58879 ^0x01 makes the batch at 58860 declare 410 bytes, its records
    # tile 411: over those the stored Adler-32 matches, so they are as written; the broker's walk never reads
    # the batch size, and the batch holds one send of fx.f5.side acknowledged later
    root = _damaged(tmp_path, "f5-kill", "db-6.log", 58879, 0x01)
    assert verdict(root)[0] == "WARNING"


def test_older_file_record_type_damaged_over_an_acked_send_is_a_warning(tmp_path):
    # campaign seed 52524000198: db-7.log@3057 ^0x10, the type byte of the batch's only record (a topic send
    # every durable subscription acknowledges later): the Adler-32 matches once it is put back to 1, and the
    # broker's walk steps over a record of another type
    root = _damaged(tmp_path, "f5-kill", "db-7.log", 3057, 0x10)
    assert verdict(root)[0] == "WARNING"


def test_newest_file_one_damaged_byte_over_an_open_transaction_send_is_a_warning(tmp_path):
    # campaign seed 52524000297: db-9.log@33 ^0x02 changes the entry type of the open transaction's send; the
    # one byte is found and undone from the Adler-32's two sums, and the broker skips the corrupted block of
    # the newest file whole
    root = _damaged(tmp_path, "f5-kill", "db-9.log", 33, 0x02)
    assert verdict(root)[0] == "WARNING"


def test_older_file_message_id_damaged_stays_critical(tmp_path):
    # campaign seed 52524000038: db-5.log@50586 ^0xf9 inside the message id of a send acknowledged later. An
    # older file is not checked at start: the broker replays the send under the damaged id, which no ack
    # takes back
    root = _damaged(tmp_path, "f5-kill", "db-5.log", 50586, 0xF9)
    assert verdict(root)[0] == "CRITICAL"


def test_newest_file_cut_short_of_the_preallocated_length_is_critical(tmp_path):
    # campaign seed 52525000096: f7-kill-gc's db-9.log (32768 bytes like every other file: preallocated)
    # truncated to 778, inside its second batch. No crash leaves a preallocated file short: what followed the
    # cut (sends and acks after the checkpoint) is lost, not a torn write
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "f7-kill-gc" / "kahadb", root)
    p = root / "db-9.log"
    p.write_bytes(p.read_bytes()[:778])
    said, codes = verdict(root)
    assert said == "CRITICAL"
    assert "kahadb-truncated-file" in codes and "kahadb-truncated-tail" not in codes


def test_a_cut_compaction_file_is_not_judged_by_the_preallocated_length(tmp_path):
    # f4-gc's newest file is the ack compaction's db-15.log (5637 bytes: reserveDataFile does not preallocate)
    root = tmp_path / "kahadb"
    shutil.copytree(DATA / "f4-gc" / "kahadb", root)
    assert "kahadb-truncated-file" not in verdict(root)[1]
