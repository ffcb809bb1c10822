"""Every SQL statement amqtool runs against an Artemis database store, one class per dialect.

The tables are those of ``artemis-jdbc-store`` (``journal-sql.properties``, ``PropertySQLProvider``), named
in broker.xml's ``<database-store>`` (defaults from ``ActiveMQDefaultConfiguration``: ``BINDINGS``,
``MESSAGES``, ``LARGE_MESSAGES``, ``PAGE_STORE``, ``NODE_MANAGER_STORE``):

* journal tables (bindings, messages): ``id BIGINT, recordType SMALLINT, compactCount SMALLINT, txId BIGINT,
  userRecordType SMALLINT, variableSize INTEGER, record BYTEA, txDataSize INTEGER, txData BYTEA,
  txCheckNoRecords INTEGER, seq BIGINT``; ``JDBCJournalImpl.load`` reads them ``ORDER BY seq ASC``
  (``select-journal-record``).
* the large-message table (``JDBCSequentialFileFactory``): ``ID BIGSERIAL, FILENAME, EXTENSION, DATA OID``
  on PostgreSQL (``create-file-table.postgresql``: the bytes are a large object), ``BLOB`` elsewhere.
* the node-manager table (``JdbcSharedStateManager``, ``JdbcLeaseLock``): ``ID, HOLDER_ID,
  HOLDER_EXPIRATION_TIME, NODE_ID, STATE``; row 0 the state (``L`` active, ``F`` failing back, ``P`` paused,
  ``N`` not started), row 1 the primary lock, row 2 the backup lock, row 3 the node id.

On PostgreSQL the broker lower-cases the names (``table-names-case.postgresql=lower``); unquoted names in
the statements below fold the same way.
"""
from __future__ import annotations

from amqtool.engines.jdbc.connection import check_identifier

DEFAULT_TABLES = {"bindings": "BINDINGS", "messages": "MESSAGES", "large-messages": "LARGE_MESSAGES",
                  "page-store": "PAGE_STORE", "node-manager": "NODE_MANAGER_STORE"}
STATE_ROW, PRIMARY_LOCK_ROW, BACKUP_LOCK_ROW, NODE_ID_ROW = 0, 1, 2, 3  # PropertySQLProvider
STATES = {"L": "ACTIVE", "F": "FAILING_BACK", "P": "PAUSED", "N": "NOT_STARTED"}  # JdbcSharedStateManager


class ArtemisStatements:
    """The ANSI statements for one store's table names."""

    vendor = "ansi"

    def __init__(self, tables: dict[str, str] | None = None):
        names = dict(DEFAULT_TABLES, **(tables or {}))
        self.tables = {role: check_identifier(name, f"{role} table name") for role, name in names.items()}

    def journal_rows(self, table: str) -> str:
        """``select-journal-record``: every row in the order ``JDBCJournalImpl.load`` reads them."""
        return (f"SELECT id, recordType, compactCount, txId, userRecordType, variableSize, record, txDataSize, "
                f"txData, txCheckNoRecords, seq FROM {table} ORDER BY seq ASC")

    def journal_bounds(self, table: str) -> str:
        return f"SELECT MIN(seq), MAX(seq), COUNT(*) FROM {table}"

    def node_manager_rows(self) -> str:
        return (f"SELECT ID, HOLDER_ID, HOLDER_EXPIRATION_TIME, NODE_ID, STATE FROM {self.tables['node-manager']} "
                f"ORDER BY ID")

    def large_message_files(self) -> str:
        raise NotImplementedError

    def now_ms(self) -> str:
        raise NotImplementedError

    def table_facts(self) -> str:
        raise NotImplementedError


class PostgresArtemisStatements(ArtemisStatements):
    vendor = "postgresql"

    def large_message_files(self) -> str:
        # DATA is a large-object OID; its size through a read-only descriptor (INV_READ = 0x40000), which a
        # READ ONLY transaction may open.
        return (f"SELECT ID, FILENAME, EXTENSION, "
                f"CASE WHEN DATA IS NULL THEN NULL ELSE lo_lseek64(lo_open(DATA, 262144), 0, 2) END "
                f"FROM {self.tables['large-messages']} ORDER BY ID")

    def now_ms(self) -> str:
        return "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"

    def table_facts(self) -> str:
        parts = " UNION ALL ".join("SELECT %s::text AS role, %s::text AS name, to_regclass(%s) AS oid"
                                   for _ in self.tables)
        return (f"SELECT t.role, t.name, t.oid IS NOT NULL, "
                f"CASE WHEN t.oid IS NULL THEN NULL ELSE pg_total_relation_size(t.oid) END FROM ({parts}) t")

    def table_fact_params(self) -> list[str]:
        out: list[str] = []
        for role, name in self.tables.items():
            out += [role, name, name]
        return out


DIALECTS = {"postgresql": PostgresArtemisStatements}


def statements_for(vendor: str, tables: dict[str, str] | None = None) -> ArtemisStatements:
    return DIALECTS[vendor](tables)
