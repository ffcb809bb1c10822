"""Single damaged records of the fault campaign (tests/faults/, seed 25), replayed on the campaign's first demo
store (tests/faults/stores.py ``campaign_demo``), each held to its verdict and finding codes: the verdict
follows what the broker loses (issue 25)."""
from __future__ import annotations

import pytest

from tests.support import copy_tree, flip_byte


@pytest.fixture(scope="module")
def demo_s1(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


@pytest.fixture(scope="module")
def demo_s2(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s2", 2)


def _codes(doc, severity=None):
    return sorted(f["code"] for f in doc["findings"] if severity is None or f["severity"] == severity)


def test_a_message_record_whose_user_type_was_flipped_is_critical(run_json, tmp_path, demo_s1):
    # campaign seed 25000077000036: record 139's user record type 45 (ADD_MESSAGE_PROTOCOL) flipped to 41
    # (PAGE_CURSOR_COUNTER_INC); the broker loads no message 139 and drops its reference on queue 15
    store = copy_tree(demo_s1, tmp_path / "s")
    victim = store / "data/journal/activemq-data-4.amq"
    flip_byte(victim, 37772, 0x04)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    assert _codes(doc, "critical") == ["message-record-retyped"]
    (f,) = [f for f in doc["findings"] if f["code"] == "message-record-retyped"]
    assert (f["path"], f["offset"], f["details"]["messageIds"]) == (str(victim), 37772, [139])


@pytest.mark.parametrize("demo,victim,offset,mask,mid,read_as", [
    # campaign seed 7001022003038 (demo-s2): message 304's ADD record type 11 flipped to 10 (an EVENT record,
    # which JournalImpl.load skips)
    ("demo_s2", "activemq-data-10.amq", 48504, 0x01, 304, "an event"),
    # campaign seed 7000023000184 (demo-s1): a bit of message 352's record id flipped: its ADD now reads as
    # record 288, which a later DELETE removes
    ("demo_s1", "activemq-data-10.amq", 10583, 0x40, 352, "record 288"),
])
def test_a_message_record_whose_record_type_or_id_was_flipped_is_critical(run_json, tmp_path, request, demo,
                                                                          victim, offset, mask, mid, read_as):
    store = copy_tree(request.getfixturevalue(demo), tmp_path / "s")
    path = store / "data/journal" / victim
    flip_byte(path, offset, mask)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    assert _codes(doc, "critical") == ["message-header-damaged"]
    (f,) = [f for f in doc["findings"] if f["code"] == "message-header-damaged"]
    assert (f["path"], f["details"]["messageIds"]) == (str(path), [mid])
    assert f["offset"] <= offset and f"{mid} (read as {read_as}" in f["message"]


def test_the_undamaged_demos_have_no_damaged_message_header(run_json, demo_s1, demo_s2):
    for demo in (demo_s1, demo_s2):
        code, doc, _ = run_json("verify", demo)
        assert code == 0 and not {"message-record-retyped", "message-header-damaged"} & set(_codes(doc))


def _zero(path, offset, length):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(bytes(length))


def test_a_zeroed_update_of_a_deleted_record_read_by_its_intact_head_is_a_warning(run_json, tmp_path, demo_s1):
    # campaign seed 25000075000192: 4 bytes zeroed inside the 31-byte acknowledgement (UPDATE of record 336,
    # at 1453) that precedes record 336's DELETE: its body size and user record type are gone (no one-field
    # reading rebuilds it), but its type, tag, id and trailing size survive, and record 336 was deleted since
    store = copy_tree(demo_s1, tmp_path / "s")
    victim = store / "data/journal/activemq-data-16.amq"
    _zero(victim, 1470, 4)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (1, "WARNING", "warning", 1453)
    assert "record 336" in f["message"]


def test_the_same_damage_to_an_update_of_a_live_record_stays_critical(run_json, tmp_path, demo_s1):
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    store = copy_tree(demo_s1, tmp_path / "s")
    files = messages_files(store)
    # an UPDATE of an id the journal never deletes: no DELETE record of it anywhere
    deletes = {r[5] for p, t, v in files for r in scan_records_py(p.read_bytes(), t, v)[0] if r[0] in (15, 16)}
    for path, tag, version in files:
        recs, _ = scan_records_py(path.read_bytes(), tag, version)
        hit = next((r for r in recs if r[0] == 12 and r[2] == 31 and r[5] not in deletes), None)
        if hit is not None:
            break
    assert hit is not None
    _zero(path, hit[1] + 17, 4)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", hit[1])


def test_a_message_add_whose_head_was_zeroed_is_named_by_its_body(run_json, tmp_path, demo_s2):
    # campaign seed 31001095003089: 16 bytes zeroed from offset 4 of message 136's 3647-byte ADD (its tag, id,
    # body size, user record type and persister byte): the body still gives message id 136 (every persister
    # writes it first), whose record a later DELETE removes: nothing the broker delivers changes
    store = copy_tree(demo_s2, tmp_path / "s")
    _zero(store / "data/journal/activemq-data-4.amq", 56682, 16)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (1, "WARNING", "warning", 56678)
    assert "record 136" in f["message"]


def test_a_reference_whose_message_id_was_damaged_onto_no_message_is_critical(run_json, tmp_path, demo_s2):
    # campaign seed 31001095003160: a random byte (^0x78) in the low byte of message 534's only ADD_REF: it now
    # names 622, which has no record, and 534 has no reference left; among the many messages one byte from
    # 622, 534 is the one without references (a healthy store has none); and the reference stands right after
    # 534's record, where the broker writes it (ref_in_place.run_owner): 534 lost it (ref-moved names it)
    store = copy_tree(demo_s2, tmp_path / "s")
    flip_byte(store / "data/journal/activemq-data-16.amq", 10863, 0x78)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    (f,) = [f for f in doc["findings"] if f["severity"] == "critical"]
    assert (f["code"], f["details"]["messageIds"]) == ("ref-moved", [534])
    assert "message 534 on queue" in f["message"] and "now names 622" in f["message"]


def test_a_message_record_retyped_as_an_ack_retry_is_critical(run_json, tmp_path, demo_s2):
    # campaign sweep seed 9144 (loss/OK): the user record type of message 60's ADD (ADD_MESSAGE_PROTOCOL, 45)
    # flipped to 53 (ACK_RETRY, 0x18): the broker loads no message 60 and drops its reference on queue 11.
    # Verify said OK: ACK_RETRY is a message journal type, two bits from 45, and only a type one bit from a
    # message type was read as damaged; the damaged byte may hold any value, and the body still decodes as the
    # message (message_headers.retyped_messages)
    store = copy_tree(demo_s2, tmp_path / "s")
    victim = store / "data/journal/activemq-data-1.amq"
    data = victim.read_bytes()
    assert data[30051] == 11 and data[30057:30065] == (60).to_bytes(8, "big") and data[30051 + 18] == 45
    flip_byte(victim, 30051 + 18, 0x18)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    (f,) = [f for f in doc["findings"] if f["severity"] == "critical"]
    assert (f["code"], f["details"]["messageIds"]) == ("message-record-retyped", [60])


def test_a_reference_read_as_a_second_acknowledgement_is_not_critical(run_json, tmp_path, demo_s1):
    # campaign seed 31000093000147: message 175's ADD_REF on queue 23 has its user record type flipped to 33
    # (ACKNOWLEDGE_REF): two acknowledgements of (175, 23) and no reference; the message was acknowledged
    # there anyway, and the broker delivers the same
    store = copy_tree(demo_s1, tmp_path / "s")
    flip_byte(store / "data/journal/activemq-data-6.amq", 8688, 0x01)
    code, doc, _ = run_json("verify", store)
    assert code in (0, 1) and "ack-without-ref" not in _codes(doc, "critical")


def test_a_lone_acknowledgement_without_its_reference_stays_critical(run_json, tmp_path, demo_s1):
    # the second acknowledgement of (175, 23) zeroed away as well: one acknowledgement, no reference, and 175
    # still on a queue one bit from 23: which record was changed cannot be told
    from amqtool.formats.artemis.records import scan_records_py

    store = copy_tree(demo_s1, tmp_path / "s")
    victim = store / "data/journal/activemq-data-6.amq"
    flip_byte(victim, 8688, 0x01)
    data = victim.read_bytes()
    tag = int.from_bytes(data[8:16], "big") & 0x7FFFFFFF
    (ref,) = [r for r in scan_records_py(data, tag, 2)[0] if r[1] <= 8688 < r[1] + r[2]]
    flip_byte(victim, ref[1] + 1, 0xFF)  # its tag: the broker skips it, between valid records
    code, doc, _ = run_json("verify", store)
    assert code == 2 and "ack-without-ref" in _codes(doc, "critical")


def test_a_message_add_whose_head_id_was_zeroed_is_named_by_its_core_body(run_json, tmp_path, demo_s2):
    # campaign seed 90210271630003044: 16 bytes zeroed from offset 8 of message 325's 1055-byte ADD (the low
    # bytes of its id, its body size, user record type, persister byte and the high half of the body's id):
    # head and body disagree (0 against 325), but the core message's two copies of its id (the persister's and
    # its own headers') agree on 325, whose record a later DELETE removes: nothing the broker delivers changes
    store = copy_tree(demo_s2, tmp_path / "s")
    _zero(store / "data/journal/activemq-data-11.amq", 16404, 16)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, doc["verdict"], _codes(doc, "critical"), f["severity"], f["offset"]) == \
        (1, "WARNING", [], "warning", 16396)
    assert "record 325" in f["message"]


def test_a_message_add_whose_body_was_zeroed_is_named_by_its_intact_head(run_json, tmp_path, demo_s1):
    # campaign seed 90210270631000098: 64 bytes zeroed from offset 14 of message 379's 545-byte ADD (its body
    # size, user record type and the body's start): the wiped body "decodes" as an AMQP message of id 0, which
    # is no evidence against the intact head's id 379, a record a later DELETE removes
    store = copy_tree(demo_s1, tmp_path / "s")
    _zero(store / "data/journal/activemq-data-10.amq", 58906, 64)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, doc["verdict"], _codes(doc, "critical"), f["severity"], f["offset"]) == \
        (1, "WARNING", [], "warning", 58892)
    assert "record 379" in f["message"]


@pytest.mark.parametrize("shift,length", [(8, 16), (14, 64)])
def test_the_same_zeroing_of_a_live_message_add_stays_critical(run_json, tmp_path, demo_s2, shift, length):
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    store = copy_tree(demo_s2, tmp_path / "s")
    files = messages_files(store)
    deletes = {r[5] for p, t, v in files for r in scan_records_py(p.read_bytes(), t, v)[0] if r[0] in (15, 16)}
    hit = None
    for path, tag, version in files:
        recs, _ = scan_records_py(path.read_bytes(), tag, version)
        # a core message's ADD the journal never deletes (live), long enough for the zeroed run
        hit = next((r for r in recs if r[0] == 11 and r[6] == 45 and r[2] > 200 and r[5] not in deletes), None)
        if hit is not None:
            break
    assert hit is not None
    _zero(path, hit[1] + shift, length)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-record"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", hit[1])
