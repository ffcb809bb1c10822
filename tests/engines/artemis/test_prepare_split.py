"""A PREPARE split from its transaction by a damaged transaction id (issue 25, prepare_mismatch.py,
unknown_commits.ended_open_tx).

The PREPARE then names a transaction with no records (``prepare-count-mismatch``, found 0), and the in-doubt
transaction it prepared is left open: the broker rolls it back at start and loses what it added. verify left the
mismatch a WARNING when that transaction's records spanned two files, since only an open transaction wholly in
the PREPARE's file was weighed with it. The field sweep of end records' transaction ids over new real
JournalImpl stores found it (bench/fuzz_fields.py --fields end-tx, seed 9613, h15: 7 messages lost, WARNING).

On tests/data/artemis/rolled-back-tail: transaction 2147484252 is prepared at activemq-data-23.amq@2788, counting
4 records of that file; its first records lie in activemq-data-22.amq.
"""
from __future__ import annotations

from tests.engines.artemis.pool2 import flipped
from tests.support import REPO

STORE = REPO / "tests" / "data" / "artemis" / "rolled-back-tail"
PREPARE, TX = 2788, 2147484252


def _check(data):
    assert data[PREPARE] == 17 and data[PREPARE + 6:PREPARE + 14] == TX.to_bytes(8, "big")
    assert int.from_bytes(data[PREPARE + 14:PREPARE + 18], "big") == 4


def test_a_prepare_whose_id_was_damaged_loses_the_transaction_it_prepared(tmp_path, run_json):
    # the low byte of the PREPARE's transaction id, 0x5c -> 0xaf: no other transaction has that id
    root, diff = flipped(tmp_path, "activemq-data-23.amq", PREPARE + 13, 0xf3, _check, store=STORE)
    assert diff["lost"] > 0  # the broker rolls the open transaction back
    code, doc, _ = run_json("verify", str(root))
    (found,) = [f for f in doc["findings"] if f["code"] == "prepare-count-mismatch"]
    assert (found["severity"], found["details"]["found"], found["details"]["preparedTx"]) == ("critical", 0, TX)
    assert code == 2
