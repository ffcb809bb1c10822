"""The campaign's truth of a bare JournalImpl journal (tests/faults/journal_truth.py): what JournalImpl.load gives
(the committed live records, the prepared transactions), not what a broker delivers, which is nothing for a
journal of user record types 101..105 (every fault read "same": a record lost was same/CRITICAL)."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.records import ADD, DELETE
from tests.faults import journal_truth
from tests.faults.artemis import DeliveredReader
from tests.faults.campaign_fixtures import pristine, store  # noqa: F401 - fixtures
from tests.faults.model import CONTENT, LOSS, UNPROVEN, Fault
from tests.faults.runner import Campaign
from tests.support import ORACLE

pytestmark = pytest.mark.skipif(not ORACLE.is_dir(), reason="JournalImpl-written fixtures absent")


def _campaign(name: str) -> Campaign:
    return Campaign(name, ORACLE / name)


def test_a_bare_journal_is_judged_by_its_load_a_broker_store_by_what_it_delivers(pristine):
    assert journal_truth.bare_journal(ORACLE / "02_add_update_delete")
    assert journal_truth.bare_journal(ORACLE / "06_bindings" / "journal")  # a bindings journal of types 101..105
    assert not journal_truth.bare_journal(pristine)
    assert isinstance(journal_truth.reader(pristine), DeliveredReader)
    d = journal_truth.loaded(ORACLE / "03_transactions")
    # the manifest: 79 live entries, prepared 1003 (5 records, 1 to delete) and 1010 (empty)
    assert sum(n for k, n in d.rows.items() if k[1] == "record") == 79
    assert {k[2] for k in d.rows if k[1] == "prepared"} == {1003, 1010}
    assert sum(n for k, n in d.rows.items() if k[1] == "prepared-record" and k[2] == 1003) == 5


def _live_add(c: Campaign, current: bool = False):
    live = {k[2] for k in c.pristine.rows if k[1] == "record"}
    for jf in c.sites.journals["messages"]:
        if jf.current == current:
            for r in jf.records:
                if r[0] == ADD and r[5] in live and r is not jf.records[0]:
                    return jf, r
    raise AssertionError("no live add")


def test_a_record_lost_from_an_older_file_is_loss():
    with _campaign("02_add_update_delete") as c:
        jf, r = _live_add(c)
        # its record type damaged: JournalImpl skips the record (readJournalFile moves on a byte at a time)
        o = c.judge(Fault("flip", jf.rel, r[1], 0x40, "", "record type"))
        assert (o.truth, o.diff["lost"], o.verdict, o.ok) == (LOSS, 1, "CRITICAL", True)
        # the broker's truth saw nothing: no message, no queue in a journal of user type 101
        assert not DeliveredReader(c.root).pristine.rows
        # the whole record zeroed: JournalImpl writes a file's records back to back, and AIO pads only up to a block
        # the next record starts, so zeros there are damage (load.file_gaps) -- once read as padding, unproven
        o = c.judge(Fault("zero", jf.rel, r[1], r[2], "", "record"))
        assert (o.truth, o.diff["lost"], o.verdict, o.ok) == (LOSS, 1, "CRITICAL", True)


def test_a_deleted_record_brought_back_is_loss():
    with _campaign("02_add_update_delete") as c:
        dead = {r[5] for jf in c.sites.journals["messages"] for r in jf.records if r[0] == ADD} - {
            k[2] for k in c.pristine.rows if k[1] == "record"}
        jf, r = next((jf, r) for jf in c.sites.journals["messages"] if not jf.current for r in jf.records
                     if r[0] == DELETE and r[5] in dead)
        # the delete's type byte turned into an update's: JournalImpl reads it as another record, the add is live
        o = c.judge(Fault("flip", jf.rel, r[1], DELETE ^ ADD, "", "record type"))
        assert o.truth == LOSS and o.diff["back"] >= 1, o


def test_a_flipped_body_byte_is_content():
    with _campaign("02_add_update_delete") as c:
        jf, r = _live_add(c)
        body = r[1] + r[2] - 4 - r[7]  # the body runs up to the trailing size word
        o = c.judge(Fault("flip", jf.rel, body + 3, 0x10, "", "record body"))
        assert (o.truth, o.diff["lost"], o.diff["back"], o.diff["content"]) == (CONTENT, 0, 0, 2)


def test_a_crash_cut_of_the_current_files_last_record_is_a_torn_tail():
    with _campaign("05b_torn_tail_truncated") as c:
        jf = next(f for f in c.sites.journals["messages"] if f.current)
        r = jf.records[-1]
        o = c.judge(Fault("truncate", jf.rel, r[1] + r[2] // 2, 0, "", "truncation"))
        # a crash's tail (ArtemisSites.torn) that the oracle finds a JournalImpl could have written: the classes
        # of model.classify for a torn tail that leaves no store-wide trace; WARNING is the rule's verdict
        assert (o.truth, o.diff["lost"], o.verdict, o.ok) == (UNPROVEN, 1, "WARNING", True)
        # its last 7 bytes zeroed (how 05a_torn_tail_zeroed was made): a zeroed run starting inside a 4 KiB block
        # the record's head was written to is no crash's (amqtool/formats/artemis/torn_write.py): proven loss
        o = c.judge(Fault("zero", jf.rel, r[1] + r[2] - 7, 7, "", "zeroed range"))
        assert (o.truth, o.verdict) == (LOSS, "CRITICAL")
