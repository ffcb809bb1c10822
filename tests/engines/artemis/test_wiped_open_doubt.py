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
