"""Issue 25, KahaDB: verdicts that match what the broker loses (cases 8, 13, 14).

* 8: ``basic`` without db-12.log (the file of its last acks and checkpoint): verify is CRITICAL, print's
  verdict is verify's, ``create --from`` refuses the source unless ``--salvage``, and never brings back the
  messages the index knows acknowledged (fx.bulk 13, not 130; sub-a 50, not 100).
* 13: with ``checkForCorruptJournalFiles=true`` (activemq.xml) the broker refuses to start on any corrupted
  range: damage no live message needs is CRITICAL all the same.
* 14: under the broker's defaults, damage to records the intact index never reads (acked messages, acks) is
  latent: a WARNING naming what a rebuild of the index would bring back; damage to a live message's record
  is CRITICAL; damage to a live record's own 5-byte header, which the broker does not read at dispatch (it
  takes the size from the index), is latent.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from amqtool.commands.main import main
from amqtool.engines.kahadb import print_document, verify_store
from amqtool.engines.kahadb.indexed import read_indexed
from amqtool.errors import Severity
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command
from amqtool.store.layout import detect
from amqtool.store.kahadb_layout import from_activemq_xml


def copy(fx: Path, ds: str, tmp_path: Path) -> Path:
    dst = tmp_path / ds
    shutil.copytree(fx / ds, dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    (dst / "kahadb" / "lock").unlink(missing_ok=True)
    return dst


def worst(findings) -> str:
    order = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2, Severity.UNKNOWN: 3}
    return max((f.severity for f in findings), key=lambda s: order[s], default=Severity.INFO).name


def records(log: Path):
    """(batch, record, command) of every user record of one file."""
    data = log.read_bytes()
    for ev in jr.scan_file(data):
        if isinstance(ev, jr.Batch):
            for rec in jr.iter_batch_records(data, ev):
                yield ev, rec, decode_command(bytes(rec.payload))


def live_locations(store_dir: Path) -> set:
    dests, err = read_indexed(store_dir)
    assert err is None
    return {(m.file_id, m.offset) for d in dests.values() for m in d.messages}


def find_record(root: Path, want) -> tuple[Path, jr.Batch, object]:
    kdir = root / "kahadb"
    live = live_locations(kdir)
    for n in range(1, 13):
        log = kdir / f"db-{n}.log"
        for batch, rec, cmd in records(log):
            if len(list(jr.iter_batch_records(log.read_bytes(), batch))) == 1 and want(cmd, (n, rec.offset) in live):
                return log, batch, rec
    raise AssertionError("no such record")


def body_offset(log: Path, rec) -> int:
    """File offset of the middle of the message body of the ADD record ``rec`` (inside the OpenWire bytes the
    broker unmarshals at dispatch, not a command field it does not read)."""
    from amqtool.formats.kahadb.openwire import decode_message

    payload = log.read_bytes()[rec.offset + 5:rec.offset + rec.length]
    body = decode_message(decode_command(payload).message, 11).body_bytes()
    i = payload.find(body)
    assert i > 0 and len(body) > 2
    return rec.offset + 5 + i + len(body) // 2


def flip(log: Path, offset: int, mask: int = 0x5A) -> None:
    data = bytearray(log.read_bytes())
    data[offset] ^= mask
    log.write_bytes(bytes(data))


def strict_store(root: Path, tmp_path: Path, fx: Path):
    conf = tmp_path / "inst" / "conf"
    conf.mkdir(parents=True)
    xml = (fx / "tools" / "broker-basic.xml").read_text().replace("${fx.data}", str(root))
    (conf / "activemq.xml").write_text(xml)
    store = from_activemq_xml(conf / "activemq.xml")
    assert store.settings["checkForCorruptJournalFiles"] == "true"
    return store


def is_acked_bulk_add(cmd, live):
    return cmd.type is EntryType.ADD_MESSAGE and cmd.destination.name == "fx.bulk" and not live


# -- case 8 ----------------------------------------------------------------------------------------------

def test_case8_print_verdict_is_verify_and_create_from_refuses(kahadb_fixtures, tmp_path, capsys):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    (root / "kahadb" / "db-12.log").unlink()
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "CRITICAL"
    doc = print_document(detect(root))
    assert doc["verdict"] == "CRITICAL"
    assert main(["print", str(root), "--format", "json"]) == 2
    capsys.readouterr()
    # the replay alone would keep what db-12's acks removed; the index knows they were acknowledged
    live = {d["key"]: (len(d["live"]), {s["key"]: len(s["live"]) for s in d["subscriptions"]})
            for st in doc["stores"] for d in st["destinations"]}
    assert live == {"0:fx.audit": (120, {}), "0:fx.bulk": (13, {}), "0:fx.orders": (93, {}),
                    "1:fx.events": (100, {"fx-durable-a:sub-a": 50, "fx-durable-b:sub-b": 100})}

    dest = tmp_path / "artemis"
    assert main(["create", str(dest), "--from", str(root), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert "CRITICAL" in err and "--salvage" in err and not dest.exists()

    assert main(["create", str(dest), "--from", str(root), "--salvage", "--format", "json"]) == 2  # source CRITICAL
    out, _ = capsys.readouterr()
    res = json.loads(out)
    assert res["sourceVerdict"] == "CRITICAL" and res["messages"] == 326
    queues = {q["name"]: q["messages"] for q in res["queues"]}
    assert queues == {"fx.audit": 120, "fx.bulk": 13, "fx.orders": 93, "fx-durable-a.sub-a": 50,
                      "fx-durable-b.sub-b": 100}
    assert res["acknowledgedNotRestored"] == 117 + 27 + 50


# -- case 14: latent vs read -------------------------------------------------------------------------------

def test_case14_damage_to_an_acked_record_is_latent_warning(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, is_acked_bulk_add)
    flip(log, body_offset(log, rec))
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "WARNING", [(f.severity, f.code, f.message) for f in findings]
    hit = [f for f in findings if f.code == "kahadb-checksum-mismatch"]
    assert hit and hit[0].severity is Severity.WARNING and hit[0].details["latent"] is True
    assert hit[0].offset == batch.offset


def test_case14_damage_to_an_ack_names_what_a_rebuild_brings_back(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, lambda c, live: c.type is EntryType.REMOVE_MESSAGE
                                  and c.destination.name == "fx.bulk" and c.transaction is None)
    acked = decode_command(bytes(log.read_bytes()[rec.offset + 5:rec.offset + rec.length])).message_id
    flip(log, rec.offset + 8)
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "WARNING"
    back = [f for f in findings if f.code == "kahadb-rebuild-would-differ"]
    assert back and back[0].details["rebuildWouldBringBack"] == [acked]
    # and what the other commands show is what the broker delivers: the acked message stays acked
    doc = print_document(detect(root))
    bulk = [d for st in doc["stores"] for d in st["destinations"] if d["key"] == "0:fx.bulk"][0]
    assert len(bulk["live"]) == 13 and doc["verdict"] == "WARNING"


def test_case14_damage_to_a_live_body_is_critical(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, lambda c, live: c.type is EntryType.ADD_MESSAGE and live)
    flip(log, body_offset(log, rec))
    findings, _ = verify_store(detect(root))
    hit = [f for f in findings if f.code == "kahadb-checksum-mismatch"]
    assert hit and hit[0].severity is Severity.CRITICAL and hit[0].details["read"] is True


def test_case14_damage_to_a_live_commands_priority_is_latent(kahadb_fixtures, tmp_path):
    # The last bytes of an ADD are the command's priority fields, after the OpenWire message: the broker
    # does not read them at dispatch (it unmarshals the message field only). The real broker delivered the
    # same messages from such a copy (tests/integration/test_kahadb_faults_broker.py); Adler-32 places the
    # one changed byte there.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, lambda c, live: c.type is EntryType.ADD_MESSAGE and live)
    flip(log, rec.offset + rec.length - 3)
    findings, _ = verify_store(detect(root))
    hit = [f for f in findings if f.code == "kahadb-checksum-mismatch"]
    assert hit and hit[0].severity is Severity.WARNING and hit[0].details["latent"] is True


def test_case14_damage_to_a_live_records_header_is_latent(kahadb_fixtures, tmp_path):
    # DataFileAccessor.readRecord takes the size from the index and seeks past the header: consumers get the
    # same message; only a rebuild (which walks the headers) loses it.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, lambda c, live: c.type is EntryType.ADD_MESSAGE and live)
    flip(log, rec.offset + 4, 0x04)  # the type byte
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "WARNING", [(f.severity, f.code, f.message) for f in findings]
    lose = [f for f in findings if f.code == "kahadb-rebuild-would-differ"]
    assert lose and lose[0].details["lose"] == 1


def test_case14_index_pointing_at_the_wrong_record_is_critical(kahadb_fixtures, tmp_path):
    # swapped journal files: every batch checks out, but the index's locations now hold other messages
    root = copy(kahadb_fixtures, "basic", tmp_path)
    a, b = root / "kahadb" / "db-3.log", root / "kahadb" / "db-4.log"
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    findings, _ = verify_store(detect(root))
    assert any(f.code == "kahadb-unreadable-live-message" and f.severity is Severity.CRITICAL for f in findings)


# -- case 13 -----------------------------------------------------------------------------------------------

def test_case13_check_for_corrupt_journal_files_makes_latent_damage_critical(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, rec = find_record(root, is_acked_bulk_add)
    flip(log, body_offset(log, rec))
    findings, _ = verify_store(strict_store(root, tmp_path, kahadb_fixtures))
    hit = [f for f in findings if f.code == "kahadb-checksum-mismatch"]
    assert hit and hit[0].severity is Severity.CRITICAL
    assert "checkForCorruptJournalFiles" in hit[0].message


def test_case8_recover_does_not_bring_back_acknowledged_messages(kahadb_fixtures, tmp_path, capsys):
    # recover writes the live state without an index (the broker rebuilds it from the journal): what it
    # writes must be what the broker delivered, not the replay of what survives (fx.bulk 130, sub-a 100)
    root = copy(kahadb_fixtures, "basic", tmp_path)
    (root / "kahadb" / "db-12.log").unlink()
    dest = tmp_path / "recovered"
    assert main(["recover", str(root), "-o", str(dest), "--format", "json"]) == 2  # refused: the source is CRITICAL
    capsys.readouterr()
    assert not dest.exists()
    assert main(["recover", str(root), "-o", str(dest), "--salvage", "--format", "json"]) == 2
    capsys.readouterr()
    doc = print_document(detect(dest))
    live = {d["key"]: (len(d["live"]), {s["key"]: len(s["live"]) for s in d["subscriptions"]})
            for st in doc["stores"] for d in st["destinations"]}
    assert live == {"0:fx.audit": (120, {}), "0:fx.bulk": (13, {}), "0:fx.orders": (93, {}),
                    "1:fx.events": (100, {"fx-durable-a:sub-a": 50, "fx-durable-b:sub-b": 100})}


def test_case14_index_subscription_key_damaged_is_critical(kahadb_fixtures, tmp_path):
    # A flipped byte in the index's copy of a durable subscription's key (client id "fx-durable-b" read as
    # "nx-durable-b"): the journal is intact, but the broker delivers sub-b's 100 pending messages under a
    # key no subscriber has and the real fx-durable-b gets nothing. Found by the fault campaign (basic, seed
    # 483640000660: a db.data page payload flip, verdict OK); every occurrence of the key in db.data whose
    # flip changes what the index reads is tried, not one offset.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    db = root / "kahadb" / "db.data"
    pristine = db.read_bytes()
    hits = 0
    start = pristine.find(b"fx-durable-b:sub-b")
    while start >= 0:
        db.write_bytes(pristine[:start] + b"n" + pristine[start + 1:])
        dests, _err = read_indexed(root / "kahadb")
        if dests and any("nx-durable-b:sub-b" in d.subscriptions for d in dests.values()):
            hits += 1
            findings, _ = verify_store(detect(root))
            hit = [f for f in findings if f.code == "kahadb-index-journal-mismatch"]
            assert worst(findings) == "CRITICAL" and hit, [(f.code, f.message) for f in findings]
            assert "fx-durable-b:sub-b" in hit[0].message and "nx-durable-b:sub-b" in hit[0].message
            subs = {(s["subscription"], s["index"], s["journal"]) for s in hit[0].details["subscriptions"]}
            assert subs == {("fx-durable-b:sub-b", "absent", 100), ("nx-durable-b:sub-b", 100, "absent")}
        start = pristine.find(b"fx-durable-b:sub-b", start + 1)
    db.write_bytes(pristine)
    assert hits >= 1


def test_checkpoint_ack_map_offset_made_negative_is_judged_not_a_traceback(kahadb_fixtures, tmp_path):
    # The high bit of the ack map's Location offset in page 0 flipped: the offset reads negative. verify
    # crashed (struct.error in the ack-map read, found by the fault campaign); the broker cannot read that
    # record and replays the whole journal on top of its index: the checkpoint-unreadable finding.
    from amqtool.formats.kahadb import pagefile as pf

    root = copy(kahadb_fixtures, "basic", tmp_path)
    db = root / "kahadb" / "db.data"
    buf = bytearray(db.read_bytes())
    meta = pf.decode_metadata(pf.read_chain(bytes(buf), pf.decode_header(bytes(buf)).page_size, 0))
    loc = meta.ack_map
    # Metadata.write puts the ack map's Location last (after lastUpdate, which may name the same record)
    at = bytes(buf[pf.HEADER_SIZE:pf.HEADER_SIZE + 4096]).rfind(struct.pack(">ii", loc.log_id, loc.offset))
    assert at > 0
    buf[pf.HEADER_SIZE + at + 4] ^= 0x80
    db.write_bytes(bytes(buf))
    findings, _ = verify_store(detect(root))
    hit = [f for f in findings if f.code == "kahadb-checkpoint-unreadable"]
    assert hit and "ack" in hit[0].message


def test_torn_write_in_a_preallocated_newest_file_is_a_warning(kahadb_fixtures, tmp_path):
    # A crash mid-write of a batch after the checkpoint: the broker's files are preallocated, so the torn
    # batch is followed by zero fill and its checksum fails, with no batch after it. The broker appends from
    # its start (Journal.recoveryCheck) and loses nothing it acknowledged: a WARNING, not CRITICAL.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log = root / "kahadb" / "db-12.log"
    data = bytearray(log.read_bytes())
    events = list(jr.scan_file(bytes(data)))
    end = next(e.offset for e in events if isinstance(e, jr.End))
    last = [e for e in events if isinstance(e, jr.Batch)][-1]
    data[end:end + 200] = data[last.offset:last.offset + 200]
    log.write_bytes(bytes(data))
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "WARNING", [(f.code, f.message) for f in findings if f.severity is not Severity.INFO]
    hit = [f for f in findings if f.code == "kahadb-truncated-tail"]
    assert hit and hit[0].offset == end
    # damage to the batch holding the checkpoint is no torn write (the index was written from it), whatever
    # else verify makes of it
    data = bytearray(log.read_bytes())
    data[last.offset + 40] ^= 0x5A
    log.write_bytes(bytes(data))
    findings, _ = verify_store(detect(root))
    assert [f.code for f in findings if f.offset == last.offset] == ["kahadb-checksum-mismatch"]
    assert [f.offset for f in findings if f.code == "kahadb-truncated-tail"] == [end]


@pytest.mark.parametrize("which", ["first", "middle"])
def test_a_zeroed_batch_size_hides_the_rest_of_the_file_latent_and_compact_refuses(kahadb_fixtures, tmp_path,
                                                                                  capsys, which):
    # A batch's size and checksum fields zeroed in a file that is not the newest: the broker's Journal.recoveryCheck (and
    # the scan) take a size-0 batch for the end of the data, so a rebuild of the index would not read the
    # batches after it. The intact index still reads every live message at its Location: latent, a WARNING
    # naming the range (verify called the journal intact and the index wrong: CRITICAL; found by the fault
    # campaign, basic seed 220000138). Compaction, which writes from the replay, refuses it.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log = root / "kahadb" / "db-6.log"
    data = bytearray(log.read_bytes())
    batches = [e for e in jr.scan_file(bytes(data)) if isinstance(e, jr.Batch)]
    batch = batches[0] if which == "first" else batches[len(batches) // 2]
    data[batch.offset + 16:batch.offset + 28] = bytes(12)  # size and checksum zeroed (a zeroed run)
    log.write_bytes(bytes(data))
    findings, _ = verify_store(detect(root))
    assert worst(findings) == "WARNING", [(f.code, f.message) for f in findings if f.severity is not Severity.INFO]
    hit = [f for f in findings if f.code == "kahadb-corrupt-range"]
    assert hit and hit[0].offset == batch.offset and hit[0].details["reason"] == "zero-size-batch"
    assert hit[0].details["last"] > batch.offset
    assert any(f.code == "kahadb-rebuild-would-differ" for f in findings)
    before = {p.name: p.read_bytes() for p in (root / "kahadb").iterdir()}
    assert main(["compact", str(root), "-q"]) == 3  # the journal is damaged: compaction would keep less
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in (root / "kahadb").iterdir()} == before


# -- zeroed ranges that end inside a live record's header (issue 25: the campaign's latent/CRITICAL misses) --

def live_after_dead(root: Path):
    """(log, batch, dead record, live record): a live ADD opening its batch right after a record no index
    entry points at, which ends the batch before it (the fixtures' batches hold one record each)."""
    kdir = root / "kahadb"
    live = live_locations(kdir)
    for n in range(1, 13):
        log = kdir / f"db-{n}.log"
        prev = None
        for batch, rec, cmd in records(log):
            opens = rec.offset == batch.offset + 28
            if (prev is not None and opens and (n, rec.offset) in live and (n, prev.offset) not in live
                    and prev.length > 64 and cmd.type is EntryType.ADD_MESSAGE
                    and prev.offset + prev.length == batch.offset):
                return log, batch, prev, rec
            prev = rec
    raise AssertionError("no such pair of records")


def zero(log: Path, start: int, end: int) -> None:
    data = bytearray(log.read_bytes())
    data[start:end] = bytes(end - start)
    log.write_bytes(bytes(data))


def verify_cli(root: Path, capsys) -> tuple[int, dict]:
    code = main(["verify", str(root), "--format", "json"])
    out, _ = capsys.readouterr()
    return code, {f["code"]: f for f in json.loads(out)["findings"]}


@pytest.mark.parametrize("where,back,into", [
    ("checksum", 2, 2),               # the last 2 bytes of the batch's Adler-32 and 2 header bytes
    ("control record", 28 + 60, 2),   # the whole control record of the live record's batch, and more
])
def test_a_zeroed_range_ending_in_a_live_records_header_is_latent(kahadb_fixtures, tmp_path, capsys, where, back,
                                                                  into):
    # DataFileAccessor.readRecord seeks past the header when the Location has its size (the index's): the
    # live message reads whole, and what the zeros hit is read only by a rebuild. The checksum cannot locate a
    # zeroed range, but one that ends in the header of a live record opening its batch reached back into the
    # batch's control record: the Adler-32 bytes it left match the batch (or it took them all, as a batch
    # without checksum). verify said CRITICAL for both (the truth: latent, tests/faults/kahadb.py).
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, dead, rec = live_after_dead(root)
    zero(log, rec.offset - back, rec.offset + into)
    code, f = verify_cli(root, capsys)
    assert code == 1, f
    hit = f.get("kahadb-checksum-mismatch") or f.get("kahadb-corrupt-range")
    assert hit and hit["severity"] == "warning" and hit["details"]["latent"] is True, f
    assert f["kahadb-rebuild-would-differ"]["severity"] == "warning"


@pytest.mark.parametrize("left", [1, 3, 4, 9])  # 9: the run ends in the size field
def test_a_zeroed_range_ending_in_a_live_batchs_checksum_is_latent(kahadb_fixtures, tmp_path, capsys, left):
    # campaign seed 84150000242 (f7-kill-gc, a 5.17 broker's store): zeros from a dead record's body to inside
    # the control record of the next batch, which a live message opens: into its Adler-32 (``left`` bytes of it
    # kept), or into its size field (9), which then reads too small for the record. The Adler-32 bytes left match
    # the batch walked by its records' lengths: the broker's read at the index's Location gets the message as
    # written; only a rebuild no longer finds the batch. verify said CRITICAL ("the batch checksum shows their
    # bytes changed"); the truth: latent.
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, dead, rec = live_after_dead(root)
    zero(log, dead.offset + 20, rec.offset - left)
    code, f = verify_cli(root, capsys)
    assert code == 1, f
    hit = f.get("kahadb-checksum-mismatch") or f.get("kahadb-corrupt-range")
    assert hit and hit["severity"] == "warning" and hit["details"]["latent"] is True, f


def test_a_zeroed_range_ending_in_a_checksum_that_no_longer_matches_is_critical(kahadb_fixtures, tmp_path, capsys):
    # the same zeros, and one byte of the live message's body changed: the checksum's surviving bytes no longer
    # match the batch, so they cannot vouch for it
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, dead, rec = live_after_dead(root)
    zero(log, dead.offset + 20, rec.offset - 3)
    data = bytearray(log.read_bytes())
    data[rec.offset + rec.length - 10] ^= 0x5A
    log.write_bytes(bytes(data))
    code, f = verify_cli(root, capsys)
    assert code == 2, f


@pytest.mark.parametrize("where,back", [("checksum", 2), ("control record", 28 + 60)])
def test_a_zeroed_range_running_into_a_live_message_is_critical(kahadb_fixtures, tmp_path, capsys, where, back):
    # the same ranges carried 8 bytes past the header, into the command the broker reads: the message is lost
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log, batch, dead, rec = live_after_dead(root)
    zero(log, rec.offset - back, rec.offset + 13)
    code, f = verify_cli(root, capsys)
    assert code == 2 and any(x["severity"] == "critical" for x in f.values()), f
