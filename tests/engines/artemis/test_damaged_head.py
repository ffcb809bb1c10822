"""What the surviving header of the first record a damaged end took still tells (lost_ack.py, tails.damaged_tx).

* **An acknowledgement (lost_ack.py).** In the campaign's demo-s1, activemq-data-15.amq ends with a burst of
  consumption: ACKNOWLEDGE_REF updates and DELETEs of older messages, whose loss brings those messages back, while
  no new id is issued there. Cut inside message 529's acknowledgement (at 65166), the window of new ids is empty
  and verify called the cut a warning ("acknowledgements or deletes of older messages written there carry no new
  id and cannot be seen"), while the broker delivers five consumed messages again. The cut record's own header
  names the acknowledgement.
* **A reference (lost_ref.py).** make fuzz seed 9401 (demo-s2, fault 9401029204003162): the last record of
  activemq-data-14.amq, message 488's ADD_REF to queue 23 (at 64775, 31 bytes), with a bit of its checksize
  flipped. Every new id of the window is accounted for, and verify called it a warning ("none of them was a live
  message"), while the broker loads message 488 without queue 23. The damaged record's header names the reference.
* **A transaction id (tails.damaged_tx).** make fuzz seed 8302 (demo-s4, fault 8302027906009126):
  activemq-data-7.amq cut at 24973, 62 bytes into the ADD_TX at 24909 that opens transaction 250 (messages
  251-253, all deleted since). The window of ids the lost records may have carried was 250..256, every one
  accounted for (deleted since) but 250, the transaction's own id, which no surviving record carries: verify
  called the cut CRITICAL, while the broker delivers exactly what it did. The cut record's header names
  transaction 250. Only a sending transaction's header does so: a consuming transaction lost whole (its
  acknowledgements, deletes and COMMIT) brings messages back, and its id, left unaccounted, is its only trace."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault

DEMO_S1_FILE = "data/journal/activemq-data-15.amq"
ACK_529 = 65166  # UPDATE, ACKNOWLEDGE_REF of message 529 (31 bytes), then its DELETE
ACK_373_TX = 65393  # UPDATE_TX, ACKNOWLEDGE_REF of message 373 in transaction 562, whose COMMIT follows it
DEMO_S4_FILE = "data/journal/activemq-data-7.amq"


def _campaign(tmp_path_factory, seed: int):
    from tests.faults.runner import Campaign
    from tests.faults.stores import campaign_demo

    return Campaign(f"demo-s{seed}", campaign_demo(tmp_path_factory.mktemp("demo") / f"demo-s{seed}", seed))


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    with _campaign(tmp_path_factory, 1) as c:
        yield c


@pytest.fixture(scope="module")
def demo_s2(tmp_path_factory):
    with _campaign(tmp_path_factory, 2) as c:
        yield c


@pytest.fixture(scope="module")
def demo_s4(tmp_path_factory):
    with _campaign(tmp_path_factory, 4) as c:
        yield c


def _cut(campaign, path: str, cut: int, fault: Fault | None = None):
    """(outcome, the damaged-tail finding) of ``path`` truncated at ``cut`` (or of ``fault``)."""
    outcome, (tail,) = campaign.judge_findings(fault or Fault("truncate", path, cut, label="truncation"),
                                               "damaged-tail")
    return outcome, tail


@pytest.mark.parametrize("cut, queue", [(ACK_529 + 19, None), (ACK_529 + 27, True)])
def test_an_acknowledgement_whose_header_survives_proves_the_loss(demo_s1, cut, queue):
    # 19 bytes keep the header up to the user record type; 27 the queue id of the body too
    outcome, tail = _cut(demo_s1, DEMO_S1_FILE, cut)
    assert (outcome.truth, outcome.diff["back"]) == ("loss", 5)
    assert (outcome.verdict, tail.severity.name) == ("CRITICAL", "CRITICAL")
    ack = tail.details["lostAck"]
    assert (ack["recordType"], ack["messageId"], ack["txId"]) == (12, 529, -1)
    assert (ack["queueId"] is not None) is bool(queue)


def test_an_open_transactions_acknowledgement_proves_nothing(demo_s1):
    # transaction 562's COMMIT was lost with it: the broker discards its acknowledgements anyway
    outcome, tail = _cut(demo_s1, DEMO_S1_FILE, ACK_373_TX + 27)
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    assert "lostAck" not in tail.details


def test_a_delete_of_a_message_acknowledged_everywhere_proves_nothing(demo_s1):
    # message 337's DELETE (65112) follows its acknowledgement in committed transaction 561: the broker deletes
    # a message with no reference left at load (loadMessageJournal), so losing that DELETE costs nothing by
    # itself -- the five acknowledgements lost after it do, which no header shows
    outcome, tail = _cut(demo_s1, DEMO_S1_FILE, 65112 + 14)
    assert outcome.truth == "loss"
    assert "lostAck" not in tail.details


def test_the_cut_records_transaction_id_is_accounted_for(demo_s4):
    outcome, tail = _cut(demo_s4, DEMO_S4_FILE, 24973)
    assert (outcome.truth, outcome.verdict) == ("same", "WARNING")
    ids = tail.details["lostIds"]
    assert (ids["idsAfter"], ids["idsBefore"], ids["unaccountedCount"]) == (249, 257, 0)
    assert ids["deletedIds"] == [251, 252, 253, 254, 256]


def test_a_header_cut_before_its_transaction_id_names_none(demo_s4):
    # 10 bytes keep the type, the tag and one byte of the id: the transaction cannot be named, and 250 stays
    # unaccounted for (the cut is judged by the odds, CRITICAL, as before)
    outcome, tail = _cut(demo_s4, DEMO_S4_FILE, 24909 + 10)
    assert outcome.truth == "same"
    assert tail.details["lostIds"]["unaccountedIds"] == [250]
    assert tail.severity.name == "CRITICAL"


def test_a_consuming_transactions_header_leaves_its_id_unaccounted(demo_s1):
    # activemq-data-8.amq, cut 27 bytes into the UPDATE_TX (an acknowledgement) that opens transaction 256, whose
    # records and COMMIT all follow in the lost bytes: the broker delivers its messages again
    outcome, tail = _cut(demo_s1, "data/journal/activemq-data-8.amq", 28080)
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert 256 in tail.details["lostIds"]["unaccountedIds"]


REF_488 = 64775  # UPDATE, ADD_REF of message 488 to queue 23 (31 bytes): the last record of demo-s2's file 14


REF_488_FILE = "data/journal/activemq-data-14.amq"


def _loses_ref_488(demo_s2, fault: Fault, queue: int | None = 23) -> None:
    """``fault`` on demo-s2's REF_488 loses message 488 on a queue, and verify names that reference (lostRef)."""
    outcome, tail = _cut(demo_s2, REF_488_FILE, 0, fault)
    assert (outcome.truth, outcome.diff["lost"]) == ("loss", 1)
    assert (outcome.verdict, tail.severity.name, tail.offset) == ("CRITICAL", "CRITICAL", REF_488)
    assert tail.details["lostRef"] == {"messageId": 488, "queueId": queue, "txId": -1}


@pytest.mark.parametrize("offset, mask", [(REF_488 + 27, 0x40), (REF_488 + 30, 0x01)])
def test_a_reference_whose_header_survives_proves_the_loss(demo_s2, offset, mask):
    data = (demo_s2.root / REF_488_FILE).read_bytes()
    assert (data[REF_488], int.from_bytes(data[REF_488 + 6:REF_488 + 14], "big"), data[REF_488 + 18],
            int.from_bytes(data[REF_488 + 19:REF_488 + 27], "big")) == (12, 488, 32, 23)
    _loses_ref_488(demo_s2, Fault("flip", REF_488_FILE, offset, mask, label="record checksize"))


@pytest.mark.parametrize("offset, mask", [(REF_488 + 16, 0x40), (REF_488 + 17, 0x01)])
def test_a_reference_whose_body_size_was_damaged_names_its_queue(demo_s2, offset, mask):
    # campaign seed 4711 on the hold-out h36 (real JournalImpl; loss/WARNING): the last reference of a compactor
    # output with a bit of its body size flipped. A reference's body is its 8-byte queue id, and the record's
    # closing size word, where such a body ends it, says the body is whole: the queue is read from it
    _loses_ref_488(demo_s2, Fault("flip", REF_488_FILE, offset, mask, label="record 12 bodysize"))


@pytest.mark.parametrize("offset, length", [(REF_488 + 25, 6), (REF_488 + 20, 11)])
def test_a_reference_whose_queue_id_was_zeroed_is_its_messages_last(demo_s2, offset, length):
    # zeros from inside its queue id to the end (hold-out h32, end-zero sweep seed 4740: loss/WARNING, "every new
    # id ... is accounted for"): which of the address's queues it named cannot be told, but every other reference
    # of message 488 was acknowledged, and the broker deletes a message once its last reference is: a live one
    # with none pending lost the reference that kept it
    _loses_ref_488(demo_s2, Fault("zero", REF_488_FILE, offset, length, label="end-zero"), queue=None)


@pytest.mark.parametrize("offset, mask", [(REF_488 + 1, 0x40), (REF_488 + 1, 0x10), (REF_488 + 3, 0x80)])
def test_a_reference_whose_tag_was_damaged_into_an_id_no_file_had_proves_the_loss(demo_s2, offset, mask):
    # fresh seed 9744 of make fuzz (demo-s2 9744030233003086 and 9744030236003016, loss/WARNING): the same
    # reference with a bit of its tag (the fileID, 14) flipped. The broker skips a record whose fileID is not the
    # file's, and stops there; verify read a clean end. A record of an earlier use of the file left behind carries
    # a lower fileID, but no file of the journal ever had this one: the record is this use's, its tag damaged
    _loses_ref_488(demo_s2, Fault("flip", REF_488_FILE, offset, mask, label="record 12 tag"))


def test_a_reference_whose_tag_reads_as_an_earlier_files_names_nothing(demo_s2):
    # the tag flipped to 10, a fileID an earlier use of the file may have carried: a record that use left
    # behind after this use's last reads the same, and names nothing this use lost
    outcome, tail = _cut(demo_s2, REF_488_FILE, 0, Fault("flip", REF_488_FILE, REF_488 + 4, 0x04,
                                                          label="record 12 tag"))
    assert "lostRef" not in tail.details


def test_a_message_whose_references_the_damage_took_is_lost(demo_s1):
    """refless_add.py (hunt40's seed 9542065626111011 on a JournalImpl store, and 15 of 95 such losses of a
    tail-zero sweep, seed 9421): an older file whose last records are a message's ADD and its references, the
    references zeroed. The window of new ids showed nothing (a reference carries its message's id, which
    survives) and verify said WARNING, while the broker deletes the message, left with no reference, at start."""
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(demo_s1.root)]
    cases = []
    for path, recs in files[:-1]:
        # the file ends with one message's ADD and its ADD_REF updates (type 12, user type 32), nothing else
        k = len(recs) - 1
        while k > 0 and recs[k][0] == 12 and recs[k][6] == 32 and recs[k][5] == recs[-1][5]:
            k -= 1
        if k < len(recs) - 1 and recs[k][0] == 11 and recs[k][5] == recs[-1][5]:
            cases.append((path, recs[k], recs[k + 1][1], recs[-1][1] + recs[-1][2]))
    assert cases, "demo-s1 has no older file ending with a message and its references"
    lost = 0
    for path, add, start, end in cases[:8]:
        start += 10  # the first reference's type, tag and a byte of its id left: damaged bytes, not a clean end
        rel = str(path.relative_to(demo_s1.root))
        outcome, tail = _cut(demo_s1, rel, 0, Fault("zero", rel, start, end - start, label="zeroed range"))
        if outcome.truth == "loss":  # the message was live: deleted at start with no reference left
            lost += 1
            assert (outcome.verdict, tail.severity.name) == ("CRITICAL", "CRITICAL")
            assert tail.details["reflessMessage"] == add[5]
        else:  # consumed since: its DELETE survives, and this reading stays out of it
            assert "reflessMessage" not in tail.details
    assert lost >= 1


def test_a_reference_whose_head_and_id_were_zeroed_inside_a_file_is_its_messages(tmp_path):
    """The same inside a file (``damaged-record``). 02_broker_mixed_compacted's message 1312 has one reference, the
    ADD_REF right after its ADD (activemq-data-7.amq@552456, 31 bytes); 11 zeros over its tag, compact count and
    id read the record back as an update of record 32 ("whose loss changes nothing": WARNING), while the broker
    deletes message 1312, left with no reference, at start. Header-zero sweep seed 9883: 13 such warnings."""
    from tests.faults.runner import Campaign
    from tests.support import ARTEMIS

    with Campaign("02", ARTEMIS / "messages" / "02_broker_mixed_compacted") as c:
        outcome, (found,) = c.judge_findings(Fault("zero", "journal/activemq-data-7.amq", 552458, 11),
                                             "damaged-record")
    assert (outcome.truth, outcome.diff["lost"]) == ("loss", 1)
    assert (outcome.verdict, found.severity.name, found.offset) == ("CRITICAL", "CRITICAL", 552456)
    assert found.details["reflessMessage"] == 1312


def test_an_acknowledgement_whose_head_was_zeroed_right_before_its_delete_changes_nothing(demo_s1):
    """own_acks.ack_before_delete (header-zero sweep seed 9883: 20 such CRITICALs): demo-s1's activemq-data-9.amq
    holds message 174's ACKNOWLEDGE_REF on queue 11 (at 8191, 31 bytes) and right after it its DELETE. 17 zeros
    over the acknowledgement's tag, id and body size leave nothing to read it by, and verify said "at least one
    record was lost here", CRITICAL, while the broker delivers the same: the DELETE removes the message all the
    same. Message 174's records reference one queue more than they acknowledge, and the DELETE follows."""
    outcome, (found,) = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-9.amq", 8194, 17),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict, found.severity.name, found.offset) == ("same", "WARNING", "WARNING", 8191)
    assert found.details["lastAck"] == {"messageId": 174, "queueId": 11}


def test_an_update_between_two_records_of_a_message_deleted_since_changes_nothing(demo_s2):
    """deleted_neighbours.py (header-zero sweep seed 9883): demo-s2's activemq-data-9.amq holds message 276's
    first ADD_REF (at 45011, 31 bytes), between its ADD and its scheduled delivery time; 19 zeros over its tag, id
    and body size leave nothing to read it by ("at least one record was lost here", CRITICAL), while message 276 was
    deleted since and the broker delivers the same. The records on both sides are message 276's."""
    outcome, (found,) = demo_s2.judge_findings(Fault("zero", "data/journal/activemq-data-9.amq", 45015, 19),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict, found.severity.name, found.offset) == ("same", "WARNING", "WARNING", 45011)
    assert found.details["deletedMessage"] == 276


def test_a_transactional_record_read_with_its_transaction_id_zeroed_is_the_surrounding_transactions(demo_s1):
    """tx_neighbours.py (header-zero sweep seed 9883: 19 such CRITICALs): demo-s1's activemq-data-11.amq holds an
    ADD_REF of message 433 in transaction 430 (at 55714, 39 bytes), then another of its records and its ROLLBACK.
    14 zeros over the record's tag and transaction id read it back as transaction 0's, a transaction with no other
    record, judged as if its COMMIT counted it elsewhere ("which the broker will lose", CRITICAL), while the broker
    discards it with the rolled-back transaction 430 and delivers the same."""
    outcome, (found,) = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-11.amq", 55718, 14),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict, found.severity.name, found.offset) == ("same", "WARNING", "WARNING", 55714)
    assert "in transaction 430 (its tag and transaction id damaged)" in found.message


def test_a_message_record_zeroed_whole_is_lost(demo_s1):
    """zeroed_adds.py (a sweep zeroing whole records exactly, seed 9962: 16 loss/OK). Zeros over demo-s1's
    activemq-data-12.amq from a record's first byte to the last byte of another (21082+10147) read as filler: no
    damaged bytes, and the surviving reference of a message whose ADD they took was excused as a damaged id
    (its add would have lain in a file still there). verify said OK while the broker drops the message. The
    zeros run from the record before up to that reference, where the broker writes a message's ADD."""
    outcome, found = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-12.amq", 21082, 10147),
                                            "message-record-missing")
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    (zeroed,) = [f for f in found if f.details.get("zeroedAdds")]
    assert (zeroed.severity.name, zeroed.offset) == ("CRITICAL", 21082)


def test_a_damaged_commit_after_an_open_transaction_of_cursor_acknowledgements_is_its(demo_s4):
    """verify.py's COMMIT read with a damaged field (COMMIT-head sweep seed 9881): demo-s4's activemq-data-13.amq,
    13 zeros over the tag and transaction id of a COMMIT right after its transaction's records. They read as
    transaction 0's COMMIT, "whose loss changes nothing", while the broker discards the transaction and four
    messages come back. The transaction's discard is not a proven loss by itself (cut_off_tx's bar), but it
    changes what the broker delivers: the COMMIT was its (cut_off_tx.last_open_tx), judged as any lost COMMIT."""
    outcome, (found,) = demo_s4.judge_findings(Fault("zero", "data/journal/activemq-data-13.amq", 38439, 13),
                                               "damaged-record")
    assert (outcome.truth, outcome.diff["back"]) == ("loss", 4)
    assert (outcome.verdict, found.severity.name) == ("CRITICAL", "CRITICAL")
    assert "(its tag and transaction id damaged)" in found.message


def test_a_messages_references_zeroed_whole_are_damage(demo_s1):
    """load.file_gaps (a sweep zeroing whole records exactly, seed 9441: 2 loss/OK, and 150 losses the harness
    could not prove). Zeros laid exactly over message 80's three references in demo-s1's activemq-data-1.amq
    (36161+93, after its ADD) read as filler between two records: no damaged bytes, verify OK, while the broker
    deletes the message no queue holds at start. JournalImpl writes a file's records back to back (AIO pads only
    up to a block the next record starts): the zeros are records wiped whole, and the message whose ADD is the
    last record before them has no reference left (refless_add.py)."""
    outcome, found = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-1.amq", 36161, 93),
                                            "damaged-record")
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    (zeroed,) = found
    assert (zeroed.severity.name, zeroed.offset, zeroed.details["reflessMessage"]) == ("CRITICAL", 36161, 80)


def test_an_acknowledgement_zeroed_whole_right_before_its_delete_changes_nothing(demo_s1):
    """own_acks.ack_before_delete (the sweep zeroing whole records exactly, seed 9441): zeros laid exactly over
    demo-s1's ACKNOWLEDGE_REF of message 45 on queue 15 (activemq-data-1.amq, 14404+31), right before the
    message's DELETE. No type byte survives, so the window of new ids judged it, and an id it could not place read
    as a live record lost: CRITICAL, while the broker loads the same (the DELETE removes the message anyway).
    The region's size is an acknowledgement's, and it was the message's last."""
    outcome, (found,) = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-1.amq", 14404, 31),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict, found.severity.name) == ("same", "WARNING", "WARNING")
    assert found.details["lastAck"] == {"messageId": 45, "queueId": 15}


def test_ids_no_add_could_carry_in_a_short_run_of_whole_records_are_not_lost_there(demo_s1):
    """wiped_run._smallest_add (the sweep zeroing whole records exactly, seed 9441): zeros laid exactly over one
    31-byte update of demo-s1's activemq-data-1.amq (6613). Id 48, issued while it was written, is carried by
    no surviving record, and the window read it as a live record lost: CRITICAL, while the broker loads the same.
    No add of this journal is that short, so no record carrying a new id was there."""
    outcome, (found,) = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-1.amq", 6613, 31),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict, found.severity.name) == ("same", "WARNING", "WARNING")
    lost = found.details["lostIds"]
    assert (lost["unstoredIds"], lost["unaccountedIds"]) == ([48], [])


def test_references_zeroed_whole_that_outnumber_the_acknowledgements_are_lost(demo_s1):
    """refless_add.py: zeros laid exactly over message 74's two references (demo-s1's activemq-data-1.amq,
    34487+62, right after its ADD), one queue having acknowledged it since. A message with an acknowledgement was
    left out (one acknowledged everywhere whose DELETE a crash cut off loses nothing), and the run judge called the
    region a warning, while the broker deletes the message the other queue still held. Two references' worth of
    zeros against one acknowledgement: a queue still held it."""
    outcome, (found,) = demo_s1.judge_findings(Fault("zero", "data/journal/activemq-data-1.amq", 34487, 62),
                                               "damaged-record")
    assert (outcome.truth, outcome.verdict) == ("loss", "CRITICAL")
    assert (found.severity.name, found.details["reflessMessage"]) == ("CRITICAL", 74)


def test_a_zeroed_queue_id_names_the_one_queue_of_its_address_left():
    # hold-out h32 (real JournalImpl), end-zero sweep seed 4740: a reference's queue id 11 zeroed in its low bytes,
    # of a message of address events (queues 9 and 11) still on 9: only 11 can have been named
    from types import SimpleNamespace

    from amqtool.engines.artemis.lost_ref import _damaged_queue

    ev = SimpleNamespace(queue_address={4: "orders", 9: "events", 11: "events", 16: "bulk"}, refs={7: {9}},
                         acked=set())
    assert _damaged_queue(ev, 7, 0) == 11
    assert _damaged_queue(ev, 7, None) == 11
    assert _damaged_queue(ev, 7, 0x0300) is None  # a byte that is neither 11's nor zeroed
    ev.acked = {(7, 11)}  # consumed there: losing it changes nothing
    assert _damaged_queue(ev, 7, 0) is None
