"""The truth's replay of the records after the index checkpoint (tests/faults/kahadb_after.py), on a store a
real 5.17.2 broker left behind when SIGKILLed (tests/data/kahadb/f7-kill-gc)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.faults import kahadb as k
from tests.support import flip_byte

STORE = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f7-kill-gc"


def _pristine(tmp_path: Path, name: str) -> tuple[Path, dict, dict]:
    """A copy of the committed store ``name`` (tests/data/kahadb), what the broker delivers from it and what a
    rebuild gives."""
    store = tmp_path / "kahadb"
    shutil.copytree(STORE.parent / name / "kahadb", store)
    k._Files.reset()
    pristine_rb = k.rebuilt(store)
    return store, k.delivered(store, pristine_rb), pristine_rb


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "kahadb"
    shutil.copytree(STORE / "kahadb", d)
    return d


def test_delivered_replays_what_follows_the_checkpoint(tmp_path):
    # MessageDatabase.recover replays the 39 records after lastUpdate: the broker delivers every confirmed
    # send, not the index's state of one checkpoint before the kill
    store = _copy(tmp_path)
    manifest = json.loads((STORE / "manifest.json").read_text())
    rb = k.rebuilt(store)
    state = k.delivered(store, rb)["kahadb"]
    for dest, key in (("/queue/fx.f7.q", "0:fx.f7.q"), ("/queue/fx.f7.k", "0:fx.f7.k")):
        ids = {k._id_of(x) for x in state["dests"][key]}
        confirmed = [m for m in manifest["messages"] if dest in m["live_in"]]
        unconfirmed = [m for m in manifest["messages"] if m["destination"] == dest and not m["receipt_requested"]]
        assert {m["message_id"] for m in confirmed if m["message_id"]} <= ids
        assert len(confirmed) <= len(ids) <= len(confirmed) + len(unconfirmed)
        # a healthy store: the broker's recovery and a rebuild from the journal agree
        assert sorted(state["dests"][key]) == sorted(rb["kahadb"]["dests"][key])


def test_a_damaged_record_after_the_checkpoint_is_a_loss(tmp_path):
    # a flipped byte in a batch after lastUpdate: the broker skips the corrupted batch in its replay, so the
    # ack it holds is not applied and the acknowledged message comes back -- the truth is loss, not latent
    store = _copy(tmp_path)
    k._Files.reset()
    pristine_rb = k.rebuilt(store)
    pristine = k.delivered(store, pristine_rb)
    log = store / "db-9.log"
    data = bytearray(log.read_bytes())
    data[2937] ^= 0x3A  # inside the ack of fx.f7.k's message 58, after the checkpoint (campaign seed 50056000035)
    log.write_bytes(bytes(data))
    k._Files.reset()  # (the journal files are read once per fault)
    assert k.classify(pristine, pristine_rb, store) == k.LOSS


def test_the_whole_newest_file_is_torn_when_the_checkpoint_is_in_an_older_one(tmp_path):
    # f7-kill-gc: lastUpdate is 8:22057, the newest file db-9.log was written wholly after it, so a crash can
    # tear any of its tail (campaign seed 50056000014: db-9.log@5013 was called loss, verify said torn)
    from tests.faults.model import Fault

    sites = k.KahaSites.read(_copy(tmp_path))
    last = sites.dirs[0].logs[-1].batches[-1][0]  # db-9.log's last batch
    assert sites.dirs[0].logs[-1].rel == "db-9.log" and 0 < last < 5013
    assert sites.torn(Fault("flip", "db-9.log", 5013, 0xE6))
    # but not cut short: every file of this journal is preallocated to 32768 bytes before its first write
    # (Journal.rotateWriteFile), so a crash never leaves the newest shorter (seed 52525000096: cut at 778)
    assert k._preallocated(sites.dirs[0])
    assert not sites.torn(Fault("truncate", "db-9.log", last + 10))
    # not what a crash leaves: an intact batch after the damage, another file
    assert not sites.torn(Fault("flip", "db-9.log", 607, 0x20))
    assert not sites.torn(Fault("truncate", "db-9.log", 1000))
    assert not sites.torn(Fault("flip", "db-8.log", 22990, 0x01))


def test_the_newest_file_gone_or_empty_is_torn_when_nothing_in_the_index_names_it(tmp_path):
    # f7-kill-gc: db-9.log was wholly written after the checkpoint (8:22057) and db.data names no location in
    # it: without it the store is one whose broker was killed before it created (or first wrote) db-9.log
    # (campaign seed 52525000156: deleted, 52525000028: emptied, were called loss)
    from tests.faults.model import Fault

    sites = k.KahaSites.read(_copy(tmp_path))
    assert 9 not in sites.dirs[0].needed
    assert sites.torn(Fault("delete", "db-9.log"))
    assert sites.torn(Fault("empty", "db-9.log"))
    # not the newest file, nor one a swap changed
    assert not sites.torn(Fault("delete", "db-8.log"))
    assert not sites.torn(Fault("swap", "db-9.log", other="db-8.log"))


def test_the_newest_file_the_ack_map_names_is_not_torn(tmp_path):
    # f4-gc (clean stop): the ack compaction's db-15.log lies after the checkpoint 14:12754, but the ack map
    # page 0 names holds it: recoverIndex refuses to start without it ("Detected missing journal files")
    from tests.faults.model import Fault

    d = tmp_path / "kahadb"
    shutil.copytree(STORE.parent / "f4-gc" / "kahadb", d)
    sites = k.KahaSites.read(d)
    assert sites.dirs[0].logs[-1].rel == "db-15.log" and 15 in sites.dirs[0].needed
    assert not sites.torn(Fault("delete", "db-15.log"))
    assert not sites.torn(Fault("empty", "db-15.log"))


def test_a_damaged_message_id_in_an_older_file_after_the_checkpoint_comes_back(tmp_path):
    # ActiveMQ 5.17.2 defaults (checkForCorruptJournalFiles=false): Journal.start recoveryChecks only the newest
    # file (lastAppendLocation is null: recoveryCheck(dataFiles.getTail())), so MessageDatabase.recover's walk
    # (Journal.getNextLocation: record header by record header) loads the records of db-8.log, not the newest,
    # whatever their batch's checksum. The send of fx.f7.k's ...:3:-1:1:60 after lastUpdate 8:22057 with a
    # damaged id is replayed as a live message of that id, and its ack in db-9 finds nothing: it comes back
    # (f5-kill's same/CRITICAL of the last stop; the truth skipped the batch and called it unchanged)
    store = _copy(tmp_path)
    k._Files.reset()
    pristine_rb = k.rebuilt(store)
    pristine = k.delivered(store, pristine_rb)
    log = store / "db-8.log"
    data = bytearray(log.read_bytes())
    assert data[24442:24479] == b"ID:vm-37799-1795706049181-3:3:-1:1:60"
    data[24445] ^= 0x20  # 'v' -> 'V'
    log.write_bytes(bytes(data))
    k._Files.reset()
    state = k.delivered(store, k.rebuilt(store))["kahadb"]
    ids = {k._id_of(x) for x in state["dests"]["0:fx.f7.k"]}
    assert "ID:Vm-37799-1795706049181-3:3:-1:1:60" in ids
    assert k.classify(pristine, pristine_rb, store) == k.LOSS


def test_a_record_the_walk_cannot_load_after_the_checkpoint_stops_the_broker(tmp_path):
    # the same walk loads a record of db-8.log whose entry type byte names no KahaEntryType:
    # MessageDatabase.load throws "Could not load journal record, null type information", and recover
    # rethrows it ("Failed to recover data at position"): the broker does not start
    store = _copy(tmp_path)
    log = store / "db-8.log"
    data = bytearray(log.read_bytes())
    assert data[24419 + 5] == 1  # KAHA_ADD_MESSAGE_COMMAND
    data[24419 + 5] = 0x7F
    log.write_bytes(bytes(data))
    k._Files.reset()
    state = k.delivered(store, k.rebuilt(store))["kahadb"]
    assert state["refused"].startswith("8:24419: the record does not load (unknown KahaEntryType 127)")


MKILL = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f8-mkahadb-kill"


def test_an_index_without_a_checkpoint_is_replayed_from_the_journal_start(tmp_path):
    # f8-mkahadb-kill: each child store of a real 5.17.2 mKahaDB ran with checkpointInterval=600000 and was
    # SIGKILLed, so its db.data has no lastUpdate. MessageDatabase.getRecoveryPosition then returns
    # journal.getNextLocation(null): the broker replays the whole journal onto its (empty) index and delivers
    # every confirmed send. The truth took the empty index alone (nothing delivered, before and after any
    # fault: 70 latent/CRITICAL at campaign seed 7201)
    from amqtool.formats.kahadb import pagefile as pf

    store = tmp_path / "mkahadb"
    shutil.copytree(MKILL / "mkahadb", store)
    manifest = json.loads((MKILL / "manifest.json").read_text())
    k._Files.reset()
    state = k.delivered(store, k.rebuilt(store))
    for child, dest in (("queue#3a#2f#2ffx.f8.own", "fx.f8.own"), ("queue#3a#2f#2ffx.f8.grp.#3e", "fx.f8.grp.one"),
                        ("queue#3a#2f#2ffx.f8.grp.#3e", "fx.f8.grp.two")):
        buf = (store / child / "db.data").read_bytes()
        assert pf.decode_metadata(pf.read_chain(buf, pf.decode_header(buf).page_size, 0)).last_update is None
        ids = {k._id_of(x) for x in state[child]["dests"]["0:" + dest]}
        confirmed = [m for m in manifest["messages"] if "/queue/" + dest in m["live_in"]]
        unconfirmed = [m for m in manifest["messages"] if m["destination"] == "/queue/" + dest
                       and not m["receipt_requested"]]
        assert confirmed and {m["message_id"] for m in confirmed if m["message_id"]} <= ids
        assert len(confirmed) <= len(ids) <= len(confirmed) + len(unconfirmed)


SHRUNK = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f11-shrink-kill"


def test_a_newest_file_preallocated_shorter_than_the_others_is_still_preallocated(tmp_path):
    # f11-shrink-kill: journalMaxFileLength lowered from 65536 to 16384 between runs; db-3.log (16384) is the
    # newest. Lengths alone do not show it was preallocated, its trailing end marker does
    # (Journal.doPreallocationSparseFile): a cut of it is no crash's, a damaged last batch is
    from tests.faults.model import Fault

    d = tmp_path / "kahadb"
    shutil.copytree(SHRUNK / "kahadb", d)
    sites = k.KahaSites.read(d)
    assert k._preallocated(sites.dirs[0])
    assert not sites.torn(Fault("truncate", "db-3.log", 9382 + 500))
    assert sites.torn(Fault("flip", "db-3.log", 9415, 0x10))


def test_the_newest_file_gone_from_a_store_without_checkpoint_is_torn(tmp_path):
    # f8-mkahadb-kill: no child index has a lastUpdate, so every file was written after the (absent)
    # checkpoint: without its newest file a store is one whose broker was killed before it created it
    # (campaign seed 7201: 72020000126, fx.f8.grp.>'s db-5.log deleted, was called loss)
    from tests.faults.model import Fault

    store = tmp_path / "mkahadb"
    shutil.copytree(MKILL / "mkahadb", store)
    sites = k.KahaSites.read(store)
    grp = next(d for d in sites.dirs if d.rel == "queue#3a#2f#2ffx.f8.grp.#3e")
    assert grp.no_checkpoint and grp.logs[-1].rel.endswith("db-5.log")
    assert sites.torn(Fault("delete", grp.logs[-1].rel))
    assert not sites.torn(Fault("delete", grp.logs[-2].rel))


def test_the_newest_file_gone_after_a_checkpoint_that_ends_the_file_before_it_is_unproven(tmp_path):
    # f11-shrink-kill: lastUpdate 2:53395 is the last record of db-2.log; db-3.log is the newest. Without
    # db-3 the store is, byte for byte, that of a broker killed right after its checkpoint, before
    # Journal.rotateWriteFile created db-3 (or, emptied, before its first write: Journal.start ignores a
    # zero-length file): verify rightly calls such a store OK, so the truth cannot demand a WARNING
    # (campaign seeds 7201, 7202: 12 torn/OK). Artemis' loss-unproven: any verdict, counted apart
    from tests.faults.model import Fault

    store = tmp_path / "kahadb"
    shutil.copytree(SHRUNK / "kahadb", store)
    sites = k.KahaSites.read(store)
    for kind in ("delete", "empty"):
        assert sites.torn(Fault(kind, "db-3.log")) and sites.traceless(Fault(kind, "db-3.log"))
    assert not sites.traceless(Fault("flip", "db-3.log", 9415, 0x10))
    k._Files.reset()
    rb = k.rebuilt(store)
    pristine = k.delivered(store, rb)
    (store / "db-3.log").unlink()
    k._Files.reset()
    assert k.classify(pristine, rb, store, torn=True, traceless=True) == k.UNPROVEN
    assert k.expected(k.UNPROVEN, "OK") and not k.expected(k.UNPROVEN, "UNKNOWN")
    # f7-kill-gc: records after its checkpoint stay in db-8.log without db-9: torn, and verify warns
    f7 = k.KahaSites.read(_copy(tmp_path / "f7"))
    assert f7.torn(Fault("delete", "db-9.log")) and not f7.traceless(Fault("delete", "db-9.log"))


def test_the_newest_files_last_batch_in_a_store_without_checkpoint_is_where_a_crash_tears(tmp_path):
    from tests.faults.model import Fault

    store = tmp_path / "mkahadb"
    shutil.copytree(MKILL / "mkahadb", store)
    sites = k.KahaSites.read(store)
    newest = "queue#3a#2f#2ffx.f8.grp.#3e/db-5.log"
    assert sites.torn(Fault("flip", newest, 3840 + 28 + 700, 0x10))
    assert not sites.torn(Fault("flip", newest, 3520 + 40, 0x10))  # an intact batch after it
    assert not sites.torn(Fault("truncate", newest, 3840 + 500))  # preallocated: no crash cuts it


def test_a_subscription_ack_in_an_older_files_damaged_batch_is_still_replayed(tmp_path):
    # seed 7202 (f5-kill, db-8.log@50190 ^0x02, 72026000094): a flipped batch size in db-8.log (not the newest)
    # over the durable subscription's ack of a topic message sent after the checkpoint. The walk replays that
    # ack (the batch size is never read); the truth took the message's pending subscriptions from the
    # rebuild, which skips the batch, and called the acknowledged message back: loss (verify: WARNING)
    store, pristine, pristine_rb = _pristine(tmp_path, "f5-kill")
    p = store / "db-8.log"
    data = bytearray(p.read_bytes())
    data[50228 + 18] ^= 0x02  # the batch holding f5-d:sd's ack of ...:1:-1:1:33, sent in db-6 after lastUpdate
    p.write_bytes(bytes(data))
    k._Files.reset()
    assert k.classify(pristine, pristine_rb, store) in (k.SAME, k.LATENT)


K2 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "k2-priority-subs-kill"
K8 = K2.parent / "k8-priority-topic-kill"


def test_a_subscription_is_handed_from_its_last_ack_in_time(tmp_path):
    # k2 (prioritizedMessages=true, SIGKILLed with no checkpoint in its second run): the walk after the
    # checkpoint moves each subscription's LastAck to its last ack in time, and the broker, restarted on a copy
    # with and without db.data, hands each resumed subscription what follows it (kahadb_after.
    # handed_from_last_ack; amqtool/engines/kahadb/last_acks.py for the rebuild): red 11 it had acknowledged,
    # all 21, blue 7 (the truth said 16, 31 and 8)
    store = tmp_path / "kahadb"
    shutil.copytree(K2 / "kahadb", store)
    ids = {m["fx_id"]: m["message_id"] for m in json.loads((K2 / "manifest.json").read_text())["messages"]}
    rb = k.rebuilt(store)
    for state, name in ((k.delivered(store, rb)["kahadb"], "broker-delivered.json"),
                        (rb["kahadb"], "broker-delivered-noindex.json")):
        for dest, (n, fx_ids) in json.loads((K2 / name).read_text()).items():
            if not dest.startswith("/topic/"):
                continue
            sk = ":".join(dest.split(":")[1:3])
            got = {k._id_of(x) for x in state["subs"][("1:fx.k2.t", sk)]}
            assert len(got) == n, (name, sk)
            assert {ids[f] for f in fx_ids if ids.get(f)} <= got, (name, sk)


def test_a_subscription_whose_ack_positions_hold_nothing_is_handed_nothing(tmp_path):
    # k8: sub a acknowledged all it was handed, its priority-9 message first; the broker hands it nothing (its
    # ackPositions hold no message: getMessageCount 0, the store cursor never asks the store), where the truth
    # handed it the priority-9 message after its LastAck from the index (indexed._pending)
    store = tmp_path / "kahadb"
    shutil.copytree(K8 / "kahadb", store)
    rb = k.rebuilt(store)
    for state in (k.delivered(store, rb)["kahadb"], rb["kahadb"]):
        assert len(state["subs"][("1:fx.k8.t", "k8-a:a")]) == 0
        assert len(state["subs"][("1:fx.k8.t", "k8-b:b")]) == 12


def test_a_send_the_index_holds_replayed_under_a_damaged_id_is_a_redo(tmp_path):
    # MessageDatabase.updateIndex(KahaAddMessageCommand) (5.17): locationIndex.put(location) returns the
    # sequence the index holds there, which it puts back ("Looks like this was a redo of a previously added
    # message"): nothing else is indexed, whatever message id the record reads. The shared fixture gc with
    # page 0's lastUpdate moved back to 7:60456 is a killed broker's index whose pages were flushed after its
    # checkpoint (indexWriteBatchSize): it holds fx.gc.keep's ...:1:58 at 7:62166, after lastUpdate in an older
    # file, whose records the walk loads whatever their batch's checksum. Its id damaged there, the broker
    # delivers the same; the truth added it again under the damaged id and called it loss (kl48 hold-out
    # m2-vtopic-groups-kill, indexWriteBatchSize=30: 6 of 9 loss/WARNING misses of seed 7658)
    import struct

    from tests.support import KAHADB

    src = KAHADB / "gc" / "kahadb"
    if not src.is_dir():
        import pytest

        pytest.skip("shared KahaDB fixtures not present")
    store = tmp_path / "kahadb"
    shutil.copytree(src, store)
    (store / "lock").unlink(missing_ok=True)
    at = 4096 + 21 + 4 + 8 + 1  # db.data page 0: lastUpdate's log id, offset (test_index_ahead.py)
    data = bytearray((store / "db.data").read_bytes())
    assert struct.unpack_from(">ii", data, at) == (8, 39989)
    struct.pack_into(">ii", data, at, 7, 60456)
    (store / "db.data").write_bytes(bytes(data))
    for p in store.iterdir():
        p.chmod(0o644)
    k._Files.reset()
    pristine_rb = k.rebuilt(store)
    pristine = k.delivered(store, pristine_rb)
    mid = "ID:vm-41387-1795304891300-3:3:-1:1:58"
    assert any(k._id_of(x) == mid for x in pristine["kahadb"]["dests"]["0:fx.gc.keep"])
    log = store / "db-7.log"
    data = bytearray(log.read_bytes())
    assert data[62192:62192 + len(mid)] == mid.encode()
    data[62195] ^= 0x20  # 'v' -> 'V'
    log.write_bytes(bytes(data))
    k._Files.reset()
    state = k.delivered(store, k.rebuilt(store))["kahadb"]
    ids = [k._id_of(x) for x in state["dests"]["0:fx.gc.keep"]]
    assert mid in ids and "ID:Vm-41387-1795304891300-3:3:-1:1:58" not in ids
    assert k._consumed({"kahadb": state}) == k._consumed(pristine)
    assert k.classify(pristine, pristine_rb, store) in (k.SAME, k.LATENT)


def test_an_unsubscribe_after_the_checkpoint_removes_the_subscription(tmp_path):
    # a SUBSCRIPTION record without its info after lastUpdate (an UNSUBSCRIBE the kill left unindexed): the
    # broker's replay deletes the subscription and hands it nothing (kahadb_after.unsubscribed; on the real
    # broker, the kl52 hold-out r3-unsub-groups-ttl-kill: 0 of the 171 pending, where the truth said 171)
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.protobuf import encode_field, encode_varint

    store, pristine, _rb = _pristine(tmp_path, "f12-subs-kill")
    before = pristine["kahadb"]["subs"]
    assert len(before[("1:fx.f12.t", "f12-all:all")]) > 0
    body = encode_field(1, b"\x08\x01\x12\x08fx.f12.t") + encode_field(2, "f12-all:all") + encode_field(3, 0)
    newest = max(store.glob("db-*.log"), key=lambda p: int(p.name[3:-4]))
    data = newest.read_bytes()
    end = [ev for ev in jr.scan_file(data) if isinstance(ev, jr.Batch)][-1].end
    newest.write_bytes(data[:end] + jr.encode_batch([b"\x07" + encode_varint(len(body)) + body]))
    k._Files.reset()
    after = k.delivered(store)["kahadb"]
    assert ("1:fx.f12.t", "f12-all:all") not in after["subs"]
    assert after["subs"][("1:fx.f12.t", "f12-red:red")] == before[("1:fx.f12.t", "f12-red:red")]


def test_a_subscription_only_the_journal_holds_is_no_ones(tmp_path):
    # db-5.log of the kl52 hold-out r3 holds u1's UNSUBSCRIBE, before the checkpoint: emptied, the journal alone
    # keeps u1, but the broker recovers the subscriptions of its index, which has none (campaign seed 52077,
    # 520772000313: the truth said loss, u1 handed the 63 sends replayed after the checkpoint)
    store, pristine, pristine_rb = _pristine(tmp_path, "r3-unsub-groups-ttl-kill")
    (store / "db-5.log").write_bytes(b"")
    k._Files.reset()
    assert ("1:fx.r3.t", "r3-u1:u1") in k.rebuilt(store)["kahadb"]["subs"]
    assert k.delivered(store)["kahadb"] == pristine["kahadb"]
    assert k.classify(pristine, pristine_rb, store) != k.LOSS


def test_a_checkpoint_record_that_does_not_load_replays_from_the_start(tmp_path):
    # recover() replays in one walk from the minimum of getRecoveryPosition and what recoverProducerAudit returns:
    # journal.getNextLocation(null) when the audit does not load. The truth walked from lastUpdate too, where the
    # corrupted batch holding it (the newest file's, stepped over whole) made the walk take the ack after it for
    # the checkpoint's record and skip it: the acked message came back, 'loss' where the broker delivers the same
    # (kl51's leftover q5 db-18.log@3578, campaign seed 51077)
    store, pristine, pristine_rb = _pristine(tmp_path, "q5-tiny-files-gc-kill")
    flip_byte(store / "db-18.log", 3578, 0x08)  # the producer audit's entry type: it no longer loads as one
    k._Files.reset()
    assert k.delivered(store)["kahadb"] == pristine["kahadb"]
    assert k.classify(pristine, pristine_rb, store) != k.LOSS
