"""Reading an ActiveMQ Classic ``activemq.xml`` for what amqtool needs: where the store is, how its
persistence adapter is set up, and the ``storeUsage``/``tempUsage`` limits.

One reader serves store discovery (``kahadb_layout.from_activemq_xml``) and the disk-space check
(``engines.check``). Values follow ``BrokerService``'s defaults when the file is silent:

* ``dataDirectory`` defaults to ``activemq-data`` (``IOHelper.getDefaultDataDirectory``); relative paths
  resolve against the instance directory (the parent of ``conf/``), since the broker's working directory is
  not known offline.
* the store is the adapter's ``directory``; without one, ``<dataDirectory>/<brokerName>/KahaDB`` (as
  ``BrokerService.createPersistenceAdapter`` places its default KahaDB; ``mKahaDB`` for a multi-KahaDB).
* ``tmp_storage`` is ``tmpDataDirectory`` or ``<dataDirectory>/<brokerName>/tmp_storage``
  (``BrokerService.getTmpDataDirectory``).
* ``storeUsage`` defaults to 100 GiB, ``tempUsage`` to 50 GiB (``BrokerService.getSystemUsage``); sizes such
  as ``100 gb`` are binary units (``XBeanByteConverterUtil``).

Placeholders are resolved as Spring resolves them for a broker started by ``bin/activemq``:
``${activemq.base}``/``home``/``conf``/``data`` from ``ACTIVEMQ_BASE``/``HOME``/``CONF``/``DATA`` or the file's
location, then an environment variable of the same name, then a ``${name:default}``; anything else is a
UsageError (it cannot be known offline).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UsageError
from amqtool.store.xmlconfig import local_name, parse_config

DEFAULT_DATA_DIRECTORY = "activemq-data"     # IOHelper.getDefaultDataDirectory
DEFAULT_STORE_LIMIT = 100 * 1024**3          # BrokerService.getSystemUsage
DEFAULT_TEMP_LIMIT = 50 * 1024**3
# Elements that configure <persistenceAdapter> (the XBean names of the adapters).
ADAPTERS = ("kahaDB", "mKahaDB", "levelDB", "replicatedLevelDB", "jdbcPersistenceAdapter",
            "memoryPersistenceAdapter")
_DEFAULT_STORE_NAMES = {None: "KahaDB", "kahaDB": "KahaDB", "mKahaDB": "mKahaDB"}

_CLASSIC_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(b)?\s*$", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\$\{([^}:]*)(?::([^}]*))?\}")


def parse_classic_size(text: str) -> int:
    """``XBeanByteConverterUtil.convertToLongBytes``: ``20 Mb``, ``1024kb``, ``1g``; powers of 1024."""
    m = _CLASSIC_SIZE.match(text or "")
    if not m:
        raise UsageError(f"invalid ActiveMQ size {text!r} (expected e.g. 100 gb, 512 mb, 1024)")
    return int(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower())


@dataclass
class UsageLimit:
    """One ``<storeUsage>``/``<tempUsage>`` as configured (or the broker default)."""

    name: str                 # "storeUsage" | "tempUsage"
    directory: Path
    limit: int
    percent_limit: int = 0
    total: int = 0            # usage "total" attribute (overrides the partition size)
    explicit: bool = False    # set in activemq.xml (else the broker default)

    def to_json(self) -> dict:
        return {"name": self.name, "directory": str(self.directory), "limit": self.limit,
                "percentLimit": self.percent_limit, "total": self.total, "explicit": self.explicit}


@dataclass
class ActiveMQSettings:
    """What amqtool uses from activemq.xml, with BrokerService's defaults filled in."""

    source: str
    base_dir: Path
    data_directory: Path
    broker_name: str
    tmp_directory: Path
    persistent: bool = True
    adapter: str | None = None            # the <persistenceAdapter> element's name; None: the default KahaDB
    adapter_attributes: dict[str, str] = field(default_factory=dict)  # placeholders resolved
    store_directory: Path | None = None   # None when the store is not on disk (JDBC, memory, persistent=false)
    adjust_usage_limits: bool = True
    limits: list[UsageLimit] = field(default_factory=list)

    def directories(self) -> dict[str, Path]:
        """The directories the broker writes, by role (``kahadb``, ``tmp_storage``)."""
        dirs = {"kahadb": self.store_directory, "tmp_storage": self.tmp_directory}
        return {k: v for k, v in dirs.items() if v is not None}


def placeholder_expander(path: Path):
    """(expand, base): ``expand(text)`` resolves ``${...}`` in a value of ``path`` as described above."""
    conf = path.resolve().parent
    base = Path(os.environ.get("ACTIVEMQ_BASE", str(conf.parent)))
    props = {
        "activemq.base": str(base),
        "activemq.home": os.environ.get("ACTIVEMQ_HOME", str(base)),
        "activemq.conf": os.environ.get("ACTIVEMQ_CONF", str(conf)),
        "activemq.data": os.environ.get("ACTIVEMQ_DATA", str(base / "data")),
    }

    def expand(text: str) -> str:
        def sub(m: re.Match) -> str:
            name, default = m.group(1), m.group(2)
            value = props.get(name, os.environ.get(name, default))
            if value is None:
                raise UsageError(f"activemq.xml uses ${{{name}}}, which is not known offline "
                                 "(set it in the environment to resolve it)", path=str(path))
            return value

        return _PLACEHOLDER.sub(sub, text)

    return expand, base


def read_activemq_xml(path: str | os.PathLike) -> ActiveMQSettings:
    """Read ``activemq.xml``. Raises UsageError when the file is missing, malformed or not a broker config."""
    path = Path(path)
    tree = parse_config(path, "activemq.xml")
    broker = next((e for e in tree.iter() if local_name(e.tag) == "broker"), None)
    if broker is None:
        raise UsageError("not an ActiveMQ activemq.xml (no <broker> element)", path=str(path))
    expand, base = placeholder_expander(path)

    def as_path(text: str) -> Path:
        p = Path(expand(text))
        return p if p.is_absolute() else base / p

    data_dir = as_path(broker.get("dataDirectory", DEFAULT_DATA_DIRECTORY))
    name = broker.get("brokerName", "localhost")
    tmp = broker.get("tmpDataDirectory")
    s = ActiveMQSettings(
        source=str(path), base_dir=base, data_directory=data_dir, broker_name=name,
        tmp_directory=as_path(tmp) if tmp else data_dir / name / "tmp_storage",
        persistent=broker.get("persistent", "true").strip().lower() != "false",
        adjust_usage_limits=broker.get("adjustUsageLimits", "true").strip().lower() != "false")
    adapter = next((e for e in broker.iter() if local_name(e.tag) in ADAPTERS), None)
    if adapter is not None:
        s.adapter = local_name(adapter.tag)
        s.adapter_attributes = {k: expand(v) for k, v in adapter.attrib.items()}
    if not s.persistent:
        pass  # BrokerService uses a MemoryPersistenceAdapter whatever the file configures
    elif "directory" in s.adapter_attributes:
        s.store_directory = as_path(s.adapter_attributes["directory"])
    elif s.adapter in _DEFAULT_STORE_NAMES:
        s.store_directory = data_dir / name / _DEFAULT_STORE_NAMES[s.adapter]
    s.limits = _usage_limits(broker, expand, path)
    for lim in s.limits:
        lim.directory = (s.store_directory or data_dir) if lim.name == "storeUsage" else s.tmp_directory
    return s


def _usage_limits(broker, expand, path: Path) -> list[UsageLimit]:
    defaults = {"storeUsage": DEFAULT_STORE_LIMIT, "tempUsage": DEFAULT_TEMP_LIMIT}
    found: dict[str, UsageLimit] = {}
    for elem in broker.iter():
        tag = local_name(elem.tag)
        # <storeUsage><storeUsage limit="..."/></storeUsage>: the inner element carries the attributes.
        if tag in defaults and (elem.get("limit") or elem.get("percentLimit")):
            try:
                limit = parse_classic_size(expand(elem.get("limit"))) if elem.get("limit") else defaults[tag]
                percent = int(expand(elem.get("percentLimit", "0")))
                total = parse_classic_size(expand(elem.get("total"))) if elem.get("total") else 0
            except ValueError:
                raise UsageError(f"<{tag}> has a non-numeric attribute", path=str(path)) from None
            found[tag] = UsageLimit(tag, Path(), limit, percent, total, explicit=True)
    return [found.get(tag) or UsageLimit(tag, Path(), default) for tag, default in defaults.items()]
