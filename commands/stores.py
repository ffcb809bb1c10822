"""Which stores a command acts on when PATH holds more than one (issue 27: ``verify`` in a directory with an
Artemis store and a KahaDB store checked only the KahaDB one and said OK).

The commands that read (``verify``, ``stat``, ``print``) act on every store
:func:`amqtool.store.layout.detect_all` finds and say so: each store's output is headed by its kind and
path, findings carry the ``store`` they come from, and the verdict is the worst. The commands that write
(``compact``, ``recover``, ``export``, ``create --from``) refuse with exit 3 and name the stores, so the
operator says which. ``--broker-xml`` and ``--activemq-xml`` name one store: no search then.
"""
from __future__ import annotations

import os

from amqtool.errors import UsageError


def stores_at(path: str, broker_xml: str | None = None, activemq_xml: str | None = None) -> list:
    """The stores at ``path``: the one the configuration names, else every store found there."""
    from amqtool.store.layout import detect, detect_all

    if broker_xml or activemq_xml:
        return [detect(path, broker_xml, activemq_xml)]
    return detect_all(path)


def describe(stores: list) -> str:
    return ", ".join(f"{s.kind} at {where(s)}" for s in stores)


def where(store) -> str:
    """A store's path as shown when there are several: absolute, so each names itself."""
    return os.path.abspath(store.root)


def one_store(path: str, broker_xml: str | None = None, activemq_xml: str | None = None, *,
              command: str = "this command"):
    """The single store a writing command acts on; several under ``path`` is a usage error (exit 3) that
    names them."""
    stores = stores_at(path, broker_xml, activemq_xml)
    if len(stores) > 1:
        raise UsageError(f"{len(stores)} stores under {os.path.abspath(path)} ({describe(stores)}): "
                         f"{command} acts on one store; give its path")
    return stores[0]


def header(store) -> str:
    """The line that heads one store's text when several are shown."""
    return f"== {store.kind} store {where(store)}"
