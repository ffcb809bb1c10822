"""Damage from the first records of the oldest file (amqtool/engines/artemis/tails.py, ``IdLedger.bounds``): no
record precedes it, so no id bounded the window of what was lost from below, and verify said WARNING "what they
held cannot be told" where the broker lost messages (the first-file sweep over the session-48 hold-outs: 26 losses
of 126 read WARNING). The lowest id the records after the damage carry now bounds it: ids just above it that no
record carries are weighed as any window's. What lay below it (a message never consumed since) leaves no trace,
so such a window only adds evidence: without any, the finding stays as it was."""
from __future__ import annotations

from tests.faults.model import Fault
from tests.faults.runner import Campaign
from tests.support import REPO, journalimpl_store

STORE = REPO / "tests" / "data" / "artemis" / "oldest-file-start"


def test_zeros_from_inside_the_oldest_files_records_losing_messages_are_critical(tmp_path):
    root = journalimpl_store(STORE, tmp_path / "s")
    with Campaign("s", root) as c:
        o, found = c.judge_findings(Fault("zero", "journal/activemq-data-52.amq", 703, 9537))
    assert o.truth == "loss" and o.diff["lost"] > 0
    assert o.verdict == "CRITICAL" and o.codes == ("damaged-tail",)
    tail = next(f for f in found if f.code == "damaged-tail")
    assert tail.details["lostIds"]["unaccountedCount"] > 0


def test_a_cut_of_the_oldest_files_first_record_stays_critical(tmp_path):
    # a cut through a record is CRITICAL (a file the broker moved on from holds no torn record); the window from
    # the lowest id proving nothing, it stays so
    root = journalimpl_store(STORE, tmp_path / "s")
    with Campaign("s", root) as c:
        o = c.judge(Fault("truncate", "journal/activemq-data-52.amq", 31))
    assert o.verdict == "CRITICAL"
