"""native/queue_stat.c (stat's per-queue figures) equals its Python reference (BrokerState + message_times)
on the demo store, at instants that make schedules and expiries count, and on every Artemis fixture."""
from __future__ import annotations

import pytest

from amqtool import native
from amqtool.engines.artemis.demo import create_demo
from amqtool.engines.artemis.journal_print import PrintOptions, load_store
from amqtool.engines.stat.artemis import queue_figures_native, queue_figures_reference
from amqtool.store.layout import detect
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(native.stat_live is None, reason="C extension not built")


def _both(path, now):
    store = detect(str(path))
    results = {}
    for journal, result in load_store(store, PrintOptions()):
        results[journal.kind] = result
        if journal.kind == "messages":
            return (queue_figures_native(result, now),
                    queue_figures_reference(results.get("bindings"), result, now))
    return None, None


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("qstat") / "demo"
    create_demo(root, 8 * 1024 * 1024, file_size=1024 * 1024, seed=21)
    return root


@pytest.mark.parametrize("now", [0, 1717200000000, 1717203600000, 2 ** 62])
def test_native_equals_reference_on_demo(demo, now):
    fast, ref = _both(demo, now)
    assert fast == ref
    figures = fast[0]
    assert sum(f[0] for f in figures.values()) > 0
    if now == 1717200000000:
        assert sum(f[5] for f in figures.values()) > 0  # scheduled references are counted
    if now == 2 ** 62:
        assert sum(f[5] for f in figures.values()) == 0


def test_native_equals_reference_on_fixtures():
    seen = 0
    for path in [ORACLE / s / "journal" for s in ORACLE_SCENARIOS] + list(PUBLIC_JOURNALS):
        fast, ref = _both(path, 1795000000000)
        if fast is not None:
            assert fast == ref, path
            seen += 1
    assert seen >= 5


def test_every_message_kind(tmp_path):
    """Core, core large, AMQP (persisters 2, 3, 5), legacy 31 and an undecodable body, with delivery counts
    and schedules: C reads what it can, hands the rest to Python, and the figures equal the reference."""
    from amqtool.formats.artemis.message import AmqpMessage, CoreMessage, LargeMessage, MessageHeaders
    from amqtool.formats.artemis.primitives import TypedProperties
    from amqtool.formats.artemis.userrecords import (AckRefRecord, AddRefRecord, DeliveryCountRecord,
                                                     JournalRecordIds as R, QueueBindingRecord,
                                                     ScheduledDeliveryRecord)
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import BINDINGS, MESSAGES

    data = tmp_path / "data"
    with JournalWriter.create(data / "bindings", BINDINGS) as bw:
        for qid in (1, 2):
            bw.append_add(qid, R.QUEUE_BINDING_RECORD,
                          QueueBindingRecord.build(record_id=qid, name=f"q{qid}", address="a", routing_type=1).encode())
    bodies = {
        101: (R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(message_id=101, address="a", body=b"x" * 50,
                                                        timestamp=1_000, expiration=5_000).encode()),
        102: (R.ADD_LARGE_MESSAGE, LargeMessage(MessageHeaders(102, "a", b"u" * 16, 3, True, 9_000, 2_000, 4,
                                                               TypedProperties())).encode()),
        103: (R.ADD_MESSAGE_PROTOCOL, AmqpMessage(2, 103, 0, "a", b"amqp-data").encode()),
        104: (R.ADD_MESSAGE_PROTOCOL, AmqpMessage(5, 104, 0, "a", b"amqp", 0, None, 4_000).encode()),
        105: (R.ADD_MESSAGE_PROTOCOL, AmqpMessage(3, 105, 0, None, b"amqp3").encode()),
        106: (R.ADD_MESSAGE_PROTOCOL, b"\x09garbage"),
        107: (R.ADD_MESSAGE, b"\x00" * 40),
        108: (R.ADD_MESSAGE_PROTOCOL, CoreMessage.build(message_id=108, address="a", timestamp=3_000).encode()),
    }
    with JournalWriter.create(data / "journal", MESSAGES, file_size=64 * 1024) as mw:
        for mid, (utype, body) in bodies.items():
            mw.append_add(mid, utype, body)
            for q in (1, 2) if mid % 2 else (1,):
                mw.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())
        mw.append_update(101, R.UPDATE_DELIVERY_COUNT, DeliveryCountRecord(queue_id=1, count=2).encode())
        mw.append_update(103, R.SET_SCHEDULED_DELIVERY_TIME,
                         ScheduledDeliveryRecord(queue_id=2, scheduled_time=7_000).encode())
        mw.append_update(105, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=2).encode())
        mw.append_update(101, R.UPDATE_DELIVERY_COUNT, DeliveryCountRecord(queue_id=1, count=0).encode())
    for now in (0, 4_500, 10_000):
        fast, ref = _both(data, now)
        assert fast == ref, now
    figures = fast[0]
    assert figures[1][0] == 8 and figures[2][0] == 3  # q2: 101, 103, 107 (105 acked there)
    assert figures[1][2:4] == (1_000, 3_000)  # oldest and newest timestamps on q1
    assert figures[1][7] == 1  # the large message
    assert figures[1][6] == 0  # the last delivery count of 101 is 0
    _, at4500 = _both(data, 4_500)
    assert at4500[0][1][4] == 1 and at4500[0][2][5] == 1  # 104 expired (4000); 103 scheduled at 7000 on q2
