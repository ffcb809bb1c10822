"""A damaged run inside a journal file whose bytes are accounted for record by record (wiped_run.py,
``_filled``) held no COMMIT, PREPARE or ROLLBACK: the transactions the store leaves open elsewhere were not
ended there, so they do not make its loss untellable.

tests/data/artemis/reclaimed-pool2 (real JournalImpl, README there) leaves transaction 2147483912 open in
activemq-data-5.amq (its writer leaves some open, as a crash does), with live records. Zeroing the head of a
later message whose DELETE survives, or a DELETE's end with the head of the add after it, took records the
store accounts for: the broker delivers the same. main called each CRITICAL damaged-record ("transaction(s)
2147483912 ... have no end record and held live records"), as the fault campaign found over the stores
/work/artemis-fresh holds (seed 8301: a01, d06)."""
from __future__ import annotations

import shutil

from tests.support import REPO

STORE = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"


def _zeroed(tmp_path, name: str, offset: int, length: int):
    journal = shutil.copytree(STORE / "journal", tmp_path / "journal")
    path = journal / name
    data = bytearray(path.read_bytes())
    data[offset:offset + length] = bytes(length)
    path.write_bytes(bytes(data))
    return journal


def _damaged(doc) -> dict:
    (found,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    return found


def test_a_zeroed_message_head_after_the_previous_record_is_one_add_whose_delete_survives(run_json, tmp_path):
    # the ADD of message 2147483951 at activemq-data-6.amq@3898 (713 bytes) zeroed but for its last 40: the
    # zeros run from the previous record's end, and the trailing size that survives counts the whole run, one
    # record longer than any but an add; its id's DELETE survives
    journal = _zeroed(tmp_path, "activemq-data-6.amq", 3898, 673)
    code, doc, _ = run_json("verify", str(journal))
    found = _damaged(doc)
    assert found["severity"] == "warning"
    assert found["details"]["lostIds"]["openTransactions"] == []
    assert 2147483951 in found["details"]["lostIds"]["deletedIds"]
    assert "none of them was a live message" in found["message"]


def test_a_delete_cut_with_the_head_of_the_add_after_it_is_accounted_for(run_json, tmp_path):
    # activemq-data-5.amq@6779: the DELETE of 2147483909 (18 bytes), then the ADD of 2147483921 (longer than any
    # PREPARE, the one other record that long), deleted since; 16 bytes zeroed from the DELETE's 14th: its head
    # names it, and the add's trailing size says it begins where the DELETE ends
    journal = _zeroed(tmp_path, "activemq-data-5.amq", 6779 + 14, 16)
    code, doc, _ = run_json("verify", str(journal))
    found = _damaged(doc)
    assert found["severity"] == "warning"
    assert "delete of record 2147483909" in found["message"]
    assert found["details"]["lostIds"]["openTransactions"] == []

