"""The current page's last record, cut, when it is of a transaction the message journal holds committed or
prepared: the broker synced the page before writing that COMMIT or PREPARE (PageTimedWriter), so no crash tore it
(paging/crash_tail.py ``synced_tx``): proven loss, not a torn tail."""
from __future__ import annotations

import os

from tests.faults.artemis import ArtemisSites, delivered
from tests.faults.campaign_fixtures import pristine, store  # noqa: F401 - fixtures
from tests.faults.model import Fault


def _synced_current_page(store):
    from amqtool.formats.artemis.paging import PagedMessage

    sites = ArtemisSites.read(store)
    for p in sites.pages:
        off, n = p.records[-1] if p.records else (0, 0)
        if p.current and p.records and p.synced == off + n:
            return p, off, PagedMessage.decode(p.data[off + 5:off + n - 1]).transaction_id
    raise AssertionError("no current page ending with a committed transaction's record in the demo store")


def test_a_cut_last_record_of_a_committed_transaction_on_the_current_page_is_critical(run_json, store):
    page, off, tx = _synced_current_page(store)
    assert tx >= 0
    before = delivered(store)
    Fault("truncate", page.rel, off + 100).apply(store)
    assert before.diff(delivered(store))["lost"] == 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-damaged"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (2, "CRITICAL", "critical", off)
    assert f"transaction {tx}" in f["message"]
    assert "page-torn-tail" not in {f["code"] for f in doc["findings"]}


def test_a_cut_last_record_outside_transactions_on_the_current_page_stays_a_torn_tail(run_json, store):
    sites = ArtemisSites.read(store)
    page = next(p for p in sites.pages if p.current and p.records and p.synced < p.records[-1][0])
    off = page.records[-1][0]
    Fault("truncate", page.rel, off + 100).apply(store)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-torn-tail"]
    assert (code, f["severity"], f["offset"], f["path"]) == (1, "warning", off, os.fspath(store / page.rel))
