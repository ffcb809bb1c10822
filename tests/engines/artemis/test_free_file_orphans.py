"""A free file's stale records are no evidence of a damaged header when the live update they would supply
is live only because other damage took its DELETE (free_files.supplies_live_updates, ``explained``).

A random campaign over the 48 JournalImpl stores (seeds 9483 and 9631) twice called CRITICAL
``file-header-damaged`` a store the broker delivers exactly as before: one record of a transaction, the
DELETE_TX of a message acknowledged long ago, was damaged (its tag, or its size); the load discards the whole
transaction (``commit-count-mismatch``), so the message's acknowledgement is read live without its add, whose
file the broker had freed -- and a free file (re-initialised for reuse with its old records kept) still held
that add under its old tag. In ``tests/data/artemis/free-files`` (README), ``activemq-data-57.amq`` holds the
DELETE_TX records of transaction 2147484553 at 11067 and 11136."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault
from tests.support import REPO, copy_tree


@pytest.fixture(scope="module")
def free_files(tmp_path_factory):
    from tests.faults.runner import Campaign

    root = copy_tree(REPO / "tests" / "data" / "artemis" / "free-files", tmp_path_factory.mktemp("ff") / "store")
    with Campaign("free-files", root) as c:
        yield c


@pytest.mark.parametrize("offset, deleted", [(11067, 2147484416), (11136, 2147484399)])
def test_a_damaged_transactional_delete_is_no_damaged_header(free_files, offset, deleted):
    fault = Fault("flip", "journal/activemq-data-57.amq", offset + 2, 0x80)  # the record's tag
    outcome, findings = free_files.judge_findings(fault)
    assert outcome.truth == "same"
    by_code = {f.code: f for f in findings if f.severity.name != "INFO"}
    assert "file-header-damaged" not in by_code
    run, mismatch = by_code["damaged-record"], by_code["commit-count-mismatch"]
    assert run.severity.name == "WARNING" and f"delete of record {deleted}" in run.message
    assert mismatch.severity.name == "WARNING" and mismatch.details["txId"] == 2147484553
