"""An intact index that holds what a later run wrote after an ack compaction file's forwarded acks
(amqtool/engines/kahadb/verify.py ``_skipped_by_rebuild_only``), on a store a real 5.17.2 broker left
(tests/data/kahadb/r5-archive-gc-kill: db-7.log is the compaction of db-5.log, still there, and run 2 wrote on
after its forwarded acks; five live sends of fx.r5.keep are in it, at 7162, 15600, 16314, 19722 and 21084; the
index checkpoint covers every record).

The running broker indexed those sends as it wrote them; a replay of the journal skips them
(process(KahaRewrittenDataFileCommand)). The broker with this index delivers all 37 of fx.r5.keep (the harness
truth, tests/faults/kahadb.py), so the store is OK; it was CRITICAL (kahadb-index-journal-mismatch, "a rebuild
would lose 5 live messages")."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "r5-archive-gc-kill" / "kahadb"


def _verify(root: Path):
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, {f.code: f for f in findings}


def test_the_index_holding_sends_after_the_forwarded_acks_is_ok(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    verdict, codes = _verify(root)
    assert verdict == "OK", sorted(codes)
    f = codes["kahadb-rebuild-would-skip"]
    assert len(f.details["rebuildWouldLose"]) == 5 and f.path.endswith("db-7.log")


def test_the_loader_delivers_them_as_the_broker_does(tmp_path):
    # print / export read the reconciled replay: all 37 of fx.r5.keep (they read 32)
    from amqtool.engines.kahadb.load import load_store

    d = load_store(detect(STORE))[0]
    live = d.replay.destinations["0:fx.r5.keep"].messages
    assert len(live) == 37 and len(d.skip_restored) == 5
    assert [(m.file_id, m.offset) for m in live.values()] == sorted((m.file_id, m.offset) for m in live.values())


def test_without_the_index_the_rebuild_loses_them(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    (root / "db.data").unlink()
    (root / "db.redo").unlink()
    verdict, codes = _verify(root)
    assert verdict == "CRITICAL"
    assert codes["kahadb-rebuild-skips-writes"].details["lose"] == 5
