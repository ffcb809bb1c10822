"""A byte of the fill after the newest file's last record changed (issue 25): JournalImpl writes a file's records
back to back, so a record written after the last one began where it ends; a byte further on, past fill, is no
record head of this use, whatever its value (journal_crash.own_record_at).

The bindings journal of the broker-written fixture 02_broker_mixed_compacted (and of every store
/work/artemis-fresh holds, gen.sh copies it): its newest file, activemq-bindings-2.bindings, holds one record
(an ID_COUNTER, bytes 16 to 46), then fill. Campaign seed 8301055903093013 (d02) flipped byte 84 to 0x12, a
COMMIT's type, whose following zeros read as a tag a zeroed run left: verify called it the lost COMMIT of a
binding's transaction, CRITICAL, while the broker loads the same bindings."""
from __future__ import annotations

import pytest

from tests.support import MESSAGES, copy_tree

MIXED = MESSAGES / "02_broker_mixed_compacted"


def test_a_commit_type_byte_in_the_fill_of_the_newest_bindings_file_is_no_lost_commit(run_json, tmp_path):
    if not MIXED.is_dir():
        pytest.skip("fixture 02_broker_mixed_compacted not found")
    root = copy_tree(MIXED, tmp_path / "s")
    path = root / "bindings" / "activemq-bindings-2.bindings"
    data = bytearray(path.read_bytes())
    assert data[16] == 11 and data[46] == 0x1F and not any(data[47:4096])  # one 31-byte record, then fill
    data[84] = 0x12
    path.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(root / "bindings"))
    (tail,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (tail["severity"], tail["offset"]) == ("warning", 84)
    assert (code, doc["verdict"]) == (1, "WARNING")
