"""load_journal gives exactly what Artemis' JournalImpl.load returns, for every fixture journal."""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS, oracle_manifest, public_expected


def _rec(result, r):
    return {"id": r.id, "type": r.user_record_type, "isUpdate": r.is_update, "compactCount": r.compact_count,
            "len": r.body_len, "sha256": result.body_sha256(r)}


def _tx(result, tx, with_extra):
    doc = {"txId": tx.tx_id}
    if with_extra:
        doc["extraDataHex"] = tx.extra.hex()
    doc["records"] = [_rec(result, r) for r in tx.records]
    doc["recordsToDelete"] = [_rec(result, r) for r in tx.records_to_delete]
    return doc


def _check(journal_dir, expected):
    journal = detect(journal_dir).journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
        assert [_rec(result, r) for r in result.live] == expected["live"]
        prepared = [_tx(result, t, True) for t in result.prepared]
        assert [dict(p, records=p["records"]) for p in prepared] == \
            [{k: p[k] for k in ("txId", "extraDataHex", "records", "recordsToDelete")} for p in expected["prepared"]]
        assert [_tx(result, t, False) for t in result.failed] == expected["failedTransactions"]
        assert {"numberOfRecords": result.number_of_records, "maxID": result.max_id} == expected["loadInfo"]
        assert [{"name": f.name, "fileID": f.file_id, "recordID": f.tag} for f in result.data_files] == \
            expected["dataFilesAfterLoad"]
        assert (result.current_file.name if result.current_file else None) == expected["currentFileAfterLoad"]


@pytest.mark.parametrize("scenario", ORACLE_SCENARIOS)
def test_oracle_scenario_loads_like_artemis(scenario):
    _check(ORACLE / scenario / "journal", oracle_manifest(scenario)["expectedAfterLoad"])


@pytest.mark.parametrize("journal_dir", PUBLIC_JOURNALS, ids=lambda p: p.parts[-3] if p.parts[-2] == "data" else p.parts[-4])
def test_public_bindings_load_like_artemis(journal_dir):
    _check(journal_dir, public_expected(journal_dir))


def test_re_added_id_after_delete_is_not_live():
    # 02: id 100 is deleted and added again; Artemis filters every entry of a deleted id at the end.
    journal = detect(ORACLE / "02_add_update_delete" / "journal").journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
    assert 100 not in {r.id for r in result.live}


def test_commit_count_semantics_spanning_files():
    # 03: tx 1004 spans files 1 and 2; its commit counts only the records in the commit's file (13).
    journal = detect(ORACLE / "03_transactions" / "journal").journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
    assert not result.anomalies or all(a.code != "commit-count-mismatch" for a in result.anomalies)
    ids = {r.id for r in result.live}
    manifest = oracle_manifest("03_transactions")
    tx1004 = [o["id"] for o in manifest["operations"] if o.get("txId") == 1004 and o["op"] == "addTx"]
    assert len(tx1004) == 40 and set(tx1004) <= ids
