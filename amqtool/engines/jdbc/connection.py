"""Reaching a broker's database: the JDBC URL, credentials, dialect and read-only sessions.

Contract:

* A store is addressed by a JDBC URL as the brokers' own data sources spell it
  (``jdbc:postgresql://host[:port]/database[?param=value&...]``; a ``postgresql://`` URI is accepted too), or
  found from the broker's configuration (see ``amqtool.store.jdbc_config``).
* The user name comes from ``AMQTOOL_JDBC_USER``, else the URL's ``user`` parameter, else the configuration.
  The password comes from ``--jdbc-password-file`` (its first line), else ``AMQTOOL_JDBC_PASSWORD``, else the
  broker's configuration file, else libpq's own means (``~/.pgpass``, ``PGPASSFILE``). A password in the URL is
  refused: the URL is on the command line, which every user of the machine can read in ``ps``.
* Only PostgreSQL has a dialect today; any other ``jdbc:<vendor>:`` is a CapabilityError naming the vendor.
* :func:`read_only_session` opens one transaction ``READ ONLY``, ``REPEATABLE READ`` (every query sees the
  same snapshot, so ACTIVEMQ_MSGS and ACTIVEMQ_ACKS agree even while a broker writes), with ``lock_timeout``
  and ``statement_timeout`` bounded: a read never waits long behind a broker's lock and never takes one the
  broker needs (plain SELECTs take ACCESS SHARE, which only DDL conflicts with).
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import parse_qsl, unquote, urlsplit

from amqtool.errors import CapabilityError, UnknownStoreError, UsageError

USER_ENV = "AMQTOOL_JDBC_USER"
PASSWORD_ENV = "AMQTOOL_JDBC_PASSWORD"
DEFAULT_PORTS = {"postgresql": 5432}
KNOWN_VENDORS = ("postgresql", "mysql", "mariadb", "oracle", "sqlserver", "db2", "derby", "h2", "hsqldb")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$")
_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z0-9_$]*$")


@dataclass
class JdbcTarget:
    """One database: where, who, and how the broker names its tables there."""

    vendor: str                  # "postgresql"
    host: str
    port: int
    database: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    params: dict[str, str] = field(default_factory=dict)
    source: str = "--jdbc-url"   # where the address came from (a config file path, or --jdbc-url)

    @property
    def url(self) -> str:
        """The JDBC URL without secrets (for documents and messages)."""
        return f"jdbc:{self.vendor}://{self.host}:{self.port}/{self.database}"

    def to_json(self) -> dict:
        return {"url": self.url, "vendor": self.vendor, "host": self.host, "port": self.port,
                "database": self.database, "user": self.user, "source": self.source}


def parse_jdbc_url(url: str, *, source: str = "--jdbc-url", allow_password: bool = False) -> JdbcTarget:
    """``jdbc:postgresql://host:port/db?user=u`` (or ``postgresql://...``) -> JdbcTarget.

    UsageError for anything that is not such a URL or that carries a password (unless ``allow_password``:
    a URL read from a configuration file, which is not on the command line). CapabilityError for a vendor
    amqtool has no dialect for yet."""
    text = (url or "").strip()
    if text.startswith("jdbc:"):
        text = text[5:]
    vendor = text.split(":", 1)[0].lower()
    if vendor == "postgres":
        vendor = "postgresql"
    if vendor not in KNOWN_VENDORS:
        raise UsageError(f"not a JDBC URL: {url!r} (expected jdbc:postgresql://host:port/database)")
    if vendor != "postgresql":
        raise CapabilityError(f"no SQL dialect for {vendor} yet (PostgreSQL is supported): {url!r}")
    parts = urlsplit("postgresql" + text[len(text.split(':', 1)[0]):])
    if not parts.hostname and not parts.path.strip("/"):
        raise UsageError(f"JDBC URL {url!r} names no host and no database")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    password = params.pop("password", None)
    if parts.password is not None:
        password = unquote(parts.password)
    if password is not None and not allow_password:
        raise UsageError("a password in --jdbc-url would be visible to every user in `ps`; use the "
                         f"{PASSWORD_ENV} environment variable or --jdbc-password-file")
    try:
        port = parts.port or DEFAULT_PORTS[vendor]
    except ValueError:
        raise UsageError(f"JDBC URL {url!r} has a port that is not a number") from None
    user = params.pop("user", None) or (unquote(parts.username) if parts.username else None)
    return JdbcTarget(vendor=vendor, host=parts.hostname or "localhost", port=port,
                      database=unquote(parts.path.lstrip("/")) or "postgres", user=user, password=password,
                      params=params, source=source)


def apply_credentials(target: JdbcTarget, password_file: str | None = None) -> JdbcTarget:
    """Fill in user and password by the precedence in the module docstring."""
    user = os.environ.get(USER_ENV)
    if user:
        target.user = user
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as fh:
                target.password = fh.readline().rstrip("\r\n")
        except OSError as err:
            raise UsageError(f"cannot read the password file: {err.strerror}", path=password_file) from None
    elif os.environ.get(PASSWORD_ENV) is not None:
        target.password = os.environ[PASSWORD_ENV]
    return target


def check_identifier(name: str, what: str) -> str:
    """A table name (optionally schema-qualified) from configuration, refused unless a plain identifier:
    these names are put into SQL text, so anything else could be an injection."""
    if not _IDENT.match(name or ""):
        raise UsageError(f"{what} {name!r} is not a plain SQL identifier")
    return name


def check_prefix(prefix: str) -> str:
    """A Classic ``tablePrefix`` (``Statements.setTablePrefix``): empty, ``SCHEMA.``, ``AMQ_`` or both."""
    if not _PREFIX.match(prefix or ""):
        raise UsageError(f"table prefix {prefix!r} is not a plain SQL identifier prefix")
    return prefix or ""


@contextmanager
def read_only_session(target: JdbcTarget, *, statement_timeout_ms: int = 0) -> Iterator[object]:
    """A psycopg connection inside one READ ONLY, REPEATABLE READ transaction, rolled back at the end.

    Connection failures are UnknownStoreError (exit 3) with the server's own one-line reason."""
    try:
        import psycopg
    except ImportError as err:  # pragma: no cover - a dependency
        raise CapabilityError(f"psycopg is not installed ({err})") from None
    kwargs = dict(host=target.host, port=target.port, dbname=target.database, connect_timeout=10,
                  application_name="amqtool (read-only)")
    if target.user:
        kwargs["user"] = target.user
    if target.password is not None:
        kwargs["password"] = target.password
    for k in ("sslmode", "sslrootcert", "sslcert", "sslkey"):
        if k in target.params:
            kwargs[k] = target.params[k]
    try:
        conn = psycopg.connect(**kwargs)
    except psycopg.Error as err:
        raise UnknownStoreError(f"cannot connect to {target.url}: {_first_line(err)}") from None
    try:
        conn.read_only = True
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.cursor() as cur:  # the first statement opens the READ ONLY transaction
            cur.execute("SET LOCAL lock_timeout = '5s'")
            cur.execute(f"SET LOCAL statement_timeout = {int(statement_timeout_ms)}")
        yield conn
    except psycopg.Error as err:
        raise UnknownStoreError(f"{target.url}: {_first_line(err)}") from None
    finally:
        # A server that went away (stopped, restarted, connection cut) fails the rollback too: the error
        # that counts is the one already on its way (or none), not this one.
        try:
            conn.rollback()
        except psycopg.Error:
            pass
        finally:
            conn.close()


@contextmanager
def database_errors(target: JdbcTarget) -> Iterator[None]:
    """Errors of a session's connection raised outside its ``with`` block (rows streamed by a generator
    that outlives it) as UnknownStoreError (exit 3): the URL and the server's one-line reason."""
    import psycopg

    try:
        yield
    except psycopg.Error as err:
        raise UnknownStoreError(f"{target.url}: {_first_line(err)}") from None


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
