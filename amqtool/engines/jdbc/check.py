"""``amqtool check db``: is a broker's database fit to hold its store? For pre-deployment checks and cron.

What it looks at, read-only (one READ ONLY transaction, the same session every command uses):

* reachability: the connection (CRITICAL ``db-unreachable`` when it fails: the broker could not start either),
  the server version, the user;
* the tables of the store kind (INFO ``db-table`` each, with its rows and size) (Classic: ``ACTIVEMQ_MSGS``/``ACKS``/``LOCK`` with the prefix; Artemis: the
  journal, large-message and node-manager tables): present, rows and sizes; none yet is fine before the first
  start (INFO ``db-tables-absent``) when the user may create them (CRITICAL ``db-cannot-create-tables``
  otherwise: ``JDBCPersistenceAdapter``/``JDBCJournalImpl`` create their tables at start); some but not all
  is WARNING ``db-tables-partial``;
* the locker: Classic ``ACTIVEMQ_LOCK`` (held by a session, leased, lease expired, free), Artemis
  ``NODE_MANAGER_STORE`` (state, primary and backup leases); INFO ``db-lock``;
* PostgreSQL settings that break a broker: ``idle_in_transaction_session_timeout`` > 0 ends the session in
  which Classic's default locker (``DefaultDatabaseLocker``) keeps ``SELECT ... FOR UPDATE`` open, so the
  broker loses its lock (WARNING ``db-idle-in-transaction-timeout``); ``default_transaction_read_only`` on
  (CRITICAL ``db-read-only``: the broker cannot write).
"""
from __future__ import annotations

from amqtool.engines.check import CheckReport
from amqtool.errors import AmqtoolError, Severity


def check_db(store, kind: str = "auto") -> CheckReport:
    """``store``: a ClassicStore or ArtemisJdbcStore (its target and table names); ``kind``: auto (by the tables
    present; Classic when neither kind has tables), classic or artemis."""
    from amqtool.engines.jdbc import artemis, classic
    from amqtool.engines.jdbc.artemis_sql import statements_for as artemis_statements
    from amqtool.engines.jdbc.connection import read_only_session

    report = CheckReport()
    target = store.target
    report.checks["database"] = target.to_json()
    try:
        with read_only_session(target) as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT current_setting('server_version'), current_user, "
                            "current_setting('idle_in_transaction_session_timeout'), "
                            "current_setting('default_transaction_read_only'), "
                            "has_database_privilege(current_user, current_database(), 'CREATE'), "
                            "has_schema_privilege(current_user, current_schema(), 'CREATE')")
                version, user, idle, ro, db_create, schema_create = cur.fetchone()
            report.checks["database"].update(serverVersion=version, sessionUser=user,
                                              canCreateTables=bool(schema_create))
            report.add(Severity.INFO, "db-reachable", f"connected to {target.url} as {user} (PostgreSQL {version})",
                       target.url)
            if store.kind == "artemis-jdbc":
                a_store, c_store = store, None
            else:
                c_store = store
                a_store = artemis.open_store(target)
            c_facts = classic._table_facts(conn, c_store.statements) if c_store is not None else None
            a_facts = artemis.table_facts(conn, a_store.statements)
            if kind == "auto":
                if store.kind == "artemis-jdbc" or (c_facts and not any(f["exists"] for f in c_facts.values())
                                                    and a_facts["bindings"]["exists"]):
                    kind = "artemis"
                else:
                    kind = "classic"
            if kind == "classic" and c_store is None:
                c_store = classic.open_store(target)
                c_facts = classic._table_facts(conn, c_store.statements)
            facts = c_facts if kind == "classic" else a_facts
            report.checks["kind"] = f"{kind}-jdbc"
            _rows(conn, facts)
            report.checks["tables"] = facts
            from amqtool.units import binary

            for role, f in facts.items():
                if f["exists"]:
                    report.add(Severity.INFO, "db-table", f"{role} table: {f['rows']} row(s), {binary(f['bytes'])}",
                               f["table"], role=role, rows=f["rows"], bytes=f["bytes"])
            present = [f["table"] for f in facts.values() if f["exists"]]
            needed = [f["table"] for role, f in facts.items() if role != "page-store"]
            if not present:
                if schema_create:
                    report.add(Severity.INFO, "db-tables-absent",
                               f"no {kind} tables yet; the broker creates them at its first start", target.url)
                else:
                    report.add(Severity.CRITICAL, "db-cannot-create-tables",
                               f"no {kind} tables, and user {user} may not create tables in the current "
                               "schema: the broker cannot start", target.url)
            elif len([t for t in needed if t in present]) < len(needed):
                missing = [t for t in needed if t not in present]
                report.add(Severity.WARNING, "db-tables-partial",
                           f"{kind} tables {', '.join(missing)} are missing while others exist", target.url,
                           missing=missing)
            if present:
                if kind == "classic":
                    lock = classic.lock_state(conn, c_store.statements, c_facts, getattr(store, "locker", None))
                    report.checks["lock"] = lock
                    if lock.get("exists"):
                        report.add(Severity.INFO, "db-lock", classic.lock_sentence(lock), c_store.statements.lock)
                else:
                    nm = artemis.node_manager(conn, a_store.statements, a_facts)
                    report.checks["nodeManager"] = nm
                    if nm.get("exists"):
                        lock = nm.get("primaryLock") or {}
                        report.add(Severity.INFO, "db-lock",
                                   f"broker state {nm['state']}; primary lock {lock.get('state', 'absent')}"
                                   + (f" by {lock['holder']}" if lock.get("holder") else ""), nm["table"])
            if idle not in ("0", "0ms", None) and kind == "classic":
                report.add(Severity.WARNING, "db-idle-in-transaction-timeout",
                           f"idle_in_transaction_session_timeout is {idle}: it ends the session in which the "
                           "default database locker holds its lock (use the lease locker, or set it to 0 for "
                           "the broker's user)", target.url, value=idle)
            if ro == "on":
                report.add(Severity.CRITICAL, "db-read-only",
                           "default_transaction_read_only is on for this user: the broker cannot write its store",
                           target.url)
    except AmqtoolError as err:
        report.add(Severity.CRITICAL, "db-unreachable", err.message, target.url)
    return report


def _rows(conn, facts: dict) -> None:
    """Row counts of the present tables (exact ``COUNT(*)``, the tables are the broker's working set)."""
    with conn.cursor() as cur:
        for f in facts.values():
            if f["exists"]:
                cur.execute(f"SELECT COUNT(*) FROM {f['table']}")
                f["rows"] = cur.fetchone()[0]
            else:
                f["rows"] = None
