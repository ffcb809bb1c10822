"""A torn-looking end of the current page of an address whose first pages were consumed and deleted (issue 25,
campaign seed 7601 over holdout demos: 8 of its 15 misses). The cut took the records of a committed page
transaction the broker had synced before its COMMIT; a page transaction newer than the first message of every
first page left cannot have paged to the deleted pages, so its references missing from the pages are lost:
CRITICAL, not the torn tail's WARNING (paging/synced_refs.py)."""
from __future__ import annotations

import json
import os

import pytest

from amqtool.formats.artemis.paging import PageScanner
from tests.support import copy_tree


@pytest.fixture(scope="module")
def deleted_pages_demo(tmp_path_factory):
    """A demo whose telemetry address lost page 1 (consumed), its current page 4 holding committed page
    transaction 1179 at record 2."""
    from tests.faults.stores import demo

    return demo(tmp_path_factory.mktemp("demo") / "s", 4 << 20, seed=21, file_size=64 * 1024)


def _telemetry(store):
    doc = json.loads((store / "manifest.json").read_text())
    (ps,) = [s for s in doc["expected"]["paging"]["stores"] if s["address"] == "telemetry"]
    return ps, [m for m in doc["expected"]["paging"]["messages"] if m["address"] == "telemetry"]


def test_a_cut_current_page_losing_a_whole_committed_transaction_after_deleted_pages(run_json, tmp_path,
                                                                                      deleted_pages_demo):
    from tests.faults.artemis import ArtemisSites
    from tests.faults.model import Fault

    store = copy_tree(deleted_pages_demo, tmp_path / "s")
    ps, messages = _telemetry(store)
    assert (ps["firstPage"], ps["currentPage"]) == (2, 4)  # page 1 consumed and deleted
    first_id = next(m["messageId"] for m in messages if m["page"] == 2)
    (tx,) = {m["transactionId"] for m in messages if m["page"] == 4 and m["pageTransaction"] == "committed"}
    assert (first_id, tx) == (433, 1179)
    rel = f"{ps['folder']}/000000004.page"
    path = store / rel
    records = [(off, n) for _, off, n in PageScanner(path.read_bytes())]
    cut = records[1][0] + 9  # inside record 1: records 1 to 5, transaction 1179's among them, cut off
    assert not ArtemisSites.read(store).torn(Fault("truncate", rel, cut))  # the harness: synced records cut
    os.truncate(path, cut)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-torn-tail"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", records[1][0])
    assert f["details"]["pageTransactionsShort"] == {"1179": 2}  # one message, two queues


def test_the_same_cut_after_the_transaction_is_still_a_torn_tail(run_json, tmp_path, deleted_pages_demo):
    # cut inside the last record, after every committed transaction's: what a crash leaves (WARNING)
    store = copy_tree(deleted_pages_demo, tmp_path / "s")
    ps, _ = _telemetry(store)
    path = store / ps["folder"] / "000000004.page"
    records = [(off, n) for _, off, n in PageScanner(path.read_bytes())]
    os.truncate(path, records[-1][0] + 9)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-torn-tail"]
    assert (code, f["severity"]) == (1, "warning")
