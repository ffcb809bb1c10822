"""A transaction that completes a page for a queue, discarded whole (evidence.py, ``_page_tx_effect``).

When a queue has acknowledged every message of a page, the cursor's cleanup writes one journal transaction: a
PAGE_CURSOR_COMPLETE add for (queue, page) and a DELETE_TX of each of that page's cursor acknowledgements. A
damaged transaction id or COMMIT of it makes the load discard the whole transaction (commit-count-mismatch, or no
COMMIT): the completion record is gone, and so are the deletes, so the acknowledgements stay; the cursor reads
the page again and finds every message acknowledged. Verify weighed the lost completion as unknown: CRITICAL
(the hold-out demos of dp45, cursor sweep seed 9581: 60 of 150 such faults, every one changing nothing the broker
delivers); it now counts the page's messages of that queue no acknowledgement covers."""
from __future__ import annotations

from tests.support import flip_byte


def test_a_page_completion_discarded_with_its_deletes_changes_nothing(run_cli, run_json, tmp_path):
    store = tmp_path / "d27"
    assert run_cli("create", store, "--kind", "broker", "--demo", "6MiB", "--seed", "27", "--live-ratio", "0.35",
                   "--quiet")[0] == 0
    # bit 1 of a DELETE_TX's transaction id (the cleanup of a completed page): its COMMIT counts one record more
    # than the transaction has in its file, and Artemis discards all of it
    flip_byte(store / "data/journal/activemq-data-1.amq", 3232322, 0x02)
    code, doc, _ = run_json("verify", str(store))
    assert (code, doc["verdict"]) == (1, "WARNING")
    (f,) = [f for f in doc["findings"] if f["code"] == "commit-count-mismatch"]
    assert f["severity"] == "warning" and "none of them changes what the broker delivers" in f["message"]
