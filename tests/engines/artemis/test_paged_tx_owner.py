"""A paged message's transaction id damaged (``paged-message-tx-damaged``): which committed page transaction it
was. A byte above the lowest damaged to any value names the one committed transaction below the message that
differs from it in that byte; a page transaction whose record counts exactly the queue references the pages
still hold of it lost nothing, and is no owner (paged_tx_ids.py, paging/page_tx.py)."""
from __future__ import annotations

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo


def _record(store, address: str, page_name: str, number: int):
    from amqtool.formats.artemis.paging import PagedMessage, scan_page

    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == address)
    page = folder / page_name
    buf = page.read_bytes()
    recs, _ = scan_page(buf)
    n, off, length = recs[number]
    assert n == number < len(recs) - 1  # not the page's last record
    return page, off, PagedMessage.decode(buf[off + 5:off + 5 + length])


def test_a_middle_byte_of_the_transaction_id_damaged_to_any_value_is_critical(run_json, tmp_path):
    # dp46's page-field sweep (seed 7751): 8 loss/WARNING and 2 loss/OK were transaction ids with a byte above
    # the lowest damaged to another value (not one bit): 439 -> 1,376,695 here (byte 2 ^ 0x15). Only one bit's
    # flips were weighed once the id was above the message's own (441): the page counters alone judged it.
    store = campaign_demo(tmp_path / "store", 3)
    page, off, m = _record(store, "telemetry", "000000001.page", 48)
    assert (m.message_id, m.transaction_id, m.queue_ids) == (441, 439, (35, 37))
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), off + 5 + 5, 0x15).apply(store)
    assert before.diff(delivered(store))["lost"] == 2
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "paged-message-tx-damaged"]
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert (f["details"]["namedTransaction"], f["details"]["pageTransaction"]) == (1_376_695, 439)


def test_a_rolled_back_message_one_bit_from_a_whole_page_transaction_is_no_loss(run_json, tmp_path):
    # dp46's sweep (seed 7751, d33): same/CRITICAL. demo-s2's message 218 was paged in transaction 217, rolled
    # back (no PAGE_TRANSACTION record): no queue ever gets it. Its id's bit 5 flipped names 249, above the
    # message, one bit from committed page transaction 121 -- whose record counts the 2 queue references the
    # pages still hold of it: none of its messages is missing, so 121 was not this message's.
    store = campaign_demo(tmp_path / "store", 2)
    page, off, m = _record(store, "backlog", "000000001.page", 4)
    assert (m.message_id, m.transaction_id) == (218, 217)
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), off + 5 + 7, 0x20).apply(store)
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    assert not [f for f in doc["findings"] if f["code"] == "paged-message-tx-damaged"]
    assert (code, doc["verdict"]) == (0, "OK")
