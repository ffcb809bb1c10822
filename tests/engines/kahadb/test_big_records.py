"""Batches of 64 KiB or more: the body as written, found from its stored Adler-32 (amqtool/engines/kahadb
/superseded.py ``_restored``), on a store a real 5.17.2 broker left when SIGKILLed (tests/data/kahadb
/k4-big-small-kill: 128 KiB files; lastUpdate 1:84799; db-2.log, written after it and older than db-3.log,
holds a 92,552-byte send of fx.k4.q that stays live).

Adler-32's two sums give the place of one changed byte modulo 65521 only: in a body that long every byte 65521
apart, changed by the same amount, gives the same checksum. Before, such a body was never restored, and a
damaged message id in an older file after the checkpoint was CRITICAL although the broker's replay indexes the
message under the damaged id and delivers the same OpenWire message (the campaign's truth: latent; seed 7646 on
the hold-out store k1, 5 in 1,500). The candidate the broker wrote is the one whose send names its OpenWire
message's own id."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

from amqtool.engines.kahadb.superseded import _restored
from tests.engines.kahadb.judged import verdict

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k4-big-small-kill" / "kahadb"
BATCH = 92552  # db-2.log's first batch body: one ADD record


def _copy_flipped(tmp_path: Path, offset: int, mask: int) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    p = root / "db-2.log"
    data = bytearray(p.read_bytes())
    data[offset] ^= mask
    p.write_bytes(bytes(data))
    return root


def _id_at() -> int:
    data = (STORE / "db-2.log").read_bytes()
    return data.find(b"ID:vm-", 28) + 20  # a character of the send's message id in the command


def test_pristine_store_is_a_warning(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index"})


def test_a_long_body_with_a_damaged_message_id_is_restored():
    data = (STORE / "db-2.log").read_bytes()
    assert struct.unpack_from(">i", data, 16)[0] == BATCH
    stored = struct.unpack_from(">q", data, 20)[0]
    body = bytearray(data[28:28 + BATCH])
    body[_id_at() - 28] ^= 0x01
    assert _restored(bytes(body), stored) == data[28:28 + BATCH]


def test_a_damaged_message_id_of_a_long_send_in_an_older_file_is_latent(tmp_path):
    said, codes = verdict(_copy_flipped(tmp_path, _id_at(), 0x01))
    assert said == "WARNING", codes
    assert "kahadb-checksum-mismatch" in codes


def test_a_damaged_body_byte_of_a_long_live_send_stays_critical(tmp_path):
    # the replay reads an older file's records as they are: the broker delivers the damaged body
    assert verdict(_copy_flipped(tmp_path, 60000, 0x04))[0] == "CRITICAL"


def test_a_long_body_with_a_damaged_destination_or_entry_type_is_restored():
    # kl48, campaign seed 8658 on the hold-out store k1 (86580000080: db-26.log@45, a send's destination name;
    # 86580000315 and 86580000394: db-29.log@33, a send's entry type; same judged CRITICAL): every candidate
    # names its OpenWire message's own id. The one the broker wrote is the one whose send also names its
    # message's destination (KahaDBStore.addMessage files the message under message.getDestination()) and
    # whose record holds no field its command type does not declare (a send read as a TRACE holds the send's)
    data = (STORE / "db-2.log").read_bytes()
    stored = struct.unpack_from(">q", data, 20)[0]
    written = data[28:28 + BATCH]
    at = written.find(b"fx.k4.q")
    assert 0 < at < 100 and written[5] == 1  # (the ADD's destination name; its KahaEntryType byte)
    for offset, mask in ((at + 3, 0x20), (5, 0x01), (5, 0x08)):
        body = bytearray(written)
        body[offset] ^= mask
        assert _restored(bytes(body), stored) == written, (offset, mask)


def test_a_damaged_destination_of_a_long_live_send_stays_critical(tmp_path):
    # restored, the batch is judged as the replay reads it: the live send filed under another queue's name
    at = (STORE / "db-2.log").read_bytes().find(b"fx.k4.q", 28)
    assert verdict(_copy_flipped(tmp_path, at + 3, 0x20))[0] == "CRITICAL"
