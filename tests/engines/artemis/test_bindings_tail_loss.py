"""A damaged end of the bindings journal's current file that no crash leaves (``damaged-tail``), on the public
broker-written bindings journals (../shared/fixtures/artemis/public), which have no message journal: what the
lost record held is all that tells a loss there.

Fault campaign misses (those stores, seed 7777, 150 faults a store: 15 loss/WARNING):

* the last COMMIT's type byte flipped to ROLLBACK's read as an 18-byte rollback with a wrong size word
  ("changes nothing"), while the broker discards the transaction and loses the binding it added;
* zeros from inside a binding's transactional add to the end of the data: "what it held cannot be told",
  while the binding was gone with its COMMIT (a delete of a live binding likewise brings it back); so too when
  the zeros took all but its type byte (the bindings journal's transactions change bindings).

A DELETE of an ID counter whose type byte reads COMMIT's (seed 7501) is read to the tail's length: a warning.

Zeros from inside an ID-counter record (and over the counters and deletes written after it) stay a warning:
nothing the broker delivers depended on them, and nothing tells what else they took."""
from __future__ import annotations

import pytest

from tests.support import PUBLIC, PUBLIC_JOURNALS, copy_tree, flip_byte

pytestmark = pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures absent")

_QUEUE, _ADDRESS, _COUNTER = 21, 44, 24


def _current(bindings_dir):
    """(path, records) of the newest bindings file holding records: (type, offset, size, tx id, id, user type)."""
    from amqtool.formats.artemis.records import scan_records_py

    files = []
    for path in bindings_dir.glob("activemq-bindings-*.bindings"):
        data = path.read_bytes()
        tag = int.from_bytes(data[8:16], "big", signed=True)
        records, _ = scan_records_py(data, tag, 2)
        if records:
            files.append((tag, path, [(r[0], r[1], r[2], r[4], r[5], r[6]) for r in records]))
    return max(files)[1:] if files else (None, [])


def _deleted(records):
    return {r[4] for r in records if r[0] in (15, 16)}


def _case(kind):
    """(bindings dir, file, offset, what to do) of the first public journal whose current file ends as ``kind``
    needs."""
    for root in PUBLIC_JOURNALS:
        path, recs = _current(root)
        if len(recs) < 2:
            continue
        last, before = recs[-1], recs[-2]
        end = last[1] + last[2]
        if kind in ("retyped-commit", "zeroed-add", "zeroed-tx-head") and last[0] == 18 and before[0] == 13 \
                and before[3] == last[3] and before[5] in (_QUEUE, _ADDRESS) and before[4] not in _deleted(recs):
            # zeros from inside the add's body (its head names it), or from its tag on (only its type is left)
            return root, path, {"retyped-commit": last[1], "zeroed-add": before[1] + 40,
                                "zeroed-tx-head": before[1] + 3}[kind], end
        if kind == "retyped-delete" and last[0] == 16 and any(
                r[0] == 11 and r[5] == _COUNTER and r[4] == last[4] for r in recs):
            return root, path, last[1], end
        if kind == "zeroed-counter":
            tail = [i for i, r in enumerate(recs) if r[0] == 11 and r[5] == _COUNTER
                    and all(x[0] == 16 or x[0] == 11 and x[5] == _COUNTER for x in recs[i:])]
            if tail and len(recs) - tail[0] >= 2:
                r = recs[tail[0]]
                return root, path, r[1] + 30, end
    return None


@pytest.mark.parametrize("kind, verdict", [("retyped-commit", "CRITICAL"), ("zeroed-add", "CRITICAL"),
                                           ("zeroed-tx-head", "CRITICAL"), ("zeroed-counter", "WARNING"),
                                           ("retyped-delete", "WARNING")])
def test_a_damaged_end_of_the_current_bindings_file(run_json, tmp_path, kind, verdict):
    from tests.faults import artemis

    found = _case(kind)
    assert found is not None, kind
    journal, path, off, end = found
    data_dir = journal.parent
    store = copy_tree(data_dir, tmp_path / "s")
    damaged = store / path.relative_to(data_dir)
    if kind == "retyped-commit":
        flip_byte(damaged, off, 0x01)  # COMMIT (18) reads as ROLLBACK (19)
    elif kind == "retyped-delete":
        flip_byte(damaged, off, 0x02)  # DELETE (16) reads as COMMIT (18)
    else:
        with open(damaged, "r+b") as fh:  # zeros from inside the record to the end of the data
            fh.seek(off)
            fh.write(bytes(end - off))
    before = artemis.DeliveredReader(data_dir).pristine
    after = artemis.DeliveredReader(store).pristine
    assert (before.bindings != after.bindings) == (verdict == "CRITICAL")
    rc, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (doc["verdict"], f["severity"], f["details"]["crash"]) == (verdict, verdict.lower(), False)


def _commits_after_a_binding(root):
    """Offsets of the COMMITs (not the file's last record) right after a live binding's transactional add."""
    path, recs = _current(root)
    return path, [c[1] for a, c in zip(recs, recs[1:]) if c[0] == 18 and a[0] == 13 and a[3] == c[3]
                  and a[5] in (_QUEUE, _ADDRESS) and a[4] not in _deleted(recs) and c[3] != 0 and c is not recs[-1]]


_ANDYMAIER = PUBLIC / "andymaier__artemis-broker1" / "data"


@pytest.mark.skipif(not _ANDYMAIER.is_dir(), reason="andymaier's journal absent")
def test_zeros_over_a_commit_read_as_another_transactions(run_json, tmp_path):
    # campaign seed 7507027521015031 (andymaier's journal): 16 zeros from the last byte of a COMMIT's tag over its
    # transaction id; the bytes read as the COMMIT of transaction 0 with a damaged tag, "whose loss changes
    # nothing", while transaction 0's own COMMIT survives (a transaction ends once) and the broker discards the
    # transaction that lost its COMMIT, with the queue binding it added: CRITICAL
    from tests.faults import artemis

    path, commits = _commits_after_a_binding(_ANDYMAIER / "bindings")
    assert 483 in commits
    store = copy_tree(_ANDYMAIER, tmp_path / "s")
    with open(store / path.relative_to(_ANDYMAIER), "r+b") as fh:
        fh.seek(483 + 4)  # the tag's last byte, the version byte, the transaction id, half the count
        fh.write(bytes(16))
    assert artemis.DeliveredReader(_ANDYMAIER).pristine.bindings != artemis.DeliveredReader(store).pristine.bindings
    rc, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (rc, f["severity"], f["offset"]) == (2, "critical", 483)


def test_zeros_over_a_commit_whose_transaction_is_left_open_before_it(run_json, tmp_path):
    # make fuzz seed 9892 (02_broker_mixed_compacted, bindings zeroed @792+16): the tag and transaction id of the
    # COMMIT of transaction 14, right after its queue binding's ADD_TX. No transaction 0 ended anywhere, so the
    # bytes read as transaction 0's COMMIT "whose loss changes nothing", while the broker rolled transaction 14 back
    # with its binding. The last record before the damage being of that transaction, left with no end, the COMMIT
    # was its own (cut_off_tx.py): CRITICAL
    from tests.faults import artemis
    from tests.support import ARTEMIS

    fixture = ARTEMIS / "messages" / "02_broker_mixed_compacted"
    store = copy_tree(fixture, tmp_path / "s")
    with open(store / "bindings" / "activemq-bindings-3.bindings", "r+b") as fh:
        fh.seek(790)
        assert fh.read(1)[0] == 18  # the COMMIT
        fh.seek(792)
        fh.write(bytes(16))
    assert artemis.DeliveredReader(fixture).pristine.bindings != artemis.DeliveredReader(store).pristine.bindings
    rc, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (rc, f["severity"], f["offset"]) == (2, "critical", 790)
