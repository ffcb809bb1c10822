"""A queue binding lost at the zeroed end of a bindings file that is not the newest, whose damaged record's head
survives (amqtool/engines/artemis/lost_binding.py). Real-JournalImpl store small-s13 (make fuzz --stores
artemis-fresh, seed 8888041664045007: loss/WARNING): 512 bytes zeroed from inside the queue binding 26 of the
bindings journal, with nothing in the message journal naming that queue; verify said WARNING ("cannot be
told"). Rebuilt here from the same bindings journal (02_broker_mixed_compacted's, which that store shares) and
the JournalImpl message journal of tests/data/artemis/reclaimed-pool2."""
from __future__ import annotations

import shutil

import pytest

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.support import MESSAGES, REPO

RECLAIMED = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"
REL = "data/bindings/activemq-bindings-3.bindings"


@pytest.fixture
def store(tmp_path):
    if not BINDINGS.is_dir():
        pytest.skip("fixture 02_broker_mixed_compacted missing")
    root = tmp_path / "inst"
    shutil.copytree(RECLAIMED / "journal", root / "data" / "journal")
    shutil.copytree(BINDINGS, root / "data" / "bindings")
    return root


def test_a_zeroed_queue_binding_whose_head_survives_is_critical(run_json, store):
    before = delivered(store)
    Fault("zero", REL, 1324, 512).apply(store)  # from inside queue binding 26 (its record at 1290) on
    assert before.diff(delivered(store))["bindings"] == 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", 1290)
    assert f["details"]["lostBinding"] == {"id": 26, "userRecordType": 21, "txId": 27}


def test_a_binding_deleted_since_is_not_judged_lost(run_json, store):
    # the same damage with the queue's binding deleted in the newest bindings file: its loss changes nothing
    from amqtool.formats.artemis.records import scan_records_py

    newest = store / "data/bindings/activemq-bindings-2.bindings"
    recs, _ = scan_records_py(newest.read_bytes(), 2, 2)
    end = recs[-1][1] + recs[-1][2]
    # a DELETE record (type 16) of id 26 with this file's tag: type, fileID, compactCount, id, size
    with open(newest, "r+b") as f:
        f.seek(end)
        f.write(bytes([16]) + (2).to_bytes(4, "big") + b"\0" + (26).to_bytes(8, "big") + (18).to_bytes(4, "big"))
    Fault("zero", REL, 1324, 512).apply(store)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert "lostBinding" not in f["details"]


def test_a_file_the_compactor_wrote_is_told_by_its_records_compact_count(store, tmp_path):
    # 02_broker_mixed_compacted's bindings-3 is the compactor's output (its records carry compactCount 1); the
    # campaign demo's bindings file was written by the broker's own appends
    from amqtool.engines.artemis.lost_binding import _compacted
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect
    from tests.faults.stores import campaign_demo

    with open_journal(detect(store).bindings) as opened:
        index = next(i for i, f in enumerate(opened.files) if f.path.name == "activemq-bindings-3.bindings")
        assert _compacted(opened, index, 1290) and not _compacted(opened, index, 16)
    demo = campaign_demo(tmp_path / "demo")
    with open_journal(detect(demo).bindings) as opened:
        assert not any(_compacted(opened, i, 1 << 30) for i in range(len(opened.files)))
