"""What the real JournalImpl leaves after the last record of a reused file is an earlier use's remainder, not a
damaged tail (issue 25, amqtool/engines/artemis/stale_tail.py).

Two stores written by the real JournalImpl and SIGKILLed mid-compaction (oracle-build gen.sh new-k64k-s71
65536 71 0 300 3 and new-k128k-s72 131072 72 0 500 4) were WARNING damaged-tail untouched, and the fault
campaign's oracle took them for stores no broker writes, so that every loss on them counted as proven (125
loss/WARNING misses at seed 7171):

* tests/data/artemis/stale-tail: activemq-data-402.amq (fileID 28, a compactor's output in a pooled file) and
  activemq-data-403.amq of the first. 402's last record is followed by 29 bytes of an earlier use that start
  with 0x0b, a record type, followed by 0000001f, not the file's tag (28); their size word (0x381) counts back
  under this use's records. ``oracle-load.jsonl`` is what the real JournalImpl loads from the two files
  (``oracle.sh load journal activemq-data amq 65536``).
* activemq-data-224.amq.cmp of the second (fileID 9, 128 KiB, the output of a compaction that committed): its
  last record (an UPDATE_TX of 39 bytes at 130825) is followed by one zero and one byte, 0x1f, the low byte
  of an old record's size word: ``CMP_TAIL`` is those bytes.
"""
from __future__ import annotations

import shutil

import pytest

from tests.support import MESSAGES, REPO, loaded_like_oracle, oracle_load

STORE = REPO / "tests" / "data" / "artemis" / "stale-tail"
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"
# activemq-data-224.amq.cmp of new-k128k-s72 from 130825: its last record, then the remainder
CMP_TAIL = bytes.fromhex("0e00000009030000000080000a7d0000000080000a7f0000000820000000000000000400000027"
                         "001f0000000000000000000000000000")
CMP_AT = 130825


def test_the_store_loads_like_journalimpl():
    records, info = oracle_load(STORE / "oracle-load.jsonl")
    result, mine = loaded_like_oracle(STORE / "journal")
    assert mine == records
    assert [f"{f.name}#{f.file_id}" for f in result.data_files] == info["dataFileNames"]


def test_a_remainder_starting_with_a_type_byte_is_no_damaged_tail(tmp_path, run_json):
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    root = tmp_path / "store"
    shutil.copytree(STORE / "journal", root / "journal")
    shutil.copytree(BINDINGS, root / "bindings")
    data = (root / "journal" / "activemq-data-402.amq").read_bytes()
    assert data[65504] == 0x0b and data[65505:65509] == (31).to_bytes(4, "big")  # not the file's tag, 28
    code, doc, _ = run_json("verify", str(root))
    assert (code, doc["verdict"]) == (0, "OK"), doc["findings"]
    stale = [f["offset"] for f in doc["findings"]
             if f["code"] == "stale-records" and f["path"].endswith("activemq-data-402.amq")]
    assert stale == [65504]


def test_a_remainder_of_a_type_byte_and_this_files_tag_may_be_this_use():
    from amqtool.engines.artemis.stale_tail import stale_fragment

    data = (STORE / "journal" / "activemq-data-402.amq").read_bytes()
    head = data[65504:]
    end = 65504 + len(head.rstrip(b"\0"))
    assert stale_fragment(head, 65504, end, tag=28)  # 0x0b then 31: an old record's body bytes
    # the file's own tag after the type byte is what a torn write of this use starts with
    torn = head[:1] + (28).to_bytes(4, "big") + head[5:]
    assert not stale_fragment(torn, 65504, end, tag=28)
    # told from the bytes alone (no tag known), a type byte may start this use's record
    assert not stale_fragment(head, 65504, end)


def test_a_remainder_too_short_for_a_record_is_an_old_one():
    from amqtool.engines.artemis.stale_tail import stale_fragment

    last_end = CMP_AT + 39
    first = last_end + 1  # one zero, then 0x1f
    assert CMP_TAIL[39:41] == b"\x00\x1f"
    head = CMP_TAIL[first - CMP_AT:]
    assert stale_fragment(head, first, first + 1, tag=9, last_end=last_end)
    # 13 bytes or more after the last record: a record of this use may have been zeroed there but for the
    # low byte of its size word
    assert not stale_fragment(head, first, first + 1, tag=9, last_end=first + 1 - 13)
    # a record type there may be a write of this use torn after one byte
    assert not stale_fragment(b"\x0b", first, first + 1, tag=9, last_end=last_end)


# /work/s49/q/q9722 (gen.sh q9722 12288 9722 2500 150, pool -1, restarted every 120 operations): the tail of
# activemq-data-956.amq (fileID 1948, a re-initialised free file) from 11890, three zeros after its last record:
# the rest of an earlier use's message whose size word (0x1b1) ends at 12283, then "00 00 1f", bytes of a use
# before that. verify read the healthy store WARNING damaged-tail (its size word was looked for at the very end).
STRAY_TAIL = bytes.fromhex(
    "0c6500760065006e0074007300000001740000012801000001167000730065006400740077007000610075006d0072006800"
    "7900750064007100670075006b006d006d007700740066006d0070006d006b006b006e00750061007a00750067007a007400"
    "67006100700076006d0067007700750072007a0065006e00690074006f00670079006b00640075006d006f00730064006f00"
    "6a00610062006c0073006d006500730061006c00720064006d006900710074006e00700067006b0064007200660074007100"
    "6d006800760065006c0064007100770077006e0066007900700064006a006600630064006a00720063007a006f006b006100"
    "6b006b007700730063006d006c006e00620073006f0062006a0063006a00690079006f0073006200750076006d007a006400"
    "69006b000000000080000777010000000c6500760065006e007400730000030100000000000000000000018bcfe6b6370001"
    "00000001000000067300650071000a000000143200310034003700340038003500350035003900000001b100001f")


def test_an_earlier_use_s_record_followed_by_stray_bytes_of_a_use_before_it_is_stale():
    from amqtool.engines.artemis.stale_tail import stale_fragment

    first, end = 11890, 11890 + len(STRAY_TAIL)
    assert end == 12286 and STRAY_TAIL[-7:] == bytes.fromhex("000001b100001f")
    assert stale_fragment(STRAY_TAIL, first, end, tag=1948, last_end=11887)
    # the old record's size word must count back under this use's records, after the file header
    assert not stale_fragment(STRAY_TAIL, 12100, end, tag=1948)
    assert not stale_fragment(STRAY_TAIL[:-7] + bytes(6) + b"\x1f", first, end, tag=1948)

