"""A journal the real Artemis JournalImpl compacted, whose compacted records have all died since
(tests/data/artemis/compacted-dead, README there): no live record carries a compactCount, but the compactor's
output files stay, named after the ids they were created with and headed with the lowest ids
(``AbstractJournalUpdateTask.openFile``). ``oracle-load.jsonl`` is what JournalImpl loads from it, and
``oracle-load-emptied-34.jsonl`` what it loads once the compactor's output activemq-data-34.amq is emptied: the
same records (Artemis deletes the short file at start; every record it held was dead)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from amqtool.engines.artemis.compaction_marks import compactor_outputs
from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.support import REPO

STORE = REPO / "tests" / "data" / "artemis" / "compacted-dead"


def _oracle(name: str):
    lines = [json.loads(x) for x in (STORE / name).read_text().splitlines()]
    return lines[:-1], lines[-1]


def _load(journal: Path):
    with open_journal(detect(journal).journals()[0]) as opened:
        result = load_journal(opened)
        mine = [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
                 "compactCount": r.compact_count, "len": r.body_len, "sha256": result.body_sha256(r)}
                for r in result.live]
        return result, mine, [f"{f.name}#{f.file_id}" for f in compactor_outputs(result)]


def test_the_store_loads_like_journalimpl_and_shows_its_compaction_by_its_files_only():
    records, info = _oracle("oracle-load.jsonl")
    result, mine, outputs = _load(STORE / "journal")
    assert mine == records
    assert [f"{f.name}#{f.file_id}" for f in result.data_files] == info["dataFileNames"]
    # what makes the store worth keeping: compacted, and no live record says so
    assert outputs == ["activemq-data-34.amq#11", "activemq-data-38.amq#12"]
    assert not any(r.compact_count for r in result.live)


def test_an_emptied_compactor_output_whose_records_died_is_a_warning(run_json, tmp_path):
    # JournalImpl loads the same records without it; main called it CRITICAL short-file ("its name is one of
    # the journal's ids between data files: the records it held are lost"), as the fault campaign found on a
    # store killed during its second compaction (bench/fuzz_verdicts.py --stores, seed 1002003006008)
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    (journal / "activemq-data-34.amq").write_bytes(b"")
    records, _ = _oracle("oracle-load-emptied-34.jsonl")
    assert _load(journal)[1] == records
    code, doc, _ = run_json("verify", str(journal))
    (short,) = [f for f in doc["findings"] if f["code"] == "short-file"]
    assert (code, doc["verdict"], short["severity"]) == (1, "WARNING", "warning")
    assert "compacted" in short["message"]
    assert not [f for f in doc["findings"] if f["severity"] == "critical"]
    # the gaps the compaction left are explained by it
    assert {f["code"] for f in doc["findings"] if "missingFileIds" in (f.get("details") or {})} == {"file-id-gap"}


def test_an_emptied_file_whose_records_the_journal_still_needs_stays_critical(run_json, tmp_path):
    # activemq-data-36.amq holds the adds of messages whose references later files hold: the compaction does
    # not explain their loss
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    (journal / "activemq-data-36.amq").write_bytes(b"")
    code, doc, _ = run_json("verify", str(journal))
    (short,) = [f for f in doc["findings"] if f["code"] == "short-file"]
    assert (code, doc["verdict"], short["severity"]) == (2, "CRITICAL", "critical")
    assert "message-record-missing" in {f["code"] for f in doc["findings"] if f["severity"] == "critical"}


RECLAIMED = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"


def test_an_emptied_data_file_of_a_never_compacted_journal_with_no_orphans_is_a_warning(run_json, tmp_path):
    # reclaimed-pool2 (never compacted; its reclaimer frees files whose records all died): with
    # activemq-data-22.amq emptied, the real JournalImpl loads exactly the records it loads from the store
    # (checked with the artemis-oracle); main called it CRITICAL short-file, as the campaign did on a real
    # store killed mid-run (bench/fuzz_verdicts.py --stores k64k-s6, seed 1002004006003175)
    journal = shutil.copytree(RECLAIMED / "journal", tmp_path / "journal")
    (journal / "activemq-data-22.amq").write_bytes(b"")
    code, doc, _ = run_json("verify", str(journal))
    (short,) = [f for f in doc["findings"] if f["code"] == "short-file"]
    assert (code, doc["verdict"], short["severity"]) == (1, "WARNING", "warning")


def test_an_emptied_data_file_where_the_broker_keeps_every_freed_file_stays_critical(run_json, tmp_path):
    # broker.xml leaves journal-pool-files at Artemis' default (-1): the broker never deletes a freed file,
    # and the journal was never compacted: a file between data files can only have been damaged
    from tests.support import MESSAGES

    bindings = MESSAGES / "02_broker_mixed_compacted" / "bindings"
    if not bindings.is_dir():
        import pytest

        pytest.skip("broker-written fixture absent")
    inst = tmp_path / "broker"
    shutil.copytree(RECLAIMED / "journal", inst / "data" / "journal")
    shutil.copytree(bindings, inst / "data" / "bindings")
    (inst / "etc").mkdir()
    (inst / "etc" / "broker.xml").write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<journal-directory>data/journal</journal-directory><bindings-directory>data/bindings</bindings-directory>"
        "<journal-file-size>16384</journal-file-size></core></configuration>")
    (inst / "data" / "journal" / "activemq-data-22.amq").write_bytes(b"")
    code, doc, _ = run_json("verify", str(inst))
    (short,) = [f for f in doc["findings"] if f["code"] == "short-file"]
    assert (code, short["severity"]) == (2, "critical")
