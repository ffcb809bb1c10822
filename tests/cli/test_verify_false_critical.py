"""False CRITICALs where nothing is lost (issue 25): faults of the in-suite campaign (tests/faults/, seed 25)
whose truth is "same" (the broker delivers what it delivered before), replayed on a copy of the broker-written
compacted store, each held to its verdict and finding. A CRITICAL must be proven by the store's evidence."""
from __future__ import annotations

import pytest

from tests.support import MESSAGES, copy_tree, flip_byte

STORE = MESSAGES / "02_broker_mixed_compacted"

pytestmark = pytest.mark.skipif(not STORE.is_dir(), reason="broker-written fixture absent")


def _findings(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


@pytest.mark.parametrize("victim", ["journal/activemq-data-5.amq", "bindings/activemq-bindings-2.bindings"])
def test_an_emptied_file_of_a_compacted_journal_with_no_orphans_is_a_warning(run_json, tmp_path, victim):
    # campaign seeds 25002075006029 and 25002075006085: data-5 is a free file the compaction reinitialised
    # (a header, no records), bindings-2 holds one superseded record; Artemis deletes a short file at start
    store = copy_tree(STORE, tmp_path / "s")
    (store / victim).write_bytes(b"")
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "short-file")
    assert (code, doc["verdict"], f["severity"]) == (1, "WARNING", "warning")
    assert "compacted" in f["message"]


def test_an_emptied_file_whose_loss_the_journal_shows_stays_critical(run_json, tmp_path):
    # data-6 held the adds of records the other file still updates: live updates without their add
    store = copy_tree(STORE, tmp_path / "s")
    (store / "journal/activemq-data-6.amq").write_bytes(b"")
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "short-file")
    assert (code, f["severity"]) == (2, "critical")


@pytest.mark.parametrize("victim,mask", [("journal/activemq-data-8.amq", 0xF5),
                                         ("bindings/activemq-bindings-4.bindings", 0x80)])
def test_a_negative_file_id_on_a_free_file_is_a_warning(run_json, tmp_path, victim, mask):
    # campaign seeds 25002075006084 and 25002075006247: the high byte of a free file's header fileID (no
    # records of its own): whether the broker loads it first or in its place, nothing changes
    store = copy_tree(STORE, tmp_path / "s")
    flip_byte(store / victim, 8, mask)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "bad-file-id")
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (1, "WARNING", "warning", 8)


def test_a_negative_file_id_on_a_file_of_live_records_is_read_first(run_json, tmp_path):
    # This was CRITICAL, the file's live records taken for skipped. The real JournalImpl (oracle.sh load) reads
    # the file first and loads the same records and prepared transaction as from the pristine journal; the
    # large messages its records hold are no orphans either (this load reads them too).
    store = copy_tree(STORE, tmp_path / "s")
    flip_byte(store / "journal/activemq-data-7.amq", 8, 0x80)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "bad-file-id")
    assert (code, f["severity"]) == (1, "warning")
    assert [x["code"] for x in doc["findings"] if x["severity"] != "info"] == ["bad-file-id"]


@pytest.fixture(scope="module")
def demo_s2(tmp_path_factory):
    """The campaign's second demo store (tests/faults/campaign.py pristine_stores): data-2.amq is a reused
    file (header fileID 3), so fileID 2 is missing and explained by that reuse."""
    from tests.faults.stores import demo

    return demo(tmp_path_factory.mktemp("demo") / "demo-s2", 3 << 20, seed=2, file_size=64 * 1024)


@pytest.mark.parametrize("mask", [0x10, 0x02])
def test_a_damaged_high_header_byte_leaves_no_file_id_gap(run_json, tmp_path, demo_s2, mask):
    # campaign seeds 25001076003251 and 25001077003113: the header's high byte flipped; the file's records
    # still carry fileID 3, which the gap check counted as missing (CRITICAL missing-journal-file)
    store = copy_tree(demo_s2, tmp_path / "s")
    victim = store / "data/journal/activemq-data-2.amq"
    flip_byte(victim, 8, mask)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (1, "WARNING")
    (f,) = _findings(doc, "file-id-damaged")
    assert (f["severity"], f["path"], f["details"]["recordTag"]) == ("warning", str(victim), 3)
    (gap,) = _findings(doc, "file-id-gap")
    assert gap["details"]["missingFileIds"] == [2] and not _findings(doc, "missing-journal-file")


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    """The campaign's first demo store (tests/faults/campaign.py pristine_stores)."""
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1")


@pytest.mark.parametrize("offset,mask,rid", [(51610, 0x40, 432), (51470, 0x01, 431)])
def test_a_damaged_record_of_a_rolled_back_transaction_is_a_warning(run_json, tmp_path, demo_s1, offset, mask,
                                                                    rid):
    # campaign seeds 25000075000203 and 25000077000040: records of transaction 430, which a ROLLBACK in the
    # same file ends; the broker never applies them, so losing one changes nothing
    store = copy_tree(demo_s1, tmp_path / "s")
    victim = store / "data/journal/activemq-data-11.amq"
    flip_byte(victim, offset, mask)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-record")
    assert (code, doc["verdict"], f["severity"], f["path"]) == (1, "WARNING", "warning", str(victim))
    assert f"record {rid} " in f["message"] and "transaction 430" in f["message"]


def test_a_damaged_transactional_page_counter_is_a_warning(run_json, tmp_path, demo_s1):
    # campaign seed 25000076000187: the tag of a transactional PAGE_CURSOR_COUNTER_VALUE (40) flipped; its
    # commit then discards the transaction, which held nothing the broker delivers
    store = copy_tree(demo_s1, tmp_path / "s")
    flip_byte(store / "data/journal/activemq-data-16.amq", 12369, 0x08)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-record")
    assert (code, f["severity"], f["offset"]) == (1, "warning", 12365)
    assert "user record type 40" in f["message"]


def test_a_misfiled_reference_of_an_acknowledged_message_is_not_an_ack_without_ref(run_json, tmp_path):
    # campaign seed 25002075006243: the id of message 1027's ADD_REF on queue 9 flipped (bit 44); 1027 is
    # acknowledged on queue 9 (data-7@519693), so the broker delivers the same: no ack-without-ref
    store = copy_tree(STORE, tmp_path / "s")
    flip_byte(store / "journal/activemq-data-7.amq", 194188, 0x10)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (0, "OK") and not _findings(doc, "ack-without-ref")


def test_an_ack_whose_queue_id_was_damaged_stays_critical(run_json, tmp_path, demo_s1):
    # campaign seed 25000075000125 (truth: loss): the ack of message 201 now names queue 4117, one bit from
    # the queue 21 it is still on, where it comes back
    store = copy_tree(demo_s1, tmp_path / "s")
    flip_byte(store / "data/journal/activemq-data-12.amq", 44176, 0x10)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "ack-without-ref")
    assert (code, f["severity"]) == (2, "critical") and "201 on queue 4117" in f["message"]


def test_a_reference_misfiled_onto_a_deleted_id_beside_its_ack_is_ok(run_json, tmp_path, demo_s1):
    # campaign seed 25000075000164: message 155's ADD_REF on queue 19 now names 411 (bit 8), a deleted id
    # with three live messages one bit away; 155 is acknowledged on queue 19 without a reference there, so
    # the one damaged field explains both, and 155 was acknowledged there anyway: nothing is lost
    store = copy_tree(demo_s1, tmp_path / "s")
    flip_byte(store / "data/journal/activemq-data-5.amq", 21161, 0x01)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (0, "OK")
    assert not _findings(doc, "message-record-missing") and not _findings(doc, "ack-without-ref")
