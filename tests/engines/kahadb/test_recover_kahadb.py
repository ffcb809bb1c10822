"""``amqtool recover`` on KahaDB and mKahaDB copies of the real-broker fixtures: a batch whose checksum fails
is skipped whole, DEST replays to exactly the source's live state without that batch's messages, the report
names them, the source is never written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command
from tests.engines.kahadb.test_compact import DATASETS, _copy, state
from tests.support import tree_hashes

pytestmark = pytest.mark.skipif(not DATASETS, reason="KahaDB fixtures absent")


def _batches(directory: Path):
    """(file, batch, [decoded commands]) of every good batch, files in id order."""
    out = []
    for p in sorted(directory.glob("db-*.log"), key=lambda q: int(q.name[3:-4])):
        data = p.read_bytes()
        for ev in jr.scan_file(data):
            if isinstance(ev, jr.Batch):
                cmds = [decode_command(bytes(r.payload)) for r in jr.iter_batch_records(data, ev)]
                out.append((p, ev, cmds))
    return out


def _break(path: Path, batch: jr.Batch) -> None:
    data = bytearray(path.read_bytes())
    data[batch.data_offset + batch.size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _without(before: dict, gone: set[str]) -> dict:
    out = {}
    for k, ids in before.items():
        kept = [i for i in ids if i not in gone] if not k.startswith("prepared") else ids
        if kept:
            out[k] = kept
    return out


@pytest.mark.parametrize("name", DATASETS)
def test_undamaged_store_recovers_whole(tmp_path, run_cli, name):
    root = _copy(tmp_path, name)
    hashes = tree_hashes(root)
    before = state(root)
    code, out, _ = run_cli("recover", root, "-o", tmp_path / "dest", "--salvage", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "OK" and doc["lost"] == []
    assert tree_hashes(root) == hashes
    after = state(tmp_path / "dest")
    assert {k: v for k, v in after.items() if not k.startswith("prepared")} == \
        {k: v for k, v in before.items() if not k.startswith("prepared")}


@pytest.mark.parametrize("count", [1, 3])
def test_checksum_failures_skip_whole_batches(tmp_path, run_cli, count):
    root = _copy(tmp_path, "basic")
    before = state(root)
    only_adds = [(p, b, c) for p, b, c in _batches(root)
                 if c and all(x.type is EntryType.ADD_MESSAGE for x in c)]
    picked = only_adds[5:5 + 7 * count:7]
    gone = set()
    for p, b, cmds in picked:
        _break(p, b)
        gone.update(x.message_id for x in cmds)
    hashes = tree_hashes(root)
    code, out, _ = run_cli("recover", root, "-o", tmp_path / "dest", "--salvage", "--format", "json")
    doc = json.loads(out)
    assert tree_hashes(root) == hashes
    assert code == 2 and doc["verdict"] == "CRITICAL"  # verify's on the source (issue 25)
    assert sorted(x["messageId"] for x in doc["lost"]) == sorted(gone)
    assert all(x["reason"] == "checksum" and x["command"] == "KAHA_ADD_MESSAGE_COMMAND" for x in doc["lost"])
    assert state(tmp_path / "dest") == _without(before, gone)
    assert doc["counts"]["bytesSkipped"] == sum(b.size for _p, b, _c in picked)


def test_mkahadb_child_store_damage(tmp_path, run_cli):
    root = _copy(tmp_path, "mkahadb")
    before = state(root)
    child = sorted(p for p in root.iterdir() if p.is_dir() and p.name != "txStore" and list(p.glob("db-*.log")))[0]
    p, b, cmds = [x for x in _batches(child) if x[2] and all(c.type is EntryType.ADD_MESSAGE for c in x[2])][3]
    _break(p, b)
    gone = {c.message_id for c in cmds}
    verdict, _, _ = run_cli("verify", root)
    code, out, _ = run_cli("recover", root, "-o", tmp_path / "dest", "--salvage", "--format", "json")
    doc = json.loads(out)
    assert code == max(verdict, 1)  # verify's verdict on the source (a batch the index no longer needs: latent)
    assert {x["messageId"] for x in doc["lost"]} == gone
    assert {x["directory"] for x in doc["lost"]} == {child.name}
    after = state(tmp_path / "dest")
    assert {k: v for k, v in after.items() if not k.startswith("prepared")} == \
        {k: v for k, v in _without(before, gone).items() if not k.startswith("prepared")}
    assert sorted(q.name for q in (tmp_path / "dest" / "txStore").iterdir()) == sorted(
        q.name for q in (root / "txStore").iterdir())


def test_dry_run_and_destination_rules(tmp_path, run_cli):
    root = _copy(tmp_path, "basic")
    p, b, cmds = [x for x in _batches(root) if x[2] and all(c.type is EntryType.ADD_MESSAGE for c in x[2])][2]
    _break(p, b)
    hashes = tree_hashes(tmp_path)
    verdict, _, _ = run_cli("verify", root)
    code, out, _ = run_cli("recover", root, "--dry-run", "--format", "json")
    doc = json.loads(out)
    assert code == max(verdict, 1) and doc["mode"] == "dry-run" and len(doc["lost"]) == len(cmds)
    assert tree_hashes(tmp_path) == hashes
    code, _out, err = run_cli("recover", root, "-o", root / "x")
    assert code == 3 and "lies inside the input" in err
    code, _out, err = run_cli("recover", root, "--dry-run", "--undelete")
    assert code == 3 and "Artemis" in err


def test_killed_at_every_durable_step_leaves_no_half_dest(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from amqtool.store import atomic
    from tests.support import REPO

    root = _copy(tmp_path, "basic")
    p, b, _c = _batches(root)[4]
    _break(p, b)
    child = ("import sys\nfrom amqtool.commands.main import main\n"
             "sys.exit(main(['recover', sys.argv[1], '-o', sys.argv[2], '--salvage', '--quiet']))\n")
    ref = tmp_path / "ref"
    assert subprocess.run([sys.executable, "-c", child, str(root), str(ref)], cwd=REPO).returncode in (1, 2)
    want = state(ref)
    outcomes = []
    n = 1
    while True:
        dest = tmp_path / f"d{n}"
        r = subprocess.run([sys.executable, "-c", child, str(root), str(dest)], cwd=REPO, capture_output=True,
                           env={**os.environ, atomic.FAULT_ENV: f"*:{n}:kill"})
        if dest.exists():
            assert state(dest) == want
        if r.returncode != -signal.SIGKILL:
            assert r.returncode in (1, 2) and dest.exists()  # verify's verdict on the source
            break
        outcomes.append(dest.exists())
        n += 1
        assert n < 300
    k = outcomes.index(True) if True in outcomes else len(outcomes)
    assert outcomes == [False] * k + [True] * (len(outcomes) - k) and k > 3


def test_missing_log_file_is_listed(tmp_path, run_cli):
    root = _copy(tmp_path, "basic")
    victim = sorted(root.glob("db-*.log"), key=lambda q: int(q.name[3:-4]))[1]
    victim.unlink()
    expected = state(root)  # what the replay of the remaining files gives
    code, out, _ = run_cli("recover", root, "-o", tmp_path / "dest", "--salvage", "--format", "json")
    doc = json.loads(out)
    assert code == 2
    missing = [x for x in doc["lost"] if x["kind"] == "journal-file"]
    assert [(x["reason"], x["fileId"]) for x in missing] == [("missing-journal-file", int(victim.name[3:-4]))]
    assert doc["counts"]["filesLost"] == 1
    assert state(tmp_path / "dest") == expected


def test_transaction_with_a_lost_record_is_left_out_whole(tmp_path, run_cli):
    """A local transaction's sends sit in several batches before its COMMIT: the broker would commit the
    sends that survive. recover leaves the whole transaction out."""
    root = _copy(tmp_path, "tx")
    before = state(root)
    by_tx: dict = {}
    for p, b, cmds in _batches(root):
        for c in cmds:
            tx = getattr(c, "transaction", None)
            if tx is not None:
                by_tx.setdefault(tx.key, []).append((p, b, c))
    key, items = next((k, v) for k, v in by_tx.items()
                      if any(c.type is EntryType.COMMIT for _p, _b, c in v)
                      and len({(p, b.offset) for p, b, c in v if c.type is EntryType.ADD_MESSAGE}) > 2)
    sends = {c.message_id for _p, _b, c in items if c.type is EntryType.ADD_MESSAGE}
    p, b, _c = next(x for x in items if x[2].type is EntryType.ADD_MESSAGE)
    in_batch = [c for pp, bb, cmds in _batches(root) if pp == p and bb == b for c in cmds]
    _break(p, b)
    verdict, _, _ = run_cli("verify", root)
    code, out, _ = run_cli("recover", root, "-o", tmp_path / "dest", "--salvage", "--format", "json")
    doc = json.loads(out)
    assert code == max(verdict, 1)
    txs = [x for x in doc["lost"] if x["kind"] == "transaction"]
    assert len(txs) == 1 and txs[0]["reason"] == "records-lost"
    assert txs[0]["records"] == len(sends) - sum(1 for c in in_batch if c.type is EntryType.ADD_MESSAGE
                                                  and getattr(c, "transaction", None) is not None
                                                  and c.transaction.key == key)
    assert doc["counts"]["transactionsNotCommitted"] == 1
    after = state(tmp_path / "dest")
    live_after = {m for k, ids in after.items() if not k.startswith("prepared") for m in ids}
    assert not (live_after & sends)  # none of the transaction's sends, not even those in intact batches
    gone = {c.message_id for c in in_batch if c.type is EntryType.ADD_MESSAGE}
    assert after == _without(before, sends | gone)
