"""Free files of a journal the real Artemis JournalImpl wrote (tests/data/artemis/free-files, README there):
``journal-pool-files`` -1 (Artemis' default), so every file the reclaimer or a compaction freed was kept and
re-initialised (``JournalFilesRepository.reinitializeFile``: a new header, its earlier records left under
their old tag). Read under that tag, some of those records change the live state: main took that for a
damaged header and called the healthy store CRITICAL file-header-damaged. What a free file cannot show tells
the damage instead (amqtool/engines/artemis/free_files.py)."""
from __future__ import annotations

import shutil

import pytest

from tests.support import REPO, loaded_like_oracle, oracle_load

STORE = REPO / "tests" / "data" / "artemis" / "free-files"


def _flip(tmp_path, name: str, byte: int, mask: int):
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    data = bytearray((journal / name).read_bytes())
    data[byte] ^= mask
    (journal / name).write_bytes(bytes(data))
    return journal


def test_the_store_loads_like_journalimpl_with_its_free_files():
    records, info = oracle_load(STORE / "oracle-load.jsonl")
    _result, mine = loaded_like_oracle(STORE / "journal")
    assert mine == records
    assert info["freeFiles"] == 5


def test_a_healthy_store_whose_free_files_keep_old_records_is_ok(run_json):
    code, doc, _ = run_json("verify", str(STORE / "journal"))
    assert (code, doc["verdict"]) == (0, "OK")
    stale = [f for f in doc["findings"] if f["code"] == "stale-records" and f["offset"] == 16]
    # the record-less files: every one of them a free file, none of them judged a damaged header
    assert len(stale) == 6
    assert not [f for f in doc["findings"] if f["code"] == "file-header-damaged"]


@pytest.mark.parametrize(("name", "byte", "mask"), [
    ("activemq-data-12.amq", 12, 0x04),  # fileID 98 + 2^26: far above every other file's
    ("activemq-data-12.amq", 14, 0x01),  # 98 + 256
    ("activemq-data-2.amq", 15, 0x08),   # 96 + 8, near: the add of a live update tells it
])
def test_a_data_file_whose_header_fileid_flipped_is_critical(run_json, tmp_path, name, byte, mask):
    # JournalImpl frees the file (none of its records carry its header's fileID) and loses what it held
    code, doc, _ = run_json("verify", str(_flip(tmp_path, name, byte, mask)))
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    assert [f["path"].rsplit("/", 1)[-1] for f in doc["findings"] if f["code"] == "file-header-damaged"] == [name]


def test_a_free_files_flipped_header_changes_nothing(run_json, tmp_path):
    # activemq-data-16.amq is free (fileID 101, records tagged 49): +256 sorts it last as before; the broker
    # frees it all the same
    code, doc, _ = run_json("verify", str(_flip(tmp_path, "activemq-data-16.amq", 14, 0x01)))
    assert (code, doc["verdict"]) == (0, "OK")


@pytest.mark.parametrize("name,tag,severity", [("activemq-data-23.amq", 51, "warning"),
                                               ("activemq-data-16.amq", 49, "warning")])
def test_a_free_files_header_made_negative_is_judged_by_what_its_old_records_hold(run_json, tmp_path, name, tag,
                                                                                  severity):
    # the high byte of a free file's header fileID damaged (negative: bad-file-id). Its records carry their old
    # tag, not the header's low bits, so the broker reads none of them: lost (had the low bytes been damaged
    # too) or an earlier use's. main called it CRITICAL whatever they held (d04, seed 8311057933099007: same,
    # CRITICAL); read under their tag in its place, 23's change nothing. 16's would change the live state, and
    # was CRITICAL on the premise that which of the two cannot be told; but a negative fileID is damage to the
    # high bytes, which leaves the low 31 bits (101) as they were: an id above the records' tag (49) that no
    # other file has, a freed file's new id (heads sweep d05 activemq-data-5.amq@8 ^0xa4: same, CRITICAL).
    journal = _flip(tmp_path, name, 8, 0xAF)
    code, doc, _ = run_json("verify", str(journal))
    (bad,) = [f for f in doc["findings"] if f["code"] == "bad-file-id"]
    assert bad["severity"] == severity
    assert doc["verdict"] == severity.upper()
    if severity == "warning":
        assert bad["details"]["recordTag"] == tag
