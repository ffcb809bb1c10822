"""Damaged bytes inside a bindings journal file too few to have held a binding change (bindings_run.py), on the
public broker-written bindings journals (../shared/fixtures/artemis/public).

Fault campaign seed 8501 (public stores, 60 faults a store): 64 zeroed bytes among the id-counter records every
restart leaves (an ADD of the new counter, a DELETE of the old) were "at least one record was lost here",
CRITICAL, in three of six misses, while the broker loads the same queues and addresses: the broker writes
bindings only in transactions, and the bytes left no room for one."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault
from tests.support import PUBLIC, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures absent")

FILE = "bindings/activemq-bindings-1.bindings"


def _judged(store, fault):
    from tests.faults.runner import Campaign

    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect

    with Campaign(store.name, store) as c:
        outcome = c.judge(fault)
        undo = fault.apply(c.root)
        try:
            found = [f for f in verify_store(detect(c.root)).findings if f.code == "damaged-record"]
        finally:
            undo()
    return outcome, found


@pytest.mark.parametrize("repo, offset", [("Mhwwww__ShutPub", 931), ("RobertFloor__packer-docker-ansible", 751),
                                          ("RobertFloor__packer-docker-ansible", 769)])
def test_zeros_among_id_counter_records_lose_no_binding(repo, offset):
    outcome, (found,) = _judged(PUBLIC / repo / "data", Fault("zero", FILE, offset, 64, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    assert found.severity.name == "WARNING" and "smallest binding transaction" in found.message


def test_a_whole_binding_transaction_zeroed_is_a_loss():
    # 16 zeros at the end of a DELETE_TX and into its COMMIT: the region is the two records (52 bytes), and the
    # COMMIT's trailing size word survives -- a record of a binding transaction's length, not set aside
    store = PUBLIC / "ColdGold1__sfg-jms" / "data"
    outcome, (found,) = _judged(store, Fault("zero", FILE, 3844, 16, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.severity.name == "CRITICAL" and found.offset == 3820


def test_the_smallest_binding_transaction_is_a_delete_and_its_commit():
    from amqtool.engines.artemis.bindings_run import smallest_binding_tx

    assert (smallest_binding_tx(2), smallest_binding_tx(1)) == (30 + 22, 29 + 21)


def test_a_commit_zeroed_leaves_its_binding_transaction_open():
    # the 22 bytes of a COMMIT (its type byte and part of its tag left) are fewer than a binding transaction, but
    # the DELETE_TX before it is left open: the broker discards it, and the queue it deleted comes back
    store = PUBLIC / "ColdGold1__sfg-jms" / "data"
    outcome, (found,) = _judged(store, Fault("zero", FILE, 3852, 20, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.severity.name == "CRITICAL" and found.offset == 3850


_STARTS = "records the broker's starts between the id-counter records around them wrote"


@pytest.mark.parametrize("repo, offset, length, said", [
    # 512 zeros over the id-counter pairs of eleven starts (restart_counters.py): more bytes than a binding
    # transaction, but exactly the records the counter ids around them say were written there
    ("JatinPandey26__artemis-activemq-training", 1744, 512, _STARTS),
    # each start there also stores the divert its configuration deploys (a DIVERT_RECORD at the counter's id + 13)
    ("JatinPandey26__artemis-activemq-training", 7548, 1121, _STARTS),
    # zeros inside a queue binding's ADD_TX (its id among them), whose COMMIT survives with no record left: the
    # queue was deleted since (a DELETE_TX names its id, and no record holds it), and its 159 bytes, told by its
    # surviving trailing size word, are the whole run (deleted_since.py; bindings sweep seed 9871)
    ("ColdGold1__sfg-jms", 3029, 64, "deleted since"),
    ("andymaier__artemis-broker1", 6213, 25, "deleted since"),
])
def test_longer_runs_lose_no_binding(repo, offset, length, said):
    outcome, (found,) = _judged(PUBLIC / repo / "data", Fault("zero", FILE, offset, length, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    assert found.severity.name == "WARNING" and said in found.message


def test_a_binding_deleted_since_does_not_excuse_the_rest_of_the_run():
    # zeros over the end of a live address's ADD_TX, its COMMIT and the head of an address binding deleted since:
    # the one deleted since explains at least 39 of the run's 156 bytes, and more than a DELETE_TX's 30 are left
    # (the live address's records): the broker loses the address
    store = PUBLIC / "andymaier__artemis-broker1" / "data"
    outcome, (found,) = _judged(store, Fault("zero", FILE, 561, 64, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.severity.name == "CRITICAL"


@pytest.mark.parametrize("repo, offset, length", [
    # zeros from the end of a record read over a live binding's ADD_TX, its COMMIT and all but the last 5 bytes of
    # the plain record after them: the 5 bytes alone read as too few for a binding transaction (WARNING), while the
    # zeros before them took the queue (andymaier) or the address (ColdGold) the broker keeps
    ("andymaier__artemis-broker1", 7284, 214),
    ("ColdGold1__sfg-jms", 47, 134),
])
def test_zeros_before_a_short_run_count_with_it(repo, offset, length):
    outcome, (found,) = _judged(PUBLIC / repo / "data", Fault("zero", FILE, offset, length, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.severity.name == "CRITICAL" and found.offset == offset + length


@pytest.mark.parametrize("repo, offset, length", [
    # zeros over a binding transaction's COMMIT and the ADD_TX after it: the load fails the first transaction (no
    # COMMIT left), but a committed DELETE_TX later removes its binding, as it removes the second's: the broker
    # deletes only a binding it holds, so the COMMIT was in the run, and nothing the broker keeps was lost there
    # (deleted_since.py; codybum/newcomm's bindings, sweep seed 9573, was same/CRITICAL)
    ("ColdGold1__sfg-jms", 264, 165),
    ("andymaier__artemis-broker1", 669, 124),
])
def test_a_failed_transaction_whose_binding_was_deleted_since_loses_nothing(repo, offset, length):
    outcome, (found,) = _judged(PUBLIC / repo / "data", Fault("zero", FILE, offset, length, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    assert found.severity.name == "WARNING" and "COMMIT of 1 transaction(s) the load fails" in found.message


def test_a_failed_transaction_still_bound_is_a_loss():
    # the same zeros where the first transaction's binding is live: the broker loses it
    store = PUBLIC / "andymaier__artemis-broker1" / "data"
    outcome, (found,) = _judged(store, Fault("zero", FILE, 598, 55, label="zeroed range"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.severity.name == "CRITICAL"
