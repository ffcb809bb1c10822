"""Two page files of an address swapped (holdout file sweep, seed 7604: 9 of 51 swaps lost messages under a
WARNING): the broker reads each file as the page its name says and applies that page's cursor acknowledgements to
the messages it finds there. Its pages are written in message-id order, so a page holding older messages than a
page before it is CRITICAL ``page-out-of-order`` (paging/page_order.py)."""
from __future__ import annotations

import os

from tests.support import copy_tree


def _telemetry(store):
    return next(p for p in (store / "data" / "paging").iterdir()
                if (p / "address.txt").read_text().split("\n")[0] == "telemetry")


def test_swapped_page_files_are_out_of_order(run_json, tmp_path):
    from tests.faults.stores import campaign_demo

    store = copy_tree(campaign_demo(tmp_path / "demo", 1), tmp_path / "s")
    folder = _telemetry(store)
    a, b = folder / "000000001.page", folder / "000000002.page"
    code, doc, _ = run_json("verify", store)
    assert not [f for f in doc["findings"] if f["code"] == "page-out-of-order"]
    os.rename(a, folder / "swap")
    os.rename(b, a)
    os.rename(folder / "swap", b)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "page-out-of-order"]
    assert (code, f["severity"], f["details"]["page"], f["details"]["earlierPage"]) == (2, "critical", 2, 1)
    assert f["details"]["newestId"] < f["details"]["earlierOldestId"]
