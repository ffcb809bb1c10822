"""A free file's old records beside a transaction the damage made the load drop (issue 25,
amqtool/engines/artemis/free_files.py, verify.py: the ``explained`` ids).

tests/data/artemis/free-files-tx: 23 files of a store the real JournalImpl wrote with its default pool (-1: every
freed file kept, re-initialised with its earlier records left under their old tag) and restarts (hold-out h25,
``JOPTS="-Dpool=-1 -DmaxBody=700 -DsendPct=36 -Dpin=true -DtxPct=30 -Drestart=500" gen.sh OUT 28672 8325 3500
900``), cut down to the files the case needs, with what the real JournalImpl loads from them. A flipped bit in
the record count of transaction 2147486914's COMMIT (activemq-data-89.amq@15366 ^ 0x40) makes the load drop
the transaction (commit-count-mismatch); its DELETE_TX records deleted messages whose updates a restart had left
without their add, so those updates are live again -- and a free file holds the adds. verify took that for a
damaged header (CRITICAL file-header-damaged) while the broker delivers exactly what it did: ids whose delete a
dropped transaction held are no evidence against a free file, as ids whose DELETE the damage took are not.
"""
from __future__ import annotations

from tests.support import REPO, assert_loads_like_journalimpl, journalimpl_store

STORE = REPO / "tests" / "data" / "artemis" / "free-files-tx"
FLIP = ("journal/activemq-data-89.amq", 15366, 0x40)


def test_the_store_loads_like_journalimpl():
    assert_loads_like_journalimpl(STORE)


def test_a_dropped_transactions_deletes_are_no_evidence_against_a_free_file(tmp_path):
    from tests.faults.model import SAME, Fault
    from tests.faults.runner import Campaign

    root = journalimpl_store(STORE, tmp_path / "s")
    with Campaign("free-files-tx", root) as c:
        o, found = c.judge_findings(Fault("flip", *FLIP))
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("commit-count-mismatch",))
    (mismatch,) = [f for f in found if f.code == "commit-count-mismatch"]
    assert (mismatch.details["txId"], mismatch.details["expected"], mismatch.details["found"]) == (2147486914, 68, 4)
    # the free files' old records are named as such
    assert [f.path.rsplit("/", 1)[1] for f in found if f.code == "stale-records" and f.offset is not None
            and "free file" in f.message] != []
