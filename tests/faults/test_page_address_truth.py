"""The harness's truth of a page folder whose address.txt names another address (a changed byte, a cut line): the
broker names a reloaded page store by the first line of its folder's address.txt
(``PagingStoreFactoryNIO.reloadStores``) and subscribes each queue on the page store of the queue's own address
(``QueueFactoryImpl.getPageSubscription`` -> ``PagingManager.getPageStore(address)``: a new, empty store when no
folder names it). The folder's messages are then in a store no queue reads: lost, not "same" (holdout sweep seed
7604: 64 address.txt flips and cuts the truth called "same" while verify said CRITICAL page-store-missing)."""
from __future__ import annotations

from tests.faults.model import Fault
from tests.faults.runner import Campaign
from tests.faults.stores import campaign_demo


def _folder(store, address):
    return next(p for p in (store / "data" / "paging").iterdir()
                if (p / "address.txt").read_text().split("\n")[0] == address)


def test_a_renamed_page_folder_loses_its_messages(tmp_path):
    store = campaign_demo(tmp_path / "store", 1)
    rel = str((_folder(store, "telemetry") / "address.txt").relative_to(store))
    with Campaign("demo-s1", store) as c:
        renamed = c.judge(Fault("flip", rel, 0, 0x01))  # "uelemetry"
        cut = c.judge(Fault("truncate", rel, 6))  # "teleme"
        newline = c.judge(Fault("truncate", rel, 9))  # "telemetry" without its line end: the same name
    for o in (renamed, cut):
        assert (o.truth, o.verdict) == ("loss", "CRITICAL") and o.diff["lost"]
        assert "page-store-missing" in o.codes
    assert (newline.truth, newline.diff["lost"]) == ("same", 0)


def test_a_queue_id_damaged_to_another_address_queue_is_delivered_by_neither(tmp_path):
    # dp46's page-qid sweep (seed 7751): queue id 35 -> 3 (one bit: telemetry's queue to DLQ's) was lost to 35 and
    # "back" on DLQ in the truth, as the export lists it. Queue 3's cursor is on DLQ's page store, and no cursor of
    # telemetry's store is queue 3's: the broker delivers it to neither (loss/OK where 35 had consumed it).
    from amqtool.formats.artemis.paging import PagedMessage, scan_page
    from tests.faults.artemis import delivered

    store = campaign_demo(tmp_path / "store", 3)
    page = _folder(store, "telemetry") / "000000002.page"
    buf = page.read_bytes()
    recs, _ = scan_page(buf)
    _, off, length = recs[0]
    m = PagedMessage.decode(buf[off + 5:off + 5 + length])
    assert (m.message_id, m.queue_ids) == (443, (35, 37))
    before = delivered(store)
    Fault("flip", str(page.relative_to(store)), off + 5 + length - 9, 0x20).apply(store)  # 35 -> 3
    after = delivered(store)
    assert {k[:2] for k in before.held() - after.held()} == {(35, 443)}
    assert not after.held() - before.held()
