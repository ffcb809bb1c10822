"""`amqtool create` on the command line: JSON output, exit codes, and stores that `print` reads back to
exactly what the manifest says."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amqtool.commands.main import main

MiB = 1024 * 1024
AMQTOOL = Path(sys.executable).with_name("amqtool")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _print_json(capsys, path) -> dict:
    code, out, err = run(capsys, "print", path, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def _journal(doc: dict, kind: str) -> dict:
    (j,) = [j for j in doc["journals"] if j["kind"] == kind]
    return j


def _hashes(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_plain_create_json_and_print(tmp_path, capsys):
    code, out, err = run(capsys, "create", tmp_path / "i", "--kind", "broker", "--file-size", "256KiB",
                         "--min-files", "3", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "OK" and doc["kind"] == "broker"
    b, m = doc["journals"]
    assert [f["name"] for f in b["files"]] == ["activemq-bindings-1.bindings", "activemq-bindings-2.bindings"]
    assert [(f["name"], f["fileId"], f["size"]) for f in m["files"]] == [
        (f"activemq-data-{i}.amq", i, 256 * 1024) for i in (1, 2, 3)]
    printed = _print_json(capsys, tmp_path / "i")
    for kind in ("bindings", "messages"):
        j = _journal(printed, kind)
        assert j["live"] == [] and j["prepared"] == [] and j["failed"] == []
    assert [f["fileId"] for f in _journal(printed, "messages")["files"]] == [1, 2, 3]


def test_create_twice_is_refused_with_exit_3(tmp_path, capsys):
    assert run(capsys, "create", tmp_path / "j")[0] == 0
    before = _hashes(tmp_path)
    code, out, err = run(capsys, "create", tmp_path / "j", "--format", "json")
    assert code == 3
    assert json.loads(out)["verdict"] == "UNKNOWN"
    assert "existing journal" in err and err.count("\n") == 1
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("args", [["--kind", "nope"], ["--file-size", "ten"], ["--demo", "1XB"],
                                  ["--kind", "bindings", "--min-files", "3"], ["--min-files", "0"]])
def test_bad_arguments_exit_3_and_create_nothing(tmp_path, capsys, args):
    code, _, err = run(capsys, "create", tmp_path / "x", *args)
    assert code == 3
    assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_demo_store_prints_back_to_its_manifest(tmp_path, capsys):
    target = tmp_path / "demo"
    code, out, err = run(capsys, "create", target, "--demo", "6MiB", "--file-size", "1MiB", "--seed", "11",
                         "--live-ratio", "0.3", "--format", "json", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    manifest = json.loads((target / "manifest.json").read_text())
    assert doc["counts"] == manifest["counts"]
    assert doc["messageCounts"] == manifest["expected"]["messageCounts"]
    before = _hashes(target)

    printed = _print_json(capsys, target)
    for kind in ("bindings", "messages"):
        got = _journal(printed, kind)
        exp = manifest["expected"]["journals"][kind]
        live = [{k: r[k] for k in ("id", "userRecordType", "isUpdate", "compactCount", "bodySize", "bodySha256")}
                for r in got["live"]]
        assert live == exp["live"], kind
        assert [(f["name"], f["fileId"], f["size"]) for f in got["files"]] == \
               [(f["name"], f["fileId"], f["size"]) for f in exp["files"]]
        assert got["failed"] == []
    prepared = _journal(printed, "messages")["prepared"]
    assert [p["txId"] for p in prepared] == [p["txId"] for p in manifest["expected"]["prepared"]]
    assert len(prepared[0]["records"]) == len(manifest["expected"]["prepared"][0]["records"])
    assert _hashes(target) == before  # print wrote nothing


def test_demo_verifies_clean(tmp_path, capsys):
    target = tmp_path / "demo"
    assert run(capsys, "create", target, "--demo", "5MiB", "--file-size", "1MiB", "--quiet")[0] == 0
    code, out, err = run(capsys, "verify", target, "--format", "json")
    doc = json.loads(out)
    assert code == 0, doc["findings"]
    assert doc["verdict"] == "OK"


def test_demo_text_output_and_refusal(tmp_path, capsys):
    target = tmp_path / "demo"
    code, out, err = run(capsys, "create", target, "--demo", "5MiB", "--file-size", "1MiB")
    assert code == 0
    assert "manifest:" in out and "queue orders:" in out
    code, out, err = run(capsys, "create", target, "--demo", "5MiB")
    assert code == 3 and "not an empty directory" in err


@pytest.mark.skipif(not AMQTOOL.exists(), reason="console script not installed")
def test_installed_command(tmp_path):
    proc = subprocess.run([str(AMQTOOL), "create", str(tmp_path / "j"), "--kind", "messages", "--file-size",
                           "64KiB", "--format", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [f["fileId"] for f in json.loads(proc.stdout)["journals"][0]["files"]] == [1, 2]
    assert sorted(os.listdir(tmp_path / "j")) == ["activemq-data-1.amq", "activemq-data-2.amq"]
