"""``recover --undelete`` on demo stores whose queue was purged the way the broker purges
(``QueueImpl.deleteMatchingReferences``: ACKNOWLEDGE_REF + DELETE_TX, committed), written with the journal
writer: exactly the purged messages come back on their queue, marked; after a compaction they are reported
unrecoverable, never invented."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

import pytest

from amqtool.commands.main import main
from amqtool.engines.artemis.broker_state import build_broker_state
from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis.message import CoreMessage, LargeMessage
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.engines.artemis.recover_helpers import purge
from tests.support import tree_hashes

QUEUE = "orders"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("undelete") / "broker"
    manifest = create_demo(root, 4 * 1024 * 1024, file_size=1024 * 1024, seed=5)
    return root, manifest


def _purged(pristine, tmp_path):
    root, manifest = pristine
    src = tmp_path / "broker"
    shutil.copytree(root, src)
    ids = purge(src, manifest, QUEUE)
    return src, manifest, ids


def _run(capsys, *args):
    code = main(["recover", *map(str, args), "--format", "json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


def _state(dest):
    store = detect(dest)
    with open_journal(store.bindings) as ob, open_journal(store.messages) as om:
        st = build_broker_state(load_journal(ob), load_journal(om))
        by_queue = st.live_by_queue()
        messages = {mid: st.message(mid) for ids in by_queue.values() for mid in ids}
    return by_queue, messages


def test_purged_queue_comes_back_exactly(tmp_path, capsys, pristine):
    src, manifest, purged = _purged(pristine, tmp_path)
    by_queue, _ = _state(src)
    assert by_queue.get(QUEUE, []) == []  # the purge emptied the queue
    hashes = tree_hashes(src)
    # the purge is the only deletion after the newest message: --since one millisecond after it
    code, doc = _run(capsys, src, "--dry-run", "--undelete", "--queue", QUEUE)
    assert code == 0
    newest = max(datetime.fromisoformat(u["deletedAfter"]) for u in doc["undeleted"])
    since = datetime.fromtimestamp(newest.timestamp() + 0.001, timezone.utc).isoformat(timespec="milliseconds")
    code, doc = _run(capsys, src, "-o", tmp_path / "dest", "--undelete", "--queue", QUEUE, "--since", since)
    assert code == 0 and doc["verdict"] == "OK"
    assert tree_hashes(src) == hashes
    assert sorted(u["messageId"] for u in doc["undeleted"]) == sorted(purged)
    assert all(u["queues"] == [QUEUE] and u["marked"] for u in doc["undeleted"])
    assert doc["counts"]["undeleted"] == len(purged)
    # DEST: every queue as the demo left it before the purge, the purged messages marked, bodies intact
    by_queue, messages = _state(tmp_path / "dest")
    want = {q: sorted(m["messageId"] for m in msgs) for q, msgs in manifest["expected"]["liveByQueue"].items()
            if msgs}
    assert {q: sorted(ids) for q, ids in by_queue.items() if ids} == want
    newest_ms = round(newest.timestamp() * 1000)
    for mid in purged:
        msg = messages[mid]
        assert isinstance(msg, (CoreMessage, LargeMessage))
        props = msg.properties
        assert datetime.fromisoformat(props["AMQTOOL_UNDELETED"]).tzinfo is not None
        assert props["AMQTOOL_DELETED_AFTER"] == newest_ms
        assert props["AMQTOOL_DELETED_BEFORE"] >= newest_ms
    sizes = {m["messageId"]: m["bodySize"] for m in manifest["expected"]["liveByQueue"][QUEUE]}
    for mid in purged:
        if isinstance(messages[mid], CoreMessage):
            assert len(messages[mid].body) == sizes[mid]


def test_since_until_and_queue_select(tmp_path, capsys, pristine):
    src, _manifest, purged = _purged(pristine, tmp_path)
    code, doc = _run(capsys, src, "--dry-run", "--undelete")
    assert code == 0
    every = {u["messageId"] for u in doc["undeleted"]}
    assert set(purged) <= every and len(every) > len(purged)  # consumers deleted others earlier
    code, doc = _run(capsys, src, "--dry-run", "--undelete", "--until", "2000-01-01T00:00:00Z")
    assert doc["undeleted"] == []
    code, doc = _run(capsys, src, "--dry-run", "--undelete", "--queue", "no-such-queue")
    assert doc["undeleted"] == []
    assert "queue-unknown" in [f["code"] for f in doc["findings"] if f["severity"] == "warning"]
    code, doc = _run(capsys, src, "--dry-run", "--undelete", "--queue", QUEUE)
    assert {u["messageId"] for u in doc["undeleted"]} >= set(purged)
    assert all(u["queues"] == [QUEUE] for u in doc["undeleted"])


def test_after_compaction_purged_messages_are_unrecoverable_not_invented(tmp_path, capsys, pristine):
    src, _manifest, purged = _purged(pristine, tmp_path)
    assert main(["compact", str(src), "--quiet"]) == 0
    capsys.readouterr()
    code, doc = _run(capsys, src, "-o", tmp_path / "dest", "--undelete", "--queue", QUEUE)
    assert code == 0
    assert doc["undeleted"] == []
    # amqtool's compaction zeroes the files it frees (issue 25, case 9): nothing of the purged messages is
    # left to name, and nothing is invented
    assert doc["unrecoverable"] == []
    by_queue, _ = _state(tmp_path / "dest")
    assert by_queue.get(QUEUE, []) == []


def test_jsonl_rows(tmp_path, run_cli, pristine):
    src, _manifest, purged = _purged(pristine, tmp_path)
    code, out, _err = run_cli("recover", src, "--dry-run", "--undelete", "--queue", QUEUE, "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert {r["messageId"] for r in rows if r["record"] == "undeleted"} >= set(purged)
    assert rows[-1]["record"] == "summary" and rows[-1]["counts"]["undeleted"] >= len(purged)


def test_bad_times_are_usage_errors(tmp_path, run_cli, pristine):
    src, _manifest, _purged_ids = _purged(pristine, tmp_path)
    code, _out, err = run_cli("recover", src, "--dry-run", "--undelete", "--since", "yesterday")
    assert code == 3 and "ISO 8601" in err
    code, _out, err = run_cli("recover", src, "--dry-run", "--undelete", "--since", "2026-01-02", "--until",
                              "2026-01-01")
    assert code == 3 and "before" in err
