"""Writers and the locks on a store: every place a broker keeps its lock (issue 26 item 4), amqtool's own
writer lock (two writers exclude each other), and readers during a compaction (issue 26 item 5)."""
from __future__ import annotations

import json
import textwrap

import pytest

from amqtool.commands.main import main
from tests.support import lock_held, tree_hashes

BROKER_XML = """\
<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <journal-directory>data/journal</journal-directory>
  <bindings-directory>data/bindings</bindings-directory>
  <paging-directory>data/paging</paging-directory>
  <large-messages-directory>data/large-messages</large-messages-directory>
  {extra}
</core></configuration>
"""


def _json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def _instance(tmp_path, extra=""):
    from amqtool.engines.artemis.demo import create_demo

    inst = tmp_path / "broker1"
    create_demo(inst, 5 * 1024 * 1024, file_size=1024 * 1024, seed=2, paging=False, large_messages=False)
    (inst / "etc").mkdir()
    (inst / "etc" / "broker.xml").write_text(BROKER_XML.format(extra=extra))
    return inst


def _server_lock(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"P00" + bytes(range(16)))  # state byte, "00", node UUID (FileBasedNodeManager)
    return path


@pytest.mark.parametrize("where", ["", "data", "data/journal", "data/bindings"])
def test_node_manager_lock_directory_of_broker_xml(tmp_path, capsys, where):
    # Issue 26 item 4: <node-manager-lock-directory>locks</...> and the lock held on locks/server.lock:
    # compact compacted anyway.
    inst = _instance(tmp_path, "<node-manager-lock-directory>locks</node-manager-lock-directory>")
    lock = _server_lock(inst / "locks" / "server.lock")
    with lock_held(lock) as holder:
        hashes = tree_hashes(inst / "data")
        code, doc, err = _json(capsys, ["compact", str(inst / where), "-f", "json"])
        assert code == 3 and doc["verdict"] == "UNKNOWN", doc
        assert str(lock) in doc["error"] and f"PID {holder.pid}" in doc["error"]
        assert tree_hashes(inst / "data") == hashes


def test_node_manager_lock_directory_text_error_is_one_line(tmp_path, capsys):
    inst = _instance(tmp_path, "<node-manager-lock-directory>locks</node-manager-lock-directory>")
    lock = _server_lock(inst / "locks" / "server.lock")
    with lock_held(lock):
        code = main(["compact", str(inst)])
        out = capsys.readouterr()
    assert code == 3 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and str(lock) in lines[0], out.err


def test_absolute_node_manager_lock_directory(tmp_path, capsys):
    locks_dir = tmp_path / "shared-store-locks"
    inst = _instance(tmp_path, f"<node-manager-lock-directory>{locks_dir}</node-manager-lock-directory>")
    lock = _server_lock(locks_dir / "serverlock.1")
    with lock_held(lock):
        code, doc, _ = _json(capsys, ["compact", str(inst / "data" / "journal"), "-f", "json"])
        assert code == 3 and str(lock) in doc["error"]


@pytest.mark.parametrize("where", ["", "data/journal"])
def test_server_lock_in_the_data_directory(tmp_path, capsys, where):
    # Issue 26 item 4: a lock held on data/server.lock was not seen.
    inst = _instance(tmp_path)
    lock = _server_lock(inst / "data" / "server.lock")
    with lock_held(lock):
        hashes = tree_hashes(inst / "data")
        code, doc, _ = _json(capsys, ["compact", str(inst / where), "-f", "json"])
        assert code == 3 and str(lock) in doc["error"], doc
        assert tree_hashes(inst / "data") == hashes


def test_unheld_lock_files_do_not_refuse(tmp_path, capsys):
    inst = _instance(tmp_path, "<node-manager-lock-directory>locks</node-manager-lock-directory>")
    _server_lock(inst / "locks" / "server.lock")
    _server_lock(inst / "data" / "server.lock")
    code, doc, _ = _json(capsys, ["compact", str(inst), "-f", "json"])
    assert code == 0 and doc["mode"] == "in-place"
