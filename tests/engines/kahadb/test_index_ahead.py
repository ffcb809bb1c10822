"""A damaged batch after the index checkpoint in the newest file whose sends the index already holds
(amqtool/engines/kahadb/index_ahead.py).

The shared fixture ``gc`` (a real 5.17.2 broker, clean stop: lastUpdate 8:39989, db-8.log the newest, every
send of it live in the index) with page 0's lastUpdate moved back to db-7.log's last record, 7:63596: the
index then holds the sends of db-8.log written after its checkpoint, as a broker whose index pages were flushed
between checkpoints (indexWriteBatchSize) and was then killed leaves it. The kl45 hold-out store
h2-many-dests-tx-kill (indexWriteBatchSize=50) is such a store: with db-8.log's first batch corrupted a real
broker with the default settings delivers every message of the index; with checkForCorruptJournalFiles=true
it refuses to start."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.kahadb_layout import from_activemq_xml
from amqtool.store.layout import detect
from tests.faults.kahadb import KahaCampaign
from tests.faults.model import Fault
from tests.engines.kahadb.judged import LAST_UPDATE_AT, checkpoint_moved
from tests.support import KAHADB

GC = KAHADB / "gc" / "kahadb"
BATCH = 2075  # db-8.log: the batch of the ADD at 8:2103 (ID:...-3:3:-1:1:61, live on fx.gc.q), up to 3680

pytestmark = pytest.mark.skipif(not GC.is_dir(), reason="shared KahaDB fixtures not present")


def _index_ahead(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "kahadb"
    checkpoint_moved(GC, root, (8, 39989), (7, 63596))
    return root


def _verdict(store) -> tuple[str, set]:
    findings, _ = verify_store(store)
    return overall_verdict(findings).name, {f.code for f in findings if f.severity.value != "info"}


def _outcome(root: Path, tmp_path: Path, fault: Fault):
    return KahaCampaign("gc-ahead", root, tmp_path / "scratch").run_fault(fault)


def test_the_moved_checkpoint_leaves_a_store_the_broker_replays(tmp_path):
    verdict, codes = _verdict(detect(_index_ahead(tmp_path)))
    assert (verdict, codes) == ("WARNING", {"kahadb-journal-ahead-of-index"})


def test_a_corrupted_batch_of_a_send_the_index_holds_is_latent(tmp_path):
    # its checksum field changed: the newest file's recoveryCheck marks the batch corrupted, the replay skips
    # it, and the index still holds the send at 8:2103: the broker delivers the same (it was CRITICAL)
    root = _index_ahead(tmp_path)
    fault = Fault("flip", "db-8.log", BATCH + 20, 0x10, "", "batch checksum")
    o = _outcome(root, tmp_path, fault)
    assert (o.truth, o.verdict) == ("latent", "WARNING")
    assert "kahadb-checksum-mismatch" in o.codes


def test_a_changed_byte_of_the_held_message_itself_stays_critical(tmp_path):
    # inside the message's bytes, which the broker reads at dispatch from the index's Location
    root = _index_ahead(tmp_path)
    fault = Fault("flip", "db-8.log", BATCH + 28 + 600, 0x10, "", "message body")
    o = _outcome(root, tmp_path, fault)
    assert (o.truth, o.verdict) == ("loss", "CRITICAL")


def test_with_check_for_corrupt_journal_files_the_broker_refuses_to_start(tmp_path):
    # recoverIndex: "Detected missing/corrupt journal files referenced by" the index entry at 8:2103
    root = _index_ahead(tmp_path)
    data = bytearray((root / "db-8.log").read_bytes())
    data[BATCH + 20] ^= 0x10
    (root / "db-8.log").write_bytes(bytes(data))
    conf = tmp_path / "inst" / "conf"
    conf.mkdir(parents=True)
    xml = (KAHADB / "tools" / "broker-basic.xml").read_text().replace("${fx.data}/kahadb", str(root)) \
        .replace("${fx.data}", str(root.parent))
    (conf / "activemq.xml").write_text(xml)
    store = from_activemq_xml(conf / "activemq.xml")
    assert store.settings["checkForCorruptJournalFiles"] == "true"
    assert _verdict(store)[0] == "CRITICAL"


def _index_ahead_of_db7(tmp_path: Path) -> Path:
    """lastUpdate moved back to db-6.log's last record, 6:63097: db-7.log, an older file, is after it."""
    root = _index_ahead(tmp_path)
    data = bytearray((root / "db.data").read_bytes())
    struct.pack_into(">ii", data, LAST_UPDATE_AT, 6, 63097)
    (root / "db.data").write_bytes(bytes(data))
    return root


def test_an_older_files_send_the_index_holds_stepped_over_is_latent(tmp_path):
    # db-7.log@62166 (ID:...-3:3:-1:1:58, live on fx.gc.keep): its record type byte changed, the walk of an older
    # file steps over a record that is no user record; the index holds the send at its Location: the same (it
    # was CRITICAL)
    root = _index_ahead_of_db7(tmp_path)
    o = _outcome(root, tmp_path, Fault("flip", "db-7.log", 62166 + 4, 0x40, "", "record 1 type"))
    assert (o.truth, o.verdict) == ("latent", "WARNING")
    assert "kahadb-checksum-mismatch" in o.codes


def test_an_older_files_held_send_with_changed_message_bytes_stays_critical(tmp_path):
    # the walk reads it as the same send (a redo) but the broker reads its bytes from there at dispatch
    root = _index_ahead_of_db7(tmp_path)
    o = _outcome(root, tmp_path, Fault("flip", "db-7.log", 62166 + 600, 0x10, "", "record 1 body"))
    assert (o.truth, o.verdict) == ("loss", "CRITICAL")


def test_an_older_files_control_record_length_that_skips_held_sends_is_latent(tmp_path):
    # db-7.log's batch at 62138 (the send ...:1:58 at 62166): one bit of its control record's own length set,
    # 28 -> 65564. Journal.getNextLocation steps over a record of type 2 by the size it reads: past the file's
    # end, on to db-8.log, so the replay skips ...:1:58 and ...:1:59, both held by the index at their Locations
    # (a redo each): the broker delivers the same. It was CRITICAL (kahadb-corrupt-range); kl48 hold-out
    # m2-vtopic-groups-kill (indexWriteBatchSize=30), seed 7658: 10 of 21 latent/CRITICAL misses were this
    root = _index_ahead_of_db7(tmp_path)
    o = _outcome(root, tmp_path, Fault("flip", "db-7.log", 62138 + 1, 0x01, "", "batch length"))
    assert (o.truth, o.verdict) == ("latent", "WARNING")



def test_an_older_files_control_record_length_that_skips_acks_stays_critical(tmp_path):
    # tests/data/kahadb/f7-kill-gc (lastUpdate 8:22057): the same flip at db-8.log's batch 22946 takes the walk
    # on to db-9.log past the acks of fx.f7.k written after it in db-8.log, which the index does not hold: the
    # acknowledged messages come back
    root = tmp_path / "src" / "kahadb"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f7-kill-gc" / "kahadb", root)
    o = _outcome(root, tmp_path, Fault("flip", "db-8.log", 22946 + 1, 0x01, "", "batch length"))
    assert (o.truth, o.verdict) == ("loss", "CRITICAL")


def test_an_older_files_held_send_read_as_a_topic_nobody_subscribes_is_latent(tmp_path):
    # db-7.log@62177: the KahaDestination type of the send ...:1:58 (fx.gc.keep, held by the index at 7:62166)
    # read TOPIC for QUEUE. The walk replays it to a topic fx.gc.keep without durable subscriptions, which
    # updateIndex(KahaAddMessageCommand) skips, and the index keeps the queue's entry: the same (it was
    # CRITICAL; kl48 hold-out m2-vtopic-groups-kill, seed 7658: 76581000571, a virtual topic's name damaged)
    root = _index_ahead_of_db7(tmp_path)
    o = _outcome(root, tmp_path, Fault("flip", "db-7.log", 62166 + 11, 0x01, "", "record 1 destination"))
    assert (o.truth, o.verdict) == ("latent", "WARNING")
    assert "kahadb-checksum-mismatch" in o.codes


def _index_ahead_of_db6_acks(tmp_path: Path) -> Path:
    """lastUpdate moved back to db-6.log's first record, 6:28: its 73 acks of fx.gc.q are after it, and the index
    (of a clean stop) took their messages out already, as pages written after a checkpoint leave it."""
    root = _index_ahead(tmp_path)
    data = bytearray((root / "db.data").read_bytes())
    struct.pack_into(">ii", data, LAST_UPDATE_AT, 6, 28)
    (root / "db.data").write_bytes(bytes(data))
    return root


def test_an_older_files_ack_of_a_message_the_index_no_longer_holds_changes_nothing(tmp_path):
    # db-6.log@2800: the ack of fx.gc.q's ...:1:-1:1:97, which the index no longer holds and no send after the
    # checkpoint puts back. Its record type byte damaged, the walk steps over it; its destination's name
    # damaged, it acks a message of a queue that has none: updateIndex(KahaRemoveMessageCommand) finds nothing
    # either way, and finds nothing as written. It was CRITICAL; kl48 hold-out m2-vtopic-groups-kill
    # (indexWriteBatchSize=30), seed 7658: 76581000095, 76581000407
    root = _index_ahead_of_db6_acks(tmp_path)
    data = (root / "db-6.log").read_bytes()
    assert data[2800 + 4] == 1 and data[2800 + 14:2800 + 21] == b"fx.gc.q"
    c = KahaCampaign("gc-ahead", root, tmp_path / "scratch")
    for fault in (Fault("flip", "db-6.log", 2800 + 4, 0x40, "", "record 1 type"),
                  Fault("flip", "db-6.log", 2800 + 18, 0x20, "", "record 1 destination")):
        o = c.run_fault(fault)
        assert o.truth in ("same", "latent") and o.verdict == "WARNING", (fault, o.truth, o.verdict, o.codes)


TX = KAHADB / "tx" / "kahadb"


def test_an_older_files_commit_of_held_sends_stepped_over_is_latent(tmp_path):
    # The shared fixture ``tx`` (clean stop, lastUpdate 8:64702) with lastUpdate moved back to 3:16147, before the
    # local transaction 3 (sends from db-3.log@16609, its COMMIT at db-4.log@21556): the index holds its sends, or
    # the acks after them took them out. The COMMIT's control record (batch 21528) reads 72 long, so the walk
    # steps over the COMMIT onto the next batch: the transaction stays in flight and recover() rolls it back at its
    # end, which undoes no index entry (truth: latent; hold-out q4-big-tx-kill, seed 510513000192: CRITICAL before)
    root = tmp_path / "src" / "kahadb"
    checkpoint_moved(TX, root, (8, 64702), (3, 16147))
    o = _outcome(root, tmp_path, Fault("flip", "db-4.log", 21528 + 3, 0x1c ^ 72, "", "control record length"))
    assert (o.truth, o.verdict) == ("latent", "WARNING"), o.codes
    assert "kahadb-corrupt-range" in o.codes


def test_an_older_files_commit_of_sends_the_index_lacks_stepped_over_stays_critical(tmp_path):
    # tests/data/kahadb/k5-rollback-kill: the committed transaction's COMMIT (batch 16142 of db-1.log, the file's
    # last) stepped over the same way; the index (no checkpoint in that run) holds neither of its sends: lost
    store = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "k5-rollback-kill" / "kahadb"
    o = _outcome(store, tmp_path, Fault("flip", "db-1.log", 16142 + 3, 0x1c ^ 72, "", "control record length"))
    assert (o.truth, o.verdict) == ("loss", "CRITICAL"), o.codes


def test_an_older_files_committed_send_acked_later_stepped_over_is_latent(tmp_path):
    # ``tx`` with lastUpdate moved back to 3:16147 as above: transaction 3's first send (db-3.log@16609, ...:1:39)
    # is one the index no longer holds, acked after the checkpoint. Its batch's control record reads 1845 long,
    # so the walk lands on the next batch (18426) and skips that send: its COMMIT adds nothing for it, and the ack
    # finds nothing, as it would have taken it (truth: same; hold-out q4-big-tx-kill, seeds 510513000030 and
    # 510513000042: CRITICAL before)
    root = tmp_path / "src" / "kahadb"
    checkpoint_moved(TX, root, (8, 64702), (3, 16147))
    c = KahaCampaign("tx-ahead", root, tmp_path / "scratch")
    log = c.root / "db-3.log"
    data = bytearray(log.read_bytes())
    assert data[16581:16585] == (28).to_bytes(4, "big")
    data[16581 + 2] = 1845 >> 8  # (the other byte of the new length is the fault below)
    log.write_bytes(bytes(data))
    o = c.run_fault(Fault("flip", "db-3.log", 16581 + 3, 0x1c ^ (1845 & 0xFF), "", "control record length"))
    assert o.truth in ("same", "latent") and o.verdict == "WARNING", (o.truth, o.verdict, o.codes)


def test_an_older_files_commit_of_held_sends_read_as_a_rollback_is_latent(tmp_path):
    # ``tx`` with lastUpdate moved back to 3:16147: transaction 3's COMMIT (db-4.log@21556) read as a ROLLBACK
    # (type byte 4 ^ 1): its sends are ones the index holds or later acks take back, so dropping them changes
    # nothing delivered (truth: latent)
    root = tmp_path / "src" / "kahadb"
    checkpoint_moved(TX, root, (8, 64702), (3, 16147))
    o = _outcome(root, tmp_path, Fault("flip", "db-4.log", 21556 + 5, 0x01, "", "record entry type"))
    assert (o.truth, o.verdict) == ("latent", "WARNING"), o.codes
