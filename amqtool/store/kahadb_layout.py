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
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UnknownStoreError

@dataclass
class KahaDBStore:
    """An ActiveMQ Classic KahaDB store, or an mKahaDB with one entry per sub-store."""

    root: Path
    directories: list[Path] = field(default_factory=list)
    multi: bool = False
    activemq_xml: str | None = None
    kind: str = "kahadb"
    settings: dict = field(default_factory=dict)  # persistence-adapter attributes from activemq.xml
    given: Path | None = None  # the path it was found from (layout.detect)


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
        if n.startswith("."):
            # not a sub-store the broker would open (it names them after filters, or txStore): e.g. the
            # staging directory of an interrupted `amqtool compact`
            continue
        p = directory / n
        if p.is_dir() and is_store_dir(p):
            subs.append(p)
    # txStore last: it only holds cross-store PREPARE/COMMIT records.
    subs.sort(key=lambda p: (p.name == "txStore", p.name))
    return subs


def _store(root: Path, xml: str | None = None, settings: dict | None = None):
    if is_store_dir(root):
        return KahaDBStore(root=root, directories=[root], multi=False, activemq_xml=xml, settings=settings or {})
    subs = _sub_stores(root)
    # An mKahaDB names its children after destination filters (escaped with '#') plus "txStore"; a data
    # directory that merely holds a "kahadb" store is not one.
    if subs and any("#" in p.name or p.name == "txStore" for p in subs):
        return KahaDBStore(root=root, directories=subs, multi=True, activemq_xml=xml, settings=settings or {})
    return None


def _is_dir(p: Path) -> bool:
    """``p.is_dir()``, False when its parent cannot be searched (a probe for a KahaDB store inside a
    directory this user may not enter, an Artemis journal of mode 000, is no KahaDB store found)."""
    try:
        return p.is_dir()
    except PermissionError:
        return False


def detect_kahadb(path: Path):
    """Return a KahaDBStore for ``path`` (store, mKahaDB, data directory or instance) or None."""
    path = Path(path)
    found = _store(path)
    if found is not None:
        return found
    for base in (path, path / "data"):
        for name in _USUAL_NAMES:
            cand = base / name
            if _is_dir(cand):
                found = _store(cand)
                if found is not None:
                    return found
        # <dataDirectory>/<brokerName>/KahaDB (BrokerService default adapter)
        for n in sorted(_names(base)):
            for name in _USUAL_NAMES:
                cand = base / n / name
                if _is_dir(cand):
                    found = _store(cand)
                    if found is not None:
                        return found
    return None


def from_activemq_xml(path: Path):
    """The KahaDB store an ActiveMQ Classic ``activemq.xml`` configures (``store.activemqxml`` reads it).

    Adapter attributes (journalMaxFileLength, checksumJournalFiles, …) are kept in the store's ``settings``,
    with ``adapter`` naming the element (``kahaDB``/``mKahaDB``).
    """
    from amqtool.store.activemqxml import read_activemq_xml

    conf = read_activemq_xml(path)
    if not conf.persistent:
        raise UnknownStoreError("activemq.xml: the broker is not persistent (persistent=\"false\")",
                                path=conf.source)
    if conf.adapter in ("levelDB", "replicatedLevelDB") and conf.persistent:
        from amqtool.store.leveldb_layout import from_settings

        return from_settings(conf)
    if conf.adapter not in (None, "kahaDB", "mKahaDB"):
        raise UnknownStoreError(f"activemq.xml: persistence adapter <{conf.adapter}> is not KahaDB",
                                path=conf.source)
    directory = conf.store_directory
    if not directory.is_dir():
        raise UnknownStoreError("the KahaDB directory configured in activemq.xml does not exist",
                                path=str(directory))
    settings = {**conf.adapter_attributes, "adapter": conf.adapter or "kahaDB"}
    store = _store(directory, conf.source, settings)
    if store is None:
        raise UnknownStoreError("the KahaDB directory configured in activemq.xml holds no store yet",
                                path=str(directory))
    return store
