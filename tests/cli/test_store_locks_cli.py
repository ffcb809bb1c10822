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


# --- a reader during a compaction --------------------------------------------------------------------------

def _print_json(capsys, d):
    code = main(["print", str(d), "-f", "json"])
    out = capsys.readouterr()
    return code, out.out, out.err


def _compact_mid_read(monkeypatch, d, after_chunks=3):
    """The first print's JSON stops after a few chunks while a whole `amqtool compact` runs on its store."""
    import subprocess

    from amqtool.engines.artemis import journal_print
    from tests.support import REPO

    real = journal_print.iter_json
    ran = []

    def iter_json(*a, **kw):
        for i, chunk in enumerate(real(*a, **kw)):
            if i == after_chunks and not ran:
                ran.append(subprocess.run([str(REPO / ".venv" / "bin" / "amqtool"), "compact", str(d), "-q"],
                                          capture_output=True, text=True))
                assert ran[0].returncode == 0, ran[0].stderr
            yield chunk

    monkeypatch.setattr(journal_print, "iter_json", iter_json)
    return ran


def test_print_json_during_a_compaction_is_one_document_of_one_state(tmp_path, capsys, monkeypatch):
    # Issue 26 item 5: `print -f json` while `compact` ran gave a truncated document followed by a second
    # {"verdict":"UNKNOWN"...}.
    from tests.engines.artemis.compact_helpers import build_store

    d = build_store(tmp_path / "j", n=1200)
    code, before, _ = _print_json(capsys, d)
    assert code == 0
    ran = _compact_mid_read(monkeypatch, d)
    code, out, err = _print_json(capsys, d)
    assert ran, "the compaction did not run during the read"
    doc = json.loads(out)  # exactly one document
    monkeypatch.undo()
    code_after, after, _ = _print_json(capsys, d)
    assert code == code_after == 0, err
    assert json.loads(after) != json.loads(before)  # the compaction changed what print shows
    assert doc == json.loads(after) or doc == json.loads(before)
    assert doc == json.loads(after)  # the switch was seen and the store read again


def test_an_error_document_replaces_a_partly_written_one(tmp_path, capsys, monkeypatch):
    from amqtool.engines.artemis import journal_print
    from amqtool.errors import AmqtoolError
    from tests.engines.artemis.compact_helpers import build_store

    d = build_store(tmp_path / "j", n=300)
    real = journal_print.iter_json

    def failing(*a, **kw):
        for i, chunk in enumerate(real(*a, **kw)):
            if i == 2:
                raise AmqtoolError("cannot read journal file", path=str(d / "activemq-data-3.amq"))
            yield chunk

    monkeypatch.setattr(journal_print, "iter_json", failing)
    code, out, err = _print_json(capsys, d)
    assert code == 3
    assert json.loads(out) == {"verdict": "UNKNOWN",
                               "error": f'file "{d / "activemq-data-3.amq"}": cannot read journal file'}
    assert len(err.strip().splitlines()) == 1
