"""Finding KahaDB and mKahaDB stores (being built in this session by the KahaDB work)."""
from __future__ import annotations

from pathlib import Path


def detect_kahadb(path: Path):
    """Return a KahaDBStore for ``path`` or None."""
    from amqtool.store.layout import KahaDBStore, is_kahadb_dir

    if is_kahadb_dir(path):
        return KahaDBStore(root=path, directories=[path])
    return None


def from_activemq_xml(path: Path):
    from amqtool.errors import UsageError

    raise UsageError("--activemq-xml is not supported yet", path=str(path))
