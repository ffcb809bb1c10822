"""Finding KahaDB and mKahaDB stores on disk (kahadb-format.md §1).

A path may be:

* a KahaDB directory (``db-N.log`` files and/or ``db.data``);
* an mKahaDB directory: sub-directories that are KahaDB stores (``queue#3a#2f#2f…``, ``#210``, ``txStore``)
  and one ``lock`` at the top;
* an ActiveMQ data directory or instance holding one of those under a usual name (``kahadb``, ``KahaDB``,
  ``mKahaDB``, ``data/…``, ``<brokerName>/KahaDB``);
* with ``--activemq-xml``, whatever ``<persistenceAdapter>`` in activemq.xml says.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from amqtool.errors import UnknownStoreError, UsageError

_LOG = re.compile(r"^db-(\d+)\.log$")
_USUAL_NAMES = ("kahadb", "KahaDB", "mkahadb", "mKahaDB", "multiKahaDB")


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def is_store_dir(directory: Path) -> bool:
    """One KahaDB store: ``db.data`` or at least one ``db-N.log``."""
    names = _names(directory)
    return "db.data" in names or any(_LOG.match(n) for n in names)


def _sub_stores(directory: Path) -> list[Path]:
    subs = []
    for n in sorted(_names(directory)):
        p = directory / n
        if p.is_dir() and is_store_dir(p):
            subs.append(p)
    # txStore last: it only holds cross-store PREPARE/COMMIT records.
    subs.sort(key=lambda p: (p.name == "txStore", p.name))
    return subs


def _store(root: Path, xml: str | None = None, settings: dict | None = None):
    from amqtool.store.layout import KahaDBStore

    if is_store_dir(root):
        return KahaDBStore(root=root, directories=[root], multi=False, activemq_xml=xml, settings=settings or {})
    subs = _sub_stores(root)
    # An mKahaDB names its children after destination filters (escaped with '#') plus "txStore"; a data
    # directory that merely holds a "kahadb" store is not one.
    if subs and any("#" in p.name or p.name == "txStore" for p in subs):
        return KahaDBStore(root=root, directories=subs, multi=True, activemq_xml=xml, settings=settings or {})
    return None


def detect_kahadb(path: Path):
    """Return a KahaDBStore for ``path`` (store, mKahaDB, data directory or instance) or None."""
    path = Path(path)
    found = _store(path)
    if found is not None:
        return found
    for base in (path, path / "data"):
        for name in _USUAL_NAMES:
            cand = base / name
            if cand.is_dir():
                found = _store(cand)
                if found is not None:
                    return found
        # <dataDirectory>/<brokerName>/KahaDB (BrokerService default adapter)
        for n in sorted(_names(base)):
            for name in _USUAL_NAMES:
                cand = base / n / name
                if cand.is_dir():
                    found = _store(cand)
                    if found is not None:
                        return found
    return None


_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")


def _expand(text: str, props: dict[str, str], xml: Path) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key in props:
            return props[key]
        if key in os.environ:
            return os.environ[key]
        raise UsageError(f"activemq.xml uses ${{{key}}}, which is not known offline "
                         "(set it in the environment to resolve it)", path=str(xml))

    return _PLACEHOLDER.sub(sub, text)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def from_activemq_xml(path: Path):
    """The KahaDB store an ActiveMQ Classic ``activemq.xml`` configures.

    ``${activemq.base}`` is the directory above ``conf/``, ``${activemq.data}`` its ``data/`` (as the
    ``bin/activemq`` script sets them); other placeholders come from the environment. Adapter attributes
    (journalMaxFileLength, checksumJournalFiles, …) are kept in ``settings``.
    """
    from defusedxml import ElementTree as ET

    xml = Path(path)
    try:
        tree = ET.parse(str(xml))
    except FileNotFoundError:
        raise UsageError("activemq.xml not found", path=str(xml)) from None
    except OSError as err:
        raise UsageError(f"cannot read activemq.xml: {err.strerror}", path=str(xml)) from None
    except Exception as err:  # noqa: BLE001 - ParseError and defusedxml refusals
        raise UsageError(f"activemq.xml is not well-formed XML: {err}", path=str(xml)) from None
    base = xml.resolve().parent.parent
    props = {"activemq.base": str(base), "activemq.home": str(base), "activemq.conf": str(xml.resolve().parent),
             "activemq.data": str(base / "data")}
    broker = None
    for el in tree.iter():
        if _local(el.tag) == "broker":
            broker = el
            break
    if broker is None:
        raise UsageError("activemq.xml has no <broker> element", path=str(xml))
    data_dir = Path(_expand(broker.get("dataDirectory", "${activemq.data}"), props, xml))
    broker_name = broker.get("brokerName", "localhost")
    if broker.get("persistent", "true") == "false":
        raise UnknownStoreError("activemq.xml: the broker is not persistent (persistent=\"false\")", path=str(xml))
    adapter = None
    for el in broker.iter():
        if _local(el.tag) in ("kahaDB", "mKahaDB"):
            adapter = el
            break
    if adapter is None:
        for el in broker.iter():
            if _local(el.tag) in ("jdbcPersistenceAdapter", "levelDB", "memoryPersistenceAdapter"):
                raise UnknownStoreError(f"activemq.xml: persistence adapter <{_local(el.tag)}> is not KahaDB",
                                        path=str(xml))
        directory = data_dir / broker_name / "KahaDB"  # BrokerService.createPersistenceAdapter default
        settings = {"adapter": "kahaDB"}
    else:
        settings = {k: _expand(v, props, xml) for k, v in adapter.attrib.items()}
        settings["adapter"] = _local(adapter.tag)
        default = "KahaDB" if settings["adapter"] == "kahaDB" else "mKahaDB"
        directory = Path(settings.get("directory") or data_dir / default)
        if not directory.is_absolute():
            directory = base / directory
    if not directory.is_dir():
        raise UnknownStoreError("the KahaDB directory configured in activemq.xml does not exist",
                                path=str(directory))
    store = _store(directory, str(xml), settings)
    if store is None:
        raise UnknownStoreError("the KahaDB directory configured in activemq.xml holds no store yet",
                                path=str(directory))
    return store
