"""``amqtool export KAHADB --format xml``: the document parses, lists exactly the manifest's messages on
their queues, and is byte for byte the Artemis export of the store ``create --from`` writes from the same
source (one conversion, two outputs)."""
from __future__ import annotations

import base64
import hashlib
import json
import xml.etree.ElementTree as ET

import pytest

from amqtool.commands.main import main
from tests.engines.migrate.test_convert import DATASETS, expected_queues, manifest
from tests.support import KAHADB

pytestmark = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def text_of(body: bytes) -> bytes:
    assert body[0] == 1  # NullableSimpleString, not null
    return body[5:].decode("utf-16-le").encode("utf-8")


@pytest.mark.parametrize("ds", DATASETS)
def test_xml_equals_artemis_export_of_created_store(ds, tmp_path, capsys):
    src = KAHADB / ds
    code, out, err = run(capsys, "export", src, "-o", tmp_path / "k.xml", "--format", "xml", "--report", "json",
                         "-q")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "OK" and doc["storeKind"] == "kahadb"
    assert run(capsys, "create", tmp_path / "art", "--from", src, "-q")[0] == 0
    code, _, err = run(capsys, "export", tmp_path / "art", "-o", tmp_path / "a.xml", "--format", "xml", "-q")
    assert code == 0, err
    kxml = (tmp_path / "k.xml").read_bytes()
    assert kxml == (tmp_path / "a.xml").read_bytes()

    root = ET.fromstring(kxml)
    by_fx = {m["fx_id"]: m for m in manifest(ds)["messages"]}
    got: dict[str, list[str]] = {}
    for m in root.iter("message"):
        props = {p.get("name"): p.get("value") for p in m.iter("property")}
        fx = props["fx_id"]
        for q in m.iter("queue"):
            got.setdefault(q.get("name"), []).append(fx)
        body = base64.urlsafe_b64decode("".join(m.find("body").itertext()).strip())
        data = text_of(body) if m.get("type") == "text" else body
        assert hashlib.sha256(data).hexdigest() == by_fx[fx]["body_sha256"]
    want = expected_queues(ds)
    assert set(got) == set(want)
    for q, ids in want.items():
        assert (len(got[q]) == ids) if isinstance(ids, int) else sorted(got[q]) == sorted(ids)
    assert doc["rowsByQueue"] == {q: len(v) for q, v in got.items()}
    assert {b.get("name") for b in root.iter("queue-binding")} == set(want)


def test_xml_queue_filter(tmp_path, capsys):
    code, out, err = run(capsys, "export", KAHADB / "basic", "-o", tmp_path / "k.xml", "--format", "xml",
                         "--queue", "fx.bulk", "--report", "json", "-q")
    assert code == 0, err
    root = ET.fromstring((tmp_path / "k.xml").read_bytes())
    assert {q.get("name") for q in root.iter("queue")} == {"fx.bulk"}
    assert len(list(root.iter("message"))) == 13 == json.loads(out)["messages"]
