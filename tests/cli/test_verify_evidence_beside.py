"""Issue 25: what the store holds beside a damaged journal or page proves a loss verify called OK or WARNING
(the campaign's misses, tests/faults, seed 25). Each test damages a copy of the campaign's demo store (or the
broker-written fixture) and asserts verify's exit code and finding."""
from __future__ import annotations

import shutil

import pytest

from tests.faults.stores import campaign_demo
from tests.support import ARTEMIS


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("pristine") / "store")


@pytest.fixture
def store(pristine, tmp_path):
    return shutil.copytree(pristine, tmp_path / "store")


def test_message_journal_deleted_beside_large_message_files_is_critical(run_json, tmp_path):
    # The campaign's seed 25 miss (4 draws): the broker-written fixture's journal directory deleted, its bindings
    # journal beside: OK with no finding, while the broker loses every message (735 rows). Its large-message body
    # 1293.msg remains, and its ADD_LARGE_MESSAGE record was in that journal.
    src = ARTEMIS / "messages" / "02_broker_mixed_compacted"
    if not src.is_dir():
        pytest.skip("the broker-written fixture is not here")
    store = shutil.copytree(src, tmp_path / "store")
    shutil.rmtree(store / "journal")
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "messages-journal-missing"]
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert f["details"]["largeMessageIds"] == [1293] and f["details"]["pagedMessages"] == 0


def test_message_journal_emptied_beside_pages_and_large_messages_is_critical(run_json, store):
    # every file of the message journal gone but the directory: the pages were never read (the paging check ran
    # only with a loaded message journal or none at all), and nothing was said
    for p in (store / "data" / "journal").iterdir():
        p.unlink()
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "messages-journal-missing"]
    assert (code, f["severity"]) == (2, "critical")
    assert f["details"]["pagedMessages"] > 0 and f["details"]["largeMessageFiles"] > 0


def test_bindings_directory_given_alone_is_not_judged_for_the_message_journal(run_json, store):
    # the user asked about the bindings journal only: its sibling pages and large messages prove nothing missing
    code, doc, _ = run_json("verify", store / "data" / "bindings")
    assert "messages-journal-missing" not in {f["code"] for f in doc["findings"]}
