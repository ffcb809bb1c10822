"""``amqtool create DEST --from EXPORT.xml``: a ``data exp`` document written straight into a new Artemis
store. The document of a KahaDB store gives the store ``create --from KAHADB`` gives (new ids aside): the same
queues holding the same messages with the same bodies, types, headers and typed properties. Bad documents
are refused in words; a message naming an undeclared queue is reported and left out."""
from __future__ import annotations

import json

import pytest

from amqtool.commands.main import main
from tests.engines.migrate.test_create_from import N, artemis_rows
from tests.support import KAHADB

pytestmark = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def content(rows) -> dict:
    """queue -> sorted (message columns without ids), properties as a sorted list."""
    out: dict[str, list] = {}
    for r in rows:
        props = sorted((p["name"], p["type"], p["value"]) for p in r[N["typed_properties"]])
        key = tuple(r[N[c]] for c in ("address", "routing_type", "durable", "priority", "timestamp", "expiration",
                                      "user_id", "type", "body_sha256", "body_size", "large"))
        out.setdefault(r[N["queue"]], []).append((key, props))
    return {q: sorted(v) for q, v in out.items()}


@pytest.mark.parametrize("ds", ["basic", "mkahadb"])
def test_xml_of_kahadb_gives_the_same_store(ds, tmp_path, capsys):
    src = KAHADB / ds
    assert run(capsys, "export", src, "-o", tmp_path / "k.xml", "--format", "xml", "-q")[0] == 0
    assert run(capsys, "create", tmp_path / "direct", "--from", src, "-q")[0] == 0
    code, out, err = run(capsys, "create", tmp_path / "via-xml", "--from", tmp_path / "k.xml", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "xml" and doc["notConverted"] == []
    _, direct = artemis_rows(tmp_path / "direct")
    bindings, via = artemis_rows(tmp_path / "via-xml")
    assert content(via) == content(direct)
    assert doc["messages"] == len({r[N["message_id"]] for r in via}) and doc["references"] == len(via)
    assert run(capsys, "verify", tmp_path / "via-xml", "-q")[0] == 0


def test_bad_documents(tmp_path, capsys):
    bad = tmp_path / "bad.xml"
    bad.write_text("<activemq-journal><bindings>")
    code, _, err = run(capsys, "create", tmp_path / "a", "--from", bad)
    assert code == 3 and "well-formed" in err and not (tmp_path / "a").exists()
    ent = tmp_path / "ent.xml"
    ent.write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                   "<activemq-journal>&e;</activemq-journal>")
    code, _, err = run(capsys, "create", tmp_path / "b", "--from", ent)
    assert code == 3 and "refusing" in err and not (tmp_path / "b").exists()
    other = tmp_path / "other.xml"
    other.write_text("<beans/>")
    code, _, err = run(capsys, "create", tmp_path / "c", "--from", other)
    assert code == 3 and "activemq-journal" in err
    code, _, err = run(capsys, "create", tmp_path / "d", "--from", bad, "--include-prepared")
    assert code == 3 and "KahaDB" in err


def test_undeclared_queue_is_reported(tmp_path, capsys):
    doc = tmp_path / "x.xml"
    doc.write_text("""<activemq-journal><bindings>
  <address-binding routing-types="ANYCAST" name="q" id="1"/>
  <queue-binding address="q" filter-string="" name="q" id="2" routing-type="ANYCAST"/>
</bindings><messages>
  <message id="5" priority="4" expiration="0" timestamp="7" type="bytes"><properties>
    <property name="k" value="1" type="integer"/><property name="c" value="x"/>
    <property name="n" value="_AMQ_NULL" type="bytes"/></properties>
    <queues><queue name="q"/></queues><body><![CDATA[AAEC]]></body></message>
  <message id="6" priority="4" expiration="0" timestamp="7" type="text"><properties/>
    <queues><queue name="nowhere"/></queues><body><![CDATA[AA==]]></body></message>
</messages></activemq-journal>""")
    code, out, err = run(capsys, "create", tmp_path / "a", "--from", doc, "--format", "json")
    res = json.loads(out)
    assert code == 1 and res["verdict"] == "WARNING", err
    (p,) = res["notConverted"]
    assert p["messageId"] == "6" and "nowhere" in p["reason"]
    _, rows = artemis_rows(tmp_path / "a")
    (r,) = rows
    assert r[N["body"]] == b"\x00\x01\x02" and r[N["timestamp"]] == 7 and r[N["queue"]] == "q"
    assert {p["name"]: (p["type"], p["value"]) for p in r[N["typed_properties"]]} == {
        "k": ("integer", "1"), "c": (None, "x"), "n": ("bytes", "_AMQ_NULL")}
