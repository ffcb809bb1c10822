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
