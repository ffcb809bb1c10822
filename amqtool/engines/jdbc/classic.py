"""ActiveMQ Classic's JDBC persistence adapter: what the store holds, as the broker would recover it.

Live sets, mirroring ``org.apache.activemq.store.jdbc``:

* a queue's live messages are its ``ACTIVEMQ_MSGS`` rows with ``XID IS NULL``, in ID order
  (``JDBCMessageStore.recoverNextMessages`` -> ``Statements.getFindNextMessagesStatement``). An acked queue
  message is deleted (``DefaultJDBCAdapter.doRemoveMessage``), so every other row is live.
* a durable subscription's pending messages are its topic's rows with ``XID IS NULL`` and
  ``ID > LAST_ACKED_ID`` of the subscription's ``ACTIVEMQ_ACKS`` row: the row of priority 0, or, when the
  subscription has a row per priority (``prioritizedMessages``), the row of the message's priority
  (``JDBCTopicMessageStore.recoverNextMessages``, ``getFindDurableSubMessagesStatement`` /
  ``...ByPriorityStatement``). A topic row no subscription still needs has been acked by all and waits for the
  broker's periodic ``doDeleteOldMessages``: it is counted (``ackedByAll``), not live.
* rows with an ``XID`` belong to a prepared XA transaction (``doRecoverPreparedOps``): ``+`` a send that is not
  visible until commit, ``-`` a remove (ack) waiting for the outcome; ``ACTIVEMQ_ACKS`` rows with an ``XID`` are
  durable-subscription acks of a prepared transaction (``recoverLastAck``). They are listed under
  ``transactions``, never as live.
* ``ACTIVEMQ_LOCK`` row 1: with the lease locker, ``BROKER_NAME`` holds the lease until ``TIME`` (ms since the
  epoch); with the default locker a session keeps ``SELECT ... FOR UPDATE`` open (seen in the server's
  activity view, never by taking the lock).

Messages are decoded with the OpenWire codec KahaDB uses (``JDBCPersistenceAdapter`` marshals with an
``OpenWireFormat`` at the store's OpenWire version, 11 by default).
"""
from __future__ import annotations

import base64
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from amqtool.errors import FormatError, Finding, Severity, UnknownStoreError, overall_verdict
from amqtool.formats.kahadb.openwire import decode_message
from amqtool.engines.jdbc.classic_sql import DESTINATION_MARKER_PRIORITY, ClassicStatements, statements_for
from amqtool.engines.jdbc.connection import JdbcTarget, read_only_session

OPENWIRE_STORE_VERSION = 11  # OpenWireFormat.DEFAULT_STORE_VERSION (BrokerService.getStoreOpenWireVersion)
FETCH_ROWS = 2000


@dataclass
class ClassicStore:
    """A Classic JDBC store: the database and the table names the broker uses there."""

    target: JdbcTarget
    statements: ClassicStatements
    locker: str | None = None
    kind: str = "classic-jdbc"

    @property
    def root(self) -> str:
        return self.target.url


def open_store(target: JdbcTarget, table_prefix: str = "", table_names: dict | None = None,
               locker: str | None = None) -> ClassicStore:
    return ClassicStore(target, statements_for(target.vendor, table_prefix, **(table_names or {})), locker)


@dataclass
class MessageRow:
    id: int
    container: str
    msgid_prod: str | None
    msgid_seq: int | None
    expiration: int | None
    priority: int | None
    xid: str | None
    msg: bytes | None

    @property
    def message_id(self) -> str:
        return f"{self.msgid_prod}:{self.msgid_seq}"


@dataclass
class Subscription:
    container: str
    client_id: str
    name: str
    selector: str | None = None
    sub_dest: str | None = None
    last_acked: dict[int, int] = field(default_factory=dict)  # priority -> LAST_ACKED_ID
    pending_xids: list[str] = field(default_factory=list)

    @property
    def prioritized(self) -> bool:
        return len(self.last_acked) > 1

    def wants(self, row: MessageRow) -> bool:
        """``M.ID > D.LAST_ACKED_ID`` for the row of priority 0 (or of the message's priority)."""
        if row.xid is not None:
            return False
        last = self.last_acked.get((row.priority or 0) if self.prioritized else 0)
        return last is not None and row.id > last


@dataclass
class Xid:
    """An encoded ``XATransactionId`` as the adapter stores it: byte 0 the operation (``+``, ``-``, or 0 for a
    durable ack whose bytes 1..9 carry the acked sequence and priority), then from byte 10 formatId, the
    global id's length, the global id and the branch qualifier (``XATransactionId.getEncodedXidBytes``)."""

    op: str
    key: str
    ack_seq: int | None = None


def decode_xid(text: str) -> Xid:
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise FormatError(f"XID {text[:40]!r} is not base64") from None
    if len(raw) < 16:
        raise FormatError(f"XID is {len(raw)} bytes, shorter than its 16-byte header")
    fmt, glen = struct.unpack_from(">iH", raw, 10)
    if 16 + glen > len(raw):
        raise FormatError(f"XID global id length {glen} runs past its {len(raw)} bytes")
    gid, bq = raw[16:16 + glen], raw[16 + glen:]
    key = f"XID:[{fmt},globalId={gid.hex()},branchId={bq.hex()}]"
    op = chr(raw[0]) if raw[0] in (ord("+"), ord("-")) else "ack"
    ack_seq = struct.unpack_from(">q", raw, 1)[0] if op == "ack" else None
    return Xid(op, key, ack_seq)


def destination_of(container: str) -> tuple[str, str]:
    """``queue://A`` -> ("queue", "A") (``ActiveMQDestination.getQualifiedName``)."""
    kind, sep, name = (container or "").partition("://")
    if not sep:
        return "unknown", container or ""
    return {"temp-queue": "temp-queue", "temp-topic": "temp-topic"}.get(kind, kind), name


# ---------------------------------------------------------------------------------------------------------
# Reading

def _table_facts(conn, st: ClassicStatements) -> dict[str, dict]:
    with conn.cursor() as cur:
        cur.execute(st.table_facts(), st.table_fact_params())
        facts = {name: {"table": name, "exists": bool(ok), "bytes": size} for name, ok, size in cur.fetchall()}
    return {role: facts[name] for role, name in st.tables.items()}


def require_tables(conn, store: ClassicStore) -> dict[str, dict]:
    facts = _table_facts(conn, store.statements)
    missing = [f["table"] for role, f in facts.items() if role != "lock" and not f["exists"]]
    if missing:
        raise UnknownStoreError(f"{store.target.url}: no ActiveMQ JDBC store here (table(s) "
                                f"{', '.join(missing)} missing; check the table prefix)")
    return facts


def read_subscriptions(conn, st: ClassicStatements) -> tuple[dict[str, list[Subscription]], set[str], list]:
    """(durable subscriptions by topic container, every container with a marker row, prepared ack rows)."""
    subs: dict[tuple, Subscription] = {}
    markers: set[str] = set()
    prepared: list[tuple[str, Subscription]] = []
    with conn.cursor() as cur:
        cur.execute(st.acks_rows())
        for container, sub_dest, client, name, selector, last, prio, xid in cur:
            if prio == DESTINATION_MARKER_PRIORITY:
                markers.add(container)
                continue
            s = subs.setdefault((container, client, name), Subscription(container, client, name, selector, sub_dest))
            s.last_acked[int(prio or 0)] = int(last if last is not None else -1)
            if xid is not None:
                s.pending_xids.append(xid)
                prepared.append((xid, s))
    by_topic: dict[str, list[Subscription]] = {}
    for s in subs.values():
        by_topic.setdefault(s.container, []).append(s)
    return by_topic, markers, prepared


def iter_message_rows(conn, st: ClassicStatements, where: str = "") -> Iterator[MessageRow]:
    """Every message row in ID order, through a server-side cursor (memory does not grow with the table)."""
    with conn.cursor(name="amqtool_msgs") as cur:
        cur.itersize = FETCH_ROWS
        cur.execute(st.messages(where))
        for rid, container, prod, seq, exp, prio, xid, msg in cur:
            yield MessageRow(int(rid), container, prod, seq, exp, prio, xid,
                             bytes(msg) if msg is not None else None)


def lock_state(conn, st: ClassicStatements, facts: dict, locker: str | None = None) -> dict:
    """``ACTIVEMQ_LOCK``: the lease holder and expiry, and sessions holding the default locker's row lock."""
    out: dict = {"table": st.lock, "exists": facts["lock"]["exists"], "locker": locker}
    if not facts["lock"]["exists"]:
        return out
    with conn.cursor() as cur:
        cur.execute(st.now_ms())
        now = int(cur.fetchone()[0])
        cur.execute(st.lock_row())
        rows = cur.fetchall()
        cur.execute(st.row_lock_holders(), st.row_lock_params())
        holders = [{"pid": pid, "since": since.isoformat() if since else None, "client": addr,
                    "application": app, "state": state} for pid, since, addr, app, state, _q in cur.fetchall()]
    row = next((r for r in rows if r[0] == 1), None)
    out.update(rows=len(rows), databaseTimeMs=now, rowLockHolders=holders)
    if row is None:
        out.update(state="no-row", holder=None, leaseExpiresMs=None)
        return out
    _id, t, holder = row
    out.update(holder=holder, leaseExpiresMs=t)
    if holders:
        out["state"] = "held"          # DefaultDatabaseLocker: SELECT ... FOR UPDATE kept open
    elif holder and t and t >= now:
        out["state"] = "leased"        # LeaseDatabaseLocker: lease not yet expired
        out["leaseRemainingMs"] = t - now
    elif holder:
        out["state"] = "lease-expired"
        out["leaseExpiredAgoMs"] = now - (t or 0)
    else:
        out["state"] = "free"
    return out


# ---------------------------------------------------------------------------------------------------------
# The print document

def message_json(row: MessageRow, *, safe: bool, decoded=None, error: str | None = None) -> dict:
    from amqtool.engines.kahadb.document import openwire_message_json

    doc = {"messageId": row.message_id, "id": row.id, "container": row.container, "priority": row.priority,
           "expiration": row.expiration, "xid": row.xid, "msgSize": len(row.msg) if row.msg is not None else None}
    if decoded is None and error is None:
        decoded, error = decode_row(row)
    if decoded is None:
        doc.update(bodySize=None, bodySha256=None, error=error)
        return doc
    doc.update(openwire_message_json(decoded, safe=safe))
    doc["priority"] = row.priority
    return doc


def decode_row(row: MessageRow):
    """(OpenWireMessage, None) or (None, reason)."""
    if row.msg is None:
        return None, "MSG is NULL"
    try:
        return decode_message(row.msg, OPENWIRE_STORE_VERSION), None
    except FormatError as err:
        return None, err.message


@dataclass
class ClassicScan:
    """One pass over the store: destinations with their live rows, subscriptions, prepared transactions."""

    facts: dict
    lock: dict
    destinations: dict[str, dict] = field(default_factory=dict)   # container -> entry
    subs: dict[str, list[Subscription]] = field(default_factory=dict)
    transactions: dict[str, dict] = field(default_factory=dict)
    rows: int = 0
    live: int = 0
    expired: int = 0             # live rows whose EXPIRATION has passed at ``now``
    findings: list[Finding] = field(default_factory=list)


def scan(store: ClassicStore, *, safe: bool = True, keep_messages: bool = True,
         on_row: Callable[[MessageRow, object, str | None, bool, list], None] | None = None,
         progress: Callable[[int], None] | None = None, conn=None, now: int | None = None) -> ClassicScan:
    """Read the store once in one read-only snapshot (``conn``'s, when given: a caller reading the same
    snapshot after). ``on_row(row, decoded, error, queue_live, subs)`` is called for every message row
    (``subs``: the subscriptions that still want it)."""
    import contextlib

    if now is None:
        now = int(time.time() * 1000)
    st = store.statements
    with (contextlib.nullcontext(conn) if conn is not None else read_only_session(store.target)) as conn:
        facts = require_tables(conn, store)
        lock = lock_state(conn, st, facts, store.locker)
        subs, markers, prepared_acks = read_subscriptions(conn, st)
        res = ClassicScan(facts, lock, subs=subs)

        def dest(container: str) -> dict:
            d = res.destinations.get(container)
            if d is None:
                kind, name = destination_of(container)
                d = res.destinations[container] = {
                    "name": name, "type": kind, "key": container, "rows": 0, "live": [], "liveCount": 0,
                    "ackedByAll": 0, "subscriptions": []}
            return d

        for c in sorted(markers | set(subs)):
            dest(c)
        for xid, s in prepared_acks:
            _tx(res, xid, f"{s.container} {s.client_id}/{s.name}")
        sub_live: dict[tuple, list] = {}
        # (container, message id) -> who its first row is pending for, and whether that row's MSGID columns
        # name another message (its bytes damaged into this one)
        copies: dict[tuple, tuple[set, bool]] = {}
        for row in iter_message_rows(conn, st):
            res.rows += 1
            if progress is not None:
                progress(len(row.msg or b""))
            d = dest(row.container)
            d["rows"] += 1
            decoded, error = decode_row(row)
            if error is not None:
                res.findings.append(Finding(Severity.CRITICAL, "classic-jdbc-undecodable",
                                            f"message row ID {row.id} ({row.message_id}) does not decode as "
                                            f"OpenWire: {error}", path=f"{st.msgs}:{row.id}"))
            elif decoded.message_id is not None and decoded.message_id != row.message_id:
                res.findings.append(Finding(Severity.WARNING, "classic-jdbc-msgid-mismatch",
                                            f"row ID {row.id} has MSGID {row.message_id} but its message is "
                                            f"{decoded.message_id}", path=f"{st.msgs}:{row.id}"))
            if row.xid is not None:
                _tx(res, row.xid, row.container, row=row)
            if decoded is not None and decoded.message_id is not None:
                _duplicate_check(res, st, subs, copies, row, decoded.message_id)
            wanting = []
            queue_live = False
            if row.container.startswith("topic://"):
                wanting = [s for s in subs.get(row.container, ()) if s.wants(row)]
                if not wanting and row.xid is None:
                    d["ackedByAll"] += 1
            elif row.xid is None:
                queue_live = True
            if queue_live or wanting:
                res.live += 1
                d["liveCount"] += 1
                if row.expiration and 0 < row.expiration < now:
                    res.expired += 1
                item = message_json(row, safe=safe, decoded=decoded, error=error) if keep_messages else row.id
                if keep_messages:
                    d["live"].append(item)
                for s in wanting:
                    sub_live.setdefault((s.container, s.client_id, s.name), []).append(item)
            if on_row is not None:
                on_row(row, decoded, error, queue_live, wanting)
        for c, lst in sorted(subs.items()):
            d = dest(c)
            for s in sorted(lst, key=lambda s: (s.client_id, s.name)):
                pending = sub_live.get((s.container, s.client_id, s.name), [])
                d["subscriptions"].append({
                    "clientId": s.client_id, "subscriptionName": s.name, "selector": s.selector,
                    "subscribedDestination": s.sub_dest, "prioritized": s.prioritized,
                    "lastAckedId": s.last_acked.get(0) if not s.prioritized else max(s.last_acked.values()),
                    "pendingCount": len(pending), "live": pending if keep_messages else [],
                    "preparedAcks": len(s.pending_xids)})
    return res


def _duplicate_check(res: ClassicScan, st: ClassicStatements, subs: dict, copies: dict, row: MessageRow,
                     message_id: str) -> None:
    """A second row of one destination holding the same message (``JDBCMessageStore.addMessage`` writes a
    message once per destination). The cursor that has recovered the first drops the copy as a duplicate
    (``AbstractStoreCursor.recoverMessage``), so the copy matters only where the first is not pending: a
    durable subscription that acknowledged the first (``LAST_ACKED_ID`` below the copy's ID) gets the message
    again (CRITICAL ``classic-jdbc-duplicate-message``); elsewhere it changes nothing (WARNING) -- unless one of
    the two rows' MSGID columns name another message than its bytes do (``addMessage`` writes them from the
    message's own id): that row's message was damaged into the other's, and whichever row the cursor drops, a
    message pending there is lost (CRITICAL)."""
    import dataclasses

    plain = row if row.xid is None or _op(row.xid) == "-" else None
    if row.container.startswith("topic://"):
        if plain is not None and row.xid is not None:
            plain = dataclasses.replace(row, xid=None)
        pending = {(s.client_id, s.name) for s in subs.get(row.container, ()) if plain is not None and s.wants(plain)}
    else:
        pending = {"queue"} if plain is not None else set()
    key = (row.container, message_id)
    damaged = row.message_id != message_id
    if key not in copies:
        copies[key] = (pending, damaged)
        return
    first, first_damaged = copies[key]
    again = sorted(f"{c}:{n}" for c, n in pending - first if c != "queue") if pending - first else []
    # the copy's own columns name another message: it was that message, dropped as this one's copy; or the
    # first row was another message damaged into this one, kept in this one's place
    lost = (pending if damaged else set()) or (pending if first_damaged else set())
    res.findings.append(Finding(
        Severity.CRITICAL if again or lost else Severity.WARNING, "classic-jdbc-duplicate-message",
        f"row ID {row.id} holds message {message_id} of {row.container}, which an earlier row holds too"
        + (f": durable subscription(s) {', '.join(again)} acknowledged it and get it again" if again else
           f": {'this' if damaged else 'the earlier'} row's MSGID columns name another message, whose bytes were "
           f"damaged into this one: the broker's cursor drops the copy, and a message still pending is lost"
           if lost else " (the broker's cursor drops the copy)"), path=f"{st.msgs}:{row.id}"))


def _op(xid_text: str) -> str | None:
    try:
        return decode_xid(xid_text).op
    except FormatError:
        return None


def _tx(res: ClassicScan, xid_text: str, where: str, row: MessageRow | None = None) -> None:
    """Count a row of a prepared XA transaction: a message row (a send, or a remove with ``-``) or, without
    ``row``, a durable subscription's ack row."""
    try:
        xid = decode_xid(xid_text)
    except FormatError as err:
        res.findings.append(Finding(Severity.CRITICAL, "classic-jdbc-bad-xid",
                                    f"{where}: {err.message}", path=where))
        return
    t = res.transactions.setdefault(xid.key, {"xid": xid.key, "state": "prepared", "sends": 0, "acks": 0,
                                              "destinations": []})
    if row is None or xid.op == "-":
        t["acks"] += 1
    else:
        t["sends"] += 1
    dest = where.split(" ")[0]
    if dest not in t["destinations"]:
        t["destinations"].append(dest)


def print_document(store: ClassicStore, *, safe: bool = False, progress=None) -> dict:
    """The store as one JSON document (man/amqtool-print.1, "Classic JDBC stores")::

        {"verdict", "kind": "classic-jdbc", "root": <url>, "database": {...}, "tables": {...},
         "lock": {...}, "destinations": [{"name", "type", "key", "rows", "liveCount", "ackedByAll",
           "live": [message...], "subscriptions": [{"clientId", "subscriptionName", "selector",
           "lastAckedId", "pendingCount", "live": [message...], ...}]}],
         "transactions": [{"xid", "state", "sends", "acks", "destinations"}],
         "summary": {"rows", "live", "destinations", "subscriptions", "preparedTransactions"}}

    A message: messageId (MSGID_PROD:MSGID_SEQ), id (the row's ID, the store sequence), container, priority,
    expiration, xid, msgSize, then the OpenWire fields KahaDB's print gives (bodySize, bodySha256,
    messageType, timestamp, properties, body unless ``safe``)."""
    res = scan(store, safe=safe, progress=progress)
    # verify's verdict on the very scan print shows (one rule: amqtool.engines.verdicts)
    verdict = overall_verdict(scan_findings(store, res))
    return {"verdict": verdict.name, "kind": store.kind, "root": store.root,
            "database": store.target.to_json(), "tables": res.facts, "lock": res.lock,
            "destinations": [res.destinations[k] for k in sorted(res.destinations)],
            "transactions": list(res.transactions.values()),
            "summary": _summary(res)}


def _summary(res: ClassicScan) -> dict:
    return {"rows": res.rows, "live": res.live, "destinations": len(res.destinations),
            "subscriptions": sum(len(v) for v in res.subs.values()),
            "preparedTransactions": len(res.transactions),
            "ackedByAll": sum(d["ackedByAll"] for d in res.destinations.values())}


def iter_rows(doc: dict) -> Iterator[dict]:
    """``--format jsonl``: one line per live message (``record: message``), durable subscription
    (``record: subscription``, its pending messages as row IDs) and prepared transaction, then one
    ``record: summary`` line with the verdict, the lock and the counts."""
    for d in doc["destinations"]:
        for m in d["live"]:
            yield {"record": "message", "destination": d["key"], **m}
        for sub in d["subscriptions"]:
            yield {"record": "subscription", "destination": d["key"],
                   **{k: v for k, v in sub.items() if k != "live"}, "pending": [m["id"] for m in sub["live"]]}
    for tx in doc["transactions"]:
        yield {"record": "transaction", **tx}
    yield {"record": "summary", "verdict": doc["verdict"], "kind": doc["kind"], "root": doc["root"],
           "lock": doc["lock"], **doc["summary"]}


def render_text(doc: dict) -> Iterator[str]:
    yield f"classic-jdbc store {doc['root']}  verdict {doc['verdict']}"
    lock = doc.get("lock", {})
    yield f"  lock: {lock.get('state', 'unknown')}" + (f" by {lock['holder']}" if lock.get("holder") else "")
    for dest in doc["destinations"]:
        yield f"  {dest['type']} {dest['name']}: {dest['liveCount']} live ({dest['rows']} row(s))"
        for m in dest["live"][:50]:
            yield f"    {m['messageId']}  {m.get('messageType', '?')}  {m.get('bodySize')} bytes  id {m['id']}"
        if len(dest["live"]) > 50:
            yield f"    ... {len(dest['live']) - 50} more"
        for sub in dest["subscriptions"]:
            yield (f"    durable {sub['clientId']}/{sub['subscriptionName']}: {sub['pendingCount']} pending "
                   f"(last acked id {sub['lastAckedId']})")
    for tx in doc["transactions"]:
        yield f"  transaction {tx['xid']}: {tx['state']} ({tx['sends']} send(s), {tx['acks']} ack(s))"
    s = doc["summary"]
    yield f"  {s['rows']} row(s), {s['live']} live, {s['destinations']} destination(s), {s['subscriptions']} durable"


# ---------------------------------------------------------------------------------------------------------
# verify

def verify_store(store: ClassicStore, *, progress=None, conn=None) -> tuple[list[Finding], dict]:
    """Findings of one :func:`scan` (``conn``: in that session's snapshot), as :func:`scan_findings` gives them,
    and the summary."""
    res = scan(store, keep_messages=False, progress=progress, conn=conn)
    summary = _summary(res)
    summary["lock"] = res.lock.get("state")
    return scan_findings(store, res), summary


def scan_findings(store: ClassicStore, res: ClassicScan) -> list[Finding]:
    """verify's findings on a :func:`scan` (codes in man/amqtool-verify.1); print, stat and export take their
    verdict from them:

    * ``classic-jdbc-undecodable`` CRITICAL: a MSG that is not an OpenWire message.
    * ``classic-jdbc-msgid-mismatch`` WARNING: MSGID_PROD:MSGID_SEQ differs from the message's own id.
    * ``classic-jdbc-bad-xid`` CRITICAL: an XID that is not an encoded XATransactionId.
    * ``classic-jdbc-prepared-transaction`` WARNING: an XA transaction left prepared (its rows are held).
    * ``classic-jdbc-expired`` INFO: live messages whose EXPIRATION has passed (the broker drops them).
    * ``classic-jdbc-unknown-container`` CRITICAL (WARNING without message rows): a CONTAINER that is not
      ``queue://``/``topic://``...
    * ``classic-jdbc-duplicate-message`` CRITICAL: a second row of a destination holding the same message,
      pending for a durable subscription that acknowledged the first (WARNING elsewhere: the cursor drops it).
    * ``classic-jdbc-no-lock-table`` WARNING: ``ACTIVEMQ_LOCK`` is missing (the broker recreates it).
    * ``classic-jdbc-lock`` INFO: who holds the lock or lease.
    """
    findings = list(res.findings)
    for tx in res.transactions.values():
        findings.append(Finding(Severity.WARNING, "classic-jdbc-prepared-transaction",
                                f"XA transaction {tx['xid']} is prepared ({tx['sends']} send(s), {tx['acks']} "
                                f"ack(s)); its rows stay until a transaction manager commits or rolls it back",
                                path=",".join(tx["destinations"])))
    for c, d in res.destinations.items():
        if d["type"] not in ("queue", "topic", "temp-queue", "temp-topic"):
            # the adapter writes ActiveMQDestination.getQualifiedName(): a row under anything else was changed,
            # and its message is lost to its own destination
            findings.append(Finding(Severity.CRITICAL if d["rows"] else Severity.WARNING,
                                    "classic-jdbc-unknown-container",
                                    f"CONTAINER {c!r} is not a qualified destination name"
                                    + (f": its {d['rows']} message row(s) are lost to their destination"
                                       if d["rows"] else ""), path=c))
    if res.expired:
        findings.append(Finding(Severity.INFO, "classic-jdbc-expired",
                                f"{res.expired} live message(s) have expired; the broker discards them on dispatch",
                                path=store.statements.msgs))
    lock = res.lock
    if not lock.get("exists"):
        findings.append(Finding(Severity.WARNING, "classic-jdbc-no-lock-table",
                                f"{store.statements.lock} is missing (created on the broker's next start)",
                                path=store.statements.lock))
    else:
        findings.append(Finding(Severity.INFO, "classic-jdbc-lock", lock_sentence(lock), path=store.statements.lock))
    return findings


def lock_sentence(lock: dict) -> str:
    state = lock.get("state")
    if state == "held":
        h = lock["rowLockHolders"][0]
        return f"the database lock is held by session pid {h['pid']} ({h['client'] or 'local'}) since {h['since']}"
    if state == "leased":
        return (f"leased by {lock['holder']} for another {lock['leaseRemainingMs'] / 1000:.1f} s "
                f"(until {lock['leaseExpiresMs']} ms)")
    if state == "lease-expired":
        return f"the lease of {lock['holder']} expired {lock['leaseExpiredAgoMs'] / 1000:.1f} s ago"
    if state == "no-row":
        return "the lock table has no row 1 (the broker inserts it when it creates the schema)"
    return "no broker holds the lock"
