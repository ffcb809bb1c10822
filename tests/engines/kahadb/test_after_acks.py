"""Index entries acknowledged after the checkpoint (amqtool/engines/kahadb/after_acks.py), on a store a real
5.17.2 broker left when SIGKILLed (tests/data/kahadb/f7-kill-gc: 39 records after lastUpdate 8:22057)."""
from __future__ import annotations

import shutil
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect
from tests.engines.kahadb.judged import flip, verdict

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f7-kill-gc" / "kahadb"


def test_pristine_killed_store_is_a_warning(tmp_path):
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index"})


def test_damaged_record_of_a_message_acked_after_the_checkpoint_is_latent(tmp_path):
    # campaign seed 50056000035 (--kahadb-stores, f7-kill-gc): db-4.log@7555 ^0x02 damages message
    # ...-3:1:-1:1:82, which the index still holds at lastUpdate but an ack in db-9 (after it) removes; the
    # broker replays that ack before it dispatches anything and never reads the record: a WARNING, not CRITICAL
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db-4.log", 7555, 0x02)
    said, codes = verdict(root)
    assert said == "WARNING"
    assert "kahadb-checksum-mismatch" in codes


def test_damaged_record_of_a_message_still_live_stays_critical(tmp_path):
    # the same kind of flip in the body of a message nothing acknowledges (db-8.log@20044: a live fx.f7.k
    # message before the checkpoint): the broker reads it at dispatch
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    from amqtool.engines.kahadb.after_acks import acked_after
    from amqtool.engines.kahadb.indexed import read_indexed
    from amqtool.engines.kahadb.load import load_store

    dests, _ = read_indexed(root)
    d = load_store(detect(root), reconcile=False)[0]
    acked = acked_after(d, (8, 22057))
    assert sum(len(v) for v in acked.values()) > 0
    live = [m for key, dest in dests.items() for m in dest.messages
            if m.message_id not in acked.get(key, {}) and (m.file_id, m.offset) < (8, 22057) and m.size > 400]
    m = live[0]
    flip(root, f"db-{m.file_id}.log", m.offset + m.size - 100, 0x20)
    assert verdict(root)[0] == "CRITICAL"


def test_a_file_missing_after_the_checkpoint_is_critical(tmp_path):
    # campaign seed 50054000040 (f5-kill, db-5.log deleted after the checkpoint in db-4): the broker's GC never
    # removes a file at or after lastUpdate's, so the records it would replay are lost. Here lastUpdate is in
    # db-8 and db-9 is the newest; moving db-9 to db-10 leaves db-9 missing between the two
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    (root / "db-9.log").rename(root / "db-10.log")
    said, codes = verdict(root)
    assert said == "CRITICAL"
    assert "kahadb-replay-gap" in codes
    # and an emptied one
    (root / "db-9.log").write_bytes(b"")
    assert "kahadb-replay-gap" in verdict(root)[1]


def test_a_checkpoint_naming_no_file_is_a_missing_file_not_two_billion_gaps(tmp_path):
    # campaign seed 7201 (f-stores): a flipped top bit of page 0's lastUpdate file id (8 -> -2147483640) made
    # replay_gaps list every id from there to the newest file (a MemoryError). The broker cannot start its
    # replay at a file the journal does not hold (Journal.getDataFile): CRITICAL, for that file alone
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db.data", 4096 + 21 + 4 + 8 + 1, 0x80)  # page 0: state, destinations page, lastUpdate's flag
    said, codes = verdict(root)
    assert said == "CRITICAL"
    assert "kahadb-missing-journal-file" in codes and "kahadb-replay-gap" not in codes



def test_damaged_send_after_the_checkpoint_that_a_later_ack_takes_back_is_latent(tmp_path):
    # campaign seed 50054000007 (f5-kill, db-5.log@34854): a batch after the checkpoint holding only the send
    # of a queue message an intact later ack removes. The broker skips the batch in its replay and the ack
    # finds nothing: it delivers what it would have. Here: db-8.log's batch at 24391 (message ...:3:-1:1:60
    # of fx.f7.k, acked in db-9), a byte of its body flipped
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db-8.log", 24391 + 28 + 400, 0x11)
    said, codes = verdict(root)
    assert said == "WARNING"
    assert "kahadb-checksum-mismatch" in codes
    # db-8.log's batch at 22946 sends a message nobody acknowledges (...:3:-1:1:59): the same flip in its body
    # is a loss (db-8.log is not the newest: the broker replays the record as it reads, the damaged message)
    root2 = tmp_path / "kahadb2"
    shutil.copytree(STORE, root2)
    flip(root2, "db-8.log", 22946 + 28 + 1000, 0x11)
    assert verdict(root2)[0] == "CRITICAL"


KILLED = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f5-kill" / "kahadb"


def _topic_sends_after_checkpoint(root: Path):
    """(file id, batch offset, acked by the durable sub after the checkpoint) of the topic's one-send batches
    after f5-kill's lastUpdate 4:47392."""
    from amqtool.engines.kahadb.after_acks import acked_after
    from amqtool.engines.kahadb.load import load_store
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.commands import decode_command

    d = load_store(detect(root), reconcile=False)[0]
    acked = acked_after(d, (4, 47392))
    out = []
    for fid in range(5, 10):
        buf = (root / f"db-{fid}.log").read_bytes()
        for ev in jr.scan_file(buf):
            if isinstance(ev, jr.Batch):
                cmds = [decode_command(bytes(r.payload)) for r in jr.iter_batch_records(buf, ev)]
                if len(cmds) == 1 and cmds[0].type.name == "ADD_MESSAGE" and cmds[0].destination.type == 1:
                    out.append((fid, ev.offset, "f5-d:sd" in acked.get("1:fx.f5.t", {}).get(cmds[0].message_id, ())))
    return out


def test_damaged_topic_send_after_the_checkpoint_acked_by_every_subscription_is_latent(tmp_path):
    # campaign seed 50054000053 (f5-kill: SIGKILLed real 5.17.2 store, durable sub f5-d:sd on fx.f5.t):
    # db-7.log@61247 ^0x04 flips the stored checksum of the batch sending topic message ...:1:-1:1:67, which
    # the only durable subscription acknowledges after it; a pending one's damaged message stays CRITICAL
    # (its body: a damaged checksum field alone is harmless in a file that is not the newest, whose records
    # the broker's replay reads header by header, test_an_older_files_batch_damaged_in_its_control_record...)
    root = tmp_path / "kahadb"
    shutil.copytree(KILLED, root)
    sends = _topic_sends_after_checkpoint(root)
    assert (7, 61224, True) in sends
    flip(root, "db-7.log", 61247, 0x04)
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-checksum-mismatch" in codes
    fid, off, _ = next(s for s in sends if not s[2])
    root2 = tmp_path / "kahadb2"
    shutil.copytree(KILLED, root2)
    size = int.from_bytes((root2 / f"db-{fid}.log").read_bytes()[off + 28:off + 32], "big")
    flip(root2, f"db-{fid}.log", off + 28 + size - 40, 0x04)  # a byte of its message body
    assert verdict(root2)[0] == "CRITICAL"


def test_an_older_files_batch_damaged_in_its_control_record_is_replayed_as_written(tmp_path):
    # campaign seed 7201 (f5-kill, 72016000118): db-4.log@61928 ^0x40, the top byte of the stored checksum
    # of db-4's last batch (61908, after lastUpdate 4:47110; db-9.log is the newest). With 5.17's defaults
    # only the newest file is recoveryChecked; MessageDatabase.recover's walk (Journal.getNextLocation) steps
    # over the control record by its own header and loads the records after it, which still match their
    # Adler-32: the broker replays them as written. The batch runs up to the end marker and the marker
    # preallocation leaves in the file's last five bytes
    for where, mask in ((61908 + 20, 0x40), (61908 + 8, 0x10)):  # the checksum field, the magic
        root = tmp_path / f"kahadb-{where}"
        shutil.copytree(KILLED, root)
        assert (root / "db-4.log").read_bytes()[-5:] == b"-qMa4"
        flip(root, "db-4.log", where, mask)
        said, codes = verdict(root)
        assert said == "WARNING", (where, codes)
        assert codes & {"kahadb-checksum-mismatch", "kahadb-corrupt-range"}
    # the same flip of the stored checksum in the newest file: recoveryCheck marks the batch corrupted and
    # the replay skips it whole (db-9's second batch: a send without receipt nothing acknowledges; its first
    # is the open transaction's, which the broker rolls back anyway)
    root = tmp_path / "newest"
    shutil.copytree(KILLED, root)
    flip(root, "db-9.log", 573 + 20, 0x40)
    assert verdict(root)[0] == "CRITICAL"


MKILL = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f8-mkahadb-kill" / "mkahadb"


def test_a_damaged_send_acked_later_in_a_store_without_checkpoint_is_latent(tmp_path):
    # campaign seed 7201 (f8-mkahadb-kill, 72020000097: a body byte of a send in db-4.log of the fx.f8.grp.>
    # store): no child index has a lastUpdate, so the broker replays the whole journal (getRecoveryPosition:
    # getNextLocation(null)) and the REMOVE after the damaged send takes it back, as after a checkpoint
    from amqtool.engines.kahadb.after_acks import acked_after
    from amqtool.engines.kahadb.load import load_store
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.commands import decode_command

    root = tmp_path / "mkahadb"
    shutil.copytree(MKILL, root)
    child = root / "queue#3a#2f#2ffx.f8.grp.#3e"
    d = next(x for x in load_store(detect(root), reconcile=False) if x.directory == child)
    acked = acked_after(d, (0, -1))
    found = None
    for fid in (1, 2, 3):  # db-5.log is the newest
        buf = (child / f"db-{fid}.log").read_bytes()
        for ev in jr.scan_file(buf):
            if isinstance(ev, jr.Batch):
                cmds = [decode_command(bytes(r.payload)) for r in jr.iter_batch_records(buf, ev)]
                if len(cmds) == 1 and cmds[0].type.name == "ADD_MESSAGE" and cmds[0].transaction is None:
                    found = found or ((fid, ev.offset, ev.size) if cmds[0].message_id in acked.get(
                        cmds[0].destination.key, {}) else None)
    assert found is not None
    fid, off, size = found
    flip(child, f"db-{fid}.log", off + 28 + size - 30, 0x85)
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-checksum-mismatch" in codes


def test_a_file_missing_from_a_store_without_checkpoint_is_critical(tmp_path):
    # campaign seed 7201 (f8-mkahadb-kill, 72020000077: the fx.f8.grp.> store's db-1.log deleted, 72020000120:
    # its db-2.log emptied) were WARNINGs: with no lastUpdate the broker replays the whole journal, and the
    # journal GC, which runs only in a checkpoint, never ran: every file from db-1.log on held records
    for name, how in (("db-1.log", "delete"), ("db-2.log", "empty")):
        root = tmp_path / f"mkahadb-{name}"
        shutil.copytree(MKILL, root)
        p = root / "queue#3a#2f#2ffx.f8.grp.#3e" / name
        p.unlink() if how == "delete" else p.write_bytes(b"")
        said, codes = verdict(root)
        assert said == "CRITICAL" and "kahadb-replay-gap" in codes, (name, codes)


def test_the_newest_file_of_a_store_without_checkpoint_torn_or_cut(tmp_path):
    # f8-mkahadb-kill, the fx.f8.grp.> store (no lastUpdate: every record is replayed): its newest file
    # db-5.log cut inside its last batch (3840) lacks the end marker preallocation wrote into its last five
    # bytes, as its siblings have it: CRITICAL kahadb-truncated-file (seed 7202, 72030000075: a WARNING). The
    # same batch damaged in place is what a crash mid-write leaves: a torn tail, a WARNING
    grp = "queue#3a#2f#2ffx.f8.grp.#3e"
    root = tmp_path / "cut"
    shutil.copytree(MKILL, root)
    p = root / grp / "db-5.log"
    p.write_bytes(p.read_bytes()[:3840 + 500])
    said, codes = verdict(root)
    assert said == "CRITICAL" and "kahadb-truncated-file" in codes
    root = tmp_path / "torn"
    shutil.copytree(MKILL, root)
    flip(root / grp, "db-5.log", 3840 + 28 + 700, 0x10)
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index", "kahadb-truncated-tail"})


def test_a_checkpoint_naming_the_middle_of_a_record_stops_the_broker(tmp_path):
    # campaign seeds 7201 (f1-small-files, db.data@4137 ^0x08; f9-kill-16k, db.data@4133 ^0x04): a flipped
    # bit of page 0's lastUpdate. MessageDatabase.recover starts at getNextInitializedLocation(lastUpdate):
    # Journal.getNextLocation reads a record header where lastUpdate points, here 8 bytes into a record: a
    # size of 0 it never steps past. The broker does not start; verify said WARNING
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db.data", 4096 + 21 + 20, 0x08)  # lastUpdate's offset: 8:22057 -> 8:22049
    said, codes = verdict(root)
    assert said == "CRITICAL" and "kahadb-recovery-stops" in codes


def test_a_checkpoint_naming_the_middle_of_a_record_skips_what_follows(tmp_path):
    # campaign seed 8323 (f7-kill-gc of /work/kahadb-fresh, db.data@4137 ^0x20: loss judged WARNING): a flipped
    # bit of page 0's lastUpdate offset, 8:22057 -> 8:22025 here, 32 bytes before the record there. The walk
    # (Journal.getNextLocation) reads a header inside the record before it, steps by the sizes it reads there
    # and lands further on: the records it steps over are never replayed, and the sends among them are lost
    # (the harness's truth: loss). Not a stop: CRITICAL kahadb-replay-skips, naming what ends up otherwise
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db.data", 4096 + 21 + 20, 0x20)
    said, codes = verdict(root)
    assert said == "CRITICAL" and codes == {"kahadb-replay-skips", "kahadb-journal-ahead-of-index"}
    (f,) = [f for f in verify_store(detect(root))[0] if f.code == "kahadb-replay-skips"]
    assert f.details["skipped"] > 0 and f.details["messages"] > 0


def test_a_checkpoint_on_its_own_record_skips_nothing(tmp_path):
    # the pristine killed store: the walk from lastUpdate replays every record of its batches after it
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.replay_skips import skipped_effect
    from amqtool.engines.kahadb.replay_walk import replay

    (d,) = load_store(detect(STORE), reconcile=False)
    lu = (d.index.view.metadata.last_update.log_id, d.index.view.metadata.last_update.offset)
    walked, stops = replay([f.id for f in d.files], lambda fid: d.file(fid).path.read_bytes(), lu)
    assert d.records_after_last_update > 0 and walked and not stops
    assert skipped_effect(d, lu, walked) == (0, [])


def test_what_the_walk_replays_of_a_damaged_batch_is_not_a_skip(tmp_path):
    # f5-kill (lastUpdate 4:47110): a flipped bit in the length of a record of db-5.log, an older file after the
    # checkpoint. The walk replays that batch record by record and steps from the damaged length over the
    # records after it; what it replays of the damaged batch is not what the batches that check out hold, and
    # that is the checksum finding's to judge. Put back, the records it stepped over change nothing (the
    # harness's truth: same): no kahadb-replay-skips (campaign seed 8323, f9-kill-16k 83239000205, the same)
    root = tmp_path / "kahadb"
    shutil.copytree(KILLED, root)
    flip(root, "db-5.log", 54110 + 3, 0x01)
    said, codes = verdict(root)
    assert "kahadb-replay-skips" not in codes and "kahadb-checksum-mismatch" in codes


def test_journal_files_swapped_after_the_checkpoint_bring_acked_messages_back(tmp_path):
    # campaign seeds 7201 and 7202 (f5-kill db-7 <-> db-9, f9-kill-16k, f8-mkahadb-kill: 4 loss/WARNING):
    # swapped files after the checkpoint replay acks before the sends they acknowledge; the broker's replay
    # finds nothing to remove, then adds the message: it comes back. f5-kill here (lastUpdate 4:47110):
    # db-6.log <-> db-8.log, both replayed
    root = tmp_path / "kahadb"
    shutil.copytree(KILLED, root)
    assert verdict(root)[1] == {"kahadb-journal-ahead-of-index", "kahadb-open-transaction"}
    a, b = root / "db-6.log", root / "db-8.log"
    tmp = root / "swap"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    said, codes = verdict(root)
    assert said == "CRITICAL" and "kahadb-ack-before-send" in codes


def test_an_older_files_damaged_send_is_judged_as_the_replay_reads_it(tmp_path):
    # seed 7202 (f5-kill, db-8.log@32790 ^0x04: the framing varint of a send acked later): in a file that is
    # not the newest, the broker's replay loads each record as it now reads (no checksum, the framed command
    # of the length the varint gives). Here db-5.log@52298 still loads as the send of a topic message the
    # durable subscription acknowledges after the checkpoint: the ack takes it back, a WARNING. The same
    # varint one bit off the other way does not load, and the broker does not start: CRITICAL
    root = tmp_path / "kahadb"
    shutil.copytree(KILLED, root)
    assert (5, 52298, True) in _topic_sends_after_checkpoint(root)
    flip(root, "db-5.log", 52298 + 28 + 6, 0x04)
    assert verdict(root)[0] == "WARNING"
    root2 = tmp_path / "kahadb2"
    shutil.copytree(KILLED, root2)
    flip(root2, "db-5.log", 52298 + 28 + 6, 0x01)
    assert verdict(root2)[0] == "CRITICAL"


def test_an_older_files_ack_damaged_in_what_the_replay_does_not_read_is_latent(tmp_path):
    # seed 7201 (f9-kill-16k, db-12.log@14975 ^0xc4, 72018000041): a byte of a REMOVE's marshalled
    # MessageAck, in a file that is not the newest, after the checkpoint. The replay loads the record as it
    # reads and updateIndex compares the ack only by reference with UNMATCHED: the same message leaves the
    # index. The batch as written is found from its Adler-32 (one changed byte) and reads to the same effect.
    # Here f5-kill's REMOVE of ...:2:-1:1:7 in db-8.log at 36083, the ack its last 220 bytes
    root = tmp_path / "kahadb"
    shutil.copytree(KILLED, root)
    flip(root, "db-8.log", 36083 + 5 + 180, 0x20)
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-checksum-mismatch" in codes
    # its message id damaged instead: another id leaves the index (or none does): CRITICAL
    root2 = tmp_path / "kahadb2"
    shutil.copytree(KILLED, root2)
    data = (root2 / "db-8.log").read_bytes()
    at = data.index(b"ID:vm-41323-1795706006529-3:2:-1:1:7", 36083)
    flip(root2, "db-8.log", at + 5, 0x01)
    assert verdict(root2)[0] == "CRITICAL"


def test_an_older_files_send_under_a_damaged_id_is_latent_unless_acked_later(tmp_path):
    # seeds 7201-7203 (f8-mkahadb-kill, f9-kill-16k: a flipped byte of an ADD's messageId, in a file that is
    # not the newest, after the checkpoint): the replay indexes the message under the damaged id and delivers
    # the same OpenWire message, which carries its own id: latent. f7-kill-gc's db-8.log: ...:3:-1:1:59
    # (22946) nobody acknowledges; ...:3:-1:1:60 (24391) is acked in db-9, whose ack then finds nothing and
    # the message comes back (tests/faults/test_kahadb_after.py: loss)
    for batch, mid, want in ((22946, b"ID:vm-37799-1795706049181-3:3:-1:1:59", "WARNING"),
                             (24391, b"ID:vm-37799-1795706049181-3:3:-1:1:60", "CRITICAL")):
        root = tmp_path / f"kahadb-{batch}"
        shutil.copytree(STORE, root)
        at = (root / "db-8.log").read_bytes().index(mid, batch)
        assert at < batch + 28 + 40  # the command's own messageId field, not the OpenWire message's
        flip(root, "db-8.log", at + 3, 0x20)
        assert verdict(root)[0] == want, batch


def test_a_live_message_whose_framed_command_is_shorter_than_its_record_still_reads(tmp_path):
    # seeds 7201, 7202 (f5-kill, f7-kill-gc, f8-mkahadb-kill: an ADD's framing varint 4 lower): at dispatch
    # MessageDatabase.load reads the record and mergeFramed parses the framed length and ignores what follows
    # (replay_walk.load); what the 4 bytes held were fields at their defaults, so the same message is read.
    # amqtool's read wanted the command to fill its record exactly: "does not match its record", CRITICAL,
    # and the fault harness, reading the same way, called it a loss. f7-kill-gc's live ...:1:-1:1:4 at 1:4959
    from tests.faults import kahadb as k

    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    k._Files.reset()
    rb = k.rebuilt(root)
    pristine = k.delivered(root, rb)
    flip(root, "db-1.log", 4959 + 6, 0x04)
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-checksum-mismatch" in codes
    k._Files.reset()
    k._READ.clear()
    assert k.classify(pristine, rb, root) in (k.SAME, k.LATENT)


def test_a_damaged_send_beside_the_start_s_trace_record_acked_later_is_latent(tmp_path):
    # seed 7202 (f8-mkahadb-kill, 72030000119): fx.f8.own's first batch holds the "LOADED" KahaTraceCommand
    # the broker writes at start (MessageDatabase.load) and the send of ...:1:-1:1:3, acked later; a byte of
    # its body flipped. process(KahaTraceCommand) only moves lastUpdate: the batch is still only a send the
    # replay takes back, a WARNING
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.commands import decode_command

    root = tmp_path / "mkahadb"
    shutil.copytree(MKILL, root)
    own = root / "queue#3a#2f#2ffx.f8.own"
    buf = (own / "db-1.log").read_bytes()
    batch = next(ev for ev in jr.scan_file(buf) if isinstance(ev, jr.Batch))
    recs = list(jr.iter_batch_records(buf, batch))
    assert [decode_command(bytes(r.payload)).type.name for r in recs] == ["TRACE", "ADD_MESSAGE"]
    flip(own, "db-1.log", recs[1].offset + recs[1].length - 100, 0xBE)
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-checksum-mismatch" in codes


def test_a_send_whose_type_byte_reads_as_a_trace_is_lost(tmp_path):
    # seed 7203 (f5-kill 72036000037, f8-mkahadb-kill 72040000057: an ADD's entry type 1 -> 0, in a file that
    # is not the newest): the replay loads it as a KahaTraceCommand and the send is lost. It carries the ADD's
    # fields, which a trace has not: no inert trace record. f7-kill-gc's ...:3:-1:1:59 (db-8.log@22946),
    # acknowledged by nobody: CRITICAL
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    flip(root, "db-8.log", 22946 + 28 + 5, 0x01)
    assert verdict(root)[0] == "CRITICAL"


def test_a_send_whose_type_byte_reads_as_an_ack_map_is_dropped_by_the_replay(tmp_path):
    # seeds 7202, 7205 (f5-kill, f7-kill-gc: an ADD's entry type 1 -> 9, in a file that is not the newest):
    # the replay loads a KahaAckMessageFileMapCommand, whose process() only moves lastUpdate: the send is
    # dropped. The batch as written (its Adler-32: one changed byte) shows what it was: a send acked later
    # (f7-kill-gc's ...:3:-1:1:60, db-8.log@24391) changes nothing, a WARNING; one nobody acks (...:59,
    # 22946) is lost: CRITICAL
    from tests.faults import kahadb as k

    for batch, want in ((24391, "WARNING"), (22946, "CRITICAL")):
        root = tmp_path / f"kahadb-{batch}"
        shutil.copytree(STORE, root)
        k._Files.reset()
        rb = k.rebuilt(root)
        pristine = k.delivered(root, rb)
        flip(root, "db-8.log", batch + 28 + 5, 0x08)
        assert verdict(root)[0] == want, batch
        k._Files.reset()
        assert k.expected(k.classify(pristine, rb, root), want)


GC = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f4-gc" / "kahadb"


def _gc_with_db5_and_db15_swapped(tmp_path: Path) -> Path:
    """A copy of f4-gc whose db-5.log and db-15.log swapped names (campaign seed 9404, 94047000013)."""
    root = tmp_path / "kahadb"
    shutil.copytree(GC, root)
    a, b, tmp = root / "db-5.log", root / "db-15.log", root / "swap"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    return root


def test_old_sends_swapped_past_the_checkpoint_come_back_after_their_acks(tmp_path):
    # campaign seed 9404 (f4-gc, 94047000013: loss judged WARNING): db-5.log <-> db-15.log in a store stopped
    # cleanly (lastUpdate 14:12754, db-15.log the ack compaction's after it). The new db-15.log holds db-5's old
    # sends, now after the checkpoint; their acks (db-9.log ...) lie before it and took the messages out of the
    # index. The broker's replay from the checkpoint adds each send again: updateIndex(KahaAddMessageCommand)
    # rejects only an id the messageIdIndex still holds, and the producer audit only records the id. Eleven
    # acknowledged messages of fx.f4.q come back
    from tests.faults.kahadb import LOSS, KahaCampaign

    root = _gc_with_db5_and_db15_swapped(tmp_path)
    said, codes = verdict(root)
    assert said == "CRITICAL" and "kahadb-ack-before-send" in codes
    findings, _ = verify_store(detect(root))
    (early,) = [f for f in findings if f.code == "kahadb-ack-before-send"]
    assert (early.details["count"], Path(early.path).name, early.offset) == (11, "db-9.log", 20932)
    # the harness's truth (the broker-equal replay) agrees: a loss
    from tests.faults.kahadb import classify

    c = KahaCampaign("f4-gc", GC, tmp_path / "scratch")
    assert classify(c.pristine_delivered, c.pristine_rebuilt, root) == LOSS


def test_a_send_after_the_checkpoint_whose_id_the_index_holds_is_no_ack_before_send(tmp_path):
    # the same order with the message still in the index (an ack before the checkpoint of one subscription of
    # a topic, the others pending, or a resent duplicate): updateIndex rejects the replayed ADD as a duplicate
    # of the id the messageIdIndex holds, and nothing comes back. Here the pristine f4-gc's order index is
    # made to hold one of those ids by asking with an index that holds it
    from amqtool.engines.kahadb.indexed import IndexedMessage
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.out_of_order import acks_before_sends

    root = _gc_with_db5_and_db15_swapped(tmp_path)
    d = load_store(detect(root))[0]
    lu = d.index.view.metadata.last_update
    early = acks_before_sends(d, (lu.log_id, lu.offset))
    assert len(early) == 11
    _f, _o, key, mid = early[0]
    d.indexed[key].messages.append(IndexedMessage(10_000, mid, 15, 28, 100))
    assert [x[3] for x in acks_before_sends(d, (lu.log_id, lu.offset))] == [x[3] for x in early[1:]]


def _zero(root: Path, name: str, offset: int, length: int) -> None:
    p = root / name
    data = bytearray(p.read_bytes())
    data[offset:offset + length] = bytes(length)
    p.write_bytes(bytes(data))


def _zero_header(root: Path):
    findings, _ = verify_store(detect(root))
    return [f for f in findings
            if f.code == "kahadb-corrupt-range" and (f.details or {}).get("reason") == "zero-header"]


def test_zeros_over_an_older_files_last_batch_head_after_the_checkpoint_are_what_the_replay_skips(tmp_path):
    # sweep of zeros over the head of each file's last batch (f5-kill, a 5.17 broker's store killed; lastUpdate
    # 4:47110, db-9.log the newest): 25 zeros over a control record leave no batch header after them, so the
    # scan ended the file there and verify said nothing of it. The broker's replay (Journal.getNextLocation)
    # reads the zero header as the end of the file and goes on with the next: the batch's records are skipped.
    # db-6's last batch holds a send nothing acknowledges: lost (the truth, tests/faults/kahadb.py: loss; verify
    # said WARNING). db-4's holds a topic send every durable subscription acknowledges later: same (WARNING).
    root = tmp_path / "lost"
    shutil.copytree(KILLED, root)
    _zero(root, "db-6.log", 64855, 25)
    hit = _zero_header(root)
    assert [(f.offset, f.severity.value) for f in hit] == [(64855, "critical")]
    assert verdict(root)[0] == "CRITICAL"
    root = tmp_path / "acked"
    shutil.copytree(KILLED, root)
    _zero(root, "db-4.log", 61908, 25)
    hit = _zero_header(root)
    assert [(f.offset, f.severity.value, f.details["latent"]) for f in hit] == [(61908, "warning", True)]
    assert verdict(root)[0] == "WARNING"


def test_zeros_over_an_older_files_last_batch_head_before_the_checkpoint_are_latent(tmp_path):
    # the same zeros before the checkpoint (f7-kill-gc, lastUpdate 8:22057): the index still reads every live
    # message at its Location; only a rebuild stops at the zeros. verify took the journal for intact and the
    # index for wrong: CRITICAL kahadb-index-journal-mismatch (the truth: latent)
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    _zero(root, "db-5.log", 32298, 25)
    hit = _zero_header(root)
    assert [(f.offset, f.severity.value, f.details["latent"]) for f in hit] == [(32298, "warning", True)]
    said, codes = verdict(root)
    assert said == "WARNING" and "kahadb-rebuild-would-differ" in codes, codes


SUBS = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f12-subs-kill" / "kahadb"


def test_zeros_over_the_checkpoints_record_and_past_it_lose_what_the_replay_no_longer_reaches(tmp_path):
    # a sweep of zeros over the index checkpoint's record (f12-subs-kill, a 5.17 broker's store killed;
    # lastUpdate 6:3934, the ack-file map): 680 zeros from 4149 take the end of that record and the control
    # record of the batch after it. The region starts before lastUpdate, so verify judged it as damage only a
    # rebuild reads (latent, WARNING). But MessageDatabase.recover walks from lastUpdate (and, the ack map no
    # longer loading, the whole journal from its start: Journal.getNextLocation): an all-zero header takes the
    # walk to the next file, and the intact records written after the checkpoint in db-6 are never replayed
    # (the truth, tests/faults/kahadb.py: loss). CRITICAL, naming them.
    root = tmp_path / "kahadb"
    shutil.copytree(SUBS, root)
    _zero(root, "db-6.log", 4149, 680)
    findings, _ = verify_store(detect(root))
    hit = [f for f in findings if f.details and f.details.get("unreached")]
    assert hit and all(f.severity.value == "critical" and f.path.endswith("db-6.log") for f in hit)
    assert all(off > 3934 for f in hit for off in f.details["unreached"])
    assert overall_verdict(findings).name == "CRITICAL"


def test_a_skipped_topic_send_every_subscription_acknowledges_hands_nothing_out():
    # kl48 hold-out m2-vtopic-groups-kill, seed 7658 (76581000658, same judged CRITICAL): page 0's lastUpdate
    # moved 512 bytes back into a record; the walk steps over records after it, among them sends to the virtual
    # topic VirtualTopic.fx.m2 and the acknowledgements of its one durable subscription. Put back, such a send
    # and its ack leave the message acknowledged by every subscription: removeAckLocation takes it out of the
    # topic, nobody is handed it, as when both are skipped. replay_skips compared the raw replay states
    from amqtool.engines.kahadb.replay_skips import _handed, _replay
    from amqtool.formats.kahadb.commands import AddMessageCommand, Destination, EntryType, RemoveMessageCommand

    t, q = Destination(1, "VirtualTopic.fx.m2"), Destination(0, "fx.q")
    send = AddMessageCommand(EntryType.ADD_MESSAGE, destination=t, message_id="m1", message=b"x")
    ack = RemoveMessageCommand(EntryType.REMOVE_MESSAGE, destination=t, message_id="m1", subscription_key="c:vd")
    subs = {t.key: {"c:vd"}}
    assert _handed(_replay(set(), [send, ack]), subs) == _handed(_replay(set(), []), subs) == set()
    # pending for a subscription that did not acknowledge it: handed out, so the skip changes that
    assert _handed(_replay(set(), [send, ack]), {t.key: {"c:vd", "c:other"}}) == {(t.key, "m1", "c:other")}
    # a queue's send is live until a queue ack
    qsend = AddMessageCommand(EntryType.ADD_MESSAGE, destination=q, message_id="m2", message=b"x")
    assert _handed(_replay(set(), [qsend]), {}) == {(q.key, "m2", None)}
