"""A damaged send that an acknowledgement after the checkpoint takes back, beside a record it does not
(amqtool/engines/kahadb/superseded.py ``_taken_back``), on a store a real 5.17.2 broker left when SIGKILLed
(tests/data/kahadb/k7-batched-nosync-kill: enableJournalDiskSyncs=false, so the journal batched a topic send
and a queue send together; lastUpdate 1:5444; db-1.log's batch at 11133, after it in a file older than db-3.log,
holds a send of fx.k7.t at 11161, pending for the durable subscription, and one of fx.k7.q at 11956, which an
ack in db-3.log takes).

5.17 replays an older file's records as they read (only the newest is recoveryChecked): the queue send's
damaged bytes are indexed (``updateIndex(KahaAddMessageCommand)`` keeps its id and Location, it does not read
the message), then its ack finds it by its id and removes it: the broker never reads them. The batch was
CRITICAL because the topic send beside it is not taken back (campaign seed 7646 on the hold-out store k1,
76460000098: truth latent)."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k7-batched-nosync-kill" / "kahadb"


def _verdict(tmp_path: Path, offset: int | None = None) -> tuple[str, set]:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    if offset is not None:
        p = root / "db-1.log"
        data = bytearray(p.read_bytes())
        data[offset] ^= 0x04
        p.write_bytes(bytes(data))
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, {f.code for f in findings if f.severity.value != "info"}


def test_pristine_store_is_a_warning(tmp_path):
    assert _verdict(tmp_path) == ("WARNING", {"kahadb-journal-ahead-of-index"})


def test_a_damaged_body_of_a_send_acked_later_is_latent(tmp_path):
    verdict, codes = _verdict(tmp_path, 11956 + 600)
    assert verdict == "WARNING", codes
    assert "kahadb-checksum-mismatch" in codes


def test_a_damaged_body_of_the_pending_topic_send_beside_it_stays_critical(tmp_path):
    assert _verdict(tmp_path, 11161 + 600)[0] == "CRITICAL"
