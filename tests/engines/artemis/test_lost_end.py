"""A transaction's PREPARE or COMMIT lost at a damaged end of a file the broker moved on from, named by its own
surviving header (amqtool/engines/artemis/lost_end.py)."""
from __future__ import annotations

import shutil

import pytest

from tests.faults.runner import verify_verdict
from tests.support import REPO

DATA = REPO / "tests" / "data" / "artemis"


def _flip(tmp_path, store: str, name: str, offset: int):
    journal = shutil.copytree(DATA / store / "journal", tmp_path / "journal")
    path = journal / name
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    return journal


def test_a_prepare_whose_header_survives_is_a_lost_transaction(tmp_path):
    # seed 9102051306072019 (c04, activemq-data-36.amq@2870 ^0x46: a PREPARE's extra-data size, 5 rows lost) was
    # a WARNING: "a commit lost there rolls them back, a rollback lost there changes nothing". The same on
    # free-files: the PREPARE of transaction 2147484894 (activemq-data-7.amq@16126, 50 bytes, the file's last
    # record), its size field flipped; the broker fails the transaction and loses its 6 rows (the campaign's
    # truth, with the 02 bindings beside)
    journal = _flip(tmp_path, "free-files", "activemq-data-7.amq", 16126 + 49)
    assert verify_verdict(journal) == ("CRITICAL", ("damaged-tail",))


@pytest.mark.parametrize("store,name,offset", [("reclaimed-room", "activemq-data-13.amq", 13062 + 21)])
def test_a_commit_of_a_transaction_whose_discard_loses_nothing_stays_a_warning(tmp_path, store, name, offset):
    # transaction 2147483981's records are dead since: its COMMIT lost changes nothing (the truth: same)
    assert verify_verdict(_flip(tmp_path, store, name, offset)) == ("WARNING", ("damaged-tail",))


def test_a_run_inside_a_file_that_begins_with_a_transactions_end_is_a_loss(tmp_path):
    # zeros from inside the COMMIT header of transaction 495 (its type byte, tag and the high bytes of its id
    # survive) over the records after it, in the middle of file 12 of demo-s3: the broker fails the transaction
    # and loses its 6 messages. The run judge (wiped_run.py) weighed the ids around the run, all accounted for,
    # and left a warning ("transactions have no end record"): a sweep of such runs over the 48 JournalImpl stores,
    # the demos and 8 hold-out stores (seed 9575, 720 runs) found 62 losses judged so, and no unchanged store
    from tests.faults.model import Fault
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s3", campaign_demo(tmp_path / "demo-s3", 3)) as c:
        fault = Fault("zero", "data/journal/activemq-data-12.amq", 40341, 289, label="zeroed range")
        outcome, found = c.judge_findings(fault, "damaged-record")
    assert (outcome.truth, outcome.diff["lost"], outcome.verdict) == ("loss", 6, "CRITICAL")
    (run,) = found
    assert (run.severity.value, run.offset, run.details["lostEnd"]) == ("critical", 40334,
                                                                     {"recordType": 18, "txId": 495})
