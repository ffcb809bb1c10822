"""Records lost from the end of a file that ends cleanly (clean_end.py).

The pagejdbc lane's sweep of demo-s1 found zeroed ends of older files that start exactly at a record's start
reading OK, loss (31 of 47); a sweep of 500 such faults (zeroed from a record's start to the data's end, or
cut there) over two demos and 18 JournalImpl stores, seed 8801: loss/OK 153. The damaged store shows no
damaged byte, but the broker moves to a new file only for a record that does not fit, and fills every file
to its size before use."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    with Campaign("demo-s1", campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)) as c:
        yield c


def _judged(campaign, fault):
    outcome, found = campaign.judge_findings(fault)
    return outcome, [f for f in found if f.details.get("cleanEnd")]


def _record_at_or_after(campaign, rel: str, offset: int):
    (jf,) = [f for f in campaign.sites.journals["messages"] if f.rel == rel]
    return jf, next(r for r in jf.records if r[1] >= offset)


def test_zeros_from_a_records_start_to_the_end_leave_room_for_the_next_files_first_record(demo_s1):
    jf, rec = _record_at_or_after(demo_s1, "data/journal/activemq-data-4.amq", 11252)
    outcome, (found,) = _judged(demo_s1, Fault("zero", jf.rel, rec[1], jf.data_end - rec[1], label="z"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.offset == rec[1] and found.details["recordsLost"]
    assert found.details["freeBytes"] >= found.details["nextRecordSize"]


def test_a_file_cut_at_a_records_start(demo_s1):
    jf, rec = _record_at_or_after(demo_s1, "data/journal/activemq-data-4.amq", 11252)
    outcome, (found,) = _judged(demo_s1, Fault("truncate", jf.rel, rec[1], label="cut"))
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert found.details["cut"] and found.offset == rec[1]


def test_the_last_record_zeroed_leaves_no_room_the_next_file_needed(demo_s1):
    # activemq-data-4.amq's last record (31 bytes, ending at 65249 of 65536) zeroed: the 318 bytes then free did
    # not hold the next file's first record either (the broker moved on for it), so nothing shows the loss, and
    # nothing is claimed (the truth: a store the broker could have written, loss-unproven)
    jf = next(f for f in demo_s1.sites.journals["messages"] if f.rel.endswith("activemq-data-4.amq"))
    last = jf.records[-1]
    assert (last[2], jf.data_end) == (31, 65249)
    outcome, found = _judged(demo_s1, Fault("zero", jf.rel, last[1], last[2], label="z"))
    assert (outcome.truth, outcome.verdict, found) == ("loss-unproven", "OK", [])


@pytest.mark.parametrize("name", ["reclaimed-room", "interrupted-cmp", "free-files", "reclaimed-pool2",
                                  "restart-orphan", "pair-tx", "compacted-dead", "stale-tail"])
def test_no_store_the_broker_wrote_shows_it(name):
    # reclaimed-room's activemq-data-22.amq ends with room for its next data file's first record, but the record
    # that did not fit went to file 23, since freed: only the next fileID counts
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect
    from tests.support import REPO

    report = verify_store(detect(REPO / "tests" / "data" / "artemis" / name))
    assert not [f for f in report.findings if f.details and f.details.get("cleanEnd")]


def test_a_damaged_compact_count_is_no_plain_first_record(tmp_path):
    # The compactor's outputs end wherever its data ended, so room after one proves nothing when the next file's
    # first record carries a compactCount (the compactor wrote it). With that count's high bit flipped (2 ->
    # -126, a byte no compaction writes; the broker reads the record as before), the rule took the record for
    # one a plain write moved on for, and called the room lost records: CRITICAL damaged-tail, where the broker
    # delivers what it did. Found by the campaign over new real JournalImpl stores (bench/fuzz_verdicts.py
    # --stores /work/holdout2/h1*, seed 9611, h16 9611033834015131).
    import shutil

    from amqtool.engines.artemis.clean_end import room_left
    from amqtool.engines.artemis.load import load_journal
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect
    from tests.support import REPO

    root = tmp_path / "store"
    shutil.copytree(REPO / "tests" / "data" / "artemis" / "compactor-prepare-end", root)
    data = root / "journal" / "activemq-data-115.amq"
    raw = bytearray(data.read_bytes())
    assert raw[16] == 13 and raw[21] == 2  # an ADD_TX; type, fileID (4), compactCount
    raw[21] ^= 0x80
    data.write_bytes(bytes(raw))
    with open_journal(detect(root / "journal").journals()[0]) as opened:
        result = load_journal(opened)
        assert [f.file_id for f in result.files] == [6, 7]
        assert room_left(result, 0, 10961, False) is None
    report = verify_store(detect(root / "journal"))
    assert not [f for f in report.findings if f.code == "damaged-tail"], report.findings
