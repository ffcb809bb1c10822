"""Every SQL statement amqtool runs against an ActiveMQ Classic JDBC store, one class per dialect.

The tables are those ``org.apache.activemq.store.jdbc.Statements.getCreateSchemaStatements`` creates
(``tablePrefix`` + ``ACTIVEMQ_MSGS`` / ``ACTIVEMQ_ACKS`` / ``ACTIVEMQ_LOCK``):

* ``ACTIVEMQ_MSGS(ID, CONTAINER, MSGID_PROD, MSGID_SEQ, EXPIRATION, MSG, PRIORITY, XID)``: one row per stored
  message; ``CONTAINER`` is ``ActiveMQDestination.getQualifiedName()`` (``queue://A``, ``topic://B``), ``MSG``
  the OpenWire-marshalled message (``BYTEA`` on PostgreSQL, ``PostgresqlJDBCAdapter``), ``XID`` set while an
  XA transaction is prepared: base64 of the encoded XID whose first byte is ``+`` (a prepared add,
  ``DefaultJDBCAdapter.doAddMessage``) or ``-`` (a prepared remove, ``doRemoveMessage``).
* ``ACTIVEMQ_ACKS(CONTAINER, SUB_DEST, CLIENT_ID, SUB_NAME, SELECTOR, LAST_ACKED_ID, PRIORITY, XID)``: one row
  per durable subscription and priority (``doSetSubscriberEntry``: priority 0 only, or 0..9 with
  ``prioritizedMessages``) plus one destination marker per destination with ``PRIORITY = 11``
  (``doRecordDestination``); ``XID`` set while an ack of a prepared XA transaction waits for its outcome.
* ``ACTIVEMQ_LOCK(ID, TIME, BROKER_NAME)``: row 1. The lease locker writes the holder and the lease's expiry
  (ms since the epoch) there (``LeaseDatabaseLocker``, ``Statements.getLeaseObtainStatement``); the default
  locker holds ``SELECT * FROM ACTIVEMQ_LOCK FOR UPDATE`` open for the broker's life
  (``DefaultDatabaseLocker``).

A dialect differs in how it names catalog facts (which tables exist, their size) and who holds a row lock;
the message and ack statements are ANSI and shared.
"""
from __future__ import annotations

from amqtool.engines.jdbc.connection import check_prefix

DESTINATION_MARKER_PRIORITY = 11  # DefaultJDBCAdapter.doRecordDestination


class ClassicStatements:
    """The ANSI statements, with the table names of one store (``Statements`` with its ``tablePrefix``)."""

    vendor = "ansi"

    def __init__(self, table_prefix: str = "", msgs: str = "ACTIVEMQ_MSGS", acks: str = "ACTIVEMQ_ACKS",
                 lock: str = "ACTIVEMQ_LOCK"):
        self.prefix = check_prefix(table_prefix)
        for name in (msgs, acks, lock):
            check_prefix(name)
        self.msgs = self.prefix + msgs
        self.acks = self.prefix + acks
        self.lock = self.prefix + lock

    @property
    def tables(self) -> dict[str, str]:
        return {"messages": self.msgs, "acks": self.acks, "lock": self.lock}

    # --- messages ------------------------------------------------------------------------------------
    def messages(self, where: str = "") -> str:
        """Every message row, in ID order (the order ``JDBCMessageStore`` recovers a destination in)."""
        return (f"SELECT ID, CONTAINER, MSGID_PROD, MSGID_SEQ, EXPIRATION, PRIORITY, XID, MSG FROM {self.msgs}"
                f"{' WHERE ' + where if where else ''} ORDER BY ID")

    def message_bounds(self) -> str:
        """MIN/MAX of the ID column and the row count (Spark's partition bounds)."""
        return f"SELECT MIN(ID), MAX(ID), COUNT(*) FROM {self.msgs}"

    # --- acks ------------------------------------------------------------------------------------------
    def acks_rows(self) -> str:
        return (f"SELECT CONTAINER, SUB_DEST, CLIENT_ID, SUB_NAME, SELECTOR, LAST_ACKED_ID, PRIORITY, XID "
                f"FROM {self.acks} ORDER BY CONTAINER, CLIENT_ID, SUB_NAME, PRIORITY")

    # --- lock ------------------------------------------------------------------------------------------
    def lock_row(self) -> str:
        return f"SELECT ID, TIME, BROKER_NAME FROM {self.lock} ORDER BY ID"

    def now_ms(self) -> str:
        raise NotImplementedError

    # --- catalog ---------------------------------------------------------------------------------------
    def table_facts(self) -> str:
        """Rows (table name as configured, exists, row estimate, bytes) for the three tables."""
        raise NotImplementedError

    def row_lock_holders(self) -> str:
        """Sessions holding the default locker's ``SELECT ... FOR UPDATE`` open (pid, since, client, query)."""
        raise NotImplementedError


class PostgresClassicStatements(ClassicStatements):
    """PostgreSQL (``PostgresqlJDBCAdapter``: ``BYTEA`` message column; unquoted names fold to lower case)."""

    vendor = "postgresql"

    def now_ms(self) -> str:
        return "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"

    def table_facts(self) -> str:
        # to_regclass folds case and honours a schema prefix exactly as the broker's unquoted DDL did.
        parts = " UNION ALL ".join(
            f"SELECT %s::text AS name, to_regclass(%s) AS oid" for _ in self.tables)
        return (f"SELECT t.name, t.oid IS NOT NULL, "
                f"CASE WHEN t.oid IS NULL THEN NULL ELSE pg_total_relation_size(t.oid) END "
                f"FROM ({parts}) t")

    def table_fact_params(self) -> list[str]:
        out: list[str] = []
        for name in self.tables.values():
            out += [name, name]
        return out

    def row_lock_holders(self) -> str:
        # DefaultDatabaseLocker keeps a transaction open on the lock table (its SELECT ... FOR UPDATE, then the
        # keep-alive UPDATEs): that transaction holds a table-level RowShare/RowExclusive lock until it ends,
        # visible in pg_locks without touching the row. The lease locker's UPDATEs commit at once.
        return ("SELECT DISTINCT a.pid, a.xact_start, a.client_addr::text, a.application_name, a.state, a.query "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.relation = to_regclass(%s) AND l.granted AND l.mode IN ('RowShareLock', 'RowExclusiveLock') "
                "AND a.pid <> pg_backend_pid() AND a.state LIKE 'idle in transaction%%'")

    def row_lock_params(self) -> list[str]:
        return [self.lock]


DIALECTS = {"postgresql": PostgresClassicStatements}


def statements_for(vendor: str, table_prefix: str = "", **names: str) -> ClassicStatements:
    return DIALECTS[vendor](table_prefix, **names)
