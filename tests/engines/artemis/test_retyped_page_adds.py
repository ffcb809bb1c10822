"""Cursor acknowledgements and page transactions whose user record type was damaged into an update's
(paging/retyped_adds.py): the broker drops the record for want of a message of its id, and the acknowledged paged
message comes back, or the cursors skip the transaction's paged messages (issue 25, sweep seed 9546 over the
demos' ACKNOWLEDGE_CURSOR records: 39 -> 32, 33, 34 or 36, all 192 judged OK while the broker delivered the
message again; over their PAGE_TRANSACTION records, 35 -> 32, 33 or 34: 25 of the losses judged OK or WARNING)."""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.faults.artemis import delivered
from tests.faults.stores import first_cursor_ack
from tests.support import copy_tree

PAGE_TRANSACTION = 35


def _write(path, offset, raw):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(raw)


@pytest.mark.parametrize("utype", [32, 33, 34, 36])
def test_a_cursor_acknowledgement_retyped_as_an_update_brings_its_message_back(run_json, demo, tmp_path, utype):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, rid, body, page, number = first_cursor_ack(store, 41)
    _write(path, body - 1, bytes([utype]))  # the user record type, the byte before the body
    assert before.diff(delivered(store)) == {"lost": 0, "back": 1, "bindings": 0, "content": 1}
    code, doc, _ = run_json("verify", store)
    found = [f for f in doc["findings"] if f["code"] == "page-ack-retyped"]
    assert code == 2 and [f["severity"] for f in found] == ["critical"]
    assert found[0]["details"]["acks"] == [
        {"recordId": rid, "recordType": utype, "queue": 41, "page": page, "number": number}]


def test_a_retyped_acknowledgement_naming_no_message_is_a_warning(run_json, demo, tmp_path):
    store = copy_tree(demo, tmp_path / "s")
    path, _, body, _, _ = first_cursor_ack(store, 41)
    # and no page holds a message of that number: what it acknowledged cannot be told
    _write(path, body - 1, bytes([33]))
    _write(path, body + 16, (60_000).to_bytes(4, "big"))
    code, doc, _ = run_json("verify", store)
    found = [f for f in doc["findings"] if f["code"] == "page-ack-retyped"]
    assert [f["severity"] for f in found] == ["warning"] and found[0]["details"]["count"] == 1


def test_the_demo_has_no_retyped_paging_record(run_json, demo):
    code, doc, _ = run_json("verify", demo)
    assert not [f for f in doc["findings"] if f["code"] in ("page-ack-retyped", "page-tx-retyped")]


def _page_txs(store):
    """(journal file, record id, body offset, transaction id) of each live PAGE_TRANSACTION add."""
    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        return [(result.files[r.file_index].path, r.id, r.body_offset, int.from_bytes(result.body(r)[:8], "big"))
                for r in result.live if r.user_record_type == PAGE_TRANSACTION and not r.is_update]


@pytest.mark.parametrize("utype", [32, 33, 34])
def test_a_page_transaction_retyped_as_an_update_loses_its_pending_messages(run_json, demo, tmp_path, utype):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, rid, body, tx = _page_txs(store)[1]
    assert (rid, tx) == (304, 303)
    _write(path, body - 1, bytes([utype]))
    assert before.diff(delivered(store)) == {"lost": 4, "back": 0, "bindings": 0, "content": 4}
    code, doc, _ = run_json("verify", store)
    found = [f for f in doc["findings"] if f["code"] == "page-tx-retyped"]
    assert code == 2 and [f["severity"] for f in found] == ["critical"]
    assert found[0]["details"]["pageTransactions"] == [
        {"recordId": 304, "recordType": utype, "pageTransaction": 303, "pending": 4}]


@pytest.mark.parametrize("utype", [32, 33, 34])
def test_a_retyped_page_transaction_with_nothing_to_consume_is_no_loss(run_json, demo, tmp_path, utype):
    # read as ADD_REF, the record was also a reference of a message with no record (message-record-missing,
    # CRITICAL where nothing was lost): the broker writes references only as updates (Evidence.orphan_refs)
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, rid, body, tx = _page_txs(store)[0]
    assert (rid, tx) == (204, 203)
    _write(path, body - 1, bytes([utype]))
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    assert code != 2 and not [f for f in doc["findings"] if f["severity"] == "critical"]
