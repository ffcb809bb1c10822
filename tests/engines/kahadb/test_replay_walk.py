"""The broker's replay of the whole journal (amqtool/engines/kahadb/replay_walk.py): it gets through every
broker-written fixture, and stops where a record its walk reaches does not load."""
from __future__ import annotations

import shutil

import pytest

from amqtool.engines.kahadb.replay_walk import full_replay_failure
from amqtool.engines.kahadb.scan import journal_files
from tests.support import KAHADB

pytestmark = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")


def _walk(directory) -> str:
    data = {jf.id: jf.path.read_bytes() for jf in journal_files(directory)}
    return full_replay_failure(sorted(data), data.__getitem__)


@pytest.mark.parametrize("name", ["basic", "gc", "tx"])
def test_the_replay_gets_through_every_fixture(name):
    assert _walk(KAHADB / name / "kahadb") == ""


def test_mkahadb_child_stores_replay_whole():
    stores = [p for p in (KAHADB / "mkahadb" / "mkahadb").iterdir() if p.is_dir()]
    assert len(stores) >= 2
    assert all(_walk(p) == "" for p in stores)


def test_a_record_whose_length_lost_its_top_bytes_stops_the_replay(tmp_path):
    # gc's producer audit record 8:38714 (911 bytes): its length's top bytes zeroed, 143 left. The walk
    # returns it with size 143; load's mergeFramed reads the framed length 911 past them and throws.
    d = shutil.copytree(KAHADB / "gc" / "kahadb", tmp_path / "gc")
    p = d / "db-8.log"
    data = bytearray(p.read_bytes())
    data[38706:38717] = bytes(11)
    p.write_bytes(bytes(data))
    why = _walk(d)
    assert why.startswith("8:38714: the record does not load") and "911" in why


def test_trailing_bytes_after_the_framed_command_are_ignored(tmp_path):
    # mergeFramed reads the framed length and stops: a record longer than its command still loads (the
    # checker of the journal's own batches, decode_command, wants it exact)
    import struct

    d = shutil.copytree(KAHADB / "gc" / "kahadb", tmp_path / "gc")
    p = d / "db-8.log"
    data = bytearray(p.read_bytes())
    size = struct.unpack_from(">i", data, 38714)[0]
    assert data[38714 + size:38714 + size + 4] != b"\x00\x00\x00\x00"  # something follows it
    # grow the audit record by one byte into what follows: a one-byte tail after its framed command. The
    # walk may stop further on (it reads the next header one byte late), but this record loads
    struct.pack_into(">i", data, 38714, size + 1)
    p.write_bytes(bytes(data))
    assert "38714" not in _walk(d)
