"""KahaDB through the CLI: `amqtool print|verify --format json` on fixtures and a damaged copy.

The lead wires the commands to amqtool.engines.kahadb; until `print` knows `--safe` these tests skip.
"""
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FX = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "kahadb"
AMQ = [str(Path(sys.executable).parent / "amqtool")]


def run(*args):
    p = subprocess.run(AMQ + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module", autouse=True)
def wired():
    if not FX.is_dir():
        pytest.skip("KahaDB fixtures missing")
    rc, out, err = run("print", str(FX / "gc"), "--format", "json", "--safe")
    if rc != 0 or '"stores"' not in out:
        pytest.skip("amqtool print is not wired to the KahaDB engine yet")


def tree_hash(root):
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_print_json_live_counts():
    before = tree_hash(FX / "basic")
    rc, out, _ = run("print", str(FX / "basic"), "--format", "json", "--safe")
    assert rc == 0 and tree_hash(FX / "basic") == before
    doc = json.loads(out)
    live = {d["name"]: len(d["live"]) for d in doc["stores"][0]["destinations"]}
    assert live == {"fx.audit": 120, "fx.bulk": 13, "fx.orders": 93, "fx.events": 100}
    assert '"body"' not in out


def test_verify_fixture_ok_and_damaged_critical(tmp_path):
    rc, out, _ = run("verify", str(FX / "gc"), "--format", "json")
    assert rc == 0 and json.loads(out)["verdict"] == "OK"
    dst = tmp_path / "basic"
    shutil.copytree(FX / "basic", dst)
    (dst / "kahadb").chmod(0o755)
    (dst / "kahadb" / "db-5.log").chmod(0o644)
    (dst / "kahadb" / "db-5.log").unlink()
    rc, out, _ = run("verify", str(dst), "--format", "json")
    doc = json.loads(out)
    assert rc == 2 and doc["verdict"] == "CRITICAL"
    assert any(f["code"] == "kahadb-missing-journal-file" for f in doc["findings"])


def test_pins_and_jsonl():
    rc, out, _ = run("print", str(FX / "gc"), "--format", "json", "--pins", "--drain", "fx.gc.keep")
    assert rc == 0
    st = json.loads(out)["stores"][0]
    assert st["drain"]["filesFreed"] == ["db-6.log", "db-7.log"]
    rc, out, _ = run("print", str(FX / "tx"), "--format", "jsonl", "--safe")
    rows = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert rc == 0 and sum(r.get("type") == "KAHA_ADD_MESSAGE_COMMAND" for r in rows) == 92


def test_empty_dir_is_unknown(tmp_path):
    rc, out, err = run("verify", str(tmp_path), "--format", "json")
    assert rc == 3 and "error" in json.loads(out)
