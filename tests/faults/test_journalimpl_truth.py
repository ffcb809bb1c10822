"""The campaign's truth accepts what the real Artemis JournalImpl writes: a pristine store it called "no broker
writes this" would make every loss on it "proven" and demand CRITICAL for it. The stores are kept under
tests/data/artemis (written by tools/Writer.java driving JournalImpl, README there), with what JournalImpl
loads from them (``oracle-load.jsonl``)."""
from __future__ import annotations

import json
import shutil

import pytest

from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.faults import artemis
from tests.faults.runner import verify_verdict
from tests.support import MESSAGES, REPO

DATA = REPO / "tests" / "data" / "artemis"
# the writer routed to the queues of this real broker's bindings journal, left out of the kept stores (3 MiB)
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"


@pytest.fixture
def store(tmp_path, request):
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    root = tmp_path / request.param
    shutil.copytree(DATA / request.param / "journal", root / "journal")
    shutil.copytree(BINDINGS, root / "bindings")
    return root


@pytest.mark.parametrize("store", ["reclaimed-pool2", "reclaimed-room"], indirect=True)
def test_the_truth_accepts_a_healthy_journalimpl_store(store):
    # reclaimed-room: activemq-data-22.amq ends with room for the first record of the next data file, 24: the
    # record that did not fit went to 23, which the reclaimer freed and the pool of 2 deleted. The truth
    # read the room as a deleted file ("room left for the next file's first record").
    assert artemis.broker_could_write(store) == ""
    assert verify_verdict(store)[0] in ("OK", "WARNING")


def test_reclaimed_room_loads_like_journalimpl():
    lines = [json.loads(x) for x in (DATA / "reclaimed-room" / "oracle-load.jsonl").read_text().splitlines()]
    records, info = lines[:-1], lines[-1]
    with open_journal(detect(DATA / "reclaimed-room" / "journal").journals()[0]) as opened:
        result = load_journal(opened)
        mine = [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
                 "compactCount": r.compact_count, "len": r.body_len, "sha256": result.body_sha256(r)}
                for r in result.live]
    assert mine == records
    assert [f"{f.name}#{f.file_id}" for f in result.data_files] == info["dataFileNames"]
    ids = [f.file_id for f in result.data_files]
    assert 22 in ids and 23 not in ids and 24 in ids  # the gap the room lies before


def test_a_duplicated_file_takes_a_name_the_journal_does_not_have(tmp_path):
    # a real journal's names pass 99 (fileIDs only grow): the duplicate fault copied a file onto
    # activemq-data-99.amq, the journal's own file, and the campaign died of shutil.SameFileError
    import random

    journal = tmp_path / "journal"
    shutil.copytree(DATA / "reclaimed-room" / "journal", journal)
    (journal / "activemq-data-63.amq").rename(journal / "activemq-data-99.amq")
    sites = artemis.ArtemisSites.read(tmp_path)
    faults = [f for f in (sites.draw(random.Random(s)) for s in range(3000)) if f.kind == "duplicate"]
    assert faults
    names = {p.name for p in journal.iterdir()}
    assert all(f.other.rsplit("/", 1)[-1] not in names for f in faults)
    assert {f.other.rsplit("/", 1)[-1] for f in faults} == {"activemq-data-100.amq"}


def test_a_negative_file_id_is_read_first_not_skipped(tmp_path):
    # seed 9102043306048001 (b07, activemq-data-42.amq@8 ^0x80): JournalImpl.readFileHeader refuses no fileID
    # and orderFiles sorts by the whole 64-bit one, so the broker reads the file first, its records tagged by
    # the low 31 bits (JournalFileImpl). The truth skipped it, as verify's load does, and called the fault a
    # loss of the file's records (4 rows of prepared transactions); the real JournalImpl loads the same records.
    from amqtool.store.journal_files import with_negative_ids
    from tests.support import oracle_load

    journal = tmp_path / "journal"
    shutil.copytree(DATA / "reclaimed-pool2" / "journal", journal)
    with open(journal / "activemq-data-30.amq", "r+b") as f:
        f.seek(8)
        f.write(b"\x80")
    records, info = oracle_load(DATA / "reclaimed-pool2" / "oracle-load-30-negative.jsonl")
    with open_journal(detect(journal).journals()[0]) as skipping, with_negative_ids(skipping) as opened:
        assert [s.code for s in skipping.skipped] == ["bad-file-id"] and not opened.skipped
        result = load_journal(opened)
        mine = [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
                 "compactCount": r.compact_count, "len": r.body_len, "sha256": result.body_sha256(r)}
                for r in result.live]
        assert result.files[0].name == "activemq-data-30.amq"
        assert mine == records
        assert [(t.tx_id, len(t.records)) for t in result.prepared] == [(p[0], p[1]) for p in info["preparedTxs"]]


@pytest.mark.parametrize("store", ["reclaimed-pool2"], indirect=True)
def test_a_negative_file_id_whose_order_changes_nothing_is_no_loss(store):
    # the same fault with the real broker's bindings beside: what the broker delivers is what it delivered
    # (the truth said loss: the skipped file's live records), and verify's bad-file-id is a warning
    with open(store / "journal" / "activemq-data-30.amq", "r+b") as f:
        pristine = artemis.delivered(store)
        f.seek(8)
        f.write(b"\x80")
    assert artemis.delivered(store) == pristine
    assert verify_verdict(store) == ("WARNING", ("bad-file-id",))
