"""Test helper: an ActiveMQ Classic JDBC store in PostgreSQL, written from a KahaDB fixture's live messages.

The schema is the one ``Statements.getCreateSchemaStatements`` creates with ``PostgresqlJDBCAdapter``
(``BYTEA`` MSG), and rows are written as ``DefaultJDBCAdapter.doAddMessage`` / ``doSetSubscriberEntry`` /
``doRecordDestination`` write them. The OpenWire bytes are the messages' own bytes from the KahaDB journal
(the JDBC adapter marshals with the same ``OpenWireFormat``), so every decoded field can be checked against
the fixture's manifest.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def schema(prefix: str = "") -> list[str]:
    m, a, lk = f"{prefix}ACTIVEMQ_MSGS", f"{prefix}ACTIVEMQ_ACKS", f"{prefix}ACTIVEMQ_LOCK"
    return [
        f"CREATE TABLE {m}(ID BIGINT NOT NULL, CONTAINER VARCHAR(250) NOT NULL, MSGID_PROD VARCHAR(250), "
        f"MSGID_SEQ BIGINT, EXPIRATION BIGINT, MSG BYTEA, PRIMARY KEY ( ID ) )",
        f"CREATE INDEX {m.split('.')[-1]}_CIDX ON {m} (CONTAINER)",
        f"CREATE TABLE {a}(CONTAINER VARCHAR(250) NOT NULL, SUB_DEST VARCHAR(250), CLIENT_ID VARCHAR(250) NOT NULL, "
        f"SUB_NAME VARCHAR(250) NOT NULL, SELECTOR VARCHAR(250), LAST_ACKED_ID BIGINT, "
        f"PRIMARY KEY ( CONTAINER, CLIENT_ID, SUB_NAME))",
        f"ALTER TABLE {m} ADD PRIORITY BIGINT",
        f"ALTER TABLE {m} ADD XID VARCHAR(250)",
        f"ALTER TABLE {a} ADD PRIORITY BIGINT DEFAULT 5 NOT NULL",
        f"ALTER TABLE {a} ADD XID VARCHAR(250)",
        f"ALTER TABLE {a} DROP CONSTRAINT {a.split('.')[-1].lower()}_pkey",  # PostgresqlJDBCAdapter's acksPkName
        f"ALTER TABLE {a} ADD PRIMARY KEY (CONTAINER, CLIENT_ID, SUB_NAME, PRIORITY)",
        f"CREATE TABLE {lk}( ID BIGINT NOT NULL, TIME BIGINT, BROKER_NAME VARCHAR(250), PRIMARY KEY (ID) )",
        f"INSERT INTO {lk}(ID) VALUES (1)",
    ]


@dataclass
class FixtureMessage:
    container: str
    message_id: str
    priority: int
    raw: bytes


def kahadb_messages(store_dir: Path) -> list[FixtureMessage]:
    """The live messages of a KahaDB store in journal order, with their OpenWire bytes."""
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.scan import mapped
    from amqtool.formats.kahadb.commands import EntryType, decode_command
    from amqtool.store.layout import detect

    out = []
    for d in load_store(detect(store_dir)):
        for key, st in d.replay.destinations.items():
            kind = "queue" if st.destination.type in (0, 2) else "topic"
            for m in sorted(st.messages.values(), key=lambda m: (m.file_id, m.offset)):
                with mapped(d.file(m.file_id).path) as buf:
                    cmd = decode_command(bytes(buf[m.offset + 5:m.offset + m.length]))
                add = cmd.add if cmd.type is EntryType.UPDATE_MESSAGE else cmd
                out.append(FixtureMessage(f"{kind}://{st.destination.name}", m.message_id, m.priority,
                                          bytes(add.message)))
    return out


def write_messages(conn, messages: list[FixtureMessage], prefix: str = "", start_id: int = 1,
                   xid: dict[int, str] | None = None) -> dict[str, list[int]]:
    """INSERT one row per message (IDs from ``start_id`` in order); returns the row IDs per container."""
    ids: dict[str, list[int]] = {}
    with conn.cursor() as cur:
        for n, m in enumerate(messages):
            rid = start_id + n
            prod, _, seq = m.message_id.rpartition(":")
            cur.execute(f"INSERT INTO {prefix}ACTIVEMQ_MSGS(ID, MSGID_PROD, MSGID_SEQ, CONTAINER, EXPIRATION, "
                        f"PRIORITY, MSG, XID) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (rid, prod, int(seq), m.container, 0, m.priority, m.raw, (xid or {}).get(rid)))
            ids.setdefault(m.container, []).append(rid)
    return ids


def add_subscription(conn, container: str, client: str, name: str, last_acked: int, prefix: str = "",
                     priorities: range = range(1)) -> None:
    with conn.cursor() as cur:
        for p in priorities:
            cur.execute(f"INSERT INTO {prefix}ACTIVEMQ_ACKS(CONTAINER, CLIENT_ID, SUB_NAME, SELECTOR, LAST_ACKED_ID, "
                        f"SUB_DEST, PRIORITY) VALUES (%s, %s, %s, NULL, %s, %s, %s)",
                        (container, client, name, last_acked, container, p))


def record_destination(conn, container: str, prefix: str = "") -> None:
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {prefix}ACTIVEMQ_ACKS(CONTAINER, CLIENT_ID, SUB_NAME, SELECTOR, LAST_ACKED_ID, "
                    f"SUB_DEST, PRIORITY) VALUES (%s, %s, %s, NULL, 0, %s, 11)",
                    (container, container, container, container))


def encoded_xid(op: bytes, fmt: int = 7, gid: bytes = b"gtx-1", bq: bytes = b"b1") -> str:
    """``XATransactionId.getEncodedXidBytes`` with byte 0 set to ``op`` (``+``/``-``), base64."""
    import base64
    import struct

    raw = bytearray(10) + struct.pack(">iH", fmt, len(gid)) + gid + bq
    raw[0:1] = op
    return base64.b64encode(bytes(raw)).decode()
