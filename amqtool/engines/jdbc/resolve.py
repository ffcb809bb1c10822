"""Which database store a command addresses: ``--jdbc-url``, or the JDBC store a broker's configuration names.

:func:`jdbc_store` returns None when the command addresses a store on disk (no ``--jdbc-url`` and no
configuration naming a database), so the file-store path of each command goes on unchanged.
"""
from __future__ import annotations

from amqtool.errors import UsageError
from amqtool.engines.jdbc.connection import apply_credentials, parse_jdbc_url


def jdbc_store(jdbc_url: str | None, password_file: str | None = None, *, activemq_xml: str | None = None,
               table_prefix: str | None = None):
    """A ClassicStore for ``--jdbc-url`` (table names from ``activemq.xml`` when given too), or for the
    ``jdbcPersistenceAdapter`` of ``activemq.xml``; None when neither addresses a database."""
    from amqtool.engines.jdbc.classic import open_store

    cfg = None
    if activemq_xml:
        from amqtool.store.jdbc_config import has_jdbc_adapter, read_classic_jdbc

        if has_jdbc_adapter(activemq_xml):
            cfg = read_classic_jdbc(activemq_xml)
    if jdbc_url is None and cfg is None:
        if password_file:
            raise UsageError("--jdbc-password-file needs --jdbc-url (or an activemq.xml with a JDBC store)")
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
    prefix = table_prefix if table_prefix is not None else (cfg.table_prefix if cfg else "")
    return open_store(target, prefix, cfg.table_names if cfg else None, cfg.locker if cfg else None)
