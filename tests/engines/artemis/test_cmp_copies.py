"""A journal the real Artemis JournalImpl wrote, SIGKILLed during a compaction (tests/data/artemis/interrupted-cmp,
README there): ``activemq-data-7.amq.cmp``, the compactor's copy of what was live, stays beside the data files,
with no control file. The broker deletes it at start and loads the data files; what it copied and the data files
no longer hold nor delete was lost from them (amqtool/engines/artemis/cmp_copies.py). ``oracle-load.jsonl`` is
what JournalImpl loads from the store, ``oracle-load-emptied-4.jsonl`` what it loads with ``activemq-data-4.amq``
emptied."""
from __future__ import annotations

import json
import shutil

from tests.support import REPO

STORE = REPO / "tests" / "data" / "artemis" / "interrupted-cmp"
LOST = [2147483809, 2147483825, 2147483827]  # the adds activemq-data-4.amq held, copied by the compaction


def _message_ids(name: str) -> set[int]:
    lines = [json.loads(x) for x in (STORE / name).read_text().splitlines()[:-1]]
    return {x["id"] for x in lines if x["userRecordType"] == 45}


def _copy(tmp_path):
    return shutil.copytree(STORE / "journal", tmp_path / "journal")


def test_the_untouched_store_is_a_warning(run_json):
    code, doc, _ = run_json("verify", str(STORE / "journal"))
    assert (code, doc["verdict"]) == (1, "WARNING")
    assert {f["code"] for f in doc["findings"] if f["severity"] != "info"} == {"leftover-cmp"}


def test_a_compactions_leftover_cmp_files_are_one_finding(run_json, tmp_path):
    # a compaction killed mid-way leaves one .cmp per output it had opened (hold-out h35, real JournalImpl: 234
    # WARNING lines, one a file); the broker deletes them all at start
    journal = _copy(tmp_path)
    for n in (9, 10):  # two more empty outputs it had opened (as the pool hands them out: zero-filled)
        size = (journal / "activemq-data-7.amq.cmp").stat().st_size
        (journal / f"activemq-data-{n}.amq.cmp").write_bytes(bytes(size))
    code, doc, _ = run_json("verify", str(journal))
    (cmp,) = [f for f in doc["findings"] if f["code"] == "leftover-cmp"]
    assert (code, cmp["severity"], cmp["path"]) == (1, "warning", cmp["details"]["files"][0])
    assert sorted(cmp["details"]["files"]) == sorted(str(journal / f"activemq-data-{n}.amq.cmp") for n in (7, 9, 10))


def test_a_data_file_emptied_after_the_compaction_copied_it_is_critical(run_json, tmp_path):
    # main: WARNING short-file ("the journal was compacted ... nothing shows it held live records"); JournalImpl
    # loads three messages fewer, and the .cmp file holds them
    assert set(LOST) <= _message_ids("oracle-load.jsonl") - _message_ids("oracle-load-emptied-4.jsonl")
    journal = _copy(tmp_path)
    (journal / "activemq-data-4.amq").write_bytes(b"")
    code, doc, _ = run_json("verify", str(journal))
    (lost,) = [f for f in doc["findings"] if f["code"] == "compaction-copy-lost"]
    assert (code, doc["verdict"], lost["severity"], lost["details"]["ids"]) == (2, "CRITICAL", "critical", LOST)


def test_a_damaged_id_in_the_cmp_file_changes_nothing(run_json, tmp_path):
    # the add at activemq-data-7.amq.cmp@4174 copies message 2147483797, deleted since: its id's low byte
    # flipped names a message nobody holds, one bit from a deleted one (the broker deletes the .cmp file anyway)
    journal = _copy(tmp_path)
    path = journal / "activemq-data-7.amq.cmp"
    data = bytearray(path.read_bytes())
    assert int.from_bytes(data[4180:4188], "big") == 2147483797
    data[4187] ^= 0x04
    path.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(journal))
    assert (code, doc["verdict"]) == (1, "WARNING")
    assert not [f for f in doc["findings"] if f["code"] == "compaction-copy-lost"]
