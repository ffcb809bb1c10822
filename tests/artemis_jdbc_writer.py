"""Test helper: an Artemis database store written from a file journal, through the JDBC record layout.

Every record of the file journal, in the order its load reads them (files by header fileID, records in file
order, records of earlier uses of reused files skipped), is appended as ``JDBCJournalImpl`` appends it and
then synced as ``JDBCJournalImpl.sync`` does (one sync per record):

* ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX and PREPARE insert a row (``insert-journal-record``; the row's
  columns as ``JDBCJournalRecord.writeRecord`` sets them: a PREPARE has id -1 and its extra data in txData);
* DELETE runs ``DELETE ... WHERE id = ?`` (every row of that id goes);
* ROLLBACK runs ``DELETE ... WHERE txId = ?``;
* COMMIT deletes the rows of its DELETE_TX targets and inserts the commit row (id -1);
* then ``cleanupTxRecords``: a committed transaction whose added records have all been deleted loses its rows
  (``DELETE ... WHERE txId = ?``).

Events (record type 10, ``appendAddEvent``) are no-ops in ``JDBCJournalImpl``. ``seq`` counts every append.
"""
from __future__ import annotations

from pathlib import Path

from amqtool.formats.artemis.records import (
    ADD, ADD_TX, COMMIT, DELETE, DELETE_TX, EVENT, PREPARE, ROLLBACK, UPDATE, UPDATE_TX, fixed_size,
)

JOURNAL_DDL = ("CREATE TABLE {t}(id BIGINT,recordType SMALLINT,compactCount SMALLINT,txId BIGINT,"
               "userRecordType SMALLINT,variableSize INTEGER,record BYTEA,txDataSize INTEGER,txData BYTEA,"
               "txCheckNoRecords INTEGER,seq BIGINT)")
NODE_MANAGER_DDL = ("CREATE TABLE {t} (ID INT NOT NULL, HOLDER_ID VARCHAR(128), HOLDER_EXPIRATION_TIME BIGINT, "
                    "NODE_ID CHAR(36),STATE CHAR(1), PRIMARY KEY(ID))")
LARGE_DDL = ("CREATE TABLE {t} (ID BIGSERIAL, FILENAME VARCHAR(255), EXTENSION VARCHAR(10), DATA OID, "
             "PRIMARY KEY(ID))")
INSERT = ("INSERT INTO {t}(id,recordType,compactCount,txId,userRecordType,variableSize,record,txDataSize,txData,"
          "txCheckNoRecords,seq) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)")


def journal_records(journal_dir: Path) -> list[tuple]:
    """(record type, id, txId, userRecordType, compactCount, body, extra) of every record, in load order."""
    from amqtool import native
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    out = []
    [journal] = detect(journal_dir).journals()
    with open_journal(journal) as opened:
        for fi, jf in enumerate(opened.files):
            data = opened.read_file(fi)
            records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
            for t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len in records:
                start = off + fixed_size(t, jf.version) - 4
                body = bytes(data[start:start + (extra_len if t == PREPARE else body_len)]) \
                    if t in (ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX, PREPARE) else b""
                out.append((t, rid, tx_id, utype, cc, body))
    return out


class JdbcJournalWriter:
    """Appends records to one journal table as ``JDBCJournalImpl`` does (see the module docstring)."""

    def __init__(self, conn, table: str, create: bool = True):
        self.conn, self.table, self.seq = conn, table, 0
        self.txs: dict[int, dict] = {}  # txId -> {"records": [ids], "deletes": [ids], "committed": bool}
        if create:
            conn.execute(JOURNAL_DDL.format(t=table))

    def _insert(self, rid, rtype, cc, tx_id, utype, record=b"", txdata=b""):
        self.conn.execute(INSERT.format(t=self.table),
                          (rid, rtype, cc, tx_id, utype, len(record), record, len(txdata), txdata, 0, self.seq))

    def _cleanup(self, deleted: list[int]) -> None:
        for tx_id, h in list(self.txs.items()):
            h["records"] = [i for i in h["records"] if i not in deleted]
            if not h["records"] and h["committed"]:
                self.conn.execute(f"DELETE FROM {self.table} WHERE txId = %s", (tx_id,))
                del self.txs[tx_id]

    def append(self, t: int, rid: int, tx_id: int, utype: int, cc: int, body: bytes) -> None:
        if t == EVENT:
            return
        self.seq += 1
        deleted: list[int] = []
        if t in (ADD, UPDATE):
            self._insert(rid, t, cc, 0, utype, body)
        elif t in (ADD_TX, UPDATE_TX, DELETE_TX):
            h = self.txs.setdefault(tx_id, {"records": [], "deletes": [], "committed": False})
            (h["deletes"] if t == DELETE_TX else h["records"]).append(rid)
            self._insert(rid, t, cc, tx_id, -1 if t == DELETE_TX else utype, body)
        elif t == PREPARE:
            self.txs.setdefault(tx_id, {"records": [], "deletes": [], "committed": False})
            self._insert(-1, t, 0, tx_id, -1, b"", body)
        elif t == DELETE:
            self.conn.execute(f"DELETE FROM {self.table} WHERE id = %s", (rid,))
            deleted.append(rid)
        elif t == ROLLBACK:
            self.conn.execute(f"DELETE FROM {self.table} WHERE txId = %s", (tx_id,))
        elif t == COMMIT:
            h = self.txs.get(tx_id)
            if h is None:  # JDBCJournalImpl would NPE here; a file journal's orphan commit: nothing to do
                return
            for d in h["deletes"]:
                self.conn.execute(f"DELETE FROM {self.table} WHERE id = %s", (d,))
                deleted += [-1, d]
            self._insert(-1, t, 0, tx_id, -1)
            h["committed"] = True
        self._cleanup(deleted)


def write_journal(conn, journal_dir: Path, table: str) -> JdbcJournalWriter:
    w = JdbcJournalWriter(conn, table)
    for rec in journal_records(journal_dir):
        w.append(*rec)
    return w
