"""Cursor acknowledgements whose page number was damaged past the address's current page (paging/moved_acks.py):
the acknowledged message comes back, and the store says which (issue 25, make fuzz seed 5151: 14 flips of an
ACKNOWLEDGE_CURSOR's page number judged "loss-unproven" and OK while the broker delivered the message again)."""
from __future__ import annotations

from tests.faults.artemis import broker_could_write, delivered
from tests.faults.stores import first_cursor_ack
from tests.support import copy_tree


def _write(path, offset, raw):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(raw)


def _findings(run_json, store):
    code, doc, _ = run_json("verify", store)
    return code, {f["code"]: f for f in doc["findings"]}


def test_an_acknowledgement_moved_past_the_current_page_brings_its_message_back(run_json, demo, tmp_path):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, _, body, page, number = first_cursor_ack(store, 41)  # queue 41 (backlog): its address pages to page 1 only
    _write(path, body + 8, (page | 0x20 << 32).to_bytes(8, "big"))  # one byte of the page number damaged
    assert before.diff(delivered(store)) == {"lost": 0, "back": 1, "bindings": 0, "content": 1}
    assert "past its address's current page" in broker_could_write(store)
    code, found = _findings(run_json, store)
    assert code == 2 and found["page-ack-moved"]["severity"] == "critical"
    assert found["page-ack-moved"]["details"]["acks"] == [
        {"queue": 41, "page": page | 0x20 << 32, "number": number, "page_held": page, "pages_held": [page]}]


def test_an_acknowledgement_past_the_current_page_naming_no_message_is_a_warning(run_json, demo, tmp_path):
    store = copy_tree(demo, tmp_path / "s")
    path, _, body, page, _ = first_cursor_ack(store, 41)
    # past the current page, and no page holds a message of that number: what it acknowledged cannot be told
    _write(path, body + 8, (page | 0x20 << 32).to_bytes(8, "big") + (60_000).to_bytes(4, "big"))
    code, found = _findings(run_json, store)
    assert "page-ack-moved" not in found and found["page-ack-damaged"]["severity"] == "warning"
    assert found["page-ack-damaged"]["details"]["count"] == 1
