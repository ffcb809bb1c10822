"""The replay walk at start and an ack compaction marker (amqtool/engines/kahadb/replay_walk.py), in the truth
(tests/faults/kahadb_after.py) and in verify: ``MessageDatabase.process(KahaRewrittenDataFileCommand)``
(ActiveMQ 5.17.2) sets the location's offset to ``journalMaxFileLength`` while the marker's source file is
there ("Move offset so that next location read jumps to next file"), and ``Journal.getNextLocation`` reads on
from there plus the marker's size.

On tests/data/kahadb/f4-gc (a real broker's clean stop, lastUpdate 14:12754; db-15.log, 5637 bytes, is the ack
compaction of db-4.log, still there: the marker at 15:28 and 20 forwarded acks; the other files are 32768
bytes). A restarted broker appends to db-15.log, its newest file: the kl45 hold-out store h1-restarts holds
such files, and a real 5.17.2 broker restarted on it after its kill delivered 16 of 19 and 5 of 9 (+1)
confirmed messages, what the walk with the jump gives; h4-selectors-compaction-kill, whose compaction file
db-13.log a later run wrote past journalMaxFileLength (28024 bytes of 28000), hangs the broker at start:
its walk reads a header of size 0 at 13:28011 again and again."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.formats.kahadb import journal as jr
from amqtool.store.layout import detect
from tests.faults.kahadb import delivered

STORE = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f4-gc" / "kahadb"
LIVE = "ID:vm-44611-1795705981148-3:5:-1:1:69"  # live on fx.f4.q, its ADD at db-14.log@2431 (898 bytes)
NEW = "ID:vm-44611-1795705981148-3:7:-1:1:69"  # the same send under an id no record has
MARKER = 28  # db-15.log: the KahaRewrittenDataFileCommand's record
MARKER_SIZE = 11


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    return root


def _append_send(root: Path) -> None:
    """A later run's send written into db-15.log after the forwarded acks (the index does not hold it)."""
    payload = (root / "db-14.log").read_bytes()[2431 + jr.RECORD_HEAD_SPACE:2431 + 898]
    payload = payload.replace(LIVE.encode(), NEW.encode(), 1)
    p = root / "db-15.log"
    data = p.read_bytes()
    end = [ev for ev in jr.scan_file(data) if isinstance(ev, jr.Batch)][-1].end
    p.write_bytes(data[:end] + jr.encode_batch([payload]))


def _ids(state: dict) -> set:
    return {e.split(" ", 1)[0] for d in state.values() for v in d.get("dests", {}).values() for e in v}


def test_the_marker_size_is_as_written():
    data = (STORE / "db-15.log").read_bytes()
    assert int.from_bytes(data[MARKER:MARKER + 4], "big") == MARKER_SIZE


def test_a_send_after_the_forwarded_acks_is_not_replayed_at_start(tmp_path):
    # the walk from 14:12754 reaches the marker, jumps to 32768 + 11, past db-15.log's end: the send is never
    # replayed, and the index does not hold it: the broker does not deliver it (the truth said it did), and
    # verify names the loss (it said WARNING)
    root = _copy(tmp_path)
    _append_send(root)
    assert NEW not in _ids(delivered(root))
    findings, _ = verify_store(detect(root))
    assert overall_verdict(findings).name == "CRITICAL"
    (f,) = [f for f in findings if f.code == "kahadb-replay-skips"]
    assert f.details["messageIds"] == [NEW]


def test_a_compaction_file_written_past_the_max_length_stops_the_walk(tmp_path):
    # db-15.log run past 32768 bytes with a header of size 0 where the jump lands, db-16.log after it:
    # getNextLocation reads that header and does not move on (the broker hangs at start): the broker has nothing
    # to deliver, and verify says so (both judged the store by its index: nothing after the marker is replayed)
    root = _copy(tmp_path)
    p = root / "db-15.log"
    data = bytearray(p.read_bytes())
    land = 32768 + MARKER_SIZE
    data += bytes(land + 100 - len(data))
    data[land:land + 5] = b"\x00\x00\x00\x00\x28"
    p.write_bytes(bytes(data))
    # and a newer file after it (a newest file is recoveryChecked at start: its logical end would stop the walk)
    text = b"LOADED by a test"
    trace = bytes([0, len(text) + 2, 0x0A, len(text)]) + text
    batch = jr.encode_batch([trace])
    (root / "db-16.log").write_bytes(batch + bytes(32768 - len(batch)))
    assert "refused" in delivered(root)["kahadb"]
    findings, _ = verify_store(detect(root))
    assert "kahadb-recovery-stops" in {f.code for f in findings if f.severity.value == "critical"}


def test_a_campaign_over_a_store_already_critical_takes_its_unchanged_faults_as_critical(tmp_path):
    # the store above, its send after the forwarded acks never replayed: verify calls the pristine store
    # CRITICAL, rightly. A fault that changes nothing (a flip in db-14.log's preallocated zeros) leaves it so:
    # the campaign counts that CRITICAL as right (kl45's hold-out h1 and h4 are such stores as the real broker
    # left them), while the class and verdict stay what they are
    from tests.faults.kahadb import SAME, TORN, KahaCampaign, KahaOutcome
    from tests.faults.model import Fault

    root = _copy(tmp_path)
    _append_send(root)
    c = KahaCampaign("jumped", root, tmp_path / "scratch")
    o = c.run_fault(Fault("flip", "db-14.log", 32000, 0x01, label="filler"))
    assert (o.truth, o.verdict, o.already, o.ok) == (SAME, "CRITICAL", True, True)
    # and a crash's torn tail too (kl45's h1, seed 95830000023: its newest file emptied)
    assert KahaOutcome("jumped", 0, o.fault, TORN, "CRITICAL", already=True).ok
    assert not KahaOutcome("jumped", 0, o.fault, TORN, "CRITICAL").ok
