"""Journal files swapped: a rebuild of the index would bring back messages the index knows acknowledged, each
with an acknowledgement before its send in the journal's file order (amqtool/engines/kahadb/verify.py
``_index_against_journal``), on a store a real 5.17.2 broker left (tests/data/kahadb/r1-tiny-nosync-gckill:
db-29.log and db-58.log hold no message the index has live; swapped, the acks of four fx.r1.a messages in
db-58.log come before their sends).

No broker writes an ack before its send, so the journal is the damaged side; the broker with this index delivers
what it did (the harness truth: latent). It was CRITICAL kahadb-index-journal-mismatch, "the journal is intact
but the index differs from it" (campaign seed 52123 on the kl52 hold-out, 521230000122)."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "r1-tiny-nosync-gckill" / "kahadb"


def test_swapped_files_whose_acks_precede_their_sends_are_latent(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    a, b = root / "db-29.log", root / "db-58.log"
    tmp = root / "swap"
    a.rename(tmp), b.rename(a), tmp.rename(b)
    findings, _ = verify_store(detect(root))
    codes = {f.code: f for f in findings if f.severity.value != "info"}
    assert overall_verdict(findings).name == "WARNING", sorted(codes)
    f = codes["kahadb-rebuild-would-differ"]
    assert f.details["bringBack"] == 4 and "swapped or renamed" in f.message


def test_the_untouched_store_is_ok():
    findings, _ = verify_store(detect(STORE))
    assert overall_verdict(findings).name == "OK"
