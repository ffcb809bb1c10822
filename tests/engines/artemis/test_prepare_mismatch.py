"""A prepared (XA) transaction whose PREPARE no longer counts its records: the broker rolls the in-doubt
transaction back at start (JournalImpl.checkTransactionHealth -> failedTransaction), which no crash leaves, so
losing what it held is proven (prepare_mismatch.py)."""
from __future__ import annotations

from amqtool.formats.artemis.records import scan_records_py
from tests.faults.artemis import delivered
from tests.faults.campaign_fixtures import pristine, store  # noqa: F401 - fixtures
from tests.faults.stores import messages_files
from tests.support import flip_byte


def test_a_prepared_transactions_record_with_a_damaged_transaction_id_loses_the_transaction(run_json, store):
    # make fuzz seed 4314 (r2-big-tx, written by JournalImpl, seed 4314022942030032): a bit of the transaction id
    # of an ADD_TX of a prepared transaction flipped; its PREPARE then counts one record more than its file holds,
    # the broker discards the transaction and its 3 messages. Verify said WARNING prepare-count-mismatch.
    found = None
    for path, tag, version in messages_files(store):
        recs, _ = scan_records_py(path.read_bytes(), tag, version)
        prepared = {r[4] for r in recs if r[0] == 17}
        known = {r[4] for r in recs}
        adds = [r for r in recs if r[0] == 13 and r[4] in prepared and r[6] in (31, 45)]
        if adds:
            found = path, adds[0], next(k for k in range(8) if adds[0][4] ^ (1 << k) not in known)
            break
    assert found, "no prepared transaction adding a message in the demo store"
    path, rec, bit = found
    before = delivered(store)
    flip_byte(path, rec[1] + 6 + 7, 1 << bit)  # the low byte of its transaction id (type, tag, compactCount)
    assert before.diff(delivered(store))["lost"] > 0
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "prepare-count-mismatch"]
    assert (code, doc["verdict"], f["severity"], f["details"]["txId"]) == (2, "CRITICAL", "critical", rec[4])
