"""verify on a bare JournalImpl journal (user record types 101..105, as JournalImpl's own tests write: the oracle
fixtures): damaged bytes are judged by what ``JournalImpl.load`` returns, records by id (evidence.py,
``Evidence.bare``), not by the broker's record types, which no record there has (every damaged record was "at
least one record was lost here", CRITICAL, and a lost DELETE "changes nothing", WARNING). The harness's truth
for such a journal: tests/faults/journal_truth.py; campaign seed 7601 over the oracle stores."""
from __future__ import annotations

import shutil

import pytest

from amqtool.formats.artemis.records import ADD, DELETE, scan_records_py
from tests.faults.runner import verify_verdict
from tests.support import ORACLE

pytestmark = pytest.mark.skipif(not ORACLE.is_dir(), reason="JournalImpl-written fixtures absent")


def _records(path, tag):
    return scan_records_py(path.read_bytes(), tag, 2)[0]


def _flip(path, offset: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


@pytest.fixture
def store(tmp_path):
    return shutil.copytree(ORACLE / "02_add_update_delete", tmp_path / "s")


def test_a_damaged_add_of_a_deleted_record_changes_nothing(store):
    # 02: ids 1..40 were deleted (their DELETEs in file 2); seed 7601023803003047 flipped the tag of one's ADD
    f1 = store / "journal" / "activemq-data-1.amq"
    rec = next(r for r in _records(f1, 1) if r[0] == ADD and r[5] == 29)
    _flip(f1, rec[1] + 2, 0x02)
    verdict, codes = verify_verdict(store)
    assert (verdict, codes) == ("WARNING", ("damaged-record",))


def test_a_damaged_delete_of_a_record_still_in_the_files_brings_it_back(store):
    # seed 7601023803003000: a DELETE's checkSize damaged; JournalImpl skips it, the record it deleted is live
    f1, f2 = (store / "journal" / f"activemq-data-{i}.amq" for i in (1, 2))
    added = {r[5] for r in _records(f1, 1) if r[0] == ADD}
    rec = next(r for r in _records(f2, 2) if r[0] == DELETE and r[5] in added)
    _flip(f2, rec[1] + rec[2] - 2, 0x20)
    verdict, codes = verify_verdict(store)
    assert (verdict, codes) == ("CRITICAL", ("damaged-record",))


def test_a_damaged_update_of_a_live_record_is_lost(store):
    f2 = store / "journal" / "activemq-data-2.amq"
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).journals()[0]) as opened:
        live = {r.id for r in load_journal(opened).live}
    recs = _records(f2, 2)
    rec = next(r for r in recs[1:] if r[0] == 12 and r[5] in live)
    _flip(f2, rec[1], 0x40)  # its record type: skipped byte by byte
    assert verify_verdict(store)[0] == "CRITICAL"


@pytest.fixture
def bindings(tmp_path):
    return shutil.copytree(ORACLE / "06_bindings" / "journal", tmp_path / "j")


def test_a_lost_commit_at_the_current_files_end_discards_what_its_transaction_added(bindings):
    # seed 7602029806021153: the COMMIT of transaction 500 (ids 501, 502) retyped; it ends the current file, no
    # crash leaves a changed type byte, and JournalImpl.load drops the transaction: two records lost
    f = bindings / "activemq-bindings-1.bindings"
    commit = next(r for r in _records(f, 1) if r[0] == 18)
    _flip(f, commit[1], 0x10)
    assert verify_verdict(bindings) == ("CRITICAL", ("damaged-tail",))


def test_a_record_of_the_current_file_zeroed_from_inside_is_lost(bindings):
    # seed 7601027803015177: zeros from inside a record to the end of the current file's records; no crash
    # leaves a zeroed run starting inside a 4 KiB block the record's head was written to
    f = bindings / "activemq-bindings-1.bindings"
    recs = _records(f, 1)
    rec = recs[len(recs) // 2]
    data = bytearray(f.read_bytes())
    end = recs[-1][1] + recs[-1][2]
    data[rec[1] + 34:end] = bytes(end - rec[1] - 34)
    f.write_bytes(bytes(data))
    assert verify_verdict(bindings) == ("CRITICAL", ("damaged-tail",))


def _tx_record(store, rtype: int, tx_id: int):
    for i in (1, 2, 3):
        f = store / "journal" / f"activemq-data-{i}.amq"
        for r in _records(f, i):
            if r[0] == rtype and r[4] == tx_id:
                return f, r
    raise AssertionError(f"no record of type {rtype} in transaction {tx_id}")


@pytest.fixture
def transactions(tmp_path):
    return shutil.copytree(ORACLE / "03_transactions", tmp_path / "t")


def test_a_lost_prepare_of_a_transaction_rolled_back_since_changes_nothing(transactions):
    # seed 7602024806006076: tx 1006 was prepared, then rolled back; its PREPARE's checkSize damaged
    f, prepare = _tx_record(transactions, 17, 1006)
    _flip(f, prepare[1] + prepare[2] - 2, 0x80)
    assert verify_verdict(transactions) == ("WARNING", ("damaged-record",))


def test_a_lost_rollback_of_a_prepared_transaction_brings_it_back(transactions):
    # seed 7602024806006131: tx 1006's ROLLBACK retyped; JournalImpl.load hands tx 1006 back as prepared
    f, rollback = _tx_record(transactions, 19, 1006)
    _flip(f, rollback[1], 0x80)
    assert verify_verdict(transactions) == ("CRITICAL", ("damaged-record",))


def test_a_lost_update_of_a_record_a_prepared_transaction_deletes_is_lost(tmp_path):
    # seed 7602025806009060: 04a's tx 2001, left prepared, deletes record 15: a DELETE_TX deletes nothing until
    # its commit, so 15 is live and the damaged update of it (tag flipped) is a live entry lost (was "changes
    # nothing": its id read as deleted)
    store = shutil.copytree(ORACLE / "04a_before_compact", tmp_path / "s")
    f = store / "journal" / "activemq-data-3.amq"
    recs = _records(f, 3)
    rec = next(r for r in recs[1:] if r[0] == 12 and r[5] == 15)
    _flip(f, rec[1] + 2, 0x20)
    assert verify_verdict(store) == ("CRITICAL", ("damaged-record",))


def test_a_negative_file_id_read_first_to_the_same_records_is_a_warning(tmp_path):
    # seed 7601025803009178: 04a's activemq-data-3.amq's fileID made negative; JournalImpl loads the file first
    # (its records tagged by the low bits). This was CRITICAL, read as bringing deleted records back against
    # the file skipped; the real JournalImpl (oracle.sh load) returns the same 71 records as from the pristine
    # journal, in another order, and the same prepared transaction: the file's place changed, nothing loaded
    store = shutil.copytree(ORACLE / "04a_before_compact", tmp_path / "s")
    _flip(store / "journal" / "activemq-data-3.amq", 8, 0x80)
    assert verify_verdict(store) == ("WARNING", ("bad-file-id",))


def test_a_lost_prepare_of_a_transaction_committed_since_changes_nothing(transactions):
    # seed 7604024812006048: tx 1005 was prepared, then committed; its PREPARE's tag damaged: the COMMIT applies
    # the transaction's records either way
    f, prepare = _tx_record(transactions, 17, 1005)
    _flip(f, prepare[1] + 2, 0x08)
    assert verify_verdict(transactions) == ("WARNING", ("damaged-record",))


def test_a_lost_add_whose_id_only_an_uncommitted_transaction_deletes_is_lost(transactions):
    # seed 7604024812006006: record 13's ADD (checkSize damaged); the DELETE_TX naming 13 is in a transaction
    # never committed, so 13 was live: JournalImpl.load's user loses it (was "its id is deleted")
    f = transactions / "journal" / "activemq-data-1.amq"
    rec = next(r for r in _records(f, 1) if r[0] == ADD and r[5] == 13)
    _flip(f, rec[1] + rec[2] - 1, 0x80)
    assert verify_verdict(transactions) == ("CRITICAL", ("damaged-record",))
