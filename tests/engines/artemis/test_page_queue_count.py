"""A paged message's queue count damaged down (``page-queue-count-damaged``): the queue ids after the count are
left as bytes the broker never reads (``PagedMessageImpl.decode`` reads as many as the count says, inside the
record's length), so the queues left out never deliver it (paging/dropped_queues.py)."""
from __future__ import annotations

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo


def _telemetry_record(store, page_name: str, number: int):
    from amqtool.formats.artemis.paging import PagedMessage, scan_page

    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == "telemetry")
    page = folder / page_name
    buf = page.read_bytes()
    recs, _ = scan_page(buf)
    n, off, length = recs[number]
    assert n == number < len(recs) - 1  # not the page's last record
    return page, off, length, PagedMessage.decode(buf[off + 5:off + 5 + length])


def test_a_queue_count_damaged_down_loses_the_message_to_the_queue_left_out(run_json, tmp_path):
    # dp46's page-field sweep (seed 7751): 42 of 280 queue counts damaged down read loss/WARNING (the page
    # counters' surplus) or loss/OK (no counter saw it). demo-s3's message 341 names queues 35 (acknowledged) and
    # 37 (still to consume); its count 2 -> 1 leaves 37's id after the count, unread.
    store = campaign_demo(tmp_path / "store", 3)
    page, off, length, m = _telemetry_record(store, "000000001.page", 41)
    assert (m.message_id, m.queue_ids, m.trailing) == (341, (35, 37), b"")
    at = off + 5 + length - 16 - 1  # the low byte of the i32 count before the two i64 queue ids
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), at, 0x03).apply(store)
    assert before.diff(delivered(store))["lost"] == 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-queue-count-damaged"]
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert (f["offset"], f["details"]["messageIds"], f["details"]["droppedQueues"]) == (off, [341], [37])


def test_a_queue_count_damaged_down_after_both_queues_acknowledged_is_a_warning(run_json, tmp_path):
    # the same damage to message 98, which both queues have acknowledged: nothing is lost, and the bytes after
    # the count still prove the record damaged
    store = campaign_demo(tmp_path / "store", 3)
    page, off, length, m = _telemetry_record(store, "000000001.page", 10)
    assert (m.message_id, m.queue_ids) == (98, (35, 37))
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), off + 5 + length - 16 - 1, 0x03).apply(store)
    assert before.diff(delivered(store))["lost"] == 0
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-queue-count-damaged"]
    assert (code, doc["verdict"], f["severity"], f["details"]["messagesLost"]) == (1, "WARNING", "warning", 0)
