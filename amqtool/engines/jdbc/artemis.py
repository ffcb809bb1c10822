"""Artemis' database store (``<store><database-store>``): the journal tables loaded as the broker loads them.

Load semantics, mirroring ``org.apache.activemq.artemis.jdbc.store.journal``:

* rows are read ``ORDER BY seq ASC`` (``JDBCJournalImpl.load``) and fed to ``JDBCJournalReaderCallback``;
* ADD (11) and UPDATE (12) join the committed list at once (``JDBCJournalLoaderCallback.addRecord`` /
  ``updateRecord``); only ADDs count for ``maxID``; ADD_TX (13) and UPDATE_TX (14) wait in their
  transaction, DELETE_TX (15) is kept as a record to delete, PREPARE (17) marks it prepared with its
  ``txData``; COMMIT (18) appends its records to the committed list in their order (its deletes were applied
  by the broker's SQL when it committed); a ROLLBACK (19) drops it;
* at the end (``checkPreparedTx``) a transaction neither prepared nor committed has failed, a prepared one
  not committed is returned as prepared;
* ``numberOfRecords`` is the number of rows read.

What the broker never leaves in a table, and so is a finding when found: DELETE (16) and ROLLBACK rows (its
``sync`` turns them into SQL ``DELETE``s), a ROLLBACK or DELETE naming nothing (its load throws and the journal
fails), a record type outside 11..19 (its load throws: "Unknown Record Type").

Deletes are physical in a table: a record deleted and then added again with the same id is live (the file
journal's load drops every record of an id that any DELETE names; ``JDBCJournalImpl.sync`` deletes the rows).

The result is an ``amqtool.engines.artemis.load.LoadResult`` whose bodies live in one in-memory buffer per
table (:class:`TableJournal`, a stand-in for the journal files), so the print contract, the broker-state
decoding (queues, messages per queue) and ``--style artemis`` (``DescribeJournal.printSurvivingRecords``, as
``artemis data print --jdbc`` uses) are the file journal's own code.
"""
from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from amqtool.errors import Finding, Severity, UnknownStoreError, Verdict
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
)
from amqtool.engines.artemis.load import LiveRecord, LoadResult, TxInfo
from amqtool.engines.jdbc.artemis_sql import (
    BACKUP_LOCK_ROW,
    NODE_ID_ROW,
    PRIMARY_LOCK_ROW,
    STATE_ROW,
    STATES,
    ArtemisStatements,
    statements_for,
)
from amqtool.engines.jdbc.connection import JdbcTarget, read_only_session
from amqtool.engines.jdbc.page_gaps import page_gap_findings
from amqtool.formats.damage import one_byte_apart

FETCH_ROWS = 2000
ADD_LARGE_MESSAGE = 30
ADD_REF_TYPE = 32
ACKNOWLEDGE_REF_TYPE = 33
_MESSAGE_TYPES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE (1.x), ADD_MESSAGE_PROTOCOL
QUEUE_BINDING, ADDRESS_BINDING = 21, 44
# user record types whose loss changes what the broker delivers: queue and address bindings, messages,
# references and acknowledgements
DELIVERY_TYPES = frozenset({21, 44, 30, 31, 45, 32, 33})


@dataclass
class ArtemisJdbcStore:
    target: JdbcTarget
    statements: ArtemisStatements
    kind: str = "artemis-jdbc"

    @property
    def root(self) -> str:
        return self.target.url


def open_store(target: JdbcTarget, tables: dict[str, str] | None = None) -> ArtemisJdbcStore:
    return ArtemisJdbcStore(target, statements_for(target.vendor, tables))


@dataclass
class TableFile:
    """What the file-journal code asks of a journal file, for a table."""

    name: str
    size: int = 0
    file_id: int = 0
    version: int = 2

    @property
    def path(self) -> Path:
        return Path(self.name)


class TableJournal:
    """A stand-in for ``OpenedJournal``: the bodies of one table's rows, kept in one buffer in seq order
    (each followed by one pad byte, so that no two bodies share an offset). ``seq_at[offset]`` is the row."""

    def __init__(self, table: str):
        self.table = table
        self.buf = bytearray()
        self.files = [TableFile(table)]
        self.seq_at: dict[int, int] = {}
        self.pending: list = []
        self.skipped: list = []
        self.null_ids: set[int] = set()  # body offsets of rows whose id was NULL (read as 0)

    def keep(self, body: bytes, seq: int) -> int:
        off = len(self.buf)
        self.buf += body
        self.buf.append(0)
        self.seq_at[off] = seq
        self.files[0].size = len(self.buf)
        return off

    def pread(self, index: int, offset: int, length: int) -> bytes:
        return bytes(self.buf[offset:offset + length])


@dataclass
class TableLoad:
    """One journal table: the load result and what the load met on the way."""

    kind: str                    # "bindings" | "messages"
    table: str
    result: LoadResult
    rows: int = 0
    type_counts: dict[int, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    load_fails: bool = False     # the broker's load would throw (the journal fails to start)
    # records of a transaction the load leaves out though the rows show them committed or prepared: judged
    # by verify_load, which knows what each governs (a message's reference, a page transaction...)
    left_out: list["LeftOut"] = field(default_factory=list)
    # rows of a prepared transaction whose NULL userRecordType the broker reads as type 0: the load of the
    # prepared transaction skips them (``loadPreparedTransactions``: an invalid record type is logged, the
    # transaction keeps its other records); judged by verify_load with the paging facts (_Governs)
    prepared_null_types: list["LeftOut"] = field(default_factory=list)
    # DELETE rows that removed an ADD: (seq, id, the ADD's user record type, the DELETE row's own bytes); the
    # broker never writes one (it deletes a record's rows), so each is a damaged row, judged by verify_load
    # (_deleted_live) by what it removed and what its bytes were
    deletes: list[tuple] = field(default_factory=list)


@dataclass
class LeftOut:
    """A transactional record the broker's load leaves out of the state its rows say it belongs to.

    ``why``: ``after-commit`` (it comes after its transaction's last COMMIT row: a changed seq or txId),
    ``null-txid`` (its txId is NULL: the broker reads transaction 0, never committed), ``end-null-txid``
    (its transaction's COMMIT or PREPARE row has a NULL txId: the transaction is rolled back), ``end-repeated``
    (its transaction has no end, and a later COMMIT row repeats another transaction's: its own, damaged)."""

    record: LiveRecord
    tx_id: int
    seq: int | None
    why: str


class _Tx:
    __slots__ = ("tx_id", "records", "deletes", "prepared", "committed", "extra")

    def __init__(self, tx_id: int):
        self.tx_id, self.records, self.deletes = tx_id, [], []
        self.prepared = self.committed = False
        self.extra = None


def iter_journal_rows(conn, st: ArtemisStatements, table: str) -> Iterator[tuple]:
    with conn.cursor(name=f"amqtool_{table.replace('.', '_')}") as cur:
        cur.itersize = FETCH_ROWS
        cur.execute(st.journal_rows(table))
        yield from cur


_ROW_COLUMNS = ("id", "recordType", "compactCount", "txId", "userRecordType", "variableSize", "record", "txDataSize",
                "txData", "txCheckNoRecords", "seq")


def load_table(conn, st: ArtemisStatements, kind: str, table: str,
               progress: Callable[[int], None] | None = None) -> TableLoad:
    """Load one journal table (see the module docstring)."""
    opened = TableJournal(table)
    live: list[LiveRecord] = []
    last_add: dict[int, int] = {}   # deleteReferences: id -> index of its latest ADD
    txs: dict[int, _Tx] = {}        # LinkedHashMap order
    tl = TableLoad(kind, table, None)  # type: ignore[arg-type]
    max_id = -1
    seen_seq: set[int] = set()
    where = f"{table}:seq="
    null_ends: list = []  # seqs of COMMIT/PREPARE rows whose txId is NULL
    repeated: list = []  # (seq, tx) of COMMIT rows of a transaction an earlier COMMIT row committed
    commits_seen: set[int] = set()
    after_commit: dict[int, list] = {}  # tx -> (record, seq) met after its COMMIT row, until another commits them
    null_tx: list = []  # (record, seq) of transactional rows whose txId is NULL (read as transaction 0)
    null_rows: list = []  # (record, record type, tx, seq, id NULL, userRecordType NULL) of NULL-column rows

    def finding(sev, code, msg, seq, **details):
        tl.findings.append(Finding(sev, code, msg, f"{where}{seq}", None, details))

    for row in iter_journal_rows(conn, st, table):
        rid, rtype, cc, tx_id, utype, vsize, record, txdsize, txdata, _nrec, seq = row
        if None in row[:6] or None in row[7:8] or None in row[9:]:
            # JDBCJournalRecord.readRecord reads every number with getShort/getInt/getLong, which give 0 for
            # a NULL; variableSize is then the record's length (setRecord). The row itself stays where the
            # database sorts it: PostgreSQL puts a NULL seq after every other row (ORDER BY seq ASC).
            nulls = [name for name, v in zip(_ROW_COLUMNS, row) if v is None and name not in ("record", "txData")]
            finding(Severity.WARNING, "artemis-jdbc-null-column",
                    f"row id {rid} has NULL {', '.join(nulls)}: the broker reads 0"
                    + (" and loads the row where the database sorts a NULL seq (PostgreSQL: after every other "
                       "row)" if seq is None else ""), seq, id=rid, columns=nulls)
            if tx_id is None and rtype in (PREPARE, COMMIT):
                null_ends.append(seq)  # judged at the end, by what the transactions left open hold
            nulled = (tx_id is None and rtype in (ADD_TX, UPDATE_TX), rid is None, utype is None)
            rid, rtype, cc, tx_id, utype = (v or 0 for v in (rid, rtype, cc, tx_id, utype))
        else:
            nulled = None
        tl.rows += 1
        tl.type_counts[rtype] = tl.type_counts.get(rtype, 0) + 1
        record = bytes(record) if record is not None else b""
        txdata = bytes(txdata) if txdata is not None else b""
        if progress is not None:
            progress(len(record) + len(txdata))
        if seq in seen_seq:
            finding(Severity.WARNING, "artemis-jdbc-duplicate-seq",
                    f"seq {seq} is used by more than one row: their load order is the database's choice", seq)
        seen_seq.add(seq)
        if vsize is not None and vsize != len(record):
            finding(Severity.WARNING, "artemis-jdbc-size-mismatch",
                    f"row id {rid} says variableSize={vsize} but its record holds {len(record)} byte(s) "
                    "(the broker uses the bytes)", seq, id=rid)
        utype = int(utype) if utype is not None else -1
        cc = cc or 0
        if rtype in (ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX):
            off = opened.keep(record, seq)
            entry = LiveRecord(rid, utype, rtype in (UPDATE, UPDATE_TX), cc, 0, off, len(record))
            if nulled is not None and rtype != DELETE_TX:
                if nulled[1]:
                    opened.null_ids.add(off)
                if nulled[0]:
                    null_tx.append((entry, seq))  # transaction 0 instead of its own
                null_rows.append((entry, rtype, tx_id, seq, nulled[1], nulled[2]))
        if rtype == ADD:
            live.append(entry)
            last_add[rid] = len(live) - 1
            max_id = max(max_id, rid)
        elif rtype == UPDATE:
            live.append(entry)
        elif rtype in (ADD_TX, UPDATE_TX, DELETE_TX):
            tx = txs.get(tx_id) or txs.setdefault(tx_id, _Tx(tx_id))
            if (tx_id in commits_seen and rtype != DELETE_TX
                    and not _same_record(opened, tx.records, rid, utype, record)):
                # JDBCJournalImpl appends a transaction's COMMIT after its records: a record after it (a
                # changed seq or txId) is left out, unless another COMMIT row of the transaction comes later
                # (JDBCJournalReaderCallback.onReadCommitRecord keeps the transaction and commits all its
                # records again); a copy of a record the transaction did commit loses nothing
                after_commit.setdefault(tx_id, []).append((entry, seq))
            if rtype == DELETE_TX:
                tx.deletes.append(LiveRecord(rid, 0, True, cc, 0, entry.body_offset, entry.body_len))
            else:
                tx.records.append(entry)
        elif rtype == PREPARE:
            tx = txs.get(tx_id) or txs.setdefault(tx_id, _Tx(tx_id))
            tx.prepared = True
            tx.extra = txdata
        elif rtype == COMMIT:
            if tx_id in commits_seen:
                repeated.append((seq, tx_id))
            commits_seen.add(tx_id)
            after_commit.pop(tx_id, None)  # this COMMIT commits them
            tx = txs.get(tx_id)
            if tx is not None:
                tx.committed = True
                for r in tx.records:
                    live.append(r)
                    if not r.is_update:
                        last_add[r.id] = len(live) - 1
                        max_id = max(max_id, r.id)
        elif rtype == DELETE:
            idx = last_add.pop(rid, None)
            if idx is None:
                tl.load_fails = True
                finding(Severity.CRITICAL, "artemis-jdbc-delete-unknown",
                        f"a DELETE row for id {rid}, which no ADD row before it holds: the broker's load throws "
                        "and the journal fails", seq, id=rid)
            else:
                tl.deletes.append((seq, rid, live[idx].user_record_type, record))
                live[idx] = None  # type: ignore[call-overload]
        elif rtype == ROLLBACK:
            if txs.pop(tx_id, None) is None:
                tl.load_fails = True
                finding(Severity.CRITICAL, "artemis-jdbc-rollback-unknown",
                        f"a ROLLBACK row for transaction {tx_id}, which has no records before it: the broker's "
                        "load throws (\"Cannot rollback, tx not found\") and the journal fails", seq, txId=tx_id)
            else:
                finding(Severity.WARNING, "artemis-jdbc-rollback-row",
                        f"a ROLLBACK row for transaction {tx_id}: the broker deletes a rolled-back "
                        "transaction's rows instead of writing these", seq, txId=tx_id)
        else:
            tl.load_fails = True
            finding(Severity.CRITICAL, "artemis-jdbc-unknown-record-type",
                    f"row id {rid} has record type {rtype}: the broker's load throws (\"Unknown Record Type\") "
                    "and the journal fails", seq, recordType=rtype)
    prepared, failed = [], []
    for tx in txs.values():
        info = TxInfo(tx.tx_id, tx.records, tx.deletes, tx.prepared, False, tx.extra)
        if not tx.prepared and not tx.committed:
            failed.append(info)
        elif not tx.committed:
            prepared.append(info)
    for tx_id, recs in after_commit.items():
        tl.left_out += [LeftOut(r, tx_id, q, "after-commit") for r, q in recs]
    tx0 = txs.get(0)
    if tx0 is None or not tx0.committed:
        tl.left_out += [LeftOut(r, 0, q, "null-txid") for r, q in null_tx]
    if null_ends:
        # a COMMIT (or PREPARE) that went to transaction 0 leaves its own transaction without one: the broker
        # rolls back every transaction left neither committed nor prepared (a prepared one is not at stake)
        for tx in txs.values():
            if not tx.committed and not tx.prepared and tx.tx_id != 0:
                tl.left_out += [LeftOut(r, tx.tx_id, None, "end-null-txid") for r in tx.records]
        for seq in null_ends:
            finding(Severity.WARNING, "artemis-jdbc-null-txid",
                    "a COMMIT or PREPARE row has a NULL txId: the broker reads transaction 0 (what the "
                    "transactions it leaves open held is judged apart)", seq)
    if repeated:
        # JDBCJournalImpl writes one COMMIT row a transaction: a second one is another transaction's COMMIT whose
        # txId was damaged (JDBCJournalReaderCallback.onReadCommitRecord keeps a committed transaction and commits
        # its records again), so a transaction left without an end whose rows come before it lost its COMMIT
        last = max((q for q, _ in repeated if q is not None), default=None)  # a NULL seq sorts last
        for tx in txs.values():
            if (not tx.committed and not tx.prepared and tx.tx_id != 0
                    and any(last is None or (opened.seq_at.get(r.body_offset) or last) < last for r in tx.records)):
                tl.left_out += [LeftOut(r, tx.tx_id, None, "end-repeated") for r in tx.records]
        for seq, tx_id in repeated:
            finding(Severity.WARNING, "artemis-jdbc-commit-repeated",
                    f"a second COMMIT row for transaction {tx_id}: the broker writes one, and its load commits the "
                    "transaction's records again (what a transaction it leaves open held is judged apart)", seq,
                    txId=tx_id)
    # ids that name a message: its record's, or its references' (a NULL type on the message row itself)
    named = _MESSAGE_TYPES + (ADD_REF_TYPE,)
    message_ids = {r.id for r in live if r is not None and r.user_record_type in named}
    for tx in txs.values():
        message_ids.update(r.id for r in tx.records if r.user_record_type in named)
    for entry, rtype, tx_id, seq, id_null, utype_null in null_rows:
        tx = txs.get(tx_id) if rtype in (ADD_TX, UPDATE_TX) else None
        if rtype in (ADD_TX, UPDATE_TX) and not (tx is not None and (tx.committed or tx.prepared)):
            continue  # rolled back anyway: judged with the transaction, if at all
        in_prepared = tx is not None and not tx.committed
        finding_for = (_null_prepared_loss(entry, id_null, utype_null, message_ids)
                       if in_prepared else _null_row_loss(kind, opened, entry, id_null, utype_null, live))
        if finding_for is not None:
            code, msg = finding_for
            finding(Severity.CRITICAL, code, msg, seq, id=entry.id)
        elif in_prepared and utype_null:
            tl.prepared_null_types.append(LeftOut(entry, tx_id, seq, "null-type-prepared"))
    tl.result = LoadResult(opened=opened, live=[r for r in live if r is not None], prepared=prepared,
                           failed=failed, max_id=max_id, number_of_records=tl.rows, scans=[], anomalies=[],
                           anomaly_counts={})
    return tl


def _null_row_loss(kind: str, opened: TableJournal, rec: LiveRecord, id_null: bool,
                   utype_null: bool, live: list) -> tuple[str, str] | None:
    """(code, message) when a committed row's NULL id or userRecordType, read as 0 (``JDBCJournalRecord
    .readRecord``: ``getLong``/``getByte`` of a NULL), loses what the row held; None when the other checks
    see the loss or there is none:

    * an acknowledgement (33) of message 0: the message it acknowledged comes back on its queue;
    * a queue (21) binding of id 0: the queue the broker registers is no longer the one its references, page
      stores and deletes name; an address (44) binding of id 0 only when another binding holds id 0 (an
      address is routed to by its name: its id names only its own record, whose delete rows the JDBC journal
      removes with it; ``PostOfficeJournalLoader`` keys addresses by name);
    * a bindings row of type 0 whose bytes are a queue or address binding: ``loadBindingJournal`` logs
      "invalid record type" and skips it, and the binding is gone (a messages row of type 0 makes the
      message journal's load throw: ``unknown-record-type``)."""
    t = rec.user_record_type
    if id_null and t == ACKNOWLEDGE_REF_TYPE:
        return "artemis-jdbc-null-id", ("an acknowledgement row has a NULL id: the broker reads message 0, so the "
                                        "message it acknowledged comes back on its queue")
    if kind != "bindings":
        return None
    if id_null and t in (QUEUE_BINDING, ADDRESS_BINDING):
        what = "queue" if t == QUEUE_BINDING else "address"
        if t == ADDRESS_BINDING and not any(r is not None and r is not rec and r.id == 0 for r in live):
            return None  # (the row's own id may have been 0: the demo's first id is)
        return "artemis-jdbc-null-id", (f"a {what} binding row has a NULL id: the broker registers the {what} "
                                        f"under id 0, not the id its references, pages and deletes name")
    if utype_null:
        found = _binding_bytes(opened.pread(0, rec.body_offset, rec.body_len))
        if found is not None:
            what, name = found
            return "artemis-jdbc-null-user-type", (
                f"row id {rec.id} has a NULL userRecordType: the broker reads type 0 and skips the row (\"invalid "
                f"record type\"), but its bytes are a {what} binding" + (f" ({name})" if name else "")
                + ", which is lost")
    return None


def _prepared_undecodable(messages: LoadResult) -> list[Finding]:
    """CRITICAL ``artemis-jdbc-undecodable`` for a prepared transaction's message record that does not decode
    (the broker's load of the prepared transaction decodes it: the prepared message is lost)."""
    from amqtool.errors import FormatError
    from amqtool.formats.artemis.message import LargeMessage, decode_persisted_message

    out = []
    for tx in messages.prepared:
        for rec in tx.records:
            if rec.user_record_type not in (ADD_LARGE_MESSAGE, 45):
                continue
            try:
                body = messages.body(rec)
                LargeMessage.decode(body) if rec.user_record_type == ADD_LARGE_MESSAGE else decode_persisted_message(body)
            except FormatError as err:
                out.append(Finding(Severity.CRITICAL, "artemis-jdbc-undecodable",
                                   f"message {rec.id} of prepared transaction {tx.tx_id} does not decode: "
                                   f"{err.message}",
                                   f"{messages.opened.table}:seq={messages.opened.seq_at.get(rec.body_offset)}",
                                   None, {"id": rec.id, "txId": tx.tx_id}))
    return out


def _null_prepared_loss(rec: LiveRecord, id_null: bool, utype_null: bool, message_ids: set) -> tuple[str, str] | None:
    """(code, message) when a NULL id or userRecordType of a prepared transaction's row loses what the
    transaction holds for its outcome: a message or reference of id 0 (no message), a row of type 0 naming a
    message (its reference, or its acknowledgement: ``handlePreparedAcknowledge`` takes a committed
    reference off its queue and holds it until the outcome, so without the row the message is delivered
    again, though the transaction acknowledged it), an acknowledgement of message 0 (the same); the orphan
    and acknowledgement checks see the committed state only."""
    if id_null and rec.user_record_type in _MESSAGE_TYPES + (ADD_REF_TYPE,):
        return "artemis-jdbc-null-id", (f"a row of prepared transaction data (user record type "
                                        f"{rec.user_record_type}) has a NULL id: the broker reads id 0, and the "
                                        "prepared message or reference is lost")
    if id_null and rec.user_record_type == ACKNOWLEDGE_REF_TYPE:
        return "artemis-jdbc-null-id", ("a prepared transaction's acknowledgement row has a NULL id: the broker "
                                        "reads message 0 and holds nothing for the transaction, so the message it "
                                        "acknowledged is delivered again")
    if utype_null and rec.id in message_ids:
        return "artemis-jdbc-null-user-type", (f"a prepared transaction's row of message {rec.id} has a NULL "
                                               "userRecordType: the broker reads type 0 and skips it, and the "
                                               "message, reference or acknowledgement it was is lost")
    return None


def _binding_bytes(body: bytes) -> tuple[str, str | None] | None:
    """("queue" | "address", its name) when ``body`` decodes as a queue or an address binding; else None."""
    from amqtool.errors import FormatError
    from amqtool.formats.artemis.userrecords import decode_user_record

    for cand, what in ((QUEUE_BINDING, "queue"), (ADDRESS_BINDING, "address")):
        try:
            decoded = decode_user_record(cand, body)
        except (FormatError, ValueError, IndexError):
            continue
        return what, getattr(decoded, "name", None) or getattr(decoded, "address", None)
    return None


def _same_record(opened: TableJournal, records: list, rid: int, utype: int, body: bytes) -> bool:
    return any(r.id == rid and r.user_record_type == utype and opened.pread(0, r.body_offset, r.body_len) == body
               for r in records)


# ---------------------------------------------------------------------------------------------------------

def table_facts(conn, st: ArtemisStatements) -> dict[str, dict]:
    with conn.cursor() as cur:
        cur.execute(st.table_facts(), st.table_fact_params())
        return {role: {"table": name, "exists": bool(ok), "bytes": size} for role, name, ok, size in cur.fetchall()}


def node_manager(conn, st: ArtemisStatements, facts: dict) -> dict:
    """``NODE_MANAGER_STORE``: the broker state, who holds the primary and backup leases until when (ms, the
    database clock ``JdbcLeaseLock`` uses), and the node id."""
    out: dict = {"table": st.tables["node-manager"], "exists": facts["node-manager"]["exists"]}
    if not out["exists"]:
        return out
    with conn.cursor() as cur:
        cur.execute(st.now_ms())
        now = int(cur.fetchone()[0])
        cur.execute(st.node_manager_rows())
        rows = {r[0]: r for r in cur.fetchall()}
    out["databaseTimeMs"] = now
    state = rows.get(STATE_ROW)
    code = (state[4] or "").strip() if state else ""
    out["state"] = STATES.get(code, "FIRST_TIME_START" if not code else f"unknown ({code})")
    node = rows.get(NODE_ID_ROW)
    out["nodeId"] = (node[3] or "").strip() or None if node else None
    for name, row_id in (("primaryLock", PRIMARY_LOCK_ROW), ("backupLock", BACKUP_LOCK_ROW)):
        row = rows.get(row_id)
        if row is None:
            out[name] = None
            continue
        holder, expires = row[1], row[2]
        lock = {"holder": holder, "expiresMs": expires}
        if holder is None:
            lock["state"] = "free"
        elif expires is not None and expires >= now:
            lock.update(state="held", remainingMs=expires - now)
        else:
            lock.update(state="expired", expiredAgoMs=now - (expires or 0))
        out[name] = lock
    return out


def large_message_files(conn, st: ArtemisStatements, facts: dict) -> dict[int, dict] | None:
    """``<id>.msg`` rows of the large-message table: message id -> {rowId, size}; None without the table."""
    if not facts["large-messages"]["exists"]:
        return None
    out: dict[int, dict] = {}
    with conn.cursor() as cur:
        cur.execute(st.large_message_files())
        for row_id, name, ext, size in cur.fetchall():
            stem, _, e = (name or "").partition(".")
            if (ext or e) == "msg" and stem.isdigit():
                out[int(stem)] = {"rowId": row_id, "file": name, "size": size}
    return out


def large_message_bodies(store: "ArtemisJdbcStore") -> dict[int, bytes]:
    """The bytes of every ``<id>.msg`` row of the large-message table (``lo_get`` of its large object), for
    the export; an empty dict without the table."""
    st = store.statements
    out: dict[int, bytes] = {}
    with read_only_session(store.target) as conn:
        if not table_facts(conn, st)["large-messages"]["exists"]:
            return out
        with conn.cursor() as cur:
            cur.execute(f"SELECT FILENAME, EXTENSION, lo_get(DATA) FROM {st.tables['large-messages']} "
                        f"WHERE DATA IS NOT NULL ORDER BY ID")
            for name, ext, data in cur:
                stem, _, e = (name or "").partition(".")
                if (ext or e) == "msg" and stem.isdigit():
                    out[int(stem)] = bytes(data)
    return out


def _simple_strings(data: bytes) -> list[str]:
    """A buffer of ``writeSimpleString`` values (``PagingStoreFactoryDatabase``'s directory list)."""
    from amqtool.formats.artemis.primitives import Reader

    r = Reader(data)
    out = []
    while r.pos < r.end:
        out.append(r.simple_string("page-store directory entry"))
    return out


def page_stores(conn, st: ArtemisStatements, facts: dict, memory: list | None = None
                ) -> tuple[list[dict] | None, list[Finding]]:
    """The JDBC paging stores (``PagingStoreFactoryDatabase``): the page-store table's ``directory.txt`` lists
    one table id per address (a SimpleString each); table ``<page-store-table-name><id without dashes>`` holds
    ``address.txt`` (the address, a SimpleString) and the ``<n>.page`` files, framed as file pages are
    (``Page.read``). Returns (stores, findings): a page whose records do not frame is CRITICAL
    ``page-not-framed`` (WARNING for a short tail, which Artemis ignores), a framed record that does not decode
    CRITICAL ``page-record-undecodable``, a listed table that is missing WARNING ``page-store-table-missing``.
    None without the page-store table. ``memory`` receives the stores as
    :class:`~amqtool.engines.artemis.paging.stores.MemoryPageStore` (their pages' bytes), in the order the
    broker's paging manager explores them, for the export's paged rows."""
    from amqtool.engines.artemis.paging.stores import MemoryPageStore, _chm_order
    from amqtool.errors import FormatError
    from amqtool.formats.artemis.paging import decode_page, page_id_from_name

    if not facts["page-store"]["exists"]:
        return None, []
    prefix = st.tables["page-store"]
    findings: list[Finding] = []
    stores: list[dict] = []
    if memory is None:
        memory = []
    with conn.cursor() as cur:
        cur.execute(f"SELECT lo_get(DATA) FROM {prefix} WHERE FILENAME = 'directory.txt' AND DATA IS NOT NULL")
        row = cur.fetchone()
        try:
            ids = _simple_strings(bytes(row[0])) if row is not None else []
        except FormatError as err:
            return [], [Finding(Severity.CRITICAL, "page-directory-undecodable", err.message, f"{prefix}:directory.txt")]
        findings += _unlisted_page_tables(cur, prefix, {prefix + gid.replace("-", "") for gid in ids})
        if row is None:
            return [], findings
        for gid in ids:
            table = prefix + gid.replace("-", "")
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
            if not cur.fetchone()[0]:
                findings.append(Finding(Severity.WARNING, "page-store-table-missing",
                                        f"{prefix}'s directory lists {gid}, but table {table} does not exist", table))
                continue
            cur.execute(f"SELECT FILENAME, lo_get(DATA) FROM {table} WHERE DATA IS NOT NULL ORDER BY ID")
            entry: dict = {"table": table, "address": None, "pages": []}
            mem = MemoryPageStore(Path(table), "")
            for name, data in cur.fetchall():
                data = bytes(data)
                if name == "address.txt":
                    try:
                        entry["address"] = _simple_strings(data)[0]
                    except (FormatError, IndexError):
                        entry["address_bad"] = f"{table}:{name}"
                    continue
                page = page_id_from_name(name or "")
                if page is None:
                    continue
                mem.pages[page], mem.data[page] = name, data
                mem.page_files += 1
                try:
                    messages, end = decode_page(data)
                except FormatError as err:
                    findings.append(Finding(Severity.CRITICAL, "page-record-undecodable",
                                            f"page {page}: {err.message}", f"{table}:{name}"))
                    entry["pages"].append({"file": name, "page": page, "size": len(data), "records": None,
                                           "end": "undecodable"})
                    continue
                entry["pages"].append({"file": name, "page": page, "size": len(data), "records": len(messages),
                                       "end": end.reason,
                                       "largeMessageIds": [m.message_id for m in messages if m.is_large]})
                if not end.clean:
                    findings.append(Finding(Severity.CRITICAL if end.suspect else Severity.WARNING, "page-not-framed",
                                            f"page {page} stops framing at byte {end.offset} of {end.size} "
                                            f"({end.reason}) after {end.records} record(s)",
                                            f"{table}:{name}", end.offset))
            entry["pages"].sort(key=lambda p: p["page"])
            bad = entry.pop("address_bad", None)
            if bad is not None:
                # the broker cannot tell which address the pages are for: with pages, their messages are lost
                held = sum(p["records"] or 0 for p in entry["pages"])
                findings.append(Finding(Severity.CRITICAL if held else Severity.WARNING, "page-address-undecodable",
                                        f"address.txt does not hold a SimpleString" + (
                                            f": the {held} paged message(s) of {len(entry['pages'])} page(s) "
                                            "belong to no address" if held else ""), bad, None, {"messages": held}))
            elif entry["address"] is None and entry["pages"]:
                # PagingStoreFactoryDatabase writes address.txt when it creates the table, before any page
                held = sum(p["records"] or 0 for p in entry["pages"])
                findings.append(Finding(Severity.CRITICAL if held else Severity.WARNING, "page-address-missing",
                                        f"table {table} holds {len(entry['pages'])} page(s) but no address.txt"
                                        + (f": its {held} paged message(s) belong to no address" if held else ""),
                                        table, None, {"messages": held}))
            stores.append(entry)
            if entry["address"] is not None:
                mem.address = entry["address"]
                memory.append(mem)
    memory[:] = [memory[i] for i in _chm_order([m.address for m in memory])]
    return stores, findings


def _unlisted_page_tables(cur, prefix: str, listed: set[str]) -> list[Finding]:
    """CRITICAL ``page-store-table-unlisted``: a ``<prefix><id>`` table holding ``.page`` rows that
    ``directory.txt`` does not list (``PagingStoreFactoryDatabase.reloadStores`` loads only the listed ones,
    so its paged messages are lost: the directory was damaged)."""
    cur.execute("SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid) "
                "AND c.relname LIKE %s AND c.relname <> %s ORDER BY c.relname",
                (prefix.lower().replace("_", "\\_") + "%", prefix.lower()))
    names = {n.lower() for n in listed}
    out = []
    for (table,) in cur.fetchall():
        if table in names:
            continue
        cur.execute(f"SELECT COUNT(*) FROM {table} WHERE FILENAME LIKE '%%.page' AND DATA IS NOT NULL")
        pages = cur.fetchone()[0]
        if pages:
            out.append(Finding(Severity.CRITICAL, "page-store-table-unlisted",
                               f"table {table} holds {pages} page(s) but {prefix}'s directory.txt does not list it: "
                               "the broker does not load them", table, None, {"pages": pages}))
    return out


@dataclass
class ArtemisJdbcLoad:
    facts: dict
    journals: list[TableLoad]
    node_manager: dict
    large_files: dict[int, dict] | None
    page_stores: list[dict] | None = None
    page_findings: list[Finding] = field(default_factory=list)
    page_data: list = field(default_factory=list)  # MemoryPageStore per address with pages, exploring order

    def result(self, kind: str) -> LoadResult | None:
        return next((j.result for j in self.journals if j.kind == kind), None)


def load(store: ArtemisJdbcStore, progress=None, journals: set[str] | None = None) -> ArtemisJdbcLoad:
    st = store.statements
    with read_only_session(store.target) as conn:
        facts = table_facts(conn, st)
        missing = [facts[r]["table"] for r in ("bindings", "messages") if not facts[r]["exists"]]
        if missing:
            raise UnknownStoreError(f"{store.target.url}: no Artemis database store here (table(s) "
                                    f"{', '.join(missing)} missing; check the table names)")
        loads = [load_table(conn, st, kind, st.tables[kind], progress) for kind in ("bindings", "messages")
                 if journals is None or kind in journals]
        nm = node_manager(conn, st, facts)
        lm = large_message_files(conn, st, facts)
        memory: list = []
        ps, pf = page_stores(conn, st, facts, memory)
    return ArtemisJdbcLoad(facts, loads, nm, lm, ps, pf, memory)


# ---------------------------------------------------------------------------------------------------------
# print

def _record_json(result: LoadResult, rec: LiveRecord, safe: bool) -> dict:
    from amqtool.engines.artemis.journal_print import record_json

    doc = record_json(result, rec, safe)
    doc["offset"] = doc["seq"] = result.opened.seq_at[rec.body_offset]
    return doc


def _tx_json(result: LoadResult, tx: TxInfo, safe: bool) -> dict:
    doc = {"txId": tx.tx_id}
    if tx.extra is not None:
        doc["extraData"] = base64.urlsafe_b64encode(tx.extra).decode("ascii")
    doc["records"] = [_record_json(result, r, safe) for r in tx.records]
    doc["recordsToDelete"] = [_record_json(result, r, safe) for r in tx.records_to_delete]
    return doc


def _selected(opts, result: LoadResult) -> Iterator[LiveRecord]:
    for rec in result.live:
        if opts is None or opts.selects(rec, result.opened.table):
            yield rec


def print_json(store: ArtemisJdbcStore, data: "ArtemisJdbcLoad", opts, verdict: Verdict) -> Iterator[str]:
    """The text chunks of the print document of ``data`` (a :func:`load` of ``store``, or the part of it
    :func:`selected_journals` keeps); ``verdict``: verify's on the whole load (:func:`verify_load`)."""
    return _document_chunks(store, data, verdict, opts)


def selected_journals(data: "ArtemisJdbcLoad", journals: set[str] | None) -> "ArtemisJdbcLoad":
    """``data`` with only the journal tables ``journals`` names (print's ``--journal``); all when None."""
    if journals is None:
        return data
    import dataclasses

    return dataclasses.replace(data, journals=[j for j in data.journals if j.kind in journals])


def _document_chunks(store: ArtemisJdbcStore, data: "ArtemisJdbcLoad", verdict: Verdict, opts) -> Iterator[str]:
    """The print document (the file journal's contract, man/amqtool-print.1) as text chunks::

        {"verdict", "kind": "artemis-jdbc", "root": <url>, "database": {...}, "tables": {...},
         "journals": [{"kind", "table", "directory": null, "files": [], "pending": [], "refused": [],
                       "live": [...], "prepared": [...], "failed": [...], "maxId", "numberOfRecords", "rows"}],
         "queueSummary": {...}, "nodeManager": {...}, "largeMessages": [...]}

    A record: the file journal's fields, with ``file`` the table and ``offset``/``seq`` the row's seq.
    ``verdict``: verify's (the exit code's)."""
    from amqtool.engines.artemis.journal_print import queue_summary

    dumps = json.dumps
    safe = bool(opts and opts.safe)
    yield ('{"verdict": "%s", "kind": "artemis-jdbc", "root": %s, "database": %s, "tables": %s, "journals": ['
           % (verdict.name, dumps(store.root), dumps(store.target.to_json()), dumps(data.facts)))
    for n, j in enumerate(data.journals):
        r = j.result
        yield (", " if n else "") + '{"kind": %s, "table": %s, "directory": null, "files": [], "pending": [], ' \
            '"refused": [], "live": [' % (dumps(j.kind), dumps(j.table))
        for k, rec in enumerate(_selected(opts, r)):
            yield ("\n  " if k == 0 else ",\n  ") + dumps(_record_json(r, rec, safe), ensure_ascii=False)
        yield "]"
        yield ', "prepared": ' + dumps([_tx_json(r, tx, safe) for tx in r.prepared])
        yield ', "failed": ' + dumps([_tx_json(r, tx, safe) for tx in r.failed])
        yield ', "maxId": %d, "numberOfRecords": %d, "rows": %d}' % (r.max_id, r.number_of_records, j.rows)
    yield "]"
    messages = data.result("messages")
    if messages is not None:
        yield ', "queueSummary": ' + dumps(queue_summary(data.result("bindings"), messages))
    yield ', "nodeManager": ' + dumps(data.node_manager)
    lm = None if data.large_files is None else [dict(messageId=k, **v) for k, v in sorted(data.large_files.items())]
    yield ', "largeMessages": ' + dumps(lm)
    yield ', "pageStores": ' + dumps(data.page_stores)
    yield "}\n"


def iter_rows(data: "ArtemisJdbcLoad", opts) -> Iterator[dict]:
    """``--format jsonl``: one object per live, prepared or failed record, as the file journal's rows."""
    safe = bool(opts and opts.safe)
    for j in data.journals:
        r = j.result
        for rec in _selected(opts, r):
            yield dict(journal=j.kind, state="live", **_record_json(r, rec, safe))
        for state, txs in (("prepared", r.prepared), ("failed", r.failed)):
            for tx in txs:
                for rec in tx.records:
                    yield dict(journal=j.kind, state=state, txId=tx.tx_id, **_record_json(r, rec, safe))
                for rec in tx.records_to_delete:
                    yield dict(journal=j.kind, state=state + "-delete", txId=tx.tx_id, **_record_json(r, rec, safe))


def iter_text(data: "ArtemisJdbcLoad", opts) -> Iterator[str]:
    from amqtool.engines.artemis.describe import describe_live_record
    from amqtool.engines.artemis.journal_print import queue_summary_lines

    safe = bool(opts and opts.safe)
    for j in data.journals:
        r = j.result
        yield f"== {j.kind} table: {j.table} ({j.rows} row(s))"
        yield (f"   live records: {len(r.live)}, prepared transactions: {len(r.prepared)}, "
               f"failed transactions: {len(r.failed)}, maxId: {r.max_id}")
        for rec in _selected(opts, r):
            kind = "update" if rec.is_update else "add"
            text = describe_live_record(r, rec, j.kind, safe)
            yield (f"   {kind:6} id={rec.id} type={rec.user_record_type} cc={rec.compact_count} "
                   f"size={rec.body_len} seq={r.opened.seq_at[rec.body_offset]} {text}").rstrip()
        for label, txs in (("prepared", r.prepared), ("failed", r.failed)):
            for tx in txs:
                yield (f"   {label} transaction {tx.tx_id}: {len(tx.records)} record(s), "
                       f"{len(tx.records_to_delete)} delete(s)")
        yield ""
    if data.result("messages") is not None:
        yield from queue_summary_lines(data.result("bindings"), data.result("messages"))
    nm = data.node_manager
    if nm.get("exists"):
        yield f"== node manager ({nm['table']}): state {nm['state']}, node id {nm['nodeId']}"
        for name in ("primaryLock", "backupLock"):
            lock = nm.get(name)
            if lock:
                yield f"   {name}: {lock['state']}" + (f" by {lock['holder']}" if lock["holder"] else "")


def describe_store(data: "ArtemisJdbcLoad", *, safe: bool = False) -> Iterator[str]:
    """``artemis data print --jdbc`` (``PrintData.printDataJDBC``): the surviving records of the bindings then
    the messages journal (``DescribeJournal.printSurvivingRecords``), under their banners (the paging section
    the Java tool prints after them is not reproduced)."""
    from amqtool.engines.artemis.describe import BANNER, _surviving_lines

    for title, kind in (("B I N D I N G S  J O U R N A L", "bindings"), ("M E S S A G E S   J O U R N A L", "messages")):
        yield ""
        yield BANNER
        yield title
        yield BANNER
        yield from _surviving_lines(data.result(kind), safe)


# ---------------------------------------------------------------------------------------------------------
# verify

def verify_store(store: ArtemisJdbcStore, progress=None) -> tuple[list[Finding], dict]:
    """Findings (codes in man/amqtool-verify.1): the load's (above), records that do not decode
    (``artemis-jdbc-undecodable``), transactions left prepared (``tx-prepared``, INFO) or incomplete
    (``tx-incomplete``, INFO: the broker rolls them back), large-message records without their ``.msg`` row
    (``large-message-missing``, CRITICAL) and rows without a record (``large-message-orphan``), and the node
    manager's lease (``artemis-jdbc-node-manager``, INFO)."""
    from amqtool.engines.artemis.broker_state import build_broker_state
    from amqtool.engines.artemis.load import live_ids_of_type

    return verify_load(store, load(store, progress))


MAX_LISTED_ORPHANS = 100
_LEFT_OUT_CODES = {"after-commit": "artemis-jdbc-record-after-commit", "null-txid": "artemis-jdbc-null-txid",
                   "end-null-txid": "artemis-jdbc-null-txid", "end-repeated": "artemis-jdbc-commit-repeated"}
_LEFT_OUT_WHY = {"after-commit": "comes after its transaction's last COMMIT row",
                 "null-txid": "has a NULL txId (the broker reads transaction 0, never committed)",
                 "end-null-txid": "belongs to a transaction whose COMMIT or PREPARE row has a NULL txId",
                 "end-repeated": "belongs to a transaction left without an end before a second COMMIT row of another "
                                 "(its own COMMIT, the txId damaged)"}


def _left_out_findings(data: "ArtemisJdbcLoad", governs: Callable[[], "_Governs"]) -> list[Finding]:
    """The records the load leaves out of their transaction (:class:`LeftOut`), each CRITICAL when what it
    held is delivered differently without it (:meth:`_Governs.what`; ``governs()``: the load's, built once on
    first use), else WARNING (a counter, a record whose id another live one holds: nothing delivered changes)."""
    out: list[Finding] = []
    for j in data.journals:
        for lo in j.left_out:
            what = governs().what(j.kind, lo.record)
            rec = lo.record
            seq = lo.seq if lo.seq is not None else j.result.opened.seq_at.get(rec.body_offset)
            out.append(Finding(
                Severity.CRITICAL if what else Severity.WARNING, _LEFT_OUT_CODES[lo.why],
                f"row id {rec.id} (user record type {rec.user_record_type}) of transaction {lo.tx_id} "
                f"{_LEFT_OUT_WHY[lo.why]}: the broker's load leaves it out"
                + (f", and {what}" if what else " (nothing it holds is delivered differently)"),
                f"{j.table}:seq={seq}", None, {"id": rec.id, "txId": lo.tx_id}))
    return out


def _deleted_live(data: "ArtemisJdbcLoad", governs: Callable[[], "_Governs"]) -> list[Finding]:
    """``artemis-jdbc-delete-row`` for each DELETE row that removed an ADD (``TableLoad.deletes``). The broker
    deletes a record's rows instead of writing one (``JDBCJournalImpl``: a delete record removes the rows of
    its id), so the row is another one damaged into a DELETE, and the load drops the ADD it follows
    (``JDBCJournalLoaderCallback``). CRITICAL when that ADD was a message a queue still holds: an
    unacknowledged reference of it survives, or the row's own bytes are a reference (``RefEncoding``: one i64
    queue id) to a queue of the bindings that never acknowledged it (the row was that reference); a WARNING
    otherwise (nothing delivered names the message). ``governs()``: the load's :class:`_Governs` (its committed
    references, acknowledgements and the bindings' queues)."""
    from amqtool.engines.artemis.orphans import MESSAGE_TYPES

    out: list[Finding] = []
    for j in data.journals:
        for seq, rid, utype, body in j.deletes:
            lost = None
            if j.kind == "messages" and utype in MESSAGE_TYPES:
                g = governs()
                pending = sorted(q for m, q in g.refs if m == rid and (m, q) not in g.acks)
                if pending:
                    lost = f"queue(s) {', '.join(map(str, pending))} still reference it: message {rid} is lost"
                elif len(body) == 8:
                    q = int.from_bytes(body, "big", signed=True)
                    if q in g.view.queue_address and (rid, q) not in g.acks:
                        lost = (f"its bytes are a reference to queue {q}, which never acknowledged message {rid}: "
                                "the row was that reference, and the message is lost")
            out.append(Finding(Severity.CRITICAL if lost else Severity.WARNING, "artemis-jdbc-delete-row",
                               f"a DELETE row for id {rid}: the broker deletes rows instead of writing these, so "
                               "it is a damaged row, and the load drops the record it follows"
                               + (f"; {lost}" if lost else ""), f"{j.table}:seq={seq}", None, {"id": rid}))
    return out


class _Governs:
    """What a record left out of its transaction governs that the broker delivers (built on first use: the
    paging facts of the whole load, the page tables' messages)."""

    def __init__(self, data: "ArtemisJdbcLoad"):
        from amqtool.engines.artemis.paging import PagingJournalView
        from amqtool.engines.artemis.orphans import MESSAGE_TYPES

        self.data = data
        self.view = PagingJournalView()
        bindings, messages = data.result("bindings"), data.result("messages")
        if bindings is not None:
            self.view.add_bindings(bindings)
        if messages is not None:
            self.view.add_messages(messages)
        from amqtool.engines.artemis.orphans import ACKNOWLEDGE_REF, ADD_REF, _queue_id

        self.message_ids = {r.id for r in (messages.live if messages else ())
                            if r.user_record_type in MESSAGE_TYPES}
        for res in (messages,) if messages else ():
            for tx in res.prepared + res.failed:
                self.message_ids.update(r.id for r in tx.records if r.user_record_type in MESSAGE_TYPES)
        # (message, queue) of the committed references and acknowledgements
        self.refs = {(r.id, _queue_id(messages, r)) for r in (messages.live if messages else ())
                     if r.user_record_type == ADD_REF}
        self.acks = {(r.id, _queue_id(messages, r)) for r in (messages.live if messages else ())
                     if r.user_record_type == ACKNOWLEDGE_REF}
        # message ids the prepared transactions reference (their sends: the message is lost without its row)
        self.prepared_refs = {r.id for tx in (messages.prepared if messages else ()) for r in tx.records
                              if r.user_record_type == ADD_REF}
        self._pages = None

    def pages(self) -> dict[str, dict[int, list]]:
        """address -> page -> [(page transaction id, queue ids)] by message number."""
        if self._pages is None:
            from amqtool.errors import FormatError
            from amqtool.formats.artemis.paging import decode_page

            self._pages = {}
            for ps in self.data.page_data:
                for pid, raw in ps.data.items():
                    try:
                        msgs, _end = decode_page(raw)
                    except FormatError:
                        continue
                    self._pages.setdefault(ps.address, {})[pid] = [(m.transaction_id, m.queue_ids) for m in msgs]
        return self._pages

    def retyped_loss(self, rec: LiveRecord) -> str | None:
        """What a messages row read as a reference though its bytes are no reference's encoding (a damaged
        user record type), or read as type 0 (a NULL one), held: a page cursor acknowledgement (``i64 queue,
        i64 page, i32 message number``) of a paged message still pending, which then comes back, or in the same
        encoding a queue's page-complete record, whose page's messages then pending come back, a page
        transaction's record (``i64 transactionID, i32 numberOfMessages``) whose paged messages still to be
        consumed are then skipped (:meth:`page_tx_loss`; loadMessageJournal's ADD_REF case reads the row as a
        reference of a message it cannot find, and the page transaction is never loaded), or a
        duplicate-detection record whose cache entry is lost (:meth:`duplicate_id_loss`)."""
        from amqtool.formats.artemis.userrecords import JournalRecordIds as R

        if rec.body_len == 12:  # bench/fuzz_jdbc.py seed 9895029888: a PAGE_TRANSACTION row typed ADD_REF
            return self.page_tx_loss(int.from_bytes(self.data.result("messages").body(rec)[:8], "big", signed=True))
        if rec.body_len != 20:
            return self.duplicate_id_loss(rec, self.data.result("messages").body(rec), typed=False)
        # CursorAckRecordEncoding is a page-complete record's too (PAGE_CURSOR_COMPLETE: the queue's page done,
        # its acknowledgements deleted): when no message of that position is pending, a page with messages
        # pending without it was the one completed (bench/fuzz_jdbc.py seed 5242015856: 49 come back)
        return (self.what("messages", rec._replace(user_record_type=R.ACKNOWLEDGE_CURSOR))
                or self.what("messages", rec._replace(user_record_type=R.PAGE_CURSOR_COMPLETE)))

    def null_type_loss(self, body: bytes) -> str | None:
        """What a row read as type 0 (a NULL userRecordType) held, judged by its bytes where its id names no
        message: a page transaction's record (``i64 transactionID, i32 numberOfMessages``) whose paged
        messages are still to be consumed, or a reference or acknowledgement encoding (``i64 queueID``) of a
        queue the bindings hold."""
        if len(body) == 12:
            return self.page_tx_loss(int.from_bytes(body[:8], "big", signed=True))
        if len(body) == 8:
            q = int.from_bytes(body, "big", signed=True)
            if q in self.view.queue_address:
                return f"its bytes are a reference or acknowledgement on queue {q}, which is lost"
        return None

    def duplicate_id_loss(self, rec: LiveRecord, body: bytes, typed: bool = True) -> str | None:
        """What the messages table loses without the DUPLICATE_ID row ``rec`` (``typed``: its user record type
        says so; else its whole body must read as one, of an address the bindings hold): loadMessageJournal (case
        DUPLICATE_ID) loads each live record into its address's duplicate-detection cache, as from the file
        journal (evidence.py, ``_duplicate_id_lost``), so without it a resend the broker would have rejected is
        accepted, delivered twice -- unless another live record holds its id."""
        from amqtool.formats.artemis.body_reads import duplicate_id_value

        if not typed:
            value = duplicate_id_value(body)
            if value is None or not value[1] or 8 + len(value[0]) + len(value[1]) != len(body):
                return None
            try:
                address = value[0].decode("utf-16-le")
            except UnicodeDecodeError:
                return None
            if address not in set(self.view.queue_address.values()):
                return None
        from amqtool.formats.artemis.userrecords import JournalRecordIds as R

        if any(r.id == rec.id and r.user_record_type == R.DUPLICATE_ID and r.body_offset != rec.body_offset
               for r in self.data.result("messages").live):
            return None  # another live record holds the entry
        return ("the duplicate-detection cache entry it records is lost (a resend of that message is accepted)"
                if typed else "its bytes are a duplicate-detection record, whose cache entry is lost (a resend of "
                "that message is accepted)")

    def page_tx_loss(self, ptx: int) -> str | None:
        """What the broker skips when page transaction ``ptx`` has no record left: its paged messages still
        to be consumed (the page cursor skips a message whose page transaction it does not know); None when
        another record of it survives or none is pending."""
        from amqtool.engines.artemis.paging.view import Q_PENDING

        view = self.view
        if ptx in view.page_tx:
            return None  # another record of that page transaction survives
        for pages in self.pages().values():
            for pid, msgs in pages.items():
                for n, (mtx, qids) in enumerate(msgs):
                    if mtx == ptx and any(view.queue_state(q, pid, n) == Q_PENDING for q in qids):
                        return (f"page transaction {ptx}'s paged messages still to be consumed (page {pid}) "
                                "are skipped")
        return None

    def what(self, kind: str, rec: LiveRecord) -> str | None:
        """A description of what the broker delivers differently without ``rec``; None when nothing."""
        from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, Q_PENDING
        from amqtool.formats.artemis.userrecords import JournalRecordIds as R

        from amqtool.engines.artemis.orphans import ACKNOWLEDGE_REF, ADD_REF, MESSAGE_TYPES

        t = rec.user_record_type
        result = self.data.result(kind)
        body = result.body(rec)
        if kind == "bindings":
            if t in (QUEUE_BINDING, ADDRESS_BINDING):
                return "the binding it records is lost"
            found = _binding_bytes(body) if t == 0 else None  # a NULL userRecordType
            return f"its bytes are a {found[0]} binding, which is lost" if found else None
        if t in (ADD_REF, ACKNOWLEDGE_REF):
            pair = (rec.id, int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else -1)
            if t == ADD_REF:  # lost to the queue, unless the queue acknowledged it anyway
                return None if pair in self.acks else f"message {rec.id} is lost to queue {pair[1]}"
            if rec.body_offset in result.opened.null_ids:
                # its id was NULL too: whichever message it acknowledged (committed or prepared) is delivered
                return f"the message it acknowledged on queue {pair[1]} is delivered again (its id is NULL)"
            return f"message {rec.id} comes back on queue {pair[1]}" if pair in self.refs else None
        if t in MESSAGE_TYPES:  # its references are left without it (ref-without-message names them)
            if rec.id in self.prepared_refs:
                return f"the message {rec.id} a prepared transaction sends is lost"
            return f"message {rec.id} is lost" if any(m == rec.id for m, _ in self.refs) else None
        if t in DELIVERY_TYPES:
            return "what it records is lost"
        if t == R.DUPLICATE_ID and kind == "messages":
            return self.duplicate_id_loss(rec, body)
        if t == 0:  # a NULL userRecordType: the row of a message id is one of its references or acknowledgements
            if rec.id in self.message_ids:
                if len(body) == 8:
                    pair = (rec.id, int.from_bytes(body, "big", signed=True))
                    if pair in self.acks and pair not in self.refs:
                        # the queue acknowledged the message and holds no reference of it: the row was that
                        # reference, and the acknowledgement removes it anyway (seed 9494028874)
                        return None
                elif len(body) in (12, 16):
                    # a delivery count (i64 queue, i32 count) or a scheduled delivery time (i64 queue, i64 time)
                    # of one of its references, never a reference (8 bytes): judged as that row typed is (what it
                    # changes is the message's content, not whether it is delivered; seed 8352025664)
                    return None
                return f"it names message {rec.id}, whose reference or acknowledgement it was"
            # else its bytes tell: a page transaction, a reference's queue, a cursor acknowledgement, or a
            # duplicate-detection record (its whole body one of an address the bindings hold)
            return self.null_type_loss(body) or (self.retyped_loss(rec) if kind == "messages" else None)
        view = self.view
        if t == R.PAGE_TRANSACTION and len(body) >= 8:
            return self.page_tx_loss(int.from_bytes(body[:8], "big", signed=True))
        if t in (R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE) and len(body) >= 20:
            q = int.from_bytes(body[:8], "big", signed=True)
            pid = int.from_bytes(body[8:16], "big", signed=True)
            number = int.from_bytes(body[16:20], "big", signed=True)
            msgs = self.pages().get(view.queue_address.get(q), {}).get(pid) or []
            numbers = [number] if t == R.ACKNOWLEDGE_CURSOR else range(len(msgs))
            for n in numbers:
                if 0 <= n < len(msgs):
                    mtx, qids = msgs[n]
                    if (q in qids and view.tx_state(mtx) in (None, PAGE_TX_COMMITTED)  # None: no page tx
                            and view.queue_state(q, pid, n) == Q_PENDING):
                        return f"paged message {n} of page {pid} comes back on queue {q}"
        return None


def _prepared_null_type_findings(data: "ArtemisJdbcLoad", governs: Callable[[], "_Governs"]) -> list[Finding]:
    """CRITICAL ``artemis-jdbc-null-user-type`` for a prepared transaction's row of NULL userRecordType (read
    as type 0, skipped by the load of the prepared transaction) whose bytes show what is lost with it
    (:meth:`_Governs.null_type_loss`: the transaction's page transaction record, whose paged messages are
    then skipped; a reference or acknowledgement). Rows naming a message are judged by the load
    (:func:`_null_prepared_loss`)."""
    out: list[Finding] = []
    for j in data.journals:
        for lo in j.prepared_null_types:
            if j.kind != "messages":
                continue
            what = governs().null_type_loss(j.result.body(lo.record))
            if what:
                out.append(Finding(Severity.CRITICAL, "artemis-jdbc-null-user-type",
                                   f"row id {lo.record.id} of prepared transaction {lo.tx_id} has a NULL "
                                   f"userRecordType: the broker reads type 0 and skips it, and {what}",
                                   f"{j.table}:seq={lo.seq}", None, {"id": lo.record.id, "txId": lo.tx_id}))
    return out


def _prepared_orphan_findings(messages: LoadResult) -> list[Finding]:
    """CRITICAL ``ref-without-message``: a prepared transaction's reference (ADD_REF) whose message no
    committed or prepared record holds. ``loadPreparedTransactions`` finds no message for it ("Cannot find
    message with id") and the send is lost (the committed state's orphans: :func:`_orphan_findings`)."""
    held = {r.id for r in messages.live if r.user_record_type in _MESSAGE_TYPES}
    held.update(r.id for tx in messages.prepared for r in tx.records if r.user_record_type in _MESSAGE_TYPES)
    out: list[Finding] = []
    for tx in messages.prepared:
        for mid in sorted({r.id for r in tx.records if r.user_record_type == ADD_REF_TYPE} - held):
            rec = next(r for r in tx.records if r.id == mid and r.user_record_type == ADD_REF_TYPE)
            out.append(Finding(Severity.CRITICAL, "ref-without-message",
                               f"prepared transaction {tx.tx_id} references message {mid}, which no message row "
                               "holds: the broker's load of the transaction finds no message, and the send is lost",
                               f"{messages.opened.table}:seq={messages.opened.seq_at.get(rec.body_offset)}", None,
                               {"id": mid, "txId": tx.tx_id}))
    return out[:MAX_LISTED_ORPHANS]


def _orphan_findings(messages: LoadResult | None, unsure_acks: set = frozenset(),
                     retyped: Callable[[LiveRecord], str | None] | None = None) -> list[Finding]:
    """CRITICAL ``ref-without-message``: a queue's reference (ADD_REF row, not acknowledged) with no message
    row before it in ``seq`` order: the broker's load drops it, and the message is lost to that queue
    (:mod:`amqtool.engines.artemis.orphans`). WARNING when no message row holds that id and the row is the
    damaged id of another message's reference whose loss changes nothing (:func:`_misfiled_harmlessly`), or
    when its rows are not a reference's encoding (a damaged user record type) unless ``retyped`` says what
    the row was and what is lost with it (:meth:`_Governs.retyped_loss`)."""
    from amqtool.engines.artemis.orphans import ADD_REF, MESSAGE_TYPES, _queue_id, orphan_refs

    out: list[Finding] = []
    by_message: dict[int, list] = {}
    for o in orphan_refs(messages):
        by_message.setdefault(o.message_id, []).append(o)
    pairs: set | None = None

    def attached() -> set:
        """(message, queue) of the reference rows the load attaches (their message row came first)."""
        nonlocal pairs
        if pairs is None:
            seen: set[int] = set()
            pairs = set()
            for rec in messages.live:
                if rec.user_record_type in MESSAGE_TYPES:
                    seen.add(rec.id)
                elif rec.user_record_type == ADD_REF and rec.id in seen:
                    pairs.add((rec.id, _queue_id(messages, rec)))
        return pairs
    for mid, refs in list(by_message.items())[:MAX_LISTED_ORPHANS]:
        first = refs[0]
        why = ("its message row comes after them in seq order (the load meets the references first)"
               if first.later else "no message row holds it")
        seq = messages.opened.seq_at.get(first.record.body_offset)
        if not first.later and all(o.record.body_len != 8 for o in refs):
            # RefEncoding is one i64 queue id: rows of another size were never references (a damaged user
            # record type), and the broker's walk skips them ("cannot find message"): lost is what they were
            lost = next((w for o in refs if (w := retyped(o.record) if retyped else None)), None)
            if lost:
                out.append(Finding(
                    Severity.CRITICAL, "ref-without-message",
                    f"message {mid} is referenced by {len(refs)} row(s) that are not a reference's 8-byte "
                    f"encoding: a damaged user record type, which the broker skips, and {lost}",
                    f"{messages.opened.table}:seq={seq}", None,
                    {"messageId": mid, "queueIds": [o.queue_id for o in refs], "messageRowLater": False}))
                continue
            out.append(Finding(
                Severity.WARNING, "ref-without-message",
                f"message {mid} is referenced by {len(refs)} row(s) that are not a reference's 8-byte encoding and "
                "no message row holds it: a damaged user record type, which the broker skips",
                f"{messages.opened.table}:seq={seq}", None,
                {"messageId": mid, "queueIds": [o.queue_id for o in refs], "messageRowLater": False}))
            continue
        # a row before its message's whose (message, queue) pair a later reference row attaches anyway holds
        # nothing of that message: it is what another message's reference row became (seed 8342025906)
        if (not first.later or all((mid, o.queue_id) in attached() for o in refs)) and _misfiled_harmlessly(
                unsure_acks, mid, refs, first.record.body_offset in messages.opened.null_ids):
            out.append(Finding(
                Severity.WARNING, "ref-without-message",
                f"message {mid} is referenced by {len(refs)} queue(s) ({', '.join(str(o.queue_id) for o in refs)}) "
                + ("but no message row holds it" if not first.later else
                   "before its message row, and again after it") +
                ": the row's id is one byte from another message's, which is acknowledged there anyway (a damaged "
                "id; nothing delivered is lost)",
                f"{messages.opened.table}:seq={seq}", None,
                {"messageId": mid, "queueIds": [o.queue_id for o in refs], "messageRowLater": first.later}))
            continue
        out.append(Finding(
            Severity.CRITICAL, "ref-without-message",
            f"message {mid} is referenced by {len(refs)} queue(s) ({', '.join(str(o.queue_id) for o in refs)}) but "
            f"{why}: the broker's load drops the references and the message is lost to those queues",
            f"{messages.opened.table}:seq={seq}", None,
            {"messageId": mid, "queueIds": [o.queue_id for o in refs], "messageRowLater": first.later}))
    if len(by_message) > MAX_LISTED_ORPHANS:
        out.append(Finding(Severity.CRITICAL, "ref-without-message",
                           f"{len(by_message) - MAX_LISTED_ORPHANS} more message(s) referenced without their "
                           f"message row", messages.opened.table, None))
    return out


def _misfiled_harmlessly(unsure_acks: set, mid: int, refs: list, null_id: bool = False) -> bool:
    """Whether the one reference row of ``mid`` (an id no message row holds) is a damaged id of the reference
    of an acknowledgement row left without one (``unsure_acks``: (message, queue) pairs), one byte away (or
    any id: ``null_id``, the row's id is NULL, read as 0) on the same queue: the message was acknowledged there
    anyway, so nothing delivered is lost. A row deleted in a table takes every row of its id
    (``JDBCJournalImpl``: ``DELETE ... WHERE id = ?``), so unlike a file journal's reclaimed records, a
    reference left with nothing to pair with is never explained so."""
    if len(refs) != 1:
        return False
    q = refs[0].queue_id
    return any(aq == q and (null_id or one_byte_apart(m, mid)) for m, aq in unsure_acks)


def _evidence_findings(bindings: LoadResult | None, messages: LoadResult | None) -> tuple[list[Finding], set]:
    """What the rows say was lost, as the file journal's verify weighs it (:mod:`amqtool.engines.artemis
    .evidence`), each CRITICAL:

    * ``unknown-record-type``: a live messages row of a user record type ``loadMessageJournal`` does not know
      (it throws "Invalid record type": the broker does not start);
    * ``ref-undecodable``: a reference, acknowledgement, delivery-count or scheduled row whose record is
      shorter than its encoding (its decode throws there);
    * ``ack-without-ref``: an acknowledgement of (message, queue) with no ADD_REF row of that pair before it in
      ``seq`` order: ``loadMessageJournal`` removes a reference only when it is already there, so the ack is
      ignored. CRITICAL when the pair's ADD_REF comes later (the acknowledged message comes back) or the
      queue id is no queue's (the ack row was changed: the queue it acknowledged gets the message back);
      WARNING when the queue exists and has no reference row of the message at all (a reference row gone
      from a queue that had acknowledged it: nothing delivered changes, or an ack row moved to another of
      the message's queues: the rows cannot tell). Returns the findings and those last (message, queue)
      pairs.
    * ``ack-repeated`` (WARNING): an acknowledgement row repeating one of the same (message, queue), which no
      broker writes, one damaged byte from a queue the message is still referenced on unacknowledged: either
      that queue's acknowledgement with a damaged queue id (the broker ignores the repeat: the message comes
      back there) or a row written twice (nothing changes); the rows cannot tell;
    * ``ref-unknown-queue``: unacknowledged references to a queue id no binding row holds (the broker skips
      them: the message is lost to that queue), unless the queue id is one byte from a queue the message is
      acknowledged on with no reference row there (that reference, its queue id damaged: nothing lost)."""
    from amqtool.engines.artemis.evidence import Evidence
    from amqtool.engines.artemis.orphans import ACKNOWLEDGE_REF, ADD_REF, MESSAGE_TYPES, _queue_id

    if messages is None:
        return [], set()
    out: list[Finding] = []
    table = messages.opened.table

    def where(rec) -> str:
        return f"{table}:seq={messages.opened.seq_at.get(rec.body_offset)}"

    # a broker's tables (bindings rows, or messages and references): then the user record types are the
    # broker's (journal tables of other user types, as JournalImpl's own tests write, are not judged so)
    broker = bool(bindings is not None and bindings.live) or any(
        r.user_record_type in MESSAGE_TYPES or r.user_record_type == ADD_REF for r in messages.live)
    ev = Evidence.build(bindings if broker else None, messages)
    if ev.unknown_types:
        r = ev.unknown_types[0]
        out.append(Finding(Severity.CRITICAL, "unknown-record-type",
                           f"{len(ev.unknown_types)} live row(s) of a user record type the broker's message journal "
                           f"load does not know (first: id {r.id}, type {r.user_record_type}): it throws 'Invalid "
                           "record type' and does not start", where(r), None, {"count": len(ev.unknown_types)}))
    if ev.bad_refs:
        r = ev.bad_refs[0]
        out.append(Finding(Severity.CRITICAL, "ref-undecodable",
                           f"{len(ev.bad_refs)} live reference or acknowledgement row(s) shorter than their encoding "
                           f"(first: id {r.id}, {r.body_len} bytes): the broker's load fails on it", where(r), None,
                           {"count": len(ev.bad_refs)}))
    refs_seen: set[tuple[int, int]] = set()
    acked: set[tuple[int, int]] = set()
    proven: list = []
    unsure: list = []
    doubled: list = []
    for rec in messages.live:
        t = rec.user_record_type
        if t == ADD_REF:
            refs_seen.add((rec.id, _queue_id(messages, rec)))
        elif t == ACKNOWLEDGE_REF and rec.id in ev.messages:
            q = _queue_id(messages, rec)
            if (rec.id, q) in acked:
                doubled.append((rec, q))
            acked.add((rec.id, q))
            if (rec.id, q) not in refs_seen:
                later = q in ev.refs.get(rec.id, ())
                (proven if later or (broker and q not in ev.queues) else unsure).append((rec, q))
    for sev, acks, why in (
            (Severity.CRITICAL, proven, "before their reference row, or on a queue id no binding row holds: the "
             "broker ignores them and the acknowledged message comes back"),
            (Severity.WARNING, unsure, "on a queue of no reference row of that message: the broker ignores them "
             "(a reference row gone from a queue that had acknowledged it changes nothing; an acknowledgement "
             "moved from another queue brings the message back there)")):
        if acks:
            shown = ", ".join(f"{r.id} on queue {q}" for r, q in acks[:MAX_LISTED_ORPHANS])
            out.append(Finding(sev, "ack-without-ref", f"{len(acks)} acknowledgement row(s) {why}: {shown}",
                               where(acks[0][0]), None,
                               {"count": len(acks), "pairs": [[r.id, q] for r, q in acks[:MAX_LISTED_ORPHANS]]}))
    # a second acknowledgement of one (message, queue) pair, which no broker writes (the first removed the
    # reference), one damaged byte away from a queue the message is still referenced on unacknowledged: that
    # queue's acknowledgement with its queue id damaged (the broker ignores the repeat and delivers the message
    # there again), or a row written twice (nothing changes): the rows cannot tell, so a WARNING
    moved = []
    for rec, q in doubled:
        back = sorted(rq for rq in ev.refs.get(rec.id, ()) if (rec.id, rq) not in acked and one_byte_apart(q, rq))
        if back:
            moved.append((rec, q, back[0]))
    if moved:
        shown = ", ".join(f"message {r.id} on queue {q} (queue {b}, one byte away, holds it unacknowledged)"
                          for r, q, b in moved[:MAX_LISTED_ORPHANS])
        out.append(Finding(Severity.WARNING, "ack-repeated",
                           f"{len(moved)} acknowledgement row(s) repeat an acknowledgement of the same message and "
                           f"queue, which no broker writes: a row written twice changes nothing, but an "
                           f"acknowledgement of the queue one damaged byte away would be lost (the message "
                           f"delivered again there): {shown}", where(moved[0][0]), None,
                           {"count": len(moved), "pairs": [[r.id, b] for r, _q, b in moved[:MAX_LISTED_ORPHANS]]}))
    unknown = ev.refs_to_unknown_queues()
    # a reference whose queue id is one byte from a queue the message is acknowledged on without a reference
    # is that reference with a damaged queue id: the message was consumed there, nothing is lost
    paired = {(m, q) for q, ms in unknown.items() for m in ms
              if any(r.id == m and one_byte_apart(q, aq) for r, aq in unsure)}
    unknown = {q: ms - {m for m, pq in paired if pq == q} for q, ms in unknown.items()}
    unknown = {q: ms for q, ms in unknown.items() if ms}
    if unknown:
        shown = ", ".join(f"queue {q} ({len(m)} message(s))" for q, m in sorted(unknown.items())[:MAX_LISTED_ORPHANS])
        out.append(Finding(Severity.CRITICAL, "ref-unknown-queue",
                           f"messages are referenced by queue ids no binding row holds (the broker skips them): "
                           f"{shown}", table, None,
                           {"queueIds": sorted(unknown), "messages": sum(len(m) for m in unknown.values())}))
    return out, {(r.id, q) for r, q in unsure}


def verify_load(store: ArtemisJdbcStore, data: "ArtemisJdbcLoad") -> tuple[list[Finding], dict]:
    """:func:`verify_store` of a load already made (the export judges the load it exports)."""
    from amqtool.engines.artemis.broker_state import build_broker_state
    from amqtool.engines.artemis.load import live_ids_of_type

    findings = [f for j in data.journals for f in j.findings] + data.page_findings
    bindings, messages = data.result("bindings"), data.result("messages")
    state = build_broker_state(bindings, messages)
    for p in state.problems:
        res = bindings if p.journal == "bindings" else messages
        seq = res.opened.seq_at.get(p.body_offset)
        findings.append(Finding(Severity.CRITICAL, "artemis-jdbc-undecodable",
                                f"{p.journal} record id {p.record_id} (user record type {p.user_record_type}) does "
                                f"not decode: {p.message}", f"{res.opened.table}:seq={seq}", None,
                                {"id": p.record_id}))
    if messages is not None:
        from amqtool.errors import FormatError

        for mid, rec in state.message_records.items():
            try:
                state.message(mid)
            except FormatError as err:
                findings.append(Finding(Severity.CRITICAL, "artemis-jdbc-undecodable",
                                        f"message {mid} (user record type {rec.user_record_type}) does not decode: "
                                        f"{err.message}",
                                        f"{messages.opened.table}:seq={messages.opened.seq_at.get(rec.body_offset)}",
                                        None, {"id": mid}))
    if messages is not None:
        findings += _prepared_undecodable(messages)
    for j in data.journals:
        r = j.result
        for tx in r.prepared:
            findings.append(Finding(Severity.INFO, "tx-prepared",
                                    f"transaction {tx.tx_id} is prepared (XA, in doubt) with {len(tx.records)} "
                                    f"record(s) and {len(tx.records_to_delete)} delete(s)", j.table, None,
                                    {"txId": tx.tx_id}))
        for tx in r.failed:
            findings.append(Finding(Severity.INFO, "tx-incomplete",
                                    f"transaction {tx.tx_id} has no commit, prepare or rollback row; the broker "
                                    f"rolls back its {len(tx.records)} record(s) at start", j.table, None,
                                    {"txId": tx.tx_id}))
    # what a record governs, read once on the first damage that needs it (the paging facts, the pages)
    governs = functools.cache(lambda: _Governs(data))
    findings += _left_out_findings(data, governs)
    findings += _deleted_live(data, governs)
    findings += page_gap_findings(data.page_data, bindings, messages)
    findings += _prepared_null_type_findings(data, governs)
    if messages is not None:
        findings += _prepared_orphan_findings(messages)
    ev_findings, unsure_acks = _evidence_findings(bindings, messages)
    def retyped(rec: LiveRecord) -> str | None:
        return governs().retyped_loss(rec)

    findings += _orphan_findings(messages, unsure_acks, retyped)
    findings += ev_findings
    if data.large_files is not None and messages is not None:
        ids = set(live_ids_of_type(messages.live, ADD_LARGE_MESSAGE, is_update=False))
        for tx in messages.prepared:
            ids.update(rec.id for rec in tx.records if rec.user_record_type == ADD_LARGE_MESSAGE)
        lm_table = store.statements.tables["large-messages"]
        for mid in sorted(ids - data.large_files.keys()):
            findings.append(Finding(Severity.CRITICAL, "large-message-missing",
                                    f"large message {mid} has a journal record but no {mid}.msg row",
                                    lm_table, None, {"messageId": mid}))
        paged = {mid for ps in data.page_stores or () for p in ps["pages"] for mid in p.get("largeMessageIds") or ()}
        for mid in sorted(paged - ids - data.large_files.keys()):
            findings.append(Finding(Severity.WARNING, "paged-large-message-missing",
                                    f"paged large message {mid} has no {mid}.msg row (lost unless every queue "
                                    "has consumed it)", lm_table, None, {"messageId": mid}))
        for mid in sorted(data.large_files.keys() - ids - paged):
            findings.append(Finding(Severity.WARNING, "large-message-orphan",
                                    f"{mid}.msg has no large-message record in the messages table",
                                    f"{lm_table}:ID={data.large_files[mid]['rowId']}", None, {"messageId": mid}))
    nm = data.node_manager
    if nm.get("exists"):
        lock = nm.get("primaryLock") or {}
        findings.append(Finding(Severity.INFO, "artemis-jdbc-node-manager",
                                f"broker state {nm['state']}; primary lock {lock.get('state', 'absent')}"
                                + (f" by {lock['holder']}" if lock.get("holder") else ""), nm["table"]))
    summary = {"rows": sum(j.rows for j in data.journals),
               "live": sum(len(j.result.live) for j in data.journals),
               "prepared": sum(len(j.result.prepared) for j in data.journals),
               "failed": sum(len(j.result.failed) for j in data.journals),
               "messages": state.message_counts().messages,
               "pages": sum(len(p["pages"]) for p in data.page_stores or ()),
               "journals": [{"kind": j.kind, "table": j.table, "rows": j.rows, "live": len(j.result.live),
                             "typeCounts": {str(k): v for k, v in sorted(j.type_counts.items())}}
                            for j in data.journals]}
    return findings, summary
