"""``amqtool create DEST --from KAHADB``: amqtool's own Artemis reading of the created store (the export's
local engine, which matches the real broker's load on the stores tried) gives, per queue, exactly the
messages the KahaDB manifest lists, with their bodies; the store passes ``verify``; large messages,
``--dry-run``, refusals and the untouched source."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from amqtool.commands.main import main
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.store.layout import detect
from tests.engines.migrate.test_convert import DATASETS, expected_queues, manifest
from tests.support import KAHADB, lock_held, tree_hashes

N = {n: i for i, n in enumerate(MESSAGE_COLUMN_NAMES)}
pytestmark = pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def artemis_rows(path):
    with LocalArtemisExport(detect(path), ExportOptions()) as ex:
        return ex.binding_rows(), list(ex.rows())


def by_queue(rows) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r[N["queue"]], []).append(r)
    return out


def prop(row, name):
    for p in row[N["typed_properties"]]:
        if p["name"] == name:
            return p["value"]
    return None


def body_bytes(row) -> bytes:
    """A consumer's bytes: text bodies are one NullableSimpleString (UTF-16), bytes bodies as they are."""
    b = row[N["body"]]
    if row[N["type"]] == "text":
        assert b[0] == 1
        return b[5:].decode("utf-16-le").encode("utf-8")
    return b


@pytest.mark.parametrize("ds", DATASETS)
def test_created_store_holds_the_manifest_messages(ds, tmp_path, capsys):
    src = KAHADB / ds
    before = tree_hashes(src)
    dest = tmp_path / "artemis"
    code, out, err = run(capsys, "create", dest, "--from", src, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "OK" and not doc["dryRun"] and doc["notConverted"] == []
    assert tree_hashes(src) == before  # the source is only read
    by_fx = {m["fx_id"]: m for m in manifest(ds)["messages"]}
    bindings, rows = artemis_rows(dest)
    got = by_queue(rows)
    want = expected_queues(ds)
    assert set(got) == set(want)
    for q, fx_ids in want.items():
        ids = [prop(r, "fx_id") for r in got[q]]
        assert len(ids) == len(set(ids))
        if isinstance(fx_ids, int):
            assert len(ids) == fx_ids, q
        else:
            assert sorted(ids) == sorted(fx_ids), q
    for r in rows:
        m = by_fx[prop(r, "fx_id")]
        assert r[N["address"]] == m["destination"].split("/", 2)[2]
        assert hashlib.sha256(body_bytes(r)).hexdigest() == m["body_sha256"]
        assert r[N["protocol"]] == "core" and r[N["durable"]] and r[N["transaction_state"]] == "committed"
        assert r[N["routing_type"]] == ("MULTICAST" if m["destination"].startswith("/topic/") else "ANYCAST")
        if "broker_priority" in m:
            assert r[N["priority"]] == m["broker_priority"] and r[N["timestamp"]] == m["broker_timestamp"]
    queues = {b[2]: b for b in bindings if b[0] == "queue"}
    assert set(queues) == set(want)
    assert {q["name"]: q["messages"] for q in doc["queues"]} == {q: len(v) for q, v in got.items()}
    assert doc["messages"] == len({r[N["message_id"]] for r in rows}) and doc["references"] == len(rows)
    code, out, err = run(capsys, "verify", dest, "--format", "json")
    assert code == 0, out
    assert json.loads(out)["verdict"] == "OK"
    snippet = (dest / "broker.xml.snippet").read_text()
    for q in want:
        assert f'<queue name="{q}"' in snippet
    assert json.loads((dest / "migration.json").read_text())["messages"] == doc["messages"]


def test_large_messages_above_the_threshold(tmp_path, capsys):
    dest = tmp_path / "artemis"
    code, out, err = run(capsys, "create", dest, "--from", KAHADB / "mkahadb", "--large-message-threshold", "4KiB",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    by_fx = {m["fx_id"]: m for m in manifest("mkahadb")["messages"]}
    _, rows = artemis_rows(dest)
    large = [r for r in rows if r[N["large"]]]
    files = sorted((dest / "data" / "large-messages").glob("*.msg"))
    assert doc["counts"]["largeMessages"] == len(files) == len({r[N["message_id"]] for r in large}) > 0
    for r in rows:
        m = by_fx[prop(r, "fx_id")]
        assert hashlib.sha256(body_bytes(r)).hexdigest() == m["body_sha256"]
        assert r[N["large"]] == (r[N["body_size"]] > 4096)
        if r[N["large"]]:
            assert prop(r, "_AMQ_LARGE_SIZE") == str(r[N["body_size"]])
    code, out, _ = run(capsys, "verify", dest, "--format", "json")
    assert code == 0, out


def test_dry_run_writes_nothing(tmp_path, capsys):
    dest = tmp_path / "artemis"
    code, out, err = run(capsys, "create", dest, "--from", KAHADB / "basic", "--dry-run", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dryRun"] and not dest.exists()
    assert doc["messages"] == 326 and doc["references"] == 376
    assert {q["name"]: q["messages"] for q in doc["queues"]} == {
        "fx.audit": 120, "fx.bulk": 13, "fx.orders": 93, "fx-durable-a.sub-a": 50, "fx-durable-b.sub-b": 100}
    assert list(tmp_path.iterdir()) == []


def test_refusals(tmp_path, capsys):
    dest = tmp_path / "full"
    dest.mkdir()
    (dest / "x").write_text("x")
    code, _, err = run(capsys, "create", dest, "--from", KAHADB / "basic")
    assert code == 3 and "not an empty directory" in err
    code, _, err = run(capsys, "create", tmp_path / "a", "--from", tmp_path / "nothing-here")
    assert code == 3
    made = tmp_path / "made"
    assert run(capsys, "create", made, "--from", KAHADB / "tx")[0] == 0
    code, _, err = run(capsys, "create", tmp_path / "b", "--from", made)
    assert code == 3 and "KahaDB" in err
    code, _, err = run(capsys, "create", tmp_path / "c", "--dry-run")
    assert code == 3 and "--from" in err
    code, _, err = run(capsys, "create", tmp_path / "c", "--from", KAHADB / "tx", "--large-message-threshold", "x")
    assert code == 3 and not (tmp_path / "c").exists()


def test_refuses_while_a_classic_broker_holds_the_store(tmp_path, capsys):
    src = tmp_path / "kahadb"
    shutil.copytree(KAHADB / "tx" / "kahadb", src)
    lock = src / "lock"
    lock.write_bytes(b"")
    with lock_held(lock):
        code, _, err = run(capsys, "create", tmp_path / "out", "--from", src)
        assert code == 3 and "in use" in err and not (tmp_path / "out").exists()


def test_a_failure_midway_leaves_nothing(tmp_path, monkeypatch):
    """The store is written aside: an error while writing leaves neither DEST nor the temporary directory."""
    from amqtool.engines.migrate import write

    real = write.JournalWriter.append_records
    calls = []

    def failing(self, records):  # the messages' records: after the bindings, before the end
        calls.append(len(records))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write.JournalWriter, "append_records", failing)
    assert real is not None
    with pytest.raises(OSError):
        write.create_from(tmp_path / "dest", KAHADB / "basic")
    assert list(tmp_path.iterdir()) == []
