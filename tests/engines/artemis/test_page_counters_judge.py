"""Damage to a page that is not the current one, judged by what the page counters and cursor acknowledgements
say it held: a page cut at a record boundary (``page-cut``, paging/cut_page.py) and a page the broker stops
reading before its end whose unread bytes held no message still to consume (``PagingVerifier._counters_clear``).
Both from ``make fuzz`` seed 8302 on the campaign's demo stores."""
from __future__ import annotations

import pytest

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo


def _telemetry_page(store, pid: int):
    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == "telemetry")
    return folder / f"{pid:09d}.page"


def _records(page) -> list[tuple[int, int, int]]:
    from amqtool.formats.artemis.paging import scan_page

    recs, _ = scan_page(page.read_bytes())
    return recs


def test_a_page_before_the_current_one_cut_at_a_record_boundary_loses_what_the_counters_count(run_json, tmp_path):
    # seed 8302026908006130 (demo-s3, loss/WARNING): page 1 of 'telemetry' (page 2 is the current one) cut at
    # the start of its message 30. It reads clean; the queues' counters are 11 over what the pages hold, which
    # verify took for the current page's end cut by a crash (WARNING page-counter-mismatch). But the queues
    # acknowledged messages 47 and 40 of page 1: the page held them, and the broker never shortens a page it left.
    store = campaign_demo(tmp_path / "store", 3)
    page = _telemetry_page(store, 1)
    recs = _records(page)
    assert (len(recs), recs[30][1]) == (50, 37680)
    before = delivered(store)
    Fault("truncate", str(page.relative_to(store)), 37680).apply(store)
    assert before.diff(delivered(store))["lost"] == 11
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    (cut,) = [f for f in doc["findings"] if f["code"] == "page-cut"]
    assert (cut["severity"], cut["details"]["messages"], cut["details"]["heldAtLeast"]) == ("warning", 30, 48)
    assert cut["details"]["ackedPastEnd"] == {"35": 47, "37": 40}
    (lost,) = [f for f in doc["findings"] if f["code"] == "page-messages-lost"]
    assert (lost["severity"], lost["details"]["messagesLost"]) == ("critical", 11)


def test_the_current_page_cut_at_a_record_boundary_is_no_page_cut(run_json, tmp_path):
    # the broker may deliver a message of the page it is writing before a crash cuts it: the current page is
    # judged by the counters alone (WARNING page-counter-mismatch), as before
    store = campaign_demo(tmp_path / "store", 3)
    page = _telemetry_page(store, 2)
    recs = _records(page)
    Fault("truncate", str(page.relative_to(store)), recs[-3][1]).apply(store)
    code, doc, _ = run_json("verify", store)
    assert not [f for f in doc["findings"] if f["code"] == "page-cut"]


def test_unread_bytes_the_counters_account_for_are_a_warning(run_json, tmp_path):
    # seed 8302025906003115 (demo-s2, same/CRITICAL): the first 183 bytes of the last record of page 1 of
    # 'telemetry' (page 2 is the current one) zeroed. The broker stops reading the page there, but that record
    # was of page transaction 447, which the journals do not hold (rolled back): the queues' page counters equal
    # what the pages still hold for them, so the unread bytes held no message still to consume.
    store = campaign_demo(tmp_path / "store", 2)
    page = _telemetry_page(store, 1)
    recs = _records(page)
    assert (len(recs), recs[-1][1]) == (46, 64889)
    rel = str(page.relative_to(store))
    before = delivered(store)
    Fault("zero", rel, 64889, 183).apply(store)
    assert before.diff(delivered(store))["lost"] == 0
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-damaged"]
    assert (code, doc["verdict"], f["severity"], f["details"]["countersAgree"]) == (1, "WARNING", "warning", True)


def test_unread_bytes_holding_messages_still_to_consume_stay_critical(run_json, tmp_path):
    # the same page zeroed from its message 40 on: six records unread, ten references still to consume, which
    # the counters count
    store = campaign_demo(tmp_path / "store", 2)
    page = _telemetry_page(store, 1)
    recs = _records(page)
    off = recs[40][1]
    before = delivered(store)
    Fault("zero", str(page.relative_to(store)), off, recs[41][1] - off).apply(store)
    assert before.diff(delivered(store))["lost"] == 10
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-damaged"]
    assert (code, f["severity"], f["details"]["messages"]) == (2, "critical", 40)
    assert "countersAgree" not in f["details"]


def _page_of(store, address: str, pid: int):
    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == address)
    return folder / f"{pid:09d}.page"


def test_the_current_page_cut_through_a_committed_page_transaction_is_critical(run_json, tmp_path):
    # pagesweep seed 9604 (demo-s5, loss/WARNING): page 1 of 'backlog' (its current page) cut at the start of
    # its message 11, of page transaction 293 (messages 9-11), whose COMMIT the journal holds. The broker synced
    # the page before it wrote that COMMIT (PageTimedWriter.processMessages), so no crash cut it; verify took the
    # short counter (queue 41: 5 over 0) for a crash's (WARNING page-counter-mismatch). Transaction 293's record
    # counts 3 references unconsumed, and its messages in the pages now name queues only twice: one is gone (and
    # the one of prepared transaction 546, the page's last message).
    store = campaign_demo(tmp_path / "store", 5)
    page = _page_of(store, "backlog", 1)
    recs = _records(page)
    assert (len(recs), recs[11][1]) == (18, 8889)
    before = delivered(store)
    Fault("truncate", str(page.relative_to(store)), 8889).apply(store)
    assert before.diff(delivered(store))["lost"] == 6
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    (f,) = [f for f in doc["findings"] if f["code"] == "page-missing"]
    assert (f["severity"], f["details"]["pageTransactions"], f["details"]["lostByQueue"]) == ("critical", [293, 546],
                                                                                            {"41": 4})


def test_the_current_page_cut_through_a_prepared_page_transaction_is_critical(run_json, tmp_path):
    # pagesweep seed 9603 (demo-s5, loss/WARNING): the same page cut at the start of its message 12. Messages
    # 12-16 were sent without a transaction (a crash may cut them), but the last, 17, is of page transaction
    # 546, which the journal holds prepared: the page was synced before the PREPARE was written, and the
    # PREPARE's page transaction record counts one reference the pages no longer hold.
    store = campaign_demo(tmp_path / "store", 5)
    page = _page_of(store, "backlog", 1)
    recs = _records(page)
    before = delivered(store)
    Fault("truncate", str(page.relative_to(store)), recs[12][1]).apply(store)
    assert (recs[12][1], before.diff(delivered(store))["lost"]) == (11445, 6)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-missing"]
    assert (code, f["severity"], f["details"]["pageTransactions"]) == (2, "critical", [546])


def test_a_short_page_transaction_is_not_explained_away_by_unknown_transactions(run_json, tmp_path):
    # pagesweep seed 9603 (demo-s1, loss/WARNING): page 2 of 'telemetry' (its current page) cut at the start of
    # its message 4, of committed page transaction 510 (messages 2-4). Queue 35's counter is 5 over what the
    # pages hold, but six paged messages of transactions the journal holds prepared or not at all may be in the
    # counters, so the counters alone proved nothing (WARNING page-counter-mismatch). Transaction 510's record
    # does: its message 4 is gone with its two references.
    store = campaign_demo(tmp_path / "store", 1)
    page = _page_of(store, "telemetry", 2)
    recs = _records(page)
    assert recs[4][1] == 4279
    before = delivered(store)
    Fault("truncate", str(page.relative_to(store)), 4279).apply(store)
    assert before.diff(delivered(store))["lost"] == 10
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-missing"]
    assert (code, f["severity"], f["details"]["pageTransactions"], f["details"]["messagesLost"]) == (
        2, "critical", [510], 2)


def test_a_prepared_page_transaction_gone_from_every_page_is_evidence_too(run_json, tmp_path):
    # pagesweep seed 9605 (demo-s1, loss/WARNING): page 1 of 'backlog' (its current page) cut at the start of
    # its message 26; message 27, the page's last, was the only one of page transaction 598, which the journal
    # holds prepared. Queue 41's counter is 1 over the pages, which a message of an unknown transaction left in
    # them explained away; the PREPARE's page transaction record, with no message left anywhere, does not.
    store = campaign_demo(tmp_path / "store", 1)
    page = _page_of(store, "backlog", 1)
    recs = _records(page)
    assert (len(recs), recs[26][1]) == (28, 31163)
    before = delivered(store)
    Fault("truncate", str(page.relative_to(store)), 31163).apply(store)
    assert before.diff(delivered(store))["lost"] == 2
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-missing"]
    assert (code, f["severity"], f["details"]["pageTransactions"], f["details"]["lostByQueue"]) == (
        2, "critical", [598], {"41": 1})


@pytest.mark.parametrize("seed", range(1, 7))
def test_no_page_transaction_of_an_undamaged_demo_is_short(tmp_path, seed):
    # the pages of a store as written hold every live reference each page transaction counts
    from amqtool.engines.artemis.paging.lost_page import _read_pages
    from amqtool.engines.artemis.paging.stores import find_page_stores
    from amqtool.engines.artemis.paging.view import load_view
    from amqtool.store.layout import detect

    store = detect(campaign_demo(tmp_path / "store", seed))
    stores, _ = find_page_stores(store.paging_dir)
    assert _read_pages(load_view(store), stores)[0] == []
