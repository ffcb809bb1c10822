"""DUPLICATE_ID records (user type 37, ``DuplicateIDEncoding``) the broker cannot decode: ``loadMessageJournal``
rethrows what the decode throws, and the broker does not start (verify: CRITICAL ``record-undecodable``). Verify
said OK before: nothing decoded those records as the broker does."""
from __future__ import annotations

import pytest

from tests.support import MESSAGES, copy_tree, flip_byte

MIXED = MESSAGES / "02_broker_mixed_compacted"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s2", 2)


def _duplicate_ids(store):
    """(path, body offset, body length, record id) of each live DUPLICATE_ID record of the store."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        return [(result.files[r.file_index].path, r.body_offset, r.body_len, r.id)
                for r in result.live if r.user_record_type == 37]


@pytest.mark.parametrize("source", ["demo", "mixed"])
@pytest.mark.parametrize("where, mask", [("address length", 0x80), ("address length", 0x01), ("id length", 0x40)])
def test_a_duplicate_id_the_broker_cannot_decode_is_critical(run_json, request, tmp_path, source, where, mask):
    # 0x80 in the address length's top byte: negative (NegativeArraySizeException); 0x01 there or 0x40 in the
    # id length: past the body (IndexOutOfBoundsException)
    if source == "mixed" and not MIXED.is_dir():
        pytest.skip("broker-written fixture not found")
    store = copy_tree(MIXED if source == "mixed" else request.getfixturevalue(source), tmp_path / "s")
    path, body, size, rid = _duplicate_ids(store)[0]
    at = body
    if where == "id length":
        at = body + 4 + int.from_bytes(path.read_bytes()[body:body + 4], "big")
    flip_byte(path, at, mask)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    crit = [f for f in doc["findings"] if f["severity"] == "critical"]
    assert [f["code"] for f in crit] == ["record-undecodable"]
    assert (crit[0]["path"], crit[0]["offset"], crit[0]["details"]["recordIds"]) == (str(path), body, [rid])


def test_a_duplicate_id_whose_lengths_still_fit_is_no_refusal(run_json, tmp_path, demo):
    # the id length's lowest set bit cleared: the decode reads a shorter id and leaves bytes (Java reads no
    # further): a changed cache entry, no refusal
    store = copy_tree(demo, tmp_path / "s")
    path, body, size, rid = _duplicate_ids(store)[0]
    at = body + 4 + int.from_bytes(path.read_bytes()[body:body + 4], "big") + 3
    n = path.read_bytes()[at]
    assert n
    flip_byte(path, at, n & -n)
    code, doc, _ = run_json("verify", store)
    assert "record-undecodable" not in [f["code"] for f in doc["findings"]]


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


@pytest.mark.parametrize("seed, label", [(4303012909000201, "record 11 bodysize"), (4303012909000069, "truncation")])
def test_a_lost_duplicate_id_record_is_critical(demo_s1, seed, label):
    # Seed 4303, once the truth counted the duplicate-detection cache: 20 loss/WARNING whose only loss was a
    # DUPLICATE_ID record. Verify weighed that record as bookkeeping (evidence._BOOKKEEPING), harmless; the broker
    # loads it into the address's cache and accepts a resend without it. The first: one such record of an older
    # file damaged (damaged-record). The second: a cut of an older file that took a message and the
    # duplicate-id record of the first message after the cut, whose id (issued after that message's, written
    # before it) lies just past the window's bound (tails.REORDER).
    from tests.faults.campaign import reproduce
    from tests.faults.model import LOSS

    o = reproduce(demo_s1, seed)
    assert o.fault.label == label
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and o.diff["caches"] == 1


@pytest.mark.parametrize("mask", [0x01, 0x02, 0x04, 0x08, 0x10, 0x05, 0x07])
def test_a_duplicate_id_record_retyped_is_critical(run_json, demo, tmp_path, mask):
    # seed 25 (tests/faults/test_campaign.py), once the truth counted the cache: a DUPLICATE_ID's user record
    # type flipped 37 -> 36 (SET_SCHEDULED_DELIVERY_TIME as an add), which the load drops: verify said OK. Each
    # known type one bit from 37 loses the entry the same way (retyped_dupids.py), and so do 32 (ADD_REF) and 34
    # (UPDATE_DELIVERY_COUNT), which a damaged byte of any value reaches (sweep seed 9546: both judged OK)
    from tests.faults import artemis
    from tests.faults.model import LOSS, UNPROVEN, classify

    store = copy_tree(demo, tmp_path / "s")
    path, body, size, rid = _duplicate_ids(store)[0]
    flip_byte(path, body - 1, mask)  # the user record type byte, just before the body
    truth, diff = classify(artemis.delivered(demo), artemis.delivered(store), lambda d: False,
                           lambda: bool(artemis.broker_could_write(store)), moved=True)
    # 36, 33, 32 and 34 are written only as updates (the harness's oracle proves the damage); an add of 39, 45 or 53 is
    # one a broker writes: the loss is unproven there, and CRITICAL is still a right verdict
    assert (truth, diff["caches"]) == (LOSS if mask in (0x01, 0x04, 0x05, 0x07) else UNPROVEN, 1)
    code, doc, _ = run_json("verify", store)
    crit = [f for f in doc["findings"] if f["severity"] == "critical"]
    assert code == 2 and "duplicate-id-retyped" in [f["code"] for f in crit]
    (f,) = [f for f in crit if f["code"] == "duplicate-id-retyped"]
    assert (f["path"], f["offset"], f["details"]["recordIds"]) == (str(path), body, [rid])
