"""Artemis 1.x JMS journals (``activemq-jms-N.jms`` beside the bindings journal of an upgraded broker): found,
printed as ``JMSJournalStorageManagerImpl.load`` decodes them, verified (issue 13 item 9)."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.jmsrecords import (
    _CF_FIELDS,
    BINDING_RECORD,
    CF_RECORD,
    DESTINATION_RECORD,
    PersistedBindings,
    PersistedConnectionFactory,
    PersistedDestination,
)
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, JMS, MESSAGES
from tests.paging_stores import queue_binding


def _cf(name):
    defaults = {"bool": False, "int": 1, "long": 30000, "double": 1.0, "str": "RoundRobin", "nstr": None}
    return PersistedConnectionFactory(name, None, ["netty"], {f: defaults[k] for f, k in _CF_FIELDS})


@pytest.fixture
def upgraded(tmp_path):
    """A 2.x data directory whose bindings directory still holds a 1.x JMS journal, written record by record
    as JMSJournalStorageManagerImpl writes them: storeConnectionFactory/storeDestination (add), addBindings
    (a transaction), deleteDestination (delete)."""
    data = tmp_path / "data"
    with JournalWriter.create(data / "journal", MESSAGES):
        pass  # a broker creates its message journal beside the bindings at its first start
    with JournalWriter.create(data / "bindings", BINDINGS) as w:
        w.append_add_tx(5, 6, 21, queue_binding("orders", "orders"))
        w.append_commit(5)
    with JournalWriter.create(data / "bindings", JMS) as w:
        w.append_add(10, CF_RECORD, _cf("ConnectionFactory").encode())
        w.append_add(11, DESTINATION_RECORD, PersistedDestination("Queue", "orders", None, True).encode())
        w.append_add(12, DESTINATION_RECORD, PersistedDestination("Topic", "events", "region='EU'", True).encode())
        w.append_add(13, DESTINATION_RECORD, PersistedDestination("Queue", "gone", None, True).encode())
        w.append_add_tx(14, 15, BINDING_RECORD, PersistedBindings("Queue", "orders", ["queue/orders"]).encode())
        w.append_commit(14)
        w.append_delete(13)
    return data


def test_print_decodes_the_jms_journal(run_json, run_cli, upgraded):
    code, doc, _ = run_json("print", upgraded)
    assert code == 0
    jms = doc["jms"]
    assert [(d["type"], d["name"], d["selector"]) for d in jms["destinations"]] == \
        [("Queue", "orders", None), ("Topic", "events", "region='EU'")]
    assert [(b["name"], b["bindings"]) for b in jms["bindings"]] == [("orders", ["queue/orders"])]
    (cf,) = jms["connectionFactories"]
    assert (cf["name"], cf["connectorNames"], cf["connectionTTL"]) == ("ConnectionFactory", ["netty"], 30000)
    assert jms["undecodable"] == []
    code, out, _ = run_cli("print", upgraded)
    assert "== JMS journal (Artemis 1.x)" in out and "topic events selector \"region='EU'\"" in out


def test_verify_checks_the_jms_journal(run_json, upgraded):
    code, doc, _ = run_json("verify", upgraded)
    assert code == 0 and [j["kind"] for j in doc["summary"]["journals"]] == ["bindings", "messages", "jms"]


def test_a_jms_record_that_does_not_decode_is_critical(run_json, tmp_path):
    d = tmp_path / "bindings"
    with JournalWriter.create(d, JMS) as w:
        w.append_add(20, DESTINATION_RECORD, bytes([7]) + bytes(8))  # PersistedType 7 does not exist
        w.append_add(21, 9, b"")  # the 1.x load: "Invalid record type 9"
    code, doc, _ = run_json("verify", d)
    bad = [f for f in doc["findings"] if f["code"] == "jms-record-undecodable"]
    assert code == 2 and len(bad) == 2 and all(f["severity"] == "critical" for f in bad)


def test_a_directory_of_jms_files_alone_is_recognised(run_json, upgraded):
    code, doc, _ = run_json("print", upgraded / "bindings")
    assert code == 0 and len(doc["jms"]["destinations"]) == 2


def test_export_lists_the_jms_objects_as_bindings(run_cli, upgraded, tmp_path):
    import json

    code, _, err = run_cli("export", upgraded, "-o", tmp_path / "out", "--format", "jsonl", "--engine", "local", "-q")
    assert code == 0, err
    rows = [json.loads(line) for f in sorted((tmp_path / "out" / "bindings").glob("*.jsonl"))
            for line in f.read_text().splitlines()]
    jms = sorted((r["kind"], r["name"], r["filter_string"]) for r in rows if r["kind"].startswith("jms-"))
    assert jms == [("jms-connection-factory", "ConnectionFactory", None), ("jms-queue", "orders", None),
                   ("jms-topic", "events", "region='EU'")]
