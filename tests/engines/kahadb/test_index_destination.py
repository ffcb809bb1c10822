"""A destination name damaged in db.data (amqtool/engines/kahadb/verify.py ``_renamed_destinations``), on a store
a real 5.17.2 broker left when SIGKILLed (tests/data/kahadb/k6-acked-after-kill: the index's checkpoint holds
fx.k6.q's three messages, all acknowledged after it, then two more sends).

The broker recovers each destination by its key in the index's destinations B-tree: one flipped bit there
('fx.k6.q' read as 'dx.k6.q') files the three entries under a queue no producer sent to, and the acks replayed
after the checkpoint, which name fx.k6.q, do not find them: three acknowledged messages are delivered again, to
consumers of dx.k6.q. Nothing else in the store disagrees (the records those entries point at are intact, and
the journal's replay acknowledges them), and verify said WARNING (campaign seed 7646, hold-out store k1:
76460000499, 7 messages)."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k6-acked-after-kill" / "kahadb"


def _findings(root: Path):
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, findings


def test_pristine_store_is_a_warning(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    verdict, findings = _findings(root)
    assert verdict == "WARNING"
    assert not [f for f in findings if f.code == "kahadb-index-destination-damaged"]


def test_a_damaged_destination_name_in_the_index_is_critical(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    data = bytearray((root / "db.data").read_bytes())
    at = data.find(b"0:fx.k6.q") + 2
    data[at] ^= 0x02  # 'f' -> 'd'
    (root / "db.data").write_bytes(bytes(data))
    verdict, findings = _findings(root)
    assert verdict == "CRITICAL"
    (hit,) = [f for f in findings if f.code == "kahadb-index-destination-damaged"]
    assert hit.details["destination"] == "0:dx.k6.q"
    assert hit.details["journalDestinations"] == ["0:fx.k6.q"]
    assert hit.details["messages"] == 3
