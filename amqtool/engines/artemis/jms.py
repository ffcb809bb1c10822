"""The 1.x JMS journal of an upgraded broker, as ``JMSJournalStorageManagerImpl.load`` reads it: the live
records of the ``activemq-jms`` journal, decoded into connection factories, destinations and their JNDI
bindings (:mod:`amqtool.formats.artemis.jmsrecords`). The 2.x broker no longer reads this journal; it is what
an operator consults to know which JMS objects the 1.x broker had."""
from __future__ import annotations

from amqtool.engines.artemis.load import load_journal
from amqtool.errors import FormatError
from amqtool.formats.artemis.jmsrecords import (
    PersistedBindings,
    PersistedConnectionFactory,
    PersistedDestination,
    decode_jms_record,
)
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import ArtemisStore


def jms_document(store: ArtemisStore) -> dict | None:
    """``{"directory", "connectionFactories", "destinations", "bindings", "undecodable"}`` for the store's JMS
    journal, in load order (later records of the same name replace earlier ones, as the load's maps do), or
    None when the store has none."""
    if store.jms is None:
        return None
    factories: dict[str, dict] = {}
    destinations: dict[tuple[str, str], dict] = {}
    bindings: dict[tuple[str, str], dict] = {}
    undecodable = []
    with open_journal(store.jms) as opened:
        result = load_journal(opened)
        for rec in result.live:
            try:
                obj = decode_jms_record(rec.user_record_type, result.body(rec))
            except FormatError as err:
                undecodable.append({"id": rec.id, "type": rec.user_record_type, "error": err.message})
                continue
            if isinstance(obj, PersistedConnectionFactory):
                factories[obj.name] = {"id": rec.id, **obj.to_json()}
            elif isinstance(obj, PersistedDestination):
                destinations[(obj.type, obj.name)] = {"id": rec.id, **obj.to_json()}
            elif isinstance(obj, PersistedBindings):
                bindings[(obj.type, obj.name)] = {"id": rec.id, **obj.to_json()}
    return {"directory": str(store.jms.directory), "connectionFactories": list(factories.values()),
            "destinations": list(destinations.values()), "bindings": list(bindings.values()),
            "undecodable": undecodable}


def jms_text(doc: dict) -> list[str]:
    """The JMS journal's objects for people."""
    lines = [f"== JMS journal (Artemis 1.x) {doc['directory']}"]
    for d in doc["destinations"]:
        sel = f" selector {d['selector']!r}" if d["selector"] else ""
        lines.append(f"  {d['type'].lower()} {d['name']}{sel}{'' if d['durable'] else ' (non-durable)'}")
    for cf in doc["connectionFactories"]:
        lines.append(f"  connection factory {cf['name']} connectors {', '.join(cf['connectorNames']) or '-'}")
    for b in doc["bindings"]:
        lines.append(f"  JNDI {b['type'].lower()} {b['name']}: {', '.join(b['bindings'])}")
    for u in doc["undecodable"]:
        lines.append(f"  record {u['id']} (type {u['type']}) does not decode: {u['error']}")
    return lines


def jms_binding_rows(store: ArtemisStore) -> list[tuple]:
    """Export's bindings-table rows (``export.schema.BINDING_COLUMNS``) for the 1.x JMS journal's objects:
    kind ``jms-queue`` / ``jms-topic`` (name, selector as filter_string) and ``jms-connection-factory``; their
    JNDI names are not a column (``print`` shows them)."""
    doc = jms_document(store)
    if doc is None:
        return []
    rows = [(f"jms-{d['type'].lower()}", d["id"], d["name"], None, None, d["selector"], None, None)
            for d in doc["destinations"]]
    rows += [("jms-connection-factory", cf["id"], cf["name"], None, None, None, None, None)
             for cf in doc["connectionFactories"]]
    return rows
