"""User-record codecs (types 20..53): byte-exact round trips on every fixture record, and the ``data print``
texts written from the Java ``toString`` sources (artemis-journal-format.md §5.2, §6.1)."""
from __future__ import annotations

import struct
from collections import Counter

import pytest

from amqtool.engines.artemis.load import load_journal
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import CoreMessage, LargeMessage, MessageHeaders
from amqtool.formats.artemis.primitives import Writer, Xid
from amqtool.formats.artemis.userrecords import (
    NULL_TEXT,
    RECORD_CLASSES,
    RECORD_TYPE_NAMES,
    AckRefRecord,
    AckRetryRecord,
    AddLargeMessageRecord,
    AddMessageRecord,
    AddRefRecord,
    AddressBindingRecord,
    AddressSettingJsonRecord,
    AddressStatusRecord,
    ConnectorRecord,
    CursorAckRecord,
    DeliveryCountRecord,
    DivertRecord,
    DuplicateIdRecord,
    GroupingRecord,
    HeuristicCompletionRecord,
    IdCounterRecord,
    JournalRecordIds,
    KeyValuePairRecord,
    LegacyMessageRecord,
    PageCompleteRecord,
    PageCounterIncRecord,
    PageCounterPendingRecord,
    PageCounterValueRecord,
    PageTransactionRecord,
    PageUpdateTxRecord,
    PendingLargeMessageRecord,
    QueueBindingRecord,
    QueueStatusRecord,
    RoleRecord,
    ScheduledDeliveryRecord,
    SecuritySettingRecord,
    UnknownRecord,
    UserRecord,
    decode_user_record,
)
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import BINDINGS, JournalDir
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures missing")


def _live(journal_dir, spec=BINDINGS):
    with open_journal(JournalDir(spec, journal_dir)) as opened:
        result = load_journal(opened)
        return [(r, result.body(r)) for r in result.live]


def _find(rel: str, record_id: int):
    for rec, body in _live(PUBLIC / rel):
        if rec.id == record_id:
            return decode_user_record(rec.user_record_type, body, is_update=rec.is_update, record_id=rec.id)
    raise AssertionError(f"record {record_id} not in {rel}")


# --- every fixture record round-trips ----------------------------------------------------------------------

def test_every_public_bindings_record_round_trips():
    """Every record with a body in every public bindings file (live or not) decodes and re-encodes to the
    same bytes."""
    from amqtool.formats.artemis.records import WITH_USER_TYPE, body_offset
    from amqtool.native import scan_records

    kinds = Counter()
    for d in PUBLIC_JOURNALS:
        with open_journal(JournalDir(BINDINGS, d)) as opened:
            for fi, f in enumerate(opened.files):
                data = opened.read_file(fi)
                records, _ = scan_records(data, f.tag, f.version, True, 16)
                for r in records:
                    if r[0] not in WITH_USER_TYPE:
                        continue
                    off = body_offset(r, f.version)
                    body = data[off:off + r[7]]
                    obj = decode_user_record(r[6], body, is_update=r[0] in (12, 14), journal="bindings",
                                             record_id=r[5])
                    assert not isinstance(obj, UnknownRecord)
                    assert obj.encode() == body, (d, r)
                    assert obj.trailing == b""
                    kinds[type(obj).__name__] += 1
    # the public data holds these four types (see SOURCES.md), in these numbers of records on disk
    assert kinds == {"IdCounterRecord": 323, "DivertRecord": 280, "AddressBindingRecord": 102,
                     "QueueBindingRecord": 97}


@pytest.mark.parametrize("scenario", ORACLE_SCENARIOS)
def test_oracle_journals_use_only_unknown_types(scenario):
    """The oracle journals use types 101..105 on purpose: they decode as UnknownRecord, printed
    ``** null **``, and round-trip."""
    from amqtool.store.layout import MESSAGES
    spec = BINDINGS if scenario == "06_bindings" else MESSAGES
    for rec, body in _live(ORACLE / scenario / "journal", spec):
        obj = decode_user_record(rec.user_record_type, body)
        assert isinstance(obj, UnknownRecord) and obj.describe() == NULL_TEXT and obj.encode() == body


def test_queue_bindings_of_every_generation_carry_their_optional_fields():
    present = Counter()
    for d in PUBLIC_JOURNALS:
        for rec, body in _live(d):
            if rec.user_record_type == 21:
                present[QueueBindingRecord.decode(body).present] += 1
    # Artemis 2.6-era (3: up to lastValue), 2.7 (13), 2.1x (17), current (18: every field)
    assert set(present) == {3, 13, 17, 18}


# --- describe() on real records (expected texts written from the Java toString sources) -------------------

QC_DEFAULT_TAIL = ("durable=null, user={user}, maxConsumers=-1, exclusive=false, groupRebalance=false, "
                   "groupRebalancePauseDispatch=false, groupBuckets=-1, groupFirstKey=null, lastValue=false, "
                   "lastValueKey=null, nonDestructive=false, purgeOnNoConsumers=false, enabled=true, "
                   "consumersBeforeDispatch=0, delayBeforeDispatch=-1, consumerPriority=null, autoDelete={ad}, "
                   "autoDeleteDelay=0, autoDeleteMessageCount=0, ringSize=-1, configurationManaged={cm}, "
                   "temporary=null, autoCreateAddress=null, internal=false, transient=null, autoCreated={ac}, "
                   "fqqn=null]]")


def test_describe_current_queue_binding():
    obj = _find("ColdGold1__sfg-jms/data/bindings", 40802189332)
    assert obj.present == 18
    assert obj.describe() == (
        "PersistentQueueBindingEncoding [queueConfiguration=QueueConfiguration [id=40802189332, "
        "name=replybacktome, address=replybacktome, routingType=ANYCAST, filterString=null, "
        + QC_DEFAULT_TAIL.format(user="null", ad="true", cm="false", ac="true"))
    assert obj.describe(safe=True) == "PersistentQueueBindingEncoding(safe data)"


def test_describe_old_queue_binding_applies_static_defaults():
    """A 2019 record stops after lastValue: the decoder's applyStaticDefaults fills the rest, except
    configurationManaged, which has no default and prints null. Its metadata is ``user=null;``."""
    obj = _find("fwfurtado__fj36-jms/broker/data/bindings", 4)
    assert obj.present == 3 and obj.metadata == "user=null;" and obj.configuration_managed is None
    assert obj.describe() == (
        "PersistentQueueBindingEncoding [queueConfiguration=QueueConfiguration [id=4, name=DLQ, address=DLQ, "
        "routingType=ANYCAST, filterString=null, "
        + QC_DEFAULT_TAIL.format(user="null", ad="false", cm="null", ac="false"))


def test_describe_queue_binding_with_filter():
    obj = _find("einerfreiheit__java-helloworld/data/bindings", 10737418253)
    assert obj.describe() == (
        "PersistentQueueBindingEncoding [queueConfiguration=QueueConfiguration [id=10737418253, "
        "name=mosqsub|8500-stepa-NB11.#, address=#, routingType=MULTICAST, filterString=NOT ((AMQAddress = "
        "'activemq.management') OR (AMQAddress = 'activemq.notifications')), "
        + QC_DEFAULT_TAIL.format(user="null", ad="true", cm="false", ac="false"))


def test_describe_address_binding_and_id_counter():
    rel = "fwfurtado__fj36-jms/broker/data/bindings"
    assert _find(rel, 2).describe() == ("PersistentAddressBindingEncoding [id=2, name=DLQ, routingTypes={ANYCAST}, "
                                        "autoCreated=false, internal=false]")
    assert _find(rel, 2).internal is None  # an old record without the internal flag
    assert _find(rel, 2).describe(safe=True) == "PersistentAddressBindingEncoding(safe data)"
    assert _find(rel, 443).describe() == "IDCounterEncoding [id=443]"


def test_describe_divert():
    obj = _find("JatinPandey26__artemis-activemq-training/broker/data/bindings", 8589987937)
    assert obj.describe() == (
        "PersistedDivertConfiguration{storeId=0, divertConfiguration=DivertConfiguration ["
        "name=$.artemis.internal.retroactiveaddress.divert.retro, routingName=966443ff-bfbe-11f0-a8fa-8a00d99d748e, "
        "address=retroactiveaddress, forwardingAddress=$.artemis.internal.retroactiveaddress.address.retro, "
        "exclusive=false, filterString=null, routing-type=PASS, transformerConfiguration=null]}")


# --- constructed records: layout and text of every type -----------------------------------------------------

def _rt(obj):
    data = obj.encode()
    back = type(obj).decode(data, record_id=getattr(obj, "record_id", 0))
    assert back == obj and back.encode() == data
    return data


def test_record_ids_table():
    assert RECORD_TYPE_NAMES[21] == "QUEUE_BINDING_RECORD" and RECORD_TYPE_NAMES[53] == "ACK_RETRY"
    assert JournalRecordIds.ADD_MESSAGE_PROTOCOL == 45
    assert set(RECORD_TYPE_NAMES) == set(range(20, 54)) - {23}


def test_queue_binding_build_and_user_metadata():
    b = QueueBindingRecord.build(record_id=7, name="q", address="a", routing_type=0, filter=" ", user="bob")
    data = _rt(b)
    assert b.user == "bob" and b.filter_string is None  # a blank filter is no filter
    assert len(data) == (4 + 2) + (4 + 2) + (1 + 4 + 2) + (1 + 4 + 18) + 1 + 4 + 1 + 1 + 1 + 1 + 1 + 4 + 8 + 1 + \
        1 + 1 + 4 + 1 + 8 + 8 + 1 + 8 + 1 + 1 + 1
    text = b.describe()
    assert "routingType=MULTICAST, filterString=null, durable=null, user=bob," in text
    assert QueueBindingRecord(name="q", address="a", metadata="user=;x=y;user=a=b;").user is None


def test_grouping_status_and_security_texts():
    assert _rt(GroupingRecord("g1", "cluster", record_id=5)) and \
        GroupingRecord("g1", "cluster", record_id=5).describe() == "GroupingEncoding [id=5, groupId=g1, clusterName=cluster]"
    assert QueueStatusRecord(9, 0, record_id=3).describe() == "QueueStatusEncoding [id=3, queueID=9, status=PAUSED]"
    assert QueueStatusRecord(9, 7).describe().endswith("status=null]")
    assert _rt(AddressStatusRecord(4, 1)) == struct.pack(">qh", 4, 1)
    assert AddressStatusRecord(4, 1).describe() == "AddressStatusEncoding{status=RUNNING, id=4}"
    s = SecuritySettingRecord("#", send="amq", consume="amq,guest", record_id=11)
    _rt(s)
    assert s.describe() == (
        "PersistedSecuritySetting [storeId=11, addressMatch=#, sendRoles=amq, consumeRoles=amq,guest, "
        "createDurableQueueRoles=null, deleteDurableQueueRoles=null, createNonDurableQueueRoles=null, "
        "deleteNonDurableQueueRoles=null, manageRoles=null, browseRoles=null, createAddressRoles=null, "
        "deleteAddressRoles=null, viewRoles=null, editRoles=null]")
    old = SecuritySettingRecord("#", view_present=False, edit_present=False)
    assert SecuritySettingRecord.decode(old.encode()) == old


def test_user_role_key_value_json_texts():
    u = UserRecord("admin", "secret", record_id=2)
    data = _rt(u)
    assert data == Writer().string("admin").string("secret").getvalue()
    assert u.describe() == "PersistedUser [storeId=2, username=admin, password=****]"
    r = RoleRecord("admin", ("amq", "ops"), record_id=3)
    _rt(r)
    assert r.describe() == "PersistedRole [storeId=3, username=admin, roles [amq, ops]]"
    kv = KeyValuePairRecord("map", "k", "v" * 20)
    _rt(kv)
    assert kv.describe() == NULL_TEXT  # DescribeJournal has no case for type 50
    j = AddressSettingJsonRecord("#", '{"maxDeliveryAttempts":3}', record_id=4)
    _rt(j)
    assert j.describe().startswith('PersistedAddressSettingJSON{jsonSetting={"maxDeliveryAttempts":3}, storeId=4, '
                                   "addressMatch=#, setting=")


def test_divert_with_transformer_prints_hashmap_properties():
    d = DivertRecord("dv", "src", "dst", "rn", True, "a>1", 1, "com.X", (("b", "2"), ("a", "1")))
    _rt(d)
    assert d.describe() == (
        "PersistedDivertConfiguration{storeId=0, divertConfiguration=DivertConfiguration [name=dv, routingName=rn, "
        "address=src, forwardingAddress=dst, exclusive=true, filterString=a>1, routing-type=ANYCAST, "
        "transformerConfiguration=TransformerConfiguration [className=com.X, properties={a=1, b=2}]]}")


def test_message_journal_small_records():
    assert _rt(AddRefRecord(12)) == struct.pack(">q", 12)
    assert AddRefRecord(12).describe() == "AddRef;QueueEncoding [queueID=12]"
    assert AckRefRecord(12).describe() == "ACK;QueueEncoding [queueID=12]"
    assert _rt(DeliveryCountRecord(3, 2)) == struct.pack(">qi", 3, 2)
    assert DeliveryCountRecord(3, 2).describe() == "DeliveryCountUpdateEncoding [queueID=3, count=2]"
    assert ScheduledDeliveryRecord(3, 1700000000000).describe() == \
        "ScheduledDeliveryEncoding [scheduledDeliveryTime=1700000000000, queueID=3]"
    assert CursorAckRecord(5, 2, 9).describe() == \
        "CursorAckRecordEncoding [queueID=5, position=PagePositionImpl [pageNr=2, messageNr=9, recordID=-1]]"
    assert PageCompleteRecord(5, 2, 9).describe() == \
        "PGComplete [queueID=5, position=PagePositionImpl [pageNr=2, messageNr=9, recordID=-1]]"
    assert _rt(PageCounterValueRecord(5, 10, 1024)) == struct.pack(">qqq", 5, 10, 1024)
    assert PageCounterValueRecord.decode(struct.pack(">qq", 5, 10)).describe() == \
        "PageCountRecord [queueID=5, value=10, persistentSize=0]"
    assert PageCounterIncRecord(5, -1, 30).describe() == "PageCountRecordInc [queueID=5, value=-1, persistentSize=30]"
    assert _rt(PageCounterIncRecord(5, -1, None)) == struct.pack(">qi", 5, -1)
    assert PageCounterPendingRecord(5, 3).describe() == "PageCountPendingImpl [queueID=5, pageID=3]"
    assert PendingLargeMessageRecord(77).describe() == "PendingLargeMessageEncoding::MessageID=77"


def test_page_transaction_add_and_update_share_type_35():
    body = struct.pack(">qi", 900, 4)
    add = decode_user_record(35, body, record_id=901)
    upd = decode_user_record(35, body, is_update=True, record_id=901)
    assert isinstance(add, PageTransactionRecord) and isinstance(upd, PageUpdateTxRecord)
    assert add.describe() == "PageTransactionInfoImpl(transactionID=900,id=901,numberOfMessages=4)"
    assert upd.describe() == "PageUpdateTXEncoding [pageTX=900, records=4]"
    assert add.encode() == upd.encode() == body


def test_duplicate_id_texts():
    d = DuplicateIdRecord("orders", "ship-dup".encode("utf-16-le"))
    _rt(d)
    assert d.describe() == "DuplicateIDEncoding [address=orders, duplID=7300 6800 6900 7000 2D00 6400 7500 7000]"
    assert DuplicateIdRecord("a", b"").describe() == "DuplicateIDEncoding [address=a, duplID=[]]"
    bridge = DuplicateIdRecord("BRIDGE.x", bytes(range(16)) + struct.pack(">q", 42))
    assert bridge.describe().endswith(" / nodeUUID=00010203-0405-1607-8809-0a0b0c0d0e0f messageID=42]")
    assert "nodeUUID" not in DuplicateIdRecord("BRIDGE.x", bytes(23)).describe()


def test_heuristic_completion_text():
    h = HeuristicCompletionRecord(Xid(1, b"b", b"g"), True)
    _rt(h)
    assert h.describe(hash_text="99") == (f"HeuristicCompletionEncoding [xid=XidImpl (99 bq:98 formatID:1 gtxid:103 "
                                          f"base64:{Xid(1, b'b', b'g').base64_text()}, isCommit=true]")


def test_ack_retry_text():
    a = AckRetryRecord(id=3, version=0, collection_id=8, node_id="node-a", message_id=55, reason=2)
    _rt(a)
    ack = "AckRetry{nodeID='node-a', messageID=55, reason=EXPIRED, pageAttempts=0, queueAttempts=0, viewCount=0}"
    assert a.describe() == f"MapRecord{{collectionID=8, id=3, key={ack}, value={ack}}}"


def test_opaque_and_unknown_types():
    assert decode_user_record(51, b"\x01\x02").describe() == NULL_TEXT
    assert isinstance(decode_user_record(51, b"\x01\x02"), ConnectorRecord)
    assert decode_user_record(49, b"chunk").describe() == NULL_TEXT
    assert decode_user_record(31, b"xx").describe() == "ADD-MESSAGE is not supported any longer, use export/import"
    assert isinstance(decode_user_record(31, b"xx"), LegacyMessageRecord)
    for t in (0, 23, 54, 101, 255):
        obj = decode_user_record(t, b"\x00\x01")
        assert isinstance(obj, UnknownRecord) and obj.describe() == NULL_TEXT and obj.encode() == b"\x00\x01"


def test_message_records_dispatch():
    msg = CoreMessage.build(message_id=5, address="q", body=b"hi")
    rec = decode_user_record(45, msg.encode())
    assert isinstance(rec, AddMessageRecord) and rec.message == msg and rec.encode() == msg.encode()
    large = LargeMessage(MessageHeaders(6, "q", None, 4, True, 0, 0, 4))
    rec = decode_user_record(30, large.encode())
    assert isinstance(rec, AddLargeMessageRecord) and rec.message.message_id == 6
    assert rec.describe(safe=True) == "LargeServerMessageImpl(safe data)"


def test_trailing_bytes_are_kept():
    body = struct.pack(">q", 12) + b"\xaa"
    obj = decode_user_record(32, body)
    assert obj.queue_id == 12 and obj.trailing == b"\xaa" and obj.encode() == body


@pytest.mark.parametrize("t", sorted(set(RECORD_CLASSES) - {49, 51, 31, 28}))
def test_truncated_bodies_raise_format_error(t):
    with pytest.raises(FormatError):
        decode_user_record(t, b"\x00\x00\x00")


def test_bad_journal_name_is_a_programming_error():
    with pytest.raises(ValueError):
        decode_user_record(32, bytes(8), journal="paging")


def test_bindings_load_view_skips_what_the_load_does_not_decode():
    # loadBindingJournal's switch decodes the bindings types only; a message journal type found there is
    # logged and skipped (invalidRecordType), never decoded
    for t in (30, 32, 45, 56, 101):
        assert isinstance(decode_user_record(t, b"\x00", journal="bindings"), UnknownRecord)
    with pytest.raises(FormatError):
        decode_user_record(32, b"\x00")  # the DescribeJournal view decodes it


@pytest.mark.parametrize("t, body", [
    (25, struct.pack(">i", 0) + bytes(32)),          # AddressSettings.decode reads 33 bytes at least
    (28, bytes(29)),                                  # BridgeConfiguration.decode reads 30 at least
    (51, struct.pack(">i", 2) + b"\x00a\x00b"),       # PersistedConnector: two Strings, the url missing
    (52, struct.pack(">i", 2) + b"a\x00" + struct.pack(">i", 4) + "{x".encode("utf-16-le")),  # no JSON
    (52, struct.pack(">i", 2) + b"a\x00" + struct.pack(">i", 80000) + ("[" * 20000 + "]" * 20000).encode("utf-16-le")),  # deep
])
def test_bindings_load_view_fails_where_the_java_decode_throws(t, body):
    decode_user_record(t, body)  # the opaque DescribeJournal view keeps it
    with pytest.raises(FormatError):
        decode_user_record(t, body, journal="bindings")


def test_bindings_load_view_takes_what_the_java_decode_reads():
    ok = {
        25: struct.pack(">i", 0) + bytes(33),
        28: bytes(30),
        51: struct.pack(">i", 1) + b"\x00a" + struct.pack(">i", 1) + b"\x00b",
        52: struct.pack(">i", 2) + b"a\x00" + struct.pack(">i", 4) + "{}".encode("utf-16-le"),
    }
    for t, body in ok.items():
        assert decode_user_record(t, body, journal="bindings").encode() == body


def test_bindings_decoded_once_give_what_a_fresh_decode_gives():
    # Queue and address bindings are decoded once per distinct (body, id) and shared between the readers of
    # a load: the shared record must be the one a fresh decode gives (same id, same fields), per id, and a
    # body that does not decode must raise on every read, never give a kept record.
    from amqtool.formats.artemis import userrecords

    queue = QueueBindingRecord.build(record_id=7, name="q1", address="a1").encode()
    first = decode_user_record(21, queue, journal="bindings", record_id=7)
    again = decode_user_record(21, bytearray(queue), journal="bindings", record_id=7)
    other = decode_user_record(21, queue, journal="bindings", record_id=8)
    fresh = QueueBindingRecord._decode(queue, 7)
    assert again is first and again == fresh and (first.record_id, other.record_id) == (7, 8)
    address = AddressBindingRecord(name="a1", routing_types=(0, 1), record_id=3).encode()
    assert decode_user_record(44, address, journal="bindings", record_id=3) == AddressBindingRecord._decode(address, 3)
    hits = userrecords._decode_kept.cache_info().hits
    for _ in range(2):
        with pytest.raises(FormatError):
            decode_user_record(21, queue[:5], journal="bindings", record_id=7)
    assert userrecords._decode_kept.cache_info().hits == hits
