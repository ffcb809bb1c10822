"""The broker view of a store: queues from real bindings fixtures, and messages/refs/counts from message
journals written here with the record encoders (refs minus acks as data exp computes them, counts as data
print prints them, §6.1 item 9, §6.2)."""
from __future__ import annotations

import struct

import pytest

from amqtool.engines.artemis.broker_state import build_broker_state
from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis.message import CoreMessage, LargeMessage, MessageHeaders
from amqtool.formats.artemis.primitives import Xid
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    PREPARE,
    UPDATE,
    UPDATE_TX,
    FileHeader,
    Record,
)
from amqtool.formats.artemis.userrecords import (
    AckRefRecord,
    AddRefRecord,
    AddressBindingRecord,
    CursorAckRecord,
    DeliveryCountRecord,
    DuplicateIdRecord,
    PageTransactionRecord,
    PageUpdateTxRecord,
    QueueBindingRecord,
    ScheduledDeliveryRecord,
)
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import BINDINGS, MESSAGES, JournalDir
from tests.support import PUBLIC, PUBLIC_JOURNALS


def _write_journal(directory, spec, records, file_id=1):
    directory.mkdir(parents=True, exist_ok=True)
    data = FileHeader(2, 0, file_id).encode() + b"".join(r.encode() for r in records)
    (directory / spec.file_name(file_id)).write_bytes(data + bytes(1024))


def _load(directory, spec):
    opened = open_journal(JournalDir(spec, directory))
    return load_journal(opened)


def _add(rid, t, obj):
    return Record(type=ADD, tag=1, record_id=rid, user_record_type=t, body=obj.encode())


def _upd(rid, t, obj):
    return Record(type=UPDATE, tag=1, record_id=rid, user_record_type=t, body=obj.encode())


@pytest.fixture()
def store(tmp_path):
    bindings = [
        Record(type=ADD_TX, tag=1, tx_id=1, record_id=2, user_record_type=44,
               body=AddressBindingRecord("orders", (1,)).encode()),
        Record(type=ADD_TX, tag=1, tx_id=1, record_id=16,
               user_record_type=21, body=QueueBindingRecord.build(record_id=16, name="q16", address="orders").encode()),
        Record(type=ADD_TX, tag=1, tx_id=1, record_id=4,
               user_record_type=21, body=QueueBindingRecord.build(record_id=4, name="q4", address="orders").encode()),
        Record(type=COMMIT, tag=1, tx_id=1, number_of_records=3),
        # an update of queue 4 renames nothing but changes its filter: the later record wins
        Record(type=UPDATE, tag=1, record_id=4, user_record_type=21,
               body=QueueBindingRecord.build(record_id=4, name="q4", address="orders", filter="x=1").encode()),
    ]
    _write_journal(tmp_path / "bindings", BINDINGS, bindings)

    def msg(mid):
        return CoreMessage.build(message_id=mid, address="orders", body=b"m%d" % mid)

    recs = [
        _add(100, 45, msg(100)), _upd(100, 32, AddRefRecord(16)), _upd(100, 32, AddRefRecord(4)),
        _add(101, 45, msg(101)), _upd(101, 32, AddRefRecord(4)), _upd(101, 33, AckRefRecord(4)),  # fully acked
        _upd(102, 33, AckRefRecord(21)),  # an ack before any ref of queue 21: count 0, no decrement
        _add(102, 45, msg(102)), _upd(102, 32, AddRefRecord(21)), _upd(102, 32, AddRefRecord(9)),
        _upd(102, 34, DeliveryCountRecord(9, 3)), _upd(102, 36, ScheduledDeliveryRecord(9, 1700000000000)),
        _add(103, 45, msg(103)),  # no ref at all: stays with an empty queue list
        _add(104, 30, LargeMessage(MessageHeaders(104, "orders", None, 4, True, 0, 0, 4))),
        _upd(104, 32, AddRefRecord(16)),
        _add(105, 45, msg(105)), _upd(105, 32, AddRefRecord(11)),
        Record(type=DELETE, tag=1, record_id=105),  # deleted: gone with its refs
        _add(200, 37, DuplicateIdRecord("orders", b"dup")),
        _add(201, 35, PageTransactionRecord(700, 2)), _upd(201, 35, PageUpdateTxRecord(700, 1)),
        _add(202, 39, CursorAckRecord(16, 1, 0)),
        # a prepared XA transaction: one message with two refs
        Record(type=ADD_TX, tag=1, tx_id=50, record_id=300, user_record_type=45, body=msg(300).encode()),
        Record(type=UPDATE_TX, tag=1, tx_id=50, record_id=300, user_record_type=32, body=AddRefRecord(4).encode()),
        Record(type=UPDATE_TX, tag=1, tx_id=50, record_id=300, user_record_type=32, body=AddRefRecord(16).encode()),
        Record(type=PREPARE, tag=1, tx_id=50, number_of_records=3, extra=Xid(1, b"b", b"g").encode()),
    ]
    _write_journal(tmp_path / "journal", MESSAGES, recs)
    b = _load(tmp_path / "bindings", BINDINGS)
    m = _load(tmp_path / "journal", MESSAGES)
    yield build_broker_state(b, m)
    b.opened.close()
    m.opened.close()


def test_queues_and_addresses(store):
    assert {q.id: (q.name, q.address, q.routing_type, q.filter) for q in store.queues.values()} == {
        16: ("q16", "orders", "ANYCAST", None), 4: ("q4", "orders", "ANYCAST", "x=1")}
    assert {a.id: (a.name, a.routing_types) for a in store.addresses.values()} == {2: ("orders", ["ANYCAST"])}
    assert store.problems == []


def test_refs_minus_acks_as_data_exp(store):
    # data exp removes acked refs after collecting them all, so the ack of (102, 21) written before its ref
    # still removes it (unlike the data print counts below)
    assert list(store.live_messages()) == [(100, [16, 4]), (102, [9]), (103, []), (104, [16])]
    assert store.live_refs(101) is None
    assert store.live_by_queue() == {"q16": [100, 104], "q4": [100], "UndefinedQueue_9": [102]}
    assert store.large_messages == [104]
    assert store.delivery_counts == {(102, 9): 3}
    assert store.scheduled == {(102, 9): 1700000000000}


def test_message_counts_as_data_print(store):
    c = store.message_counts()
    # queue 21: the early ack created 0 without decrementing, then the ref added 1
    assert c.lines() == [
        "message count=4", "large message count=1", "message reference count",
        "queue id 16,count=2", "queue id 4,count=1", "queue id 21,count=1", "queue id 9,count=1",
        "prepared message count=1", "prepared large message count=0", "prepared message reference count",
        "queue id 16,count=1", "queue id 4,count=1",  # HashMap order: bucket 0 before bucket 4
    ]
    assert c.refs == [(16, 2), (4, 1), (21, 1), (9, 1)]


def test_lazy_message_decode_and_small_records(store):
    m = store.message(102)
    assert m.body == b"m102" and m.address == "orders"
    assert store.message(104).message_id == 104 and store.message(104).is_large
    with pytest.raises(KeyError):
        store.message(105)
    assert [d.duplicate_id for _, d in store.duplicate_ids] == [b"dup"]
    assert store.page_tx_ids == {700}
    assert store.cursor_acked() == {16: {(1, 0)}}
    [tx] = store.prepared
    assert tx.tx_id == 50 and list(tx.messages) == [300] and tx.refs == {300: [4, 16]}
    assert store.prepared_message(tx, 300).body == b"m300"


def test_undecodable_records_are_reported(tmp_path):
    recs = [
        _add(1, 45, CoreMessage.build(message_id=1, address="a")),
        Record(type=UPDATE, tag=1, record_id=1, user_record_type=32, body=b"\x00\x01"),  # truncated ref
    ]
    _write_journal(tmp_path / "journal", MESSAGES, recs)
    m = _load(tmp_path / "journal", MESSAGES)
    state = build_broker_state(None, m)
    assert [(p.record_id, p.user_record_type) for p in state.problems] == [(1, 32)]
    assert state.queues == {} and list(state.live_messages()) == [(1, [])]
    assert state.message_counts().messages == 1
    m.opened.close()


@pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures missing")
def test_real_bindings_journal():
    d = PUBLIC / "JatinPandey26__artemis-activemq-training/broker/data/bindings"
    result = _load(d, BINDINGS)
    state = build_broker_state(result, None)
    names = {q.name for q in state.queues.values()}
    assert {"DLQ", "ExpiryQueue", "orders", "filteredOrdersQueue"} <= names
    assert len(state.queues) == 16 and len(state.addresses) == 20
    assert state.queues[3].name == "DLQ" and state.queues[3].routing_type == "ANYCAST"
    assert state.problems == []
    assert state.message_counts().lines()[:3] == ["message count=0", "large message count=0",
                                                  "message reference count"]
    result.opened.close()
