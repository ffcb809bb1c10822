"""Finding a broker's database from its configuration file.

ActiveMQ Classic (``activemq.xml``): ``<persistenceAdapter><jdbcPersistenceAdapter dataSource="#id">``
names a Spring ``<bean id="id">`` data source. Its properties give the address, as the common data sources
spell them: ``url``/``URL`` (Commons DBCP ``BasicDataSource``, ``PGSimpleDataSource``, HikariCP's
``jdbcUrl``), or ``serverName``/``serverNames``, ``portNumber``/``portNumbers``, ``databaseName``
(``org.postgresql.ds.PGSimpleDataSource``/``PGPoolingDataSource``); ``user``/``username`` and ``password``.
The table names come from ``<statements><statements tablePrefix=".." messageTableName=".."
durableSubAcksTableName=".." lockTableName=".."/></statements>`` inside the adapter (``Statements``). Without
``dataSource`` the broker uses an embedded Derby database (``JDBCPersistenceAdapter.createDataSource``),
which amqtool cannot open: a CapabilityError.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import CapabilityError, UnknownStoreError, UsageError
from amqtool.store.xmlconfig import local_name, parse_config


@dataclass
class ClassicJdbcConfig:
    url: str                                  # JDBC URL (may carry no password)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    table_prefix: str = ""
    table_names: dict[str, str] = field(default_factory=dict)  # msgs/acks/lock overrides
    locker: str | None = None                 # "lease-database-locker", "database-locker", ... or None
    source: str = ""


def has_jdbc_adapter(path: str | Path) -> bool:
    """Does ``activemq.xml`` configure a ``jdbcPersistenceAdapter``? (UsageError when it cannot be read.)"""
    tree = parse_config(Path(path), "activemq.xml")
    return any(local_name(e.tag) == "jdbcPersistenceAdapter" for e in tree.iter())


def read_classic_jdbc(path: str | Path) -> ClassicJdbcConfig:
    """The database a ``jdbcPersistenceAdapter`` in ``activemq.xml`` uses. UnknownStoreError when the broker's
    adapter is not JDBC; UsageError when the data source cannot be resolved from the file."""
    from amqtool.store.activemqxml import placeholder_expander

    path = Path(path)
    tree = parse_config(path, "activemq.xml")
    expand, _ = placeholder_expander(path)
    root = tree.getroot()
    adapter = next((e for e in root.iter() if local_name(e.tag) == "jdbcPersistenceAdapter"), None)
    if adapter is None:
        raise UnknownStoreError("activemq.xml configures no <jdbcPersistenceAdapter>", path=str(path))
    ref = adapter.get("dataSource")
    if not ref:
        raise CapabilityError("the jdbcPersistenceAdapter has no dataSource: the broker uses its embedded "
                              "Derby database, which amqtool cannot open", path=str(path))
    bean_id = expand(ref).lstrip("#")
    bean = next((e for e in root.iter() if local_name(e.tag) == "bean" and e.get("id") == bean_id), None)
    if bean is None:
        raise UsageError(f"activemq.xml: dataSource {ref!r} names no <bean id=\"{bean_id}\">", path=str(path))
    props: dict[str, str] = {}
    for p in bean:
        if local_name(p.tag) == "property" and p.get("name"):
            value = p.get("value")
            if value is None:  # <property name="x"><value>..</value></property>
                inner = next((c for c in p if local_name(c.tag) == "value"), None)
                value = inner.text if inner is not None else None
            if value is not None:
                props[p.get("name").lower()] = expand(value.strip())
    url = props.get("url") or props.get("jdbcurl")
    if not url:
        host = (props.get("servername") or props.get("servernames") or "localhost").split(",")[0]
        port = (props.get("portnumber") or props.get("portnumbers") or "5432").split(",")[0]
        db = props.get("databasename")
        if not db:
            raise UsageError(f"activemq.xml: data source {bean_id!r} has neither a url nor a databaseName",
                             path=str(path))
        vendor = "postgresql" if "postgres" in (bean.get("class") or "").lower() else None
        if vendor is None:
            raise CapabilityError(f"activemq.xml: cannot tell the database of data source class "
                                  f"{bean.get('class')!r}; use --jdbc-url", path=str(path))
        url = f"jdbc:{vendor}://{host}:{port}/{db}"
    cfg = ClassicJdbcConfig(url=url, user=props.get("user") or props.get("username"),
                            password=props.get("password"), source=str(path))
    for st in adapter.iter():
        if local_name(st.tag) == "statements" and st.attrib:
            cfg.table_prefix = expand(st.get("tablePrefix", ""))
            for attr, key in (("messageTableName", "msgs"), ("durableSubAcksTableName", "acks"),
                              ("lockTableName", "lock")):
                if st.get(attr):
                    cfg.table_names[key] = expand(st.get(attr))
    for lk in adapter.iter():
        if local_name(lk.tag) == "locker":
            inner = next(iter(lk), None)
            if inner is not None:
                cfg.locker = local_name(inner.tag)
    return cfg


@dataclass
class ArtemisJdbcConfig:
    """``<store><database-store>`` of an Artemis ``broker.xml`` (``DatabaseStorageConfiguration``)."""

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tables: dict[str, str] = field(default_factory=dict)   # role -> name, only those set in the file
    source: str = ""


_ARTEMIS_TABLE_ELEMENTS = {"bindings-table-name": "bindings", "message-table-name": "messages",
                           "large-message-table-name": "large-messages", "page-store-table-name": "page-store",
                           "node-manager-store-table-name": "node-manager"}


def find_database_store(path: str | Path):
    """The ``<database-store>`` element of ``broker.xml`` (None when the broker keeps a file journal)."""
    tree = parse_config(Path(path), "broker.xml")
    return next((e for e in tree.iter() if local_name(e.tag) == "database-store"), None)


def read_artemis_jdbc(path: str | Path) -> ArtemisJdbcConfig:
    """The database of a ``broker.xml`` ``<database-store>``: ``jdbc-connection-url``, ``jdbc-user``,
    ``jdbc-password`` and the table names. ``${name}`` placeholders resolve as ``read_broker_xml`` resolves
    them. A data source configured only through ``<data-source-properties>`` gives its ``url``/``user``/
    ``password`` properties."""
    from amqtool.store.brokerxml import _expand

    path = Path(path)
    store = find_database_store(path)
    if store is None:
        raise UnknownStoreError("broker.xml configures no <database-store>", path=str(path))
    instance = path.resolve().parent.parent if path.resolve().parent.name == "etc" else path.resolve().parent
    props = {"artemis.instance": str(instance), "data.dir": str(instance / "data")}
    values: dict[str, str] = {}
    for e in store.iter():
        tag = local_name(e.tag)
        if tag == "data-source-property" and e.get("key"):
            values.setdefault("ds." + e.get("key").lower(), _expand(e.get("value", ""), props))
        elif e.text and e.text.strip():
            values.setdefault(tag, _expand(e.text.strip(), props))
    url = values.get("jdbc-connection-url") or values.get("ds.url")
    if not url:
        raise UsageError("broker.xml: <database-store> has no jdbc-connection-url", path=str(path))
    tables = {role: values[tag] for tag, role in _ARTEMIS_TABLE_ELEMENTS.items() if tag in values}
    return ArtemisJdbcConfig(url=url, user=values.get("jdbc-user") or values.get("ds.username")
                             or values.get("ds.user"),
                             password=values.get("jdbc-password") or values.get("ds.password"), tables=tables,
                             source=str(path))
