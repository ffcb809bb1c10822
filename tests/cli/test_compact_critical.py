"""`amqtool compact` takes verify's verdict on the load it writes from (issue 25, the one rule; writers on
CRITICAL stores): a store verify calls CRITICAL is refused with exit 2, naming the finding and pointing to
``recover``, and not a byte changes (in place, ``-o`` and ``--reclaim-only``), unless ``--salvage``; a
WARNING store (a torn tail, which a crash leaves) is compacted; cron's ``compact; compact; verify`` on a
healthy store stays OK. For Artemis journals and KahaDB stores, on damaged copies of the broker-written
fixtures."""
from __future__ import annotations

import json
import shutil

import pytest

from amqtool.commands.main import main
from amqtool.formats.kahadb import journal as jr
from tests.support import KAHADB, ORACLE, copy_tree, tree_hashes

pytestmark = pytest.mark.skipif(not (ORACLE.is_dir() and KAHADB.is_dir()), reason="fixtures not present")


def run(capsys, argv) -> tuple[int, dict, str]:
    code = main([*argv, "--format", "json"])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if cap.out.strip() else {}), cap.err


def verdict(capsys, root) -> int:
    code = main(["verify", str(root), "-q"])
    capsys.readouterr()
    return code


# -- the damaged copies ---------------------------------------------------------------------------------------

def artemis_missing_file(tmp_path):
    """04a without activemq-data-2.amq, a data file between others: the updates in later files lost their
    adds (verify: missing-journal-file, CRITICAL)."""
    root = copy_tree(ORACLE / "04a_before_compact", tmp_path / "artemis")
    (root / "journal" / "activemq-data-2.amq").unlink()
    return root


def kahadb_missing_file(tmp_path):
    """basic without db-12.log, the file of its last acks and checkpoint (issue 25 case 8: CRITICAL)."""
    root = copy_tree(KAHADB / "basic", tmp_path / "kahadb")
    (root / "kahadb" / "lock").unlink(missing_ok=True)
    (root / "kahadb" / "db-12.log").unlink()
    return root


def kahadb_torn_tail(tmp_path):
    """basic whose newest file holds, after its last batch, the first 200 bytes of another: a crash
    mid-write. Its zero fill follows, to the length the broker preallocates every file to, so the batch's
    checksum fails with nothing after it, and the end marker in its last five bytes (verify:
    kahadb-truncated-tail, WARNING). (The same file cut short is
    no crash's: basic's files are all 131072 bytes, CRITICAL kahadb-truncated-file,
    tests/engines/kahadb/test_damaged_control_record.py.)"""
    root = copy_tree(KAHADB / "basic", tmp_path / "kahadb")
    (root / "kahadb" / "lock").unlink(missing_ok=True)
    log = root / "kahadb" / "db-12.log"
    data = log.read_bytes()
    events = list(jr.scan_file(data))
    end = next(e.offset for e in events if isinstance(e, jr.End))
    last = [e for e in events if isinstance(e, jr.Batch)][-1]
    torn = data[:end] + data[last.offset:last.offset + 200]
    # (the end marker the preallocation wrote into the file's last five bytes stays: a crash does not reach it)
    log.write_bytes(torn + bytes(len(data) - len(torn) - len(jr.EOF_RECORD)) + jr.EOF_RECORD)
    return root


CRITICAL_STORES = {"artemis": artemis_missing_file, "kahadb": kahadb_missing_file}


# -- refused ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(CRITICAL_STORES))
@pytest.mark.parametrize("mode", ["in-place", "copy", "reclaim-only"])
def test_compact_refuses_a_critical_store_and_changes_nothing(tmp_path, capsys, kind, mode):
    if kind == "kahadb" and mode == "reclaim-only":
        pytest.skip("--reclaim-only is an Artemis option")
    root = CRITICAL_STORES[kind](tmp_path)
    assert verdict(capsys, root) == 2
    hashes = tree_hashes(root)
    extra = {"in-place": [], "copy": ["-o", str(tmp_path / "out")], "reclaim-only": ["--reclaim-only"]}[mode]
    code, doc, err = run(capsys, ["compact", str(root), *extra])
    assert code == 2
    assert tree_hashes(root) == hashes
    assert not (tmp_path / "out").exists()
    message = err + json.dumps(doc)
    assert "compact refused: verify calls this store CRITICAL" in message
    want = "missing-journal-file" if kind == "artemis" else "kahadb-missing-journal-file"
    assert want in message and "amqtool recover" in message and "--salvage" in message
    # and the store is as it was: recover can still salvage it
    assert verdict(capsys, root) == 2


@pytest.mark.parametrize("kind", sorted(CRITICAL_STORES))
def test_compact_salvage_compacts_a_critical_store_listing_what_it_leaves_out(tmp_path, capsys, kind):
    root = CRITICAL_STORES[kind](tmp_path)
    hashes = tree_hashes(root)
    code, doc, _err = run(capsys, ["compact", str(root), "--salvage"])
    assert code == 2 and doc["verdict"] == "CRITICAL"  # verify's verdict on what it compacted from
    assert doc["mode"] == "in-place" and tree_hashes(root) != hashes
    want = "missing-journal-file" if kind == "artemis" else "kahadb-missing-journal-file"
    assert want in {f["code"] for f in doc["findings"] if f["severity"] == "critical"}


# -- compacted -------------------------------------------------------------------------------------------------

def test_compact_still_compacts_an_artemis_torn_tail(tmp_path, capsys):
    root = copy_tree(ORACLE / "05b_torn_tail_truncated", tmp_path / "artemis")
    assert verdict(capsys, root) == 1
    hashes = tree_hashes(root)
    code, doc, _err = run(capsys, ["compact", str(root)])
    assert code == 0 and doc["verdict"] == "OK"  # the torn tail is gone with the compaction
    assert tree_hashes(root) != hashes
    assert {j["action"] for j in doc["journals"]} == {"compacted"}
    assert verdict(capsys, root) == 0


def test_compact_still_compacts_a_kahadb_torn_tail(tmp_path, capsys):
    root = kahadb_torn_tail(tmp_path)
    assert verdict(capsys, root) == 1
    code, doc, _err = run(capsys, ["compact", str(root)])
    assert code == 0 and doc["verdict"] == "OK"
    assert [s["action"] for s in doc["stores"]] == ["compacted"]
    assert verdict(capsys, root) == 0
    # the 326 live messages of the fixture are all still there
    code, out, _ = run(capsys, ["verify", str(root)])
    assert out["summary"]["live"] == 326


@pytest.mark.parametrize("kind", ["artemis", "kahadb"])
def test_cron_compact_compact_verify_on_a_healthy_store_stays_ok(tmp_path, capsys, kind):
    if kind == "artemis":
        root = copy_tree(ORACLE / "04a_before_compact", tmp_path / "artemis")
    else:
        root = copy_tree(KAHADB / "basic", tmp_path / "kahadb")
        (root / "kahadb" / "lock").unlink(missing_ok=True)
    for _ in range(2):
        code, doc, _err = run(capsys, ["compact", str(root)])
        assert code == 0 and doc["verdict"] == "OK"
    assert verdict(capsys, root) == 0
