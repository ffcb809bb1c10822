"""Single damaged records of the fault campaign (tests/faults/, seed 25), replayed on the campaign's first demo
store (tests/faults/stores.py ``campaign_demo``), each held to its verdict and finding codes: the verdict
follows what the broker loses (issue 25)."""
from __future__ import annotations

import pytest

from tests.support import copy_tree, flip_byte


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


def _codes(doc, severity=None):
    return sorted(f["code"] for f in doc["findings"] if severity is None or f["severity"] == severity)


def test_a_message_record_whose_user_type_was_flipped_is_critical(run_json, tmp_path, demo_s1):
    # campaign seed 25000077000036: record 139's user record type 45 (ADD_MESSAGE_PROTOCOL) flipped to 41
    # (PAGE_CURSOR_COUNTER_INC); the broker loads no message 139 and drops its reference on queue 15
    store = copy_tree(demo_s1, tmp_path / "s")
    victim = store / "data/journal/activemq-data-4.amq"
    flip_byte(victim, 37772, 0x04)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    assert _codes(doc, "critical") == ["message-record-retyped"]
    (f,) = [f for f in doc["findings"] if f["code"] == "message-record-retyped"]
    assert (f["path"], f["offset"], f["details"]["messageIds"]) == (str(victim), 37772, [139])


def test_the_undamaged_demo_has_no_retyped_record(run_json, demo_s1):
    code, doc, _ = run_json("verify", demo_s1)
    assert code == 0 and "message-record-retyped" not in _codes(doc)
