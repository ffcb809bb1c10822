"""The database stores of both brokers: row faults in a throwaway PostgreSQL, the delivered state, the truth.

Stores (one PostgreSQL for a whole campaign, tests/pg_cluster.py):

* **Artemis** (:class:`ArtemisJdbcSites`): a small paged demo written into the journal tables as
  ``JDBCJournalImpl`` writes them (tests/artemis_jdbc_writer.py), with its page-store and large-message tables;
* **Classic** (:class:`ClassicJdbcSites`): the KahaDB ``basic`` fixture's live messages written into
  ``ACTIVEMQ_MSGS``/``ACTIVEMQ_ACKS`` as ``DefaultJDBCAdapter`` writes them (tests/classic_jdbc_writer.py),
  with durable subscriptions (one prioritized), a destination marker and rows of a prepared XA transaction.

Faults (:class:`RowFault`), drawn by a seeded RNG from the store's own rows: a row deleted (chosen by its
record type and user record type first, so every kind of row is reached: message ADDs, ADD_REFs, ACKs,
delivery counts, page records, transactional rows, COMMIT/PREPARE, bindings, ``.page`` and ``.msg`` rows), a
column changed (ids, record type, user record type, compactCount, seq, txId, variableSize, a bit of the data
bytes), columns set NULL, a row duplicated. Every fault runs inside a savepoint of one long transaction and
is undone by rolling back to it; verify and the truth read the damaged tables through that transaction (the
read-only session the engines open is replaced by it: :func:`in_transaction`), so a fault costs no commit.

The delivered state:

* Artemis: the JDBC load (``amqtool.engines.jdbc.artemis.load``, proven equal to ``JDBCJournalImpl`` by the
  oracle fixtures, tests/engines/test_jdbc_artemis.py), then ``AbstractJournalStorageManager
  .loadMessageJournal``'s walk of the committed records in load order, which the export's ``data exp`` model
  does not follow: a message goes into a map when its record comes; an ADD_REF puts (message, queue) into the
  queue's map only when the message is already there (else "cannot find message"); an ACKNOWLEDGE_REF removes
  it only when it is there; a delivery count or scheduled time applies to a reference already there; a
  queue the bindings do not hold gets nothing. A load that throws (unknown record type, a DELETE or ROLLBACK
  row naming nothing, an unknown user record type, a reference body shorter than its encoding) starts no
  broker: nothing is delivered. Rows and contents are then the export's (bodies, properties, delivery
  counts; paged messages from the page-store tables; prepared transactions). A committed reference that a
  prepared transaction acknowledges is held by the transaction, not delivered
  (``handlePreparedAcknowledge``: ``removeReferenceWithID`` at load, reacknowledged in the transaction): its
  row's state is ``acknowledged-in-prepared`` (the export lists it committed). The duplicate-detection caches
  the DUPLICATE_ID rows fill are held as the file journal's truth holds them (``Delivered.caches``:
  ``JDBCJournalLoaderCallback`` hands every loaded row to the same loadMessageJournal), keyed by their value.
* Classic: the JDBC export's rows (``ClassicJdbcExport``: queue rows with ``XID`` NULL, a durable
  subscription's rows above its ``LAST_ACKED_ID``), keyed by the queue and the row's ``ID``; a second row of
  a message id a destination's cursor has recovered already is dropped (``AbstractStoreCursor
  .recoverMessage``: a duplicate), and a row whose XID is no encoded XATransactionId is not recovered.

Truth (the rule of issue 25 for stores with no record checksum and no tail to tear):

* ``same``: nothing delivered changed: never CRITICAL (nor UNKNOWN);
* ``content``: the same messages on the same queues, bytes inside them changed: any verdict but UNKNOWN,
  counted as undetectable;
* ``loss-unproven`` (:data:`~.model.UNPROVEN`, as for file stores): something was lost or brought back, but the damaged tables are a state the broker itself
  writes (a Classic queue row deleted is what an acknowledgement does; an ADD_REF row gone with its message
  left looks like a message routed to fewer queues): no evidence can prove the loss, so any verdict but
  UNKNOWN is accepted; counted and shown;
* ``loss``: something was lost or brought back and the damaged tables break an invariant the broker keeps
  (:func:`artemis_evidence`, :func:`classic_evidence`, computed here from the broker's behaviour, not from
  verify's findings) that the pristine tables keep: CRITICAL.
"""
from __future__ import annotations

import contextlib
import hashlib
import random
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.model import CONTENT, LOSS, SAME, UNPROVEN, VERDICTS, Delivered, expected

TRUTHS = (SAME, CONTENT, UNPROVEN, LOSS)

ART_COLUMNS = ("id", "recordType", "compactCount", "txId", "userRecordType", "variableSize", "record",
               "txDataSize", "txData", "txCheckNoRecords", "seq")


# -- faults ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RowFault:
    """One change to one row. ``key``: (column, value) pairs selecting exactly that row. ``kind``:
    ``delete``; ``set`` (``column`` = ``value``); ``xor`` (``column`` XOR ``value``, an integer mask);
    ``flip`` (byte ``value[0]`` of bytea ``column`` XOR ``value[1]``); ``loflip`` (the same in the large
    object ``column`` names); ``null`` (``column``: comma-separated names); ``duplicate`` (the row inserted
    again, with ``column`` = ``value`` when ``column`` is given)."""

    kind: str
    table: str
    key: tuple
    column: str = ""
    value: object = None
    label: str = ""

    def describe(self) -> str:
        where = " AND ".join(f"{k}={v!r}" for k, v in self.key)
        if self.kind in ("flip", "loflip"):
            what = f" {self.column}[{self.value[0]}]^0x{self.value[1]:02x}"
        elif self.kind in ("set", "xor"):
            what = f" {self.column}{'^' if self.kind == 'xor' else ''}={self.value!r}"
        elif self.kind == "null":
            what = f" {self.column}=NULL"
        elif self.kind == "duplicate" and self.column:
            what = f" with {self.column}={self.value!r}"
        else:
            what = ""
        return f"{self.kind} {self.table} WHERE {where}{what} [{self.label}]"

    def apply(self, conn) -> None:
        """Make the change in ``conn``'s current transaction (the caller holds a savepoint to undo it)."""
        where = " AND ".join(f"{k} = %s" for k, _ in self.key)
        params = [v for _, v in self.key]
        t = self.table
        with conn.cursor() as cur:
            if self.kind == "delete":
                cur.execute(f"DELETE FROM {t} WHERE {where}", params)
            elif self.kind == "set":
                cur.execute(f"UPDATE {t} SET {self.column} = %s WHERE {where}", [self.value] + params)
            elif self.kind == "xor":
                cur.execute(f"UPDATE {t} SET {self.column} = {self.column} # %s WHERE {where}", [self.value] + params)
            elif self.kind == "flip":
                i, mask = self.value
                c = self.column
                cur.execute(f"UPDATE {t} SET {c} = set_byte({c}, %s, get_byte({c}, %s) # %s) WHERE {where}",
                            [i, i, mask] + params)
            elif self.kind == "loflip":
                i, mask = self.value
                c = self.column
                cur.execute(f"SELECT lo_put({c}, %s, set_byte('\\x00'::bytea, 0, "
                            f"get_byte(lo_get({c}, %s, 1), 0) # %s)) FROM {t} WHERE {where}", [i, i, mask] + params)
            elif self.kind == "null":
                sets = ", ".join(f"{c} = NULL" for c in self.column.split(","))
                cur.execute(f"UPDATE {t} SET {sets} WHERE {where}", params)
            elif self.kind == "duplicate":
                cur.execute(f"SELECT * FROM {t} WHERE {where}", params)
                names = [d.name for d in cur.description]
                row = list(cur.fetchone())
                if self.column:
                    row[[n.lower() for n in names].index(self.column.lower())] = self.value
                cur.execute(f"INSERT INTO {t}({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})", row)
            else:
                raise ValueError(f"unknown fault kind {self.kind}")
            if self.kind != "duplicate" and self.kind != "loflip" and cur.rowcount != 1:
                raise AssertionError(f"{self.describe()} changed {cur.rowcount} rows")


@contextmanager
def in_transaction(conn):
    """The engines' read-only sessions replaced by ``conn`` (inside its open transaction, so they see the
    uncommitted fault), with the real session's error contract: a database error is UnknownStoreError."""
    from unittest import mock

    import psycopg

    from amqtool.engines.jdbc import artemis, classic, connection
    from amqtool.errors import UnknownStoreError

    @contextmanager
    def session(target, **_):
        try:
            yield conn
        except psycopg.Error as err:
            raise UnknownStoreError(f"{target.url}: {str(err).splitlines()[0] if str(err) else err}") from None

    with mock.patch.object(artemis, "read_only_session", session), \
            mock.patch.object(classic, "read_only_session", session), \
            mock.patch.object(connection, "read_only_session", session):
        yield


@contextmanager
def faulted(conn, fault: RowFault):
    """``fault`` made in a savepoint of ``conn``'s transaction and undone after; inside, the engines' sessions
    are ``conn`` (:func:`in_transaction`). Yields False (and changes nothing) when the database refuses the
    change (a key or constraint it would break)."""
    import psycopg

    with conn.cursor() as cur:
        cur.execute("SAVEPOINT fault")
        try:
            try:
                fault.apply(conn)
            except psycopg.Error:
                yield False
                return
            with in_transaction(conn):
                yield True
        finally:
            cur.execute("ROLLBACK TO SAVEPOINT fault")


def _pick_row(rng: random.Random, groups: dict) -> tuple:
    """A row of a group chosen uniformly among the groups (so rare kinds of rows are reached too)."""
    label = rng.choice(sorted(groups))
    return label, rng.choice(groups[label])


# -- Artemis ---------------------------------------------------------------------------------------------------

_RECORD_TYPES = (11, 12, 13, 14, 15, 16, 17, 18, 19)
_USER_TYPES = (21, 22, 23, 24, 25, 26, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 49,
               53, 54, 0, 60, 127)


@dataclass
class ArtemisJdbcSites:
    """The pristine Artemis tables' rows, and the faults drawn from them."""

    rows: dict = field(default_factory=dict)          # table -> [(seq, id, rtype, utype, txid, len(record), len(txData))]
    lo_rows: list = field(default_factory=list)       # (table, ID, FILENAME, size) of page-store/large-message rows
    tx_ids: list = field(default_factory=list)
    seqs: dict = field(default_factory=dict)          # table -> set of seqs

    @classmethod
    def read(cls, conn, lo_tables: list[str]) -> "ArtemisJdbcSites":
        self = cls()
        with conn.cursor() as cur:
            for t in ("bindings", "messages"):
                cur.execute(f"SELECT seq, id, recordType, userRecordType, txId, length(record), length(txData) "
                            f"FROM {t} ORDER BY seq")
                self.rows[t] = cur.fetchall()
                self.seqs[t] = {r[0] for r in self.rows[t]}
                self.tx_ids += sorted({r[4] for r in self.rows[t] if r[4]})
            for t in lo_tables:
                cur.execute(f"SELECT ID, FILENAME, length(lo_get(DATA)) FROM {t} ORDER BY ID")
                self.lo_rows += [(t, *r) for r in cur.fetchall()]
        return self

    def _groups(self) -> dict:
        groups: dict = {}
        for t, rows in self.rows.items():
            for r in rows:
                groups.setdefault(f"{t} {r[2]}/{r[3]}", []).append((t, r))
        return groups

    def draw(self, rng: random.Random) -> RowFault:
        r = rng.random()
        if r < 0.08 and self.lo_rows:
            return self._lo_fault(rng)
        label, (t, row) = _pick_row(rng, self._groups())
        key = (("seq", row[0]),)
        if r < 0.35:
            return RowFault("delete", t, key, label=f"row {label}")
        if r < 0.80:
            return self._column(rng, t, row, key, label)
        if r < 0.92:
            cols = rng.sample([c for c in ART_COLUMNS if c not in ("record", "txData")], rng.choice((1, 1, 2, 3)))
            return RowFault("null", t, key, ",".join(sorted(cols)), label=f"nulls {label}")
        if rng.random() < 0.5:
            return RowFault("duplicate", t, key, label=f"duplicate {label}")
        return RowFault("duplicate", t, key, "seq", max(self.seqs[t]) + 1, label=f"duplicate at the end {label}")

    def _column(self, rng, t, row, key, label) -> RowFault:
        seq, rid, rtype, utype, txid, rlen, txlen = row
        choices = ["id", "recordType", "userRecordType", "compactCount", "seq", "txId", "variableSize",
                   "txCheckNoRecords", "txDataSize"]
        if rlen:
            choices += ["record"] * 4
        if txlen:
            choices += ["txData"]
        col = rng.choice(choices)
        what = f"{col} of {label}"
        if col == "id":
            if rng.random() < 0.5:
                return RowFault("xor", t, key, col, 1 << rng.randrange(20), label=what)
            return RowFault("set", t, key, col, rid + rng.choice((-1, 1)), label=what)
        if col == "recordType":
            return RowFault("set", t, key, col, rng.choice([x for x in _RECORD_TYPES + (10, 20, 0) if x != rtype]),
                            label=what)
        if col == "userRecordType":
            return RowFault("set", t, key, col, rng.choice([x for x in _USER_TYPES if x != utype]), label=what)
        if col == "compactCount":
            return RowFault("set", t, key, col, rng.choice((1, 2, 5, -1)), label=what)
        if col == "seq":
            used = self.seqs[t]
            other = rng.choice(sorted(used))
            cands = [v for v in (other - 1, other + 1) if v not in used] or [max(used) + 1]
            new = rng.choice(cands + [max(used) + 1, min(used) - 1, other])  # ``other``: a duplicate seq
            return RowFault("set", t, key, col, new, label=what)
        if col == "txId":
            others = [x for x in self.tx_ids if x != txid]
            new = rng.choice(others + [0, txid ^ (1 << rng.randrange(16))]) if others else txid ^ 1
            return RowFault("set", t, key, col, new, label=what)
        if col == "variableSize":
            return RowFault("set", t, key, col, rng.choice((0, rlen - 1, rlen + 1, 1 << 20)), label=what)
        if col in ("txCheckNoRecords", "txDataSize"):
            return RowFault("set", t, key, col, rng.choice((1, 7, -1)), label=what)
        n = rlen if col == "record" else txlen
        i = rng.randrange(min(n, 48)) if rng.random() < 0.6 else rng.randrange(n)  # biased to the encodings' heads
        return RowFault("flip", t, key, col, (i, 1 << rng.randrange(8)), label=f"{what} byte {i}")

    def _lo_fault(self, rng) -> RowFault:
        t, rid, name, size = rng.choice(self.lo_rows)
        kind = "page" if (name or "").endswith(".page") else (name or "?")
        if size and rng.random() < 0.5:
            i = rng.randrange(size)
            return RowFault("loflip", t, (("ID", rid),), "DATA", (i, 1 << rng.randrange(8)), label=f"{kind} byte")
        return RowFault("delete", t, (("ID", rid),), label=f"{kind} row")


_MESSAGE_TYPES = (30, 31, 45)
_DECODES: dict = {}  # (user record type, body) -> whether the message decodes (a pure function: memoized)


def _queue_of(body: bytes, utype: int) -> int | None:
    """The queue id of a reference (32, 33), delivery-count (34) or scheduled (36) record body."""
    if utype in (32, 33, 34):
        return int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else None
    if utype == 36:
        return int.from_bytes(body[8:16], "big", signed=True) if len(body) >= 16 else None
    return None


def broker_walk(messages, queue_ids: set[int]) -> tuple[dict, list]:
    """``loadMessageJournal``'s walk of ``messages.live`` (see the module docstring): {(message id, queue
    id): [message record, delivery count, scheduled time]} of the references the broker holds, and the
    evidence of the walk (references before their message, acknowledgements before their reference)."""
    msgs: dict = {}
    held: dict = {}
    evidence = []
    pairs = {(rec.id, _queue_of(messages.body(rec), 32)) for rec in messages.live if rec.user_record_type == 32}
    for rec in messages.live:
        t = rec.user_record_type
        if t in _MESSAGE_TYPES:
            msgs[rec.id] = rec
            continue
        if t not in (32, 33, 34, 36):
            continue
        body = messages.body(rec)
        q = _queue_of(body, t)
        if q is None:
            continue
        k = (rec.id, q)
        if t == 32:
            if rec.id in msgs:
                held[k] = [msgs[rec.id], 0, None]
            else:
                evidence.append(("ref-before-message", rec.id, q))
        elif t == 33:
            if held.pop(k, None) is None and rec.id in msgs:
                # proof only when the pair's reference comes later (the ack is ignored and the message comes
                # back) or the queue is no queue (a changed ack); an ack on a queue with no reference at all is
                # also what a reference row gone from a queue that had acknowledged it leaves
                if k in pairs:
                    evidence.append(("ack-before-ref", rec.id, q))
                elif q not in queue_ids:
                    evidence.append(("ack-unknown-queue", rec.id, q))
        elif k in held:
            if t == 34:
                held[k][1] = int.from_bytes(body[8:12], "big", signed=True)
            else:
                held[k][2] = int.from_bytes(body[:8], "big", signed=True)
    for (mid, q) in list(held):
        if q not in queue_ids:
            evidence.append(("ref-unknown-queue", mid, q))
            del held[(mid, q)]
    return held, evidence


def _decodes(rec, messages) -> bool:
    """Whether the message record ``rec`` decodes as ``loadMessageJournal`` decodes it (memoized on its
    bytes): a large message's header, a protocol message by its persister; an Artemis 1.x ADD_MESSAGE (31)
    makes it throw ("old journal data")."""
    from amqtool.errors import FormatError
    from amqtool.formats.artemis.message import LargeMessage, decode_persisted_message

    k = (rec.user_record_type, messages.body(rec))
    ok = _DECODES.get(k)
    if ok is None:
        try:
            if k[0] == 31:
                raise FormatError("ADD_MESSAGE of Artemis 1.x")
            LargeMessage.decode(k[1]) if k[0] == 30 else decode_persisted_message(k[1])
            ok = True
        except FormatError:
            ok = False
        _DECODES[k] = ok
    return ok


def artemis_state(store, data=None, findings=None) -> tuple[Delivered, frozenset]:
    """(what the broker delivers, the evidence set) of the Artemis database store (in the current session);
    ``data``/``findings``: its load and verify's findings on it, when the caller has them."""
    from unittest import mock

    from amqtool.engines.artemis.broker_state import build_broker_state
    from amqtool.engines.export.jdbc import ArtemisJdbcExport
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.schema import MESSAGE_COLUMNS
    from amqtool.engines.jdbc import artemis
    from amqtool.errors import AmqtoolError, FormatError
    from tests.faults.artemis import _FIXED_BODY, _MESSAGE_TYPES_KNOWN, duplicate_ids

    nothing = Delivered(frozenset(), Counter(), frozenset())
    if data is None:
        try:
            data = artemis.load(store)
        except AmqtoolError:
            return Delivered(frozenset(), Counter(), frozenset(), detected=False), frozenset({("no-store",)})
    evidence: set = set()
    for j in data.journals:
        for f in j.findings:
            if f.code in ("artemis-jdbc-null-column", "artemis-jdbc-duplicate-seq", "artemis-jdbc-size-mismatch"):
                evidence.add(("row-anomaly", f.code, f.path))
    if any(j.load_fails for j in data.journals):
        return nothing, frozenset(evidence | {("load-fails",)})
    messages, bindings = data.result("messages"), data.result("bindings")
    for r in messages.live:
        t = r.user_record_type
        if t not in _MESSAGE_TYPES_KNOWN or _FIXED_BODY.get(t, r.body_len) > r.body_len:
            return nothing, frozenset(evidence | {("load-throws", r.id, t)})
    for r in messages.live:
        if r.user_record_type in _MESSAGE_TYPES and not _decodes(r, messages):
            # loadMessageJournal decodes every message record as it meets it (references or not)
            return nothing, frozenset(evidence | {("load-throws", "message", r.id)})
    state = build_broker_state(bindings, messages)
    if state.problems:
        # loadBindingJournal and loadMessageJournal decode every live record with no catch around it: a body
        # its encoding runs past (a damaged length) throws, and the broker does not start
        return nothing, frozenset(evidence | {("load-throws", p.journal, p.record_id) for p in state.problems})
    held, walk = broker_walk(messages, set(state.queues))
    evidence.update(walk)
    for (mid, q), (rec, _dc, _s) in held.items():
        if rec.user_record_type == 30 and data.large_files is not None and mid not in data.large_files:
            evidence.add(("large-message-missing", mid))
    for f in data.page_findings:
        evidence.add(("page", f.code, f.path))
    for ps in data.page_stores or ():
        if ps["address"] is None and any(p["records"] for p in ps["pages"]):
            evidence.add(("page-no-address", ps["table"]))  # address.txt is written with the table
        pages = sorted(p["page"] for p in ps["pages"])
        if pages and len(pages) != pages[-1] - pages[0] + 1:
            evidence.add(("page-gap", ps["table"]))

    class BrokerOrder(ArtemisJdbcExport):
        """The export with the committed references of :func:`broker_walk` (load order) instead of the
        ``data exp`` model's (every ADD_REF minus every ACK, whatever their order)."""

        def _pairs(self):
            prepared: dict = {}
            prepared_messages = {}
            # handlePreparedAcknowledge: a prepared transaction's acknowledgement takes the committed
            # reference off its queue at load and holds it until the outcome (the export lists it committed)
            held_by = {(m, q): tx.tx_id for tx in self.refs.prepared for m, qids in tx.acks.items() for q in qids}
            for tx in self.refs.prepared:
                for m, qids in tx.refs.items():
                    for qid in qids:
                        prepared.setdefault(m, []).append((qid, tx.tx_id))
                for m, rec in tx.messages.items():
                    prepared_messages.setdefault(m, rec)
            by_message: dict = {}
            for (m, q), (rec, dc, sched) in held.items():
                tx_of = held_by.get((m, q))
                state = ("committed", None) if tx_of is None else ("acknowledged-in-prepared", tx_of)
                by_message.setdefault(m, [rec, []])[1].append((q, *state, dc, sched))
            for m, rec in prepared_messages.items():
                by_message.setdefault(m, [rec, []])
            for m in sorted(by_message):
                rec, pairs = by_message[m]
                seen = {p[0] for p in pairs}
                for qid, tx_id in prepared.get(m, ()):
                    if qid not in seen:
                        seen.add(qid)
                        pairs.append((qid, "prepared", tx_id, 0, None))
                if pairs:
                    yield m, rec, pairs

    names = [c[0] for c in MESSAGE_COLUMNS]
    key = ("queue_id", "message_id", "transaction_state")
    rows: Counter = Counter()
    content = set()
    with mock.patch.object(artemis, "load", lambda *a, **k: data):
        if findings is None:
            ex = BrokerOrder(store, ExportOptions(safe=True, salvage=True))
        else:
            with mock.patch.object(artemis, "verify_load", lambda *a, **k: (findings, {})):
                ex = BrokerOrder(store, ExportOptions(safe=True, salvage=True))
    rows_b = ex.binding_rows()
    bound = frozenset((r[0], r[1]) for r in rows_b)
    content.update(("binding",) + tuple(r) for r in rows_b)
    for batch in ex.batches():
        cols = batch.to_pydict()
        keys = list(zip(*(cols[k] for k in key)))
        rest = list(zip(*(cols[n] for n in names if n not in key)))
        for k, r in zip(keys, rest):
            rows[k] += 1
            content.add(k + (hash(repr(r)),))
    for p in ex.summary.problems:
        evidence.add(("export-problem", p.message_id))
    cached = duplicate_ids(messages)
    if cached is None:  # a DUPLICATE_ID record that does not decode: loadMessageJournal throws
        return nothing, frozenset(evidence | {("load-throws", "duplicate-id")})
    caches, entries = _cache_entries(cached)
    return Delivered(bound, rows, frozenset(content | entries), caches=caches), frozenset(evidence)


def _cache_entries(cached: tuple) -> tuple[Counter, set]:
    """The duplicate-detection cache entries of :func:`tests.faults.artemis.duplicate_ids`, keyed by their value
    (address, duplicate id) instead of their record id: ``JDBCJournalImpl.load`` hands every live row to the same
    ``AbstractJournalStorageManager.loadMessageJournal`` as the file journal's load (``JDBCJournalLoaderCallback``
    adds each ADD and UPDATE row to its committed records, case DUPLICATE_ID fills the caches), so what the caches
    hold is part of what the broker delivers here too; the record id only names the row the broker deletes when
    the entry leaves the cache, so an entry under another record id is the same entry (the file journal's truth
    says so through ``model.classify``'s ``moved``, which this classify does not take)."""
    _counts, content = cached
    caches: Counter = Counter()
    entries = set()
    for kind, _rid, state, value in content:
        caches[(kind, value, state)] = 1
        entries.add((kind, value, state))
    return caches, entries


# -- Classic ---------------------------------------------------------------------------------------------------

@dataclass
class ClassicJdbcSites:
    msgs: list = field(default_factory=list)   # (ID, CONTAINER, MSGID_PROD, MSGID_SEQ, PRIORITY, XID, len(MSG))
    acks: list = field(default_factory=list)   # (CONTAINER, CLIENT_ID, SUB_NAME, PRIORITY, LAST_ACKED_ID)

    @classmethod
    def read(cls, conn) -> "ClassicJdbcSites":
        self = cls()
        with conn.cursor() as cur:
            cur.execute("SELECT ID, CONTAINER, MSGID_PROD, MSGID_SEQ, PRIORITY, XID, length(MSG) FROM ACTIVEMQ_MSGS "
                        "ORDER BY ID")
            self.msgs = cur.fetchall()
            cur.execute("SELECT CONTAINER, CLIENT_ID, SUB_NAME, PRIORITY, LAST_ACKED_ID FROM ACTIVEMQ_ACKS "
                        "ORDER BY CONTAINER, CLIENT_ID, SUB_NAME, PRIORITY")
            self.acks = cur.fetchall()
        return self

    def draw(self, rng: random.Random) -> RowFault:
        if rng.random() < 0.2:
            return self._ack_fault(rng)
        groups: dict = {}
        for m in self.msgs:
            groups.setdefault(m[1].split("://")[0] + (" xa" if m[5] else ""), []).append(m)
        label, m = _pick_row(rng, groups)
        key = (("ID", m[0]),)
        ids = [x[0] for x in self.msgs]
        r = rng.random()
        if r < 0.3:
            return RowFault("delete", "ACTIVEMQ_MSGS", key, label=f"{label} row")
        if r < 0.85:
            col = rng.choice(("ID", "CONTAINER", "MSGID_PROD", "MSGID_SEQ", "PRIORITY", "XID", "MSG", "MSG", "MSG"))
            what = f"{col} of a {label} row"
            if col == "ID":
                free = [v for v in (m[0] + 1, m[0] - 1, max(ids) + 1, m[0] ^ (1 << rng.randrange(8)))
                        if v not in ids]
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, rng.choice(free or [max(ids) + 1]), label=what)
            if col == "CONTAINER":
                others = sorted({x[1] for x in self.msgs if x[1] != m[1]})
                new = rng.choice(others + [m[1].replace("://", ":/"), m[1] + "x"])
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, new, label=what)
            if col == "MSGID_PROD":
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, (m[2] or "") + "x", label=what)
            if col == "MSGID_SEQ":
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, (m[3] or 0) + rng.choice((1, -1, 1000)), label=what)
            if col == "PRIORITY":
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, rng.choice((0, 4, 9)), label=what)
            if col == "XID":
                from tests.classic_jdbc_writer import encoded_xid

                new = rng.choice((encoded_xid(b"+"), encoded_xid(b"-"), "not-base64", None))
                return RowFault("set", "ACTIVEMQ_MSGS", key, col, new, label=what)
            i = rng.randrange(min(m[6], 64)) if rng.random() < 0.5 else rng.randrange(m[6])
            return RowFault("flip", "ACTIVEMQ_MSGS", key, "MSG", (i, 1 << rng.randrange(8)), label=f"{what} byte {i}")
        if r < 0.93:
            col = rng.choice(("MSGID_PROD", "MSGID_SEQ", "PRIORITY", "MSG", "EXPIRATION"))
            return RowFault("null", "ACTIVEMQ_MSGS", key, col, label=f"NULL {col} of a {label} row")
        return RowFault("duplicate", "ACTIVEMQ_MSGS", key, "ID", max(ids) + 1, label=f"duplicate {label} row")

    def _ack_fault(self, rng) -> RowFault:
        a = rng.choice(self.acks)
        key = (("CONTAINER", a[0]), ("CLIENT_ID", a[1]), ("SUB_NAME", a[2]), ("PRIORITY", a[3]))
        label = "destination marker" if a[3] == 11 else "subscription"
        r = rng.random()
        if r < 0.3:
            return RowFault("delete", "ACTIVEMQ_ACKS", key, label=f"{label} row")
        if r < 0.85:
            col = rng.choice(("LAST_ACKED_ID", "LAST_ACKED_ID", "CLIENT_ID", "SUB_NAME", "CONTAINER", "PRIORITY"))
            last = a[4] if a[4] is not None else -1
            new = {"LAST_ACKED_ID": rng.choice((last + 1, last - 1, -1, last + 50, max(m[0] for m in self.msgs))),
                   "CLIENT_ID": a[1] + "x", "SUB_NAME": a[2] + "x", "CONTAINER": a[0] + "x",
                   "PRIORITY": rng.choice([p for p in (0, 4, 9, 11) if p != a[3]])}[col]
            return RowFault("set", "ACTIVEMQ_ACKS", key, col, new, label=f"{col} of a {label} row")
        return RowFault("null", "ACTIVEMQ_ACKS", key, rng.choice(("LAST_ACKED_ID", "SUB_DEST", "XID")),
                        label=f"NULL of a {label} row")


_KINDS = ("queue", "topic", "temp-queue", "temp-topic")


def classic_state(store, verified: list | None = None) -> tuple[Delivered, frozenset]:
    """(what the broker delivers, the evidence set) of the Classic JDBC store (in the current session);
    ``verified`` receives verify's findings, which the export computes on the snapshot it reads (so a fault
    is scanned by verify once).

    Evidence: what ``DefaultJDBCAdapter`` never writes: a MSG that is not an OpenWire message (or NULL), a
    row whose MSGID_PROD:MSGID_SEQ, PRIORITY or CONTAINER differs from its message's own (``doAddMessage``
    writes them from the message), a NULL where it writes a value, an XID that is not an encoded
    XATransactionId, two rows of one destination holding the same message."""
    from amqtool.engines.export.jdbc import ClassicJdbcExport, classic_rows
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.schema import MESSAGE_COLUMNS
    from amqtool.engines.jdbc.classic import decode_row, decode_xid, iter_message_rows
    from amqtool.errors import AmqtoolError, FormatError

    try:
        ex = ClassicJdbcExport(store, ExportOptions(safe=True, salvage=True))
    except AmqtoolError:
        if verified is not None:
            raise
        return Delivered(frozenset(), Counter(), frozenset(), detected=False), frozenset({("no-store",)})
    if verified is not None:
        verified[:] = ex.summary.findings
    names = [c[0] for c in MESSAGE_COLUMNS]
    qi, si = names.index("queue"), names.index("transaction_state")
    skip = {names.index("message_id"), names.index("store_message_id")}
    evidence: set = set()
    rows: Counter = Counter()
    content = set()
    seen: set = set()
    try:
        bindings = ex.binding_rows()
        for row in iter_message_rows(ex._conn, store.statements):
            msg, err = decode_row(row)
            mid = f"row {row.id}"
            if err is not None:
                evidence.add(("undecodable", row.id))
            else:
                mid = str(msg.message_id)
                if mid != row.message_id:
                    evidence.add(("msgid", row.id))
                if row.priority is None or row.priority != getattr(msg, "priority", row.priority):
                    evidence.add(("priority", row.id))
            if "://" not in row.container or row.container.split("://")[0] not in _KINDS:
                evidence.add(("container", row.id))  # never a qualified name (getQualifiedName)
            if row.xid is not None:
                try:
                    decode_xid(row.xid)
                except FormatError:
                    # recovery reads rows with XID IS NULL, and the prepared operation cannot be rebuilt
                    evidence.add(("xid", row.id))
                    continue
            if None in (row.msgid_prod, row.msgid_seq, row.expiration, row.priority):
                evidence.add(("null", row.id))
            for r in classic_rows(row, ex.ctx, ex.summary):
                # AbstractStoreCursor.recoverMessage: a message id the destination's cursor has recovered
                # already is a duplicate, dropped; the row's own ID keys it (the store's sequence)
                if (r[qi], mid, r[si]) in seen:
                    evidence.add(("duplicate", row.container, mid))
                    continue
                seen.add((r[qi], mid, r[si]))
                k = (r[qi], row.id, r[si])
                rows[k] += 1
                # the export row is a function of the table row, its queue and state: its digest is kept
                # across faults (a repr of every row for every fault was a fifth of a fault's cost)
                src = (row.id, row.container, row.msgid_prod, row.msgid_seq, row.expiration, row.priority,
                       row.xid, row.msg) + k
                digest = _ROW_DIGESTS.get(src)
                if digest is None:
                    digest = _ROW_DIGESTS[src] = hash(repr(tuple(v for i, v in enumerate(r) if i not in skip)))
                content.add(k + (digest,))
    finally:
        ex.close()
    for c, subs in ex.ctx.subs.items():
        for s in subs:
            if any(v < -1 for v in s.last_acked.values()):
                evidence.add(("last-acked", c, s.client_id, s.name))
    bound = frozenset(r[:3] for r in bindings)
    content.update(("binding",) + tuple(r) for r in bindings)
    return Delivered(bound, rows, frozenset(content)), frozenset(evidence)


# -- truth, verdict, campaign ------------------------------------------------------------------------------------

def classify(pristine: tuple, damaged: tuple) -> tuple[str, dict]:
    (p, p_ev), (d, d_ev) = pristine, damaged
    diff = p.diff(d)
    if not diff["lost"] and not diff["back"] and not diff["bindings"]:
        return (CONTENT if diff["content"] else SAME), diff
    new = d_ev - p_ev
    diff["evidence"] = sorted(map(str, new))[:3]
    return (LOSS if new else UNPROVEN), diff


@dataclass
class JdbcOutcome:
    store: str
    seed: int
    fault: RowFault
    truth: str
    verdict: str
    diff: dict
    codes: tuple = ()

    @property
    def ok(self) -> bool:
        return expected(self.truth, self.verdict)


def judge(store, state) -> tuple[str, tuple, tuple]:
    """verify's verdict and codes, and the state (delivered, evidence), of the store in the current session.
    Artemis: ``verify_store`` is ``verify_load(store, load(store))``; the truth reads that same load. Classic:
    ``verify_store`` on the snapshot the export reads, which is what the export's judge calls."""
    from amqtool.errors import AmqtoolError, overall_verdict

    if store.kind != "artemis-jdbc":
        # the export that computes the delivered state runs verify's engine on its snapshot first
        findings: list = []
        try:
            damaged = state(store, findings)
        except AmqtoolError as err:
            return "UNKNOWN", (type(err).__name__,), state(store)
        return overall_verdict(findings).name, _codes(findings), damaged
    from amqtool.engines.jdbc import artemis

    try:
        data = artemis.load(store)
        findings = artemis.verify_load(store, data)[0]
    except AmqtoolError as err:
        return "UNKNOWN", (type(err).__name__,), state(store)
    return overall_verdict(findings).name, _codes(findings), state(store, data, findings)


def _codes(findings) -> tuple:
    return tuple(sorted({f.code for f in findings if f.severity.value != "info"}))


@contextmanager
def memoized_decoders():
    """The OpenWire decoders the Classic engines call, memoized on their input bytes (pure functions: the
    same bytes decode the same way; a campaign decodes the same few hundred messages for every fault)."""
    from unittest import mock

    from amqtool.engines.export import kahadb as export_kahadb
    from amqtool.engines.jdbc import classic

    real_row, real_ow = classic.decode_row, export_kahadb.decode_openwire

    def decode_row(row):
        k = row.msg
        hit = _ROWS.get(k)
        if hit is None:
            hit = _ROWS[k] = real_row(row)
        return hit

    def decode_openwire(where, msg, *, address, safe, **kw):
        k = (id(msg), address, safe)
        hit = _OPENWIRE.get(k)
        if hit is None or hit[0] is not msg:
            hit = _OPENWIRE[k] = (msg, real_ow(where, msg, address=address, safe=safe, **kw))
        return dict(hit[1])

    from amqtool.engines.artemis import broker_state
    from amqtool.formats.artemis import paging

    real_msg, real_page = broker_state.decode_persisted_message, paging.decode_page

    def pure(real, cache):
        def call(data):
            k = bytes(data)
            hit = cache.get(k)
            if hit is None:
                try:
                    hit = cache[k] = (real(data), None)
                except Exception as err:  # noqa: BLE001 - the same bytes raise the same error again
                    hit = cache[k] = (None, err)
            if hit[1] is not None:
                raise hit[1]
            return hit[0]
        return call

    with mock.patch.object(classic, "decode_row", decode_row), \
            mock.patch.object(export_kahadb, "decode_openwire", decode_openwire), \
            mock.patch.object(broker_state, "decode_persisted_message", pure(real_msg, _MESSAGES)), \
            mock.patch.object(paging, "decode_page", pure(real_page, _PAGES)):
        yield


_ROWS: dict = {}
_ROW_DIGESTS: dict = {}  # (Classic table row, queue, state) -> digest of its export row
_OPENWIRE: dict = {}
_MESSAGES: dict = {}
_PAGES: dict = {}


class JdbcCampaign:
    """Faults on one database store, each in a savepoint of ``conn``'s one transaction, rolled back after."""

    def __init__(self, name: str, conn, store, sites, state):
        self.name, self.conn, self.store, self.sites, self.state = name, conn, store, sites, state
        self.rejected = 0
        self.lo_tables = {t.lower() for t in lo_tables(conn)}
        self.pristine_reads: dict = {}
        with in_transaction(conn):
            self.pristine = state(store)

    def run_one(self, seed: int) -> JdbcOutcome | None:
        """The outcome of fault ``seed``; None when the database refuses the change (a key it would break)."""
        fault = self.sites.draw(random.Random(seed))
        with faulted(self.conn, fault) as applied:
            if not applied:
                self.rejected += 1
                return None
            with memoized_decoders(), self.shared_reads(fault):
                verdict, codes, damaged = judge(self.store, self.state)
        truth, diff = classify(self.pristine, damaged)
        return JdbcOutcome(self.name, seed, fault, truth, verdict, diff, codes)

    def run(self, seeds) -> list[JdbcOutcome]:
        return [o for o in (self.run_one(s) for s in seeds) if o is not None]

    def close(self) -> None:
        self.conn.rollback()
        self.conn.close()

    @contextmanager
    def shared_reads(self, fault: RowFault):
        """What judging one fault reads more than once, read once (the verdict and the truth are the same
        functions on the same rows; this only spares repeats):

        * ``build_broker_state`` of the same two loads (verify, the truth's walk and the export each build it):
          the first state built from them, for the fault's duration;
        * an Artemis store's large-message and page-store tables, which a fault of another table leaves as
          they were: their reads (``large_message_files``, ``page_stores``, ``large_message_bodies``) are
          the pristine store's, kept from the first fault that does not touch them."""
        from unittest import mock

        from amqtool.engines.artemis import broker_state, live_refs
        from amqtool.engines.jdbc import artemis

        states: dict = {}
        real_state = broker_state.build_broker_state

        def build(bindings, messages, *a, **kw):
            k = (id(bindings), id(messages), a, tuple(sorted(kw.items())))
            hit = states.get(k)
            if hit is None:
                hit = states[k] = (bindings, messages, real_state(bindings, messages, *a, **kw))
            return hit[2]

        patches = [mock.patch.object(broker_state, "build_broker_state", build),
                   mock.patch.object(live_refs, "build_broker_state", build)]
        if self.store.kind == "artemis-jdbc" and fault.table.lower() not in self.lo_tables:
            patches += [mock.patch.object(artemis, name, self._pristine(name, getattr(artemis, name)))
                        for name in ("large_message_files", "page_stores", "large_message_bodies")]
        with contextlib.ExitStack() as stack:
            for p in patches:
                stack.enter_context(p)
            yield

    def _pristine(self, name: str, real):
        """``real`` (a read of the large-object tables) answered from the first call's result."""
        def call(*args):
            hit = self.pristine_reads.get(name)
            if hit is None:
                memory = args[3] if name == "page_stores" and len(args) > 3 else None
                hit = self.pristine_reads[name] = (real(*args), list(memory) if memory is not None else None)
            elif hit[1] is not None:
                args[3][:] = hit[1]  # page_stores fills the caller's list of page stores
            return hit[0]
        return call


def campaign_seeds(kind: str, seed: int, faults: int) -> range:
    """The fault seeds of campaign ``seed`` on store ``kind``: one range per (seed, kind), never overlapping."""
    base = seed * 1_000_003 + (0 if kind == "artemis" else 500_000)
    return range(base, base + faults)


def lo_tables(conn) -> list[str]:
    """The page-store and large-message tables (whose rows hold large objects)."""
    return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'page_store%' "
                                       "OR tablename = 'large_messages' ORDER BY tablename").fetchall()]


def open_campaign(kind: str, pg, workdir: Path, *, demo_seed: int = 3, demo_size: int = 3 << 20,
                  db: str | None = None) -> "JdbcCampaign | None":
    """The campaign on a fresh store of ``kind`` (``artemis``: the paged demo of ``demo_size`` written with
    ``demo_seed``; ``classic``: the KahaDB ``basic`` fixture's messages) in database ``db`` of cluster ``pg``;
    None when the Classic fixture is not present. ``close()`` it after."""
    from tests.support import KAHADB

    db = db or f"faults_{kind}"
    if kind == "artemis":
        store = artemis_store(pg, db, workdir, seed=demo_seed, size=demo_size)
        conn = pg.connect(db, autocommit=False)
        return JdbcCampaign(kind, conn, store, ArtemisJdbcSites.read(conn, lo_tables(conn)), artemis_state)
    if not (KAHADB / "basic").is_dir():
        return None
    store = classic_store(pg, db)
    conn = pg.connect(db, autocommit=False)
    return JdbcCampaign(kind, conn, store, ClassicJdbcSites.read(conn), classic_state)


def confusion(outcomes: list) -> str:
    from tests.faults.model import confusion as table

    text = table(outcomes, TRUTHS, CONTENT)
    n = sum(1 for o in outcomes if o.truth == UNPROVEN)
    return text + f"\n{n} unproven loss(es) (a state the broker itself writes: no evidence can prove them)"


# -- the pristine stores ---------------------------------------------------------------------------------------

def artemis_store(pg, db: str, workdir: Path, *, seed: int = 3, size: int = 3 << 20):
    """A small paged demo written into the tables of database ``db``; returns the store (its target)."""
    from amqtool.engines.jdbc import artemis
    from tests.engines.test_jdbc_artemis import write_demo
    from tests.faults.stores import demo

    path = demo(workdir / f"demo-{db}", size, seed=seed, file_size=64 * 1024)
    url = write_demo(pg, db, path)
    return artemis.open_store(_target(url))


def classic_store(pg, db: str):
    """The KahaDB ``basic`` fixture's live messages in Classic's tables, with durable subscriptions (one of them
    prioritized, one with acks), a destination marker, and a prepared XA transaction's send and remove."""
    from amqtool.engines.jdbc import classic
    from tests.classic_jdbc_writer import (
        add_subscription, encoded_xid, kahadb_messages, record_destination, schema, write_messages,
    )
    from tests.support import KAHADB

    messages = kahadb_messages(KAHADB / "basic" / "kahadb")
    url = pg.create_database(db)
    with pg.connect(db) as c:
        for s in schema():
            c.execute(s)
        ids = write_messages(c, messages, xid={3: encoded_xid(b"+"), 4: encoded_xid(b"-")})
        topics = sorted(k for k in ids if k.startswith("topic://"))
        for n, t in enumerate(topics):
            rows = ids[t]
            add_subscription(c, t, f"c{n}", "all", -1)
            add_subscription(c, t, f"c{n}", "half", rows[len(rows) // 2])
            add_subscription(c, t, f"c{n}", "prio", rows[len(rows) // 3], priorities=range(10))
        record_destination(c, "queue://faults.empty")
    return classic.open_store(_target(url))


def _target(url: str):
    from amqtool.engines.jdbc.connection import parse_jdbc_url
    from tests.pg_cluster import PASSWORD, USER

    t = parse_jdbc_url(url)
    t.user, t.password = USER, PASSWORD
    return t
