"""`amqtool compact` on the command line: JSON figures, exit codes, dry run and copy leave the source
untouched, --if-needed for cron, refusal while a broker holds the store."""
from __future__ import annotations

import json
import os
import subprocess

from amqtool.commands.main import main
from tests.engines.artemis.compact_helpers import build_store, state
from tests.support import ORACLE, REPO, copy_tree, lock_held, tree_hashes


def _json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_dry_run_json_and_nothing_written(tmp_path, capsys):
    d = build_store(tmp_path / "data" / "journal", n=1200)
    copy_tree(ORACLE / "06_bindings" / "journal", tmp_path / "data" / "bindings")
    hashes = tree_hashes(tmp_path / "data")
    code, doc = _json(capsys, ["compact", str(tmp_path / "data"), "--dry-run", "--format", "json",
                               "--compact-min-files", "2", "--compact-percentage", "90"])
    assert tree_hashes(tmp_path / "data") == hashes
    # --dry-run judges with verify's findings (issue 25, one rule): this synthetic journal holds user record
    # types no broker knows, which verify calls CRITICAL; compaction-needed is a warning beside them
    assert doc["mode"] == "dry-run" and doc["verdict"] == "CRITICAL" and code == 2
    assert "unknown-record-type" in {f["code"] for f in doc["findings"] if f["severity"] == "critical"}
    assert {f["severity"] for f in doc["findings"] if f["code"] == "compaction-needed"} == {"warning"}
    kinds = [j["journal"] for j in doc["journals"]]
    assert kinds == ["messages", "bindings"]
    msg = doc["journals"][0]
    assert msg["needed"] and msg["before"]["files"] > msg["after"]["dataFiles"] >= 1
    assert 0 < msg["liveRatio"] < 1 and msg["liveRecords"] > 0
    assert any(f["code"] == "compaction-needed" for f in doc["findings"])
    assert all(set(f) >= {"severity", "code", "message", "path", "offset"} for f in doc["findings"])
    assert d.exists()


def test_in_place_then_if_needed_is_a_no_op(tmp_path, capsys):
    d = build_store(tmp_path / "j", n=1200)
    live_before = [e[0] for e in state(d)[0] if not (e[2] and e[1] in (34, 36))]
    code, doc = _json(capsys, ["compact", str(d), "-f", "json", "--pool-files", "4"])
    assert code == 0 and doc["verdict"] == "OK" and doc["journals"][0]["action"] == "compacted"
    assert [e[0] for e in state(d)[0] if not (e[2] and e[1] in (34, 36))] == live_before
    assert doc["journals"][0]["after"]["files"] <= 4 or doc["journals"][0]["after"]["dataFiles"] >= 4
    hashes = tree_hashes(d)
    code, doc = _json(capsys, ["compact", str(d), "--if-needed", "-f", "json"])
    assert code == 0 and doc["journals"][0]["action"] == "skipped" and not doc["needed"]
    assert tree_hashes(d) == hashes


def test_copy_leaves_source_untouched(tmp_path, capsys):
    src = copy_tree(ORACLE / "03_transactions" / "journal", tmp_path / "j")
    hashes = tree_hashes(src)
    code, doc = _json(capsys, ["compact", str(src), "-o", str(tmp_path / "out"), "-f", "json"])
    assert code == 0 and doc["mode"] == "copy"
    assert tree_hashes(src) == hashes
    a, b = state(src, bump=True), state(tmp_path / "out")
    assert a == b


def test_usage_errors_exit_3(tmp_path, capsys):
    src = copy_tree(ORACLE / "01_simple_adds" / "journal", tmp_path / "j")
    assert main(["compact", str(src), "--dry-run", "-o", str(tmp_path / "x")]) == 3
    assert main(["compact", str(tmp_path / "nothing-here")]) == 3
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    assert main(["compact", str(src), "-o", str(tmp_path / "busy")]) == 3
    capsys.readouterr()


def test_refuses_while_a_broker_holds_the_lock(tmp_path, capsys):
    d = copy_tree(ORACLE / "02_add_update_delete" / "journal", tmp_path / "j")
    lock = d / "server.lock"
    lock.write_bytes(bytes(19))
    with lock_held(lock):
        hashes = tree_hashes(d)
        code, doc = _json(capsys, ["compact", str(d), "-f", "json"])
        assert code == 3 and doc["verdict"] == "UNKNOWN" and "in use" in doc["error"]
        assert tree_hashes(d) == hashes
        # a dry run only reads: allowed
        assert main(["compact", str(d), "--dry-run", "-q"]) in (0, 1)
        capsys.readouterr()
        code, doc = _json(capsys, ["compact", str(d), "-f", "json", "--force", "-q"])
        assert code == 0 and doc["journals"][0]["action"] == "compacted"


def test_installed_entry_point_exit_code(tmp_path):
    src = copy_tree(ORACLE / "06_bindings" / "journal", tmp_path / "j")
    exe = REPO / ".venv" / "bin" / "amqtool"
    r = subprocess.run([str(exe), "compact", str(src), "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["journals"][0]["journal"] == "bindings" and doc["journals"][0]["action"] == "compacted"
    assert r.stderr == ""  # no progress bar without a terminal


def _journal_figures(journal_dir):
    files = [p for p in journal_dir.iterdir() if p.suffix in (".amq", ".bindings")]
    return len(files), sum(p.stat().st_size for p in files)


def test_ten_nightly_compactions_keep_the_store_size_and_verify_clean(tmp_path, capsys):
    # Issue 13 items 1 and 2: every run used to add a file per output (the freed files kept as pool files)
    # and the fileID gaps it left made verify report "missing-journal-file ... its records are lost".
    from amqtool.engines.artemis.demo import create_demo

    store = tmp_path / "store"
    create_demo(store, 6 * 1024 * 1024, file_size=1024 * 1024, seed=3)
    journal = store / "data" / "journal"
    before = state(journal, with_cc=False)
    figures = []
    for run in range(10):
        code, dry = _json(capsys, ["compact", str(store), "--dry-run", "--format", "json"])
        code, doc = _json(capsys, ["compact", str(store), "--format", "json"])
        assert code == 0, doc
        (msg,) = [j for j in doc["journals"] if j["journal"] == "messages"]
        (pred,) = [j for j in dry["journals"] if j["journal"] == "messages"]
        assert pred["after"] == msg["after"]  # the dry run predicts the after-figures exactly
        got = _journal_figures(journal)
        assert (msg["after"]["files"], msg["after"]["bytes"]) == got
        assert msg["reclaimedBytes"] == max(0, msg["before"]["bytes"] - got[1])
        figures.append(got + _journal_figures(store / "data" / "bindings"))
        code, ver = _json(capsys, ["verify", str(store), "--format", "json"])
        assert (code, ver["verdict"]) == (0, "OK"), [f for f in ver["findings"] if f["severity"] != "info"]
    assert len(set(figures[1:])) == 1, figures
    assert state(journal, with_cc=False) == before


def test_pool_files_cron_example_then_verify_is_ok(tmp_path, capsys):
    # The man page's cron line: `compact --pool-files 10`, twice, then verify: no false data-loss warning.
    from amqtool.engines.artemis.demo import create_demo

    store = tmp_path / "store"
    create_demo(store, 6 * 1024 * 1024, file_size=1024 * 1024, seed=4)
    sizes = []
    for _ in range(3):
        code, doc = _json(capsys, ["compact", str(store), "--pool-files", "10", "--format", "json"])
        assert code == 0, doc
        sizes.append(_journal_figures(store / "data" / "journal"))
        code, ver = _json(capsys, ["verify", str(store), "--format", "json"])
        assert (code, ver["verdict"]) == (0, "OK"), [f for f in ver["findings"] if f["severity"] != "info"]
        assert not [f for f in ver["findings"] if f["code"] == "missing-journal-file"]
    assert sizes[0] == sizes[1] == sizes[2]


def test_a_file_removed_after_compaction_is_still_a_loss(tmp_path, capsys):
    # A compacted journal explains fileID gaps, but not a live update whose add is gone: removing the
    # output file that holds adds of records updated in a later file is still reported.
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import MESSAGES

    d = tmp_path / "journal"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        for i in range(1, 1000):
            w.add(i, 45, bytes(300))
    code, _ = _json(capsys, ["compact", str(d), "--format", "json"])
    assert code == 0
    with JournalWriter.open(d, MESSAGES, file_size=64 * 1024) as w:
        for i in range(1, 1000, 7):
            w.update(i, 34, bytes(8) + b"\x00\x00\x00\x01")  # UPDATE_DELIVERY_COUNT: i64 queue, i32 count
    code, ver = _json(capsys, ["verify", str(d), "--format", "json"])
    assert code == 0
    from amqtool.store.journal_files import open_journal
    from tests.engines.artemis.compact_helpers import journal_of
    from amqtool.engines.artemis.load import load_journal

    with open_journal(journal_of(d)) as op:
        data = sorted((s.file.file_id, s.file.path) for s in load_journal(op).scans if s.has_data)
    data[1][1].unlink()  # a middle data file of the compacted block
    code, ver = _json(capsys, ["verify", str(d), "--format", "json"])
    assert len(data) >= 4
    (f,) = [f for f in ver["findings"] if f["code"] == "missing-journal-file"]
    assert code == 2 and f["details"]["liveUpdatesWithoutAdd"] > 0  # a proven loss (issue 25)


def _instance(tmp_path):
    from amqtool.engines.artemis.demo import create_demo

    inst = tmp_path / "broker1"
    create_demo(inst, 5 * 1024 * 1024, file_size=1024 * 1024, seed=2, paging=False, large_messages=False)
    (inst / "lock").mkdir()
    (inst / "lock" / "cli.lock").write_bytes(b"")
    return inst


import pytest  # noqa: E402


@pytest.mark.parametrize("where", ["", "data", "data/journal", "data/bindings"])
def test_the_instance_lock_is_found_from_any_path_inside_it(tmp_path, capsys, where):
    # Issue 13 item 3: `compact INSTANCE/data/journal` compacted in place while lock/cli.lock was held.
    inst = _instance(tmp_path)
    with lock_held(inst / "lock" / "cli.lock"):
        hashes = tree_hashes(inst / "data")
        code, doc = _json(capsys, ["compact", str(inst / where), "-f", "json"])
        assert code == 3 and doc["verdict"] == "UNKNOWN" and "in use" in doc["error"], doc
        assert "lock/cli.lock" in doc["error"]
        assert tree_hashes(inst / "data") == hashes


def test_the_node_manager_lock_is_found_from_the_bindings_directory(tmp_path, capsys):
    inst = _instance(tmp_path)
    lock = inst / "data" / "journal" / "server.lock"
    lock.write_bytes(bytes(19))
    with lock_held(lock):
        code, doc = _json(capsys, ["compact", str(inst / "data" / "bindings"), "-f", "json"])
        assert code == 3 and str(lock) in doc["error"]


def test_copy_while_a_broker_holds_the_store_warns(tmp_path, capsys):
    inst = _instance(tmp_path)
    with lock_held(inst / "lock" / "cli.lock"):
        code, doc = _json(capsys, ["compact", str(inst / "data" / "journal"), "-o", str(tmp_path / "copy"),
                                   "-f", "json"])
        assert code == 1 and doc["verdict"] == "WARNING"
        assert [f["code"] for f in doc["findings"] if f["severity"] == "warning"] == ["store-in-use"]


def test_copy_is_a_complete_store(tmp_path, capsys):
    # Issue 13 item 4: -o DEST held only journal/ and bindings/: verify DEST was CRITICAL
    # (large-message-missing) and every paged message was gone.
    from amqtool.engines.artemis.demo import create_demo

    src = tmp_path / "src"
    manifest = create_demo(src, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    assert manifest["expected"]["paging"]["pendingByQueue"]
    hashes = tree_hashes(src)
    dest = tmp_path / "dest"
    code, doc = _json(capsys, ["compact", str(src), "-o", str(dest), "-f", "json"])
    assert code == 0 and doc["journals"][0]["carriedOver"]["files"] > 0
    assert tree_hashes(src) == hashes
    code, ver = _json(capsys, ["verify", str(dest), "-f", "json"])
    assert (code, ver["verdict"]) == (0, "OK"), [f for f in ver["findings"] if f["severity"] != "info"]

    def rows(store, out):
        assert main(["export", str(store), "-o", str(out), "--format", "jsonl", "--engine", "local", "-q"]) == 0
        capsys.readouterr()
        got = []
        for f in sorted((out / "messages").rglob("*.jsonl")):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                got.append((r["queue"], r["message_id"], r["paged"], r["body_sha256"], r["large"]))
        return sorted(got)

    want = rows(src, tmp_path / "x1")
    assert any(r[2] for r in want) and any(r[4] for r in want)  # paged and large messages are there
    assert rows(dest, tmp_path / "x2") == want
    for p in (dest / "paging").rglob("*.page"):
        assert p.stat().st_nlink == 1  # copies, never hard links a broker on DEST would write through


def test_if_needed_skip_says_why_and_shows_no_after(tmp_path, capsys, kahadb_fixtures):
    """Issue 27: a skipped --if-needed run printed "after: ... 2 data files" as if it had compacted."""
    d = build_store(tmp_path / "j", n=1200)
    code, doc = _json(capsys, ["compact", str(d), "--if-needed", "-f", "json"])
    assert code == 0 and doc["journals"][0]["action"] == "skipped"
    data_files = doc["journals"][0]["before"]["dataFiles"]
    code = main(["compact", str(d), "--if-needed", "--wide"])
    out = capsys.readouterr().out
    assert code == 0 and "after" not in out
    assert f"skipped, not needed ({data_files} data file(s), not more than journal-compact-min-files 10)" in out
    k = copy_tree(kahadb_fixtures / "basic" / "kahadb", tmp_path / "k")
    code = main(["compact", str(k), "--if-needed", "--wide"])
    out = capsys.readouterr().out
    assert code == 0 and "after" not in out and "skipped, not needed (live ratio not below --live-below 50%)" in out
