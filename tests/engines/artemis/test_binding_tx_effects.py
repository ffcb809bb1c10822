"""What discarding a bindings-journal transaction loses (``Evidence.effect_of_discarded``), on the public
broker-written bindings journals (../shared/fixtures/artemis/public).

Fault campaign misses (those stores, seed 7777): a COMMIT damaged in the bindings journal drops its transaction
at load (``JournalImpl.load``), and

* a transaction deleting a queue or address binding then deletes nothing: the binding comes back, and the
  broker recreates that queue (verify said WARNING, "whose loss changes nothing the broker delivers");
* a transaction adding a binding that a later DELETE removed changes nothing (verify said CRITICAL: only the
  message journal's DELETEs were read)."""
from __future__ import annotations

import pytest

from tests.support import PUBLIC_JOURNALS, copy_tree, flip_byte

pytestmark = pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures absent")


def _commits(bindings_dir):
    """(path, commit offset, [(record type, user type, id)] of its transaction) of every committed transaction
    of the bindings journal, in file order."""
    from amqtool.formats.artemis.records import scan_records_py

    out = []
    for path in sorted(bindings_dir.glob("activemq-bindings-*.bindings")):
        data = path.read_bytes()
        tag = int.from_bytes(data[8:16], "big", signed=True)
        records, _ = scan_records_py(data, tag, 2)
        for r in records:
            if r[0] == 18:
                out.append((path, r[1], [(x[0], x[6], x[5]) for x in records if x[0] in (13, 14, 15) and x[4] == r[4]]))
    return out


def _deleted(bindings_dir):
    from amqtool.formats.artemis.records import scan_records_py

    out = set()
    for path in sorted(bindings_dir.glob("activemq-bindings-*.bindings")):
        data = path.read_bytes()
        records, _ = scan_records_py(data, int.from_bytes(data[8:16], "big", signed=True), 2)
        out |= {r[5] for r in records if r[0] in (15, 16)}
    return out


def _case(kind):
    for root in PUBLIC_JOURNALS:
        commits = _commits(root)
        deleted = _deleted(root)
        for path, off, recs in commits:
            if kind == "delete" and recs and all(t == 15 for t, _, _ in recs):
                return root, path, off
            if kind == "added-then-deleted" and recs and all(t == 13 and u in (21, 44) and i in deleted
                                                              for t, u, i in recs):
                return root, path, off
    return None


@pytest.mark.parametrize("kind, code, verdict", [("delete", 2, "CRITICAL"), ("added-then-deleted", 1, "WARNING")])
def test_a_damaged_commit_of_a_bindings_transaction(run_json, tmp_path, kind, code, verdict):
    from tests.faults import artemis

    found = _case(kind)
    assert found is not None
    journal, path, off = found
    data_dir = journal.parent
    store = copy_tree(data_dir, tmp_path / "s")
    damaged = store / path.relative_to(data_dir)
    flip_byte(damaged, off + 1, 0x01)  # the COMMIT's file tag: the broker skips it
    before = artemis.DeliveredReader(data_dir).pristine
    after = artemis.DeliveredReader(store).pristine
    assert (before.bindings != after.bindings) == (kind == "delete")
    rc, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (rc, doc["verdict"], f["severity"]) == (code, verdict, verdict.lower())
