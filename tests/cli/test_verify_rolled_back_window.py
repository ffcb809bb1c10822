"""A damaged end whose window's ids a rolled-back transaction was sending (rolled_back.py): JournalImpl.load
discards every record of a transaction whose ROLLBACK survives, so those ids held nothing live. Seed 5151 found
two cuts verify called CRITICAL for them (demo-s1: transaction 440's messages 441 and 442 cut from file 11, its
message 443 and ROLLBACK in file 12)."""
from __future__ import annotations

import pytest

from tests.faults.model import SAME


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


@pytest.mark.parametrize("seed", [5151015462000269, 5151015463000193])
def test_ids_a_rolled_back_transaction_was_sending_are_accounted_for(demo, seed):
    from tests.faults.campaign import reproduce

    o = reproduce(demo, seed)
    assert o.fault.kind == "truncate" and o.fault.path.endswith("activemq-data-11.amq")
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("damaged-tail",))


def test_the_rollback_is_the_evidence(run_json, demo, tmp_path):
    # the same cut with transaction 440's ROLLBACK gone too: it is left open, and what its ids held cannot be
    # told (its COMMIT may have been lost there with them): CRITICAL as before
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files
    from tests.support import copy_tree

    store = copy_tree(demo, tmp_path / "s")
    files = {p.name: (p, t, v) for p, t, v in messages_files(store)}
    cut = files["activemq-data-11.amq"][0]
    with open(cut, "r+b") as f:
        f.truncate(61541)
    p, t, v = files["activemq-data-12.amq"]
    recs, _ = scan_records_py(p.read_bytes(), t, v)
    (rb,) = [r for r in recs if r[0] == 19 and r[4] == 440]
    with open(p, "r+b") as f:
        f.seek(rb[1])
        f.write(bytes(rb[2]))
    code, doc, _ = run_json("verify", store)
    tail = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert code == 2 and tail[0]["severity"] == "critical"
    assert tail[0]["details"]["lostIds"]["rolledBackIds"] == []


def test_the_window_names_the_rolled_back_ids(run_json, demo, tmp_path):
    from tests.support import copy_tree

    store = copy_tree(demo, tmp_path / "s")
    with open(store / "data/journal/activemq-data-11.amq", "r+b") as f:
        f.truncate(61541)
    code, doc, _ = run_json("verify", store)
    (tail,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, tail["severity"]) == (1, "warning")
    lost = tail["details"]["lostIds"]
    assert (lost["rolledBackIds"], lost["unaccountedIds"], lost["deletedIds"]) == ([441, 442], [], [439])


def test_no_rolled_back_run_is_counted_beside_an_open_transaction(tmp_path):
    # tests/data/artemis/pair-tx (the real JournalImpl, two transactions sending at once): transaction 2147483951
    # sends message 2147483952, transaction 2147483953 begins, and the two send in turn (their ids interleave)
    # until 2147483951 commits at activemq-data-9.amq@15061; 2147483953 is rolled back in activemq-data-10.amq.
    # Zeroing data-9 from 10440 to its end takes the first one's later messages and its COMMIT: it is left open
    # (the broker loses its 7 rows, and 2 come back), while the second's ROLLBACK survives. Counting the second's
    # run of ids as rolled back takes the open one's lost ids with it, and the damaged tail drops to a warning
    # (as it did on the fresh r2-big-tx store, seed 4303): with two transactions sending at once, whose run an id
    # was cannot be told, so the rolled-back run is not counted.
    from pathlib import Path

    from tests.faults.model import LOSS, Fault
    from tests.faults.runner import Campaign
    from tests.support import ARTEMIS, copy_tree

    bindings = ARTEMIS / "messages" / "02_broker_mixed_compacted" / "bindings"
    if not bindings.is_dir():
        pytest.skip("the broker-written fixtures (the store's bindings journal) are not on this machine")
    store = copy_tree(Path(__file__).resolve().parents[1] / "data" / "artemis" / "pair-tx", tmp_path / "pair-tx")
    copy_tree(bindings, store / "bindings")
    data9 = "journal/activemq-data-9.amq"
    with Campaign("pair-tx", store) as c:
        o = c.judge(Fault("zero", data9, 10440, (store / data9).stat().st_size - 10440))
    assert (o.truth, o.verdict, o.codes) == (LOSS, "CRITICAL", ("damaged-tail",))
    assert (o.diff["lost"], o.diff["back"]) == (7, 2)
    Fault("zero", data9, 10440, (store / data9).stat().st_size - 10440).apply(store)
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect

    (tail,) = [f for f in verify_store(detect(store)).findings if f.code == "damaged-tail"]
    lost = tail.details["lostIds"]
    assert (lost["openTransactions"], lost["rolledBackIds"], lost["unaccountedCount"]) == ([2147483951], [], 8)
