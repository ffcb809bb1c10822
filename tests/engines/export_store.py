"""A small Artemis broker store for the export tests, written record by record with the JournalWriter and
the broker-record codecs, covering what the export must get right; and helpers to read exports back.

``build_store(root)`` returns the data directory and ``EXPECTED``: (message id, queue) -> transaction state
of every row the export must give (nothing else may appear).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.formats.artemis.message import BYTES_TYPE, TEXT_TYPE, AmqpMessage, CoreMessage, MessageHeaders
from amqtool.formats.artemis.primitives import (
    BOOLEAN, BYTE, BYTES, CHAR, DOUBLE, FLOAT, INT, LONG, NULL, SHORT, STRING, Property, TypedProperties, Xid,
)
from amqtool.formats.artemis.userrecords import (
    AckRefRecord, AddRefRecord, AddressBindingRecord, DeliveryCountRecord, QueueBindingRecord,
    ScheduledDeliveryRecord,
)
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

ORDERS, EV_A, EV_B, UNKNOWN = 11, 13, 14, 99
ALL_TYPES = TypedProperties.of([
    Property("s", STRING, "text with \"quotes\" & <angles>\tand tab"), Property("b", BOOLEAN, True),
    Property("y", BYTE, -3), Property("h", SHORT, 300), Property("i", INT, -70000), Property("l", LONG, 1 << 40),
    Property("f", FLOAT, 1.5), Property("d", DOUBLE, 0.1), Property("x", BYTES, b"\x00\xffab"),
    Property("c", CHAR, "Z"), Property("n", NULL, None), Property("u", STRING, "ünïcødé ☃"),
])

EXPECTED = {
    (101, "orders"): "committed",
    (102, "events.b"): "committed",
    (104, "orders"): "committed",
    (106, "events.a"): "prepared",
    (108, "UndefinedQueue_99"): "committed",
    (109, "orders"): "committed",
    (110, "orders"): "committed",
    **{(200 + i, "events.a"): "committed" for i in range(40)},
    **{(200 + i, "events.b"): "committed" for i in range(40)},
}
PROBLEM_IDS = {111}  # legacy type-31 record: live, but not decodable
LARGE_BODY = bytes(range(256)) * 9 + b"tail"  # 2308 bytes: three 1000-byte XML chunks
DELIVERY = {(102, EV_B): 3}
SCHEDULED = {(104, ORDERS): 1717300000000}


def core(mid: int, address: str, body: bytes, *, type=BYTES_TYPE, props=None, user_id=None) -> bytes:
    m = CoreMessage.build(message_id=mid, address=address, body=body, type=type, timestamp=1717200000000 + mid,
                          expiration=0 if mid % 2 else 1717900000000, priority=4 + mid % 3, user_id=user_id,
                          properties=props)
    return m.encode()


def build_store(root: Path) -> Path:
    data = root / "data"
    (data / "large-messages").mkdir(parents=True)
    with JournalWriter.create(data / "bindings", BINDINGS, sync="none") as bw:
        bw.append_add_tx(1, 10, 44, AddressBindingRecord(name="orders", routing_types=(1,)).encode())
        bw.append_add_tx(1, ORDERS, 21, QueueBindingRecord.build(record_id=ORDERS, name="orders", address="orders",
                                                                 routing_type=1).encode())
        bw.append_add_tx(1, 12, 44, AddressBindingRecord(name="events", routing_types=(0, 1)).encode())
        bw.append_add_tx(1, EV_A, 21, QueueBindingRecord.build(record_id=EV_A, name="events.a", address="events",
                                                               routing_type=0).encode())
        bw.append_add_tx(1, EV_B, 21, QueueBindingRecord.build(record_id=EV_B, name="events.b", address="events",
                                                               routing_type=0, filter="color = 'red'",
                                                               user="bob").encode())
        bw.append_commit(1)
    ref = lambda q: AddRefRecord(queue_id=q).encode()  # noqa: E731
    ack = lambda q: AckRefRecord(queue_id=q).encode()  # noqa: E731
    with JournalWriter.create(data / "journal", MESSAGES, file_size=64 * 1024, sync="none") as w:
        w.append_add(101, 45, core(101, "orders", CoreMessage.text_body("hello"), type=TEXT_TYPE, props=ALL_TYPES,
                                   user_id=bytes(range(16))))
        w.append_update(101, 32, ref(ORDERS))
        w.append_add(102, 45, core(102, "events", b"B" * 3000))
        w.append_update(102, 32, ref(EV_A))
        w.append_update(102, 32, ref(EV_B))
        w.append_update(102, 34, DeliveryCountRecord(queue_id=EV_B, count=2).encode())
        w.append_update(102, 33, ack(EV_A))
        w.append_update(102, 34, DeliveryCountRecord(queue_id=EV_B, count=3).encode())
        w.append_add(103, 45, core(103, "orders", b"gone"))
        w.append_update(103, 32, ref(ORDERS))
        w.append_update(103, 33, ack(ORDERS))
        w.append_delete(103)
        # committed transaction with a scheduled delivery
        w.append_add_tx(500, 104, 45, core(104, "orders", b"tx-commit"))
        w.append_update_tx(500, 104, 32, ref(ORDERS))
        w.append_update_tx(500, 104, 36, ScheduledDeliveryRecord(queue_id=ORDERS,
                                                                 scheduled_time=SCHEDULED[(104, ORDERS)]).encode())
        w.append_commit(500)
        # rolled back
        w.append_add_tx(501, 105, 45, core(105, "orders", b"tx-rollback"))
        w.append_update_tx(501, 105, 32, ref(ORDERS))
        w.append_rollback(501)
        # unknown queue id
        w.append_add(108, 45, core(108, "lost", b"nobody"))
        w.append_update(108, 32, ref(UNKNOWN))
        # core large message: header in the journal, body in large-messages/109.msg
        hdr = MessageHeaders(109, "orders", None, BYTES_TYPE, True, 0, 1717200000109, 4,
                             TypedProperties.of([Property("_AMQ_LARGE_SIZE", LONG, len(LARGE_BODY))]))
        w.append_add(109, 30, hdr.encode())
        (data / "large-messages" / "109.msg").write_bytes(LARGE_BODY)
        w.append_update(109, 32, ref(ORDERS))
        # AMQP message (persister 5): exported as a row, left out of the XML
        amqp = AmqpMessage(5, 110, 0, "orders", b"\x00Sp\xc0\x02\x01A", 0, None, 1717999999999)
        w.append_add(110, 45, amqp.encode())
        w.append_update(110, 32, ref(ORDERS))
        # legacy 1.x message record: live but undecodable
        w.append_add(111, 31, b"\x01\x02\x03")
        w.append_update(111, 32, ref(ORDERS))
        # a delete before the add: load removes every entry of a deleted id
        w.append_delete(150)
        w.append_add(150, 45, core(150, "orders", b"deleted-before"))
        w.append_update(150, 32, ref(ORDERS))
        # a large committed transaction spanning several files (numberOfRecords counts the commit's file)
        for i in range(40):
            w.append_add_tx(504, 200 + i, 45, core(200 + i, "events", bytes([i]) * 2500))
            w.append_update_tx(504, 200 + i, 32, ref(EV_A))
            w.append_update_tx(504, 200 + i, 32, ref(EV_B))
        w.append_commit(504)
        # prepared (XA) and never completed
        w.append_add_tx(502, 106, 45, core(106, "events", b"in-doubt"))
        w.append_update_tx(502, 106, 32, ref(EV_A))
        w.append_prepare(502, Xid(1, b"bq", b"gtx").encode())
        w.append_add_tx(503, 107, 45, core(107, "orders", b"never-completed"))
        w.append_update_tx(503, 107, 32, ref(ORDERS))
    return data


# --- reading exports back -----------------------------------------------------------------------------------


def read_jsonl_table(directory: Path) -> list[dict]:
    rows = []
    for p in sorted(directory.glob("*.json*")):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def read_parquet_table(directory: Path) -> list[dict]:
    import pyarrow.dataset as ds

    part = "hive" if any(p.is_dir() for p in directory.iterdir()) else None
    table = ds.dataset(str(directory), format="parquet", partitioning=part).to_table()
    return table.to_pylist()


def normalise(rows: list[dict]) -> list[dict]:
    """Rows as plain comparable dicts, sorted by (message id, queue): partition values back to str, bytes to
    bytes, properties to lists of dicts."""
    out = []
    for r in rows:
        d = dict(r)
        if isinstance(d.get("body"), str):
            import base64

            d["body"] = base64.urlsafe_b64decode(d["body"])
        if d.get("queue") is not None:
            d["queue"] = str(d["queue"])
        for k in ("properties", "annotations"):  # map columns: Parquet gives pairs, JSON Lines an object
            if isinstance(d.get(k), list):
                d[k] = dict(d[k])
        out.append(d)
    return sorted(out, key=lambda d: (d.get("message_id"), d.get("queue"), d.get("kind"), d.get("id")))


# Module-scoped fixtures shared by the export engine tests (imported by name into each test module).
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The record-by-record store of :func:`build_store`."""
    return build_store(tmp_path_factory.mktemp("broker"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """A small ``create --demo`` store (6 MiB, 1 MiB files, seed 7) with its manifest."""
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return path
