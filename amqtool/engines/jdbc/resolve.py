"""Which database store a command addresses: ``--jdbc-url``, or the database a broker's configuration names.

:func:`jdbc_store` returns None when the command addresses a store on disk (no ``--jdbc-url`` and no
configuration naming a database), so the file-store path of each command goes on unchanged. With only a URL,
the store kind comes from the tables present: the Classic adapter's ``ACTIVEMQ_MSGS`` (with the prefix given),
else Artemis' journal tables.
"""
from __future__ import annotations

from amqtool.errors import UnknownStoreError, UsageError
from amqtool.engines.jdbc.connection import apply_credentials, parse_jdbc_url


def jdbc_store(jdbc_url: str | None, password_file: str | None = None, *, activemq_xml: str | None = None,
               broker_xml: str | None = None, table_prefix: str | None = None, probe: bool = True):
    """A ClassicStore or an ArtemisJdbcStore, or None when nothing addresses a database. ``probe=False``:
    with only a URL, do not look at the tables (a ClassicStore; ``check db`` looks at both kinds itself)."""
    classic_cfg = artemis_cfg = None
    if activemq_xml:
        from amqtool.store.jdbc_config import has_jdbc_adapter, read_classic_jdbc

        if has_jdbc_adapter(activemq_xml):
            classic_cfg = read_classic_jdbc(activemq_xml)
    if broker_xml:
        from amqtool.store.jdbc_config import find_database_store, read_artemis_jdbc

        if find_database_store(broker_xml) is not None:
            artemis_cfg = read_artemis_jdbc(broker_xml)
    cfg = classic_cfg or artemis_cfg
    if jdbc_url is None and cfg is None:
        if password_file:
            raise UsageError("--jdbc-password-file needs --jdbc-url (or a configuration naming a database)")
        return None
    if jdbc_url is not None:
        target = parse_jdbc_url(jdbc_url)
        if cfg is not None and target.user is None:
            target.user = cfg.user
    else:
        target = parse_jdbc_url(cfg.url, source=cfg.source, allow_password=True)
        target.user = target.user or cfg.user
        if target.password is None:
            target.password = cfg.password
    apply_credentials(target, password_file)
    if artemis_cfg is not None:
        from amqtool.engines.jdbc import artemis

        return artemis.open_store(target, artemis_cfg.tables)
    from amqtool.engines.jdbc import classic

    prefix = table_prefix if table_prefix is not None else (classic_cfg.table_prefix if classic_cfg else "")
    store = classic.open_store(target, prefix, classic_cfg.table_names if classic_cfg else None,
                               classic_cfg.locker if classic_cfg else None)
    if classic_cfg is None and table_prefix is None and probe:
        kind = detect_kind(store)
        if kind == "artemis-jdbc":
            from amqtool.engines.jdbc import artemis

            return artemis.open_store(target)
    return store


def detect_kind(classic_store) -> str:
    """"classic-jdbc" when the Classic tables are there, "artemis-jdbc" when Artemis' journal tables are, else
    UnknownStoreError naming both."""
    from amqtool.engines.jdbc.artemis_sql import statements_for as artemis_statements
    from amqtool.engines.jdbc.classic import _table_facts
    from amqtool.engines.jdbc.connection import read_only_session
    from amqtool.engines.jdbc import artemis

    with read_only_session(classic_store.target) as conn:
        if _table_facts(conn, classic_store.statements)["messages"]["exists"]:
            return "classic-jdbc"
        facts = artemis.table_facts(conn, artemis_statements(classic_store.target.vendor))
    if facts["bindings"]["exists"] and facts["messages"]["exists"]:
        return "artemis-jdbc"
    raise UnknownStoreError(f"{classic_store.target.url}: no broker store here (neither ActiveMQ Classic's "
                            f"{classic_store.statements.msgs} nor Artemis' {facts['bindings']['table']}/"
                            f"{facts['messages']['table']} tables)")
