"""A paged message's queue id damaged (``page-queue-id-damaged``): the queue it was is one of the address's queues
one damaged byte away that the message no longer names -- a queue it still names was not the damaged one (the
broker routes a message to a queue once)."""
from __future__ import annotations

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo


def _page(tmp_path, address: str, name: str):
    """(demo-s3's store, the page ``name`` of ``address``, its bytes, its records)."""
    from amqtool.formats.artemis.paging import scan_page

    store = campaign_demo(tmp_path / "store", 3)
    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == address)
    page = folder / name
    buf = page.read_bytes()
    return store, page, buf, scan_page(buf)[0]


def _damaged(run_json, store, page, offset: int, mask: int) -> tuple[int, dict, dict]:
    """(verify's exit code, its JSON, its one page-queue-id-damaged finding) once ``page[offset] ^= mask``
    made the broker deliver one row fewer."""
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), offset, mask).apply(store)
    assert before.diff(delivered(store))["lost"] == 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-queue-id-damaged"]
    return code, doc, f


def test_a_damaged_queue_id_beside_another_queue_of_the_address_is_critical(run_json, tmp_path):
    # make fuzz seed 5151 (loss/WARNING, demo-s3, seed 5151017457006037): message 569, paged to 'telemetry' for
    # queues 35 and 37, had its first queue id flipped 35 -> 51 (no binding holds 51). Queue 35 never delivers it,
    # and verify said WARNING page-counter-mismatch: small ids are all one byte apart, so 51 was one byte from
    # both 35 and 37, and two owners were no owner -- but the message still names 37.
    from amqtool.formats.artemis.paging import PagedMessage

    store, page, buf, recs = _page(tmp_path, "telemetry", "000000002.page")
    (n, off, length), = [r for r in recs if r[1] <= 20806 < r[1] + r[2] + 6]
    m = PagedMessage.decode(buf[off + 5:off + 5 + length])
    assert (n, m.message_id, m.queue_ids) == (20, 569, (35, 37)) and n < len(recs) - 1  # not the page's end
    assert buf[20806:20807] == b"\x23"  # the low byte of queue id 35, the first of the two
    code, doc, f = _damaged(run_json, store, page, 20806, 0x10)
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert (f["details"]["queueId"], f["details"]["messageIds"], f["offset"]) == (35, [569], off)


def test_a_damaged_queue_id_of_a_prepared_message_is_critical(run_json, tmp_path):
    # dp46's page-qid sweep (seed 7751): 3 loss/OK, each a queue id of a prepared transaction's paged message
    # (41 -> 23,593). A prepared transaction's messages are in no page counter until it commits, so no counter
    # exceeded what the pages hold; its PAGE_TRANSACTION record counts one reference per durable queue it paged the
    # message to (PagingStoreImpl.page), and the pages now hold fewer of queues a binding holds.
    from amqtool.formats.artemis.paging import PagedMessage

    store, page, buf, recs = _page(tmp_path, "backlog", "000000001.page")
    n, off, length = recs[33]
    m = PagedMessage.decode(buf[off + 5:off + 5 + length])
    assert (m.message_id, m.transaction_id, m.queue_ids) == (677, 673, (41,))
    code, doc, f = _damaged(run_json, store, page, off + 5 + length - 2, 0x5C)  # 41 -> 23,593
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert (f["details"]["queueId"], f["details"]["messageIds"]) == (41, [677])


def test_a_queue_id_damaged_to_another_address_queue_is_critical(run_json, tmp_path):
    # dp46's page-qid sweep (seed 7751): 35 -> 3 (DLQ's queue, one bit away) read loss/WARNING (page counters).
    # A queue of another address is no queue of this page store (its cursor reads its own address's pages): the
    # message names no queue of telemetry in 35's place, one byte from 35, whose counter says one is missing.
    from amqtool.formats.artemis.paging import PagedMessage

    store, page, buf, recs = _page(tmp_path, "telemetry", "000000002.page")
    _, off, length = recs[0]
    assert PagedMessage.decode(buf[off + 5:off + 5 + length]).queue_ids == (35, 37)
    code, doc, f = _damaged(run_json, store, page, off + 5 + length - 9, 0x20)  # 35 -> 3
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert (f["details"]["queueId"], f["details"]["messageIds"]) == (35, [443])
