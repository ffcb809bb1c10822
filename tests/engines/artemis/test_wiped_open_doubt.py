"""A zeroed run inside a message-journal file (``damaged-record``, wiped_run.py) whose only doubt is whether
transactions with no end record lost their COMMIT there is a warning, as on a damaged end of a file: nothing
proves that COMMIT was written. Zeroing runs inside every messages file of the 48 JournalImpl stores (seed
9651, 597 runs), 73 such CRITICALs were stores the broker delivers exactly as before. In
``tests/data/artemis/rolled-back-tail`` (README) transactions 2147483797 and later stay open; a run that also
leaves ids no surviving record carries stays CRITICAL."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.mark.parametrize("path, offset, length", [("journal/activemq-data-7.amq", 10386, 3142),
                                                   ("journal/activemq-data-45.amq", 14043, 1596)])
def test_a_run_whose_only_doubt_is_an_open_transaction_is_a_warning(rolled_back, path, offset, length):
    outcome, (run,) = rolled_back.judge_findings(Fault("zero", path, offset, length), "damaged-record")
    assert outcome.truth == "same"
    assert outcome.verdict == run.severity.name == "WARNING"
    ids = run.details["lostIds"]
    assert ids["openTransactions"] and not ids["unaccountedIds"] and not ids["liveIds"]


def test_a_run_that_begins_where_an_open_transaction_stops_took_its_commit(rolled_back):
    # transaction 2147483800's records run up to the zeroed run, which covers where its COMMIT lay and half the
    # record after it; it acknowledged three messages, which come back when the broker discards it. The last
    # record before the run being one of a transaction with no end anywhere, its end was among the lost records
    # (cut_off_tx.py, as on a damaged end): CRITICAL, naming it. Before, a warning.
    outcome, (run,) = rolled_back.judge_findings(Fault("zero", "journal/activemq-data-3.amq", 4268, 333),
                                                 "damaged-record")
    assert (outcome.truth, outcome.diff["back"]) == ("loss", 3)
    assert outcome.verdict == run.severity.name == "CRITICAL"
    assert run.details["cutOffTransaction"] == 2147483800
    # the zeros read as filler: the damaged bytes are what is left of the record after them
    assert (run.offset, run.details["nextValidRecord"]) == (4602, 4912)
