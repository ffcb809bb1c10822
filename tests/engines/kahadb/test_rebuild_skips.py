"""A rebuild of the index that skips what a later run wrote into an ack compaction file
(amqtool/engines/kahadb/rebuild_skips.py), on the store a real 5.17.2 broker stopped cleanly with its
compaction file newest (tests/data/kahadb/f4-gc: db-15.log holds the KAHA_REWRITTEN_DATA_FILE marker of
db-4.log, still there, and 20 forwarded REMOVEs). A restarted broker appends to db-15.log; with db.data gone
its replay jumps from the marker to the next file (process(KahaRewrittenDataFileCommand)) and the appended
records are lost. (The kl45 hold-out store h1-restarts is one a real broker wrote so; the broker started on it
without db.data delivered 13 of 19, 5 of 10 and 15 of 19: the messages written after the markers.)"""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.formats.kahadb import journal as jr
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f4-gc" / "kahadb"
LIVE = "ID:vm-44611-1795705981148-3:5:-1:1:69"  # live on fx.f4.q, its ADD at db-14.log@2431 (898 bytes)
NEW = "ID:vm-44611-1795705981148-3:7:-1:1:69"  # the same send under an id no record has


def _findings(root: Path):
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, {f.code: f for f in findings if f.severity.value != "info"}


def _without_index(tmp_path: Path, append_send: bool) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    (root / "db.data").unlink()
    (root / "db.redo").unlink(missing_ok=True)
    if append_send:
        payload = (root / "db-14.log").read_bytes()[2431 + jr.RECORD_HEAD_SPACE:2431 + 898]
        assert payload.count(LIVE.encode()) >= 1
        payload = payload.replace(LIVE.encode(), NEW.encode(), 1)  # the command's messageId field comes first
        p = root / "db-15.log"
        data = p.read_bytes()
        end = [ev for ev in jr.scan_file(data) if isinstance(ev, jr.Batch)][-1].end
        p.write_bytes(data[:end] + jr.encode_batch([payload]))
    return root


def test_a_send_after_the_forwarded_acks_is_lost_to_a_rebuild(tmp_path):
    verdict, codes = _findings(_without_index(tmp_path, append_send=True))
    assert verdict == "CRITICAL"
    f = codes["kahadb-rebuild-skips-writes"]
    assert f.details["rebuildWouldLose"] == [NEW] and f.details["bringBack"] == 0
    assert f.path.endswith("db-15.log")


def test_a_compaction_file_of_forwarded_acks_alone_rebuilds_the_same(tmp_path):
    # the skip drops only the forwarded acks, of messages acknowledged before: nothing changes
    verdict, codes = _findings(_without_index(tmp_path, append_send=False))
    assert "kahadb-rebuild-skips-writes" not in codes
    assert verdict != "CRITICAL"
