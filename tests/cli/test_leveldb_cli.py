"""LevelDB stores through the CLI (in process, ``commands.main``): print, verify, stat, export and create
--from give exit codes and documents that match the fixture's ``recovered.json``; damaged copies (a flipped
byte under a CRC, a truncated log, a missing log file, a cut last unit of work, a broken unit, a damaged
index snapshot) give the verdicts the rules say; every input is hashed before and after."""
from __future__ import annotations

import json
import os
import shutil
import struct
import zlib

import pytest

from amqtool.commands.main import main
from amqtool.engines.leveldb.load import load
from amqtool.store.layout import detect
from tests.engines.leveldb.stores import CASE_IDS, CASES, FIXTURE
from tests.engines.leveldb.truth import compare, expected
from tests.support import copy_tree, flip_byte, lock_held, tree_hashes

pytestmark = pytest.mark.skipif(not (FIXTURE / "store").is_dir(), reason="LevelDB fixture missing")
STORE = FIXTURE / "store"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def doc_of(capsys, *args):
    code, out, err = run(capsys, *args)
    return code, json.loads(out), err


def codes(doc):
    return {f["code"]: f["severity"] for f in doc["findings"]}


@pytest.fixture
def copy(tmp_path):
    return copy_tree(STORE, tmp_path / "store")


# --- the fixture, read only ---------------------------------------------------------------------------

def test_print_verify_stat_on_the_fixture(capsys):
    before = tree_hashes(STORE)
    code, doc, _ = doc_of(capsys, "print", STORE, "--format", "json")
    assert code == 0 and doc["kind"] == "leveldb" and compare(FIXTURE, doc) == []
    code, doc, _ = doc_of(capsys, "print", STORE, "--format", "json", "--safe", "--pins")
    assert code == 0 and '"body"' not in json.dumps(doc)
    pins = {p["file"]: p for p in doc["pins"]}
    assert pins["0000000000000000.log"]["pinned"] and pins["0000000000000000.log"]["reasons"][0]["count"] == 10
    code, doc, _ = doc_of(capsys, "verify", STORE, "--format", "json")
    assert code == 0 and doc["verdict"] == "OK" and doc["findings"] == []
    assert doc["summary"]["records"] == 162 and doc["summary"]["messages"] == 34
    code, doc, _ = doc_of(capsys, "stat", STORE, "--format", "json")
    assert code == 0
    rows = {(r["name"], r["subscription"]): r["messages"] for r in doc["queues"]}
    assert rows == {("Q.A", None): 15, ("Q.B", None): 11, ("T.1", None): 8, ("T.1", "gen-client:sub1"): 5,
                    ("T.1", "gen-client:sub2-selector"): 0}
    code, out, _ = run(capsys, "print", STORE, "--format", "jsonl", "--safe")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) == 162 and all(x["crcOk"] for x in lines)
    assert sum(1 for x in lines if x["kind"] == "UOW_END") == 59
    assert tree_hashes(STORE) == before


def test_activemq_xml_names_the_store(capsys, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "activemq.xml").write_text(
        '<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="b"><persistenceAdapter>'
        f'<levelDB directory="{STORE}" logSize="65536"/></persistenceAdapter></broker></beans>')
    code, doc, _ = doc_of(capsys, "print", "--activemq-xml", conf / "activemq.xml", "--format", "json")
    assert code == 0 and compare(FIXTURE, doc) == []
    (conf / "activemq.xml").write_text(
        '<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="b"><persistenceAdapter>'
        f'<replicatedLevelDB directory="{STORE}" replicas="3"/></persistenceAdapter></broker></beans>')
    code, doc, _ = doc_of(capsys, "verify", "--activemq-xml", conf / "activemq.xml", "--format", "json")
    assert code == 0 and doc["kind"] == "leveldb"


def test_a_data_directory_holding_a_leveldb_store(capsys, tmp_path):
    shutil.copytree(STORE, tmp_path / "data" / "leveldb")
    code, doc, _ = doc_of(capsys, "verify", tmp_path, "--format", "json")
    assert code == 0 and doc["kind"] == "leveldb"


# --- export and migration -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_export_tables_hold_the_recovered_messages(case, capsys, tmp_path):
    import pyarrow.parquet as pq

    before = tree_hashes(case / "store")
    judged, _out, _err = run(capsys, "verify", case / "store")
    code, out, err = run(capsys, "export", case / "store", "-o", tmp_path / "out", "--format", "parquet",
                         "--engine", "local")
    # the export's verdict is verify's (the killed stores' cut unit, the xa store's prepared transactions: 1)
    assert code == judged < 2, err
    msgs = pq.read_table(tmp_path / "out" / "messages").to_pylist()
    subs = {r["queue"]: r for r in pq.read_table(tmp_path / "out" / "subscriptions").to_pylist()}
    want = expected(case / "recovered.json")
    got: dict = {}
    held: dict = {}
    for r in msgs:
        if r["transaction_state"] == "committed":
            got.setdefault(r["queue"], []).append((r["store_message_id"], r["text"]))
        else:
            held[r["queue"]] = held.get(r["queue"], 0) + 1
    for dest, e in want.items():
        name = dest.split("://", 1)[1]
        if dest.startswith("queue://"):
            rows = got.get(name, [])
            assert [i for i, _t in rows] == [i for i, _c, _t in e["messages"]], dest
            assert all(w is None or g == w for (_i, g), (_j, _c, w) in zip(rows, e["messages"])), dest
        for (client, sname), (count, ids) in e["subs"].items():
            q = f"{client}:{sname}"
            assert [i for i, _t in got.get(q, [])] == ids, q
            assert subs[q]["pending"] == len(ids) + held.get(q, 0)  # prepared sends' rows count too
    assert tree_hashes(case / "store") == before


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_stat_counts_the_recovered_messages(case, capsys):
    """stat's rows, per destination and per durable subscription, count what the broker recovered: each
    destination's messages and each subscription's pending messages (recovered.json), with verify's verdict."""
    before = tree_hashes(case / "store")
    judged, _out, _err = run(capsys, "verify", case / "store")
    code, doc, err = doc_of(capsys, "stat", case / "store", "--format", "json")
    assert code == judged, err
    rows = {(r["address"], r["subscription"]): r["messages"] for r in doc["queues"]}
    want = {}
    for dest, e in expected(case / "recovered.json").items():
        want[(dest, None)] = len(e["messages"])
        for (client, sname), (_count, ids) in e["subs"].items():
            want[(dest, f"{client}:{sname}")] = len(ids)
    # a topic without durable subscriptions is dropped by the broker at start (recovered.json lists it empty)
    assert {k: v for k, v in rows.items() if k in want or v} == want
    assert tree_hashes(case / "store") == before


def _artemis_queues(path):
    from amqtool.engines.export.local import LocalArtemisExport
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES

    n = {c: i for i, c in enumerate(MESSAGE_COLUMN_NAMES)}
    out: dict = {}
    with LocalArtemisExport(detect(path), ExportOptions()) as ex:
        ex.binding_rows()
        for r in ex.rows():
            body = r[n["body"]]
            text = body[5:].decode("utf-16-le") if r[n["type"]] == "text" and body and body[0] == 1 else None
            out.setdefault(r[n["queue"]], []).append(text)
    return out


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_create_from_leveldb_holds_the_same_messages(case, capsys, tmp_path):
    """The migrated Artemis store, read back with amqtool's Artemis loader: per queue and per durable
    subscription (``clientId.subscriptionName``), the recovered messages with their texts, in order."""
    before = tree_hashes(case / "store")
    dest = tmp_path / "artemis"
    code, doc, err = doc_of(capsys, "create", dest, "--from", case / "store", "--format", "json")
    assert code in (0, 1), err
    assert doc["kind"] == "leveldb" and doc["notConverted"] == []
    got = _artemis_queues(dest)
    for d, e in expected(case / "recovered.json").items():
        name = d.split("://", 1)[1]
        if d.startswith("queue://"):
            texts = got.get(name, [])
            assert len(texts) == len(e["messages"]), d
            # recovered.json of the largest stores leaves texts out (None): compare those that it has
            assert all(w is None or g == w for g, (_i, _c, w) in zip(texts, e["messages"])), d
        for (client, sname), (_count, ids) in e["subs"].items():
            # what the broker's cursor hands a consumer (its pendingCount, lastSeq - ackPosition, can differ:
            # the 256 MiB store's subAll counts 8042 and delivers 8057)
            assert len(got.get(f"{client}.{sname}", [])) == len(ids)
    assert tree_hashes(case / "store") == before


def test_create_from_dry_run_writes_nothing_and_refuses_a_locked_store(capsys, tmp_path, copy):
    code, doc, _ = doc_of(capsys, "create", tmp_path / "a", "--from", STORE, "--dry-run", "--format", "json")
    assert code == 0 and doc["dryRun"] and doc["messages"] == 31 and not (tmp_path / "a").exists()
    (copy / "lock").write_bytes(b"")
    with lock_held(copy / "lock"):
        code, _out, err = run(capsys, "create", tmp_path / "b", "--from", copy)
    assert code == 3 and "lock" in err and not (tmp_path / "b").exists()


# --- damaged copies ---------------------------------------------------------------------------------------

def _first_message(store):
    with load(detect(store)) as st:
        d = next(d for d in st.destinations.values() if d.qualified == "queue://Q.A")
        m = d.messages[0]
        f = st.reader.file_at(m.location)
        return f.path, m.location - f.position, m.length


def _patch(path, offset, data):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def test_flipped_byte_under_a_crc(capsys, copy):
    """A flipped bit in a message's stored CRC-32: the data the broker reads is intact: WARNING; a changed
    byte of the message itself (its id may have changed): CRITICAL."""
    path, off, length = _first_message(copy)
    b = path.read_bytes()[off + 3]
    _patch(path, off + 3, bytes([b ^ 0x04]))  # inside the checksum field
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-checksum-mismatch"] == "warning"
    assert codes(doc)["leveldb-entry-bad-data"] == "warning"
    _patch(path, off + 3, bytes([b]))
    b = path.read_bytes()[off + 10 + length // 2]
    _patch(path, off + 10 + length // 2, bytes([b ^ 0x01]))
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-entry-bad-data"] == "critical"
    assert doc["summary"]["damagedMessages"] == 1


def test_truncated_log_is_critical(capsys, copy):
    path = copy / "0000000000000000.log"
    os.truncate(path, path.stat().st_size // 2)
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and {"leveldb-truncated-record", "leveldb-missing-log"} <= set(codes(doc))
    assert doc["summary"]["lostMessages"] > 0


def test_missing_log_file_loses_its_messages(capsys, copy):
    (copy / "0000000000000000.log").unlink()
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-missing-log"] == "critical"
    assert doc["summary"]["lostMessages"] == 10  # the Q.A messages that file held (print --pins says so)
    code, pdoc, _ = doc_of(capsys, "print", copy, "--format", "json", "--safe")
    qa = next(d for d in pdoc["destinations"] if d["name"] == "Q.A")
    # the file was the first: the broker's cursor finds no file below the next one and skips the entries
    assert not any(m.get("error") for m in qa["live"]) and qa["recovered"] == 5 and qa["messageCount"] == 15
    assert [m["skipped"] for m in qa["unreadable"]] == [True] * 10 and pdoc["unreadableMessages"] == 10


def _append_after_last_unit(store, records: bytes):
    with load(detect(store)) as st:
        last, end = st.logs[-1], st.last_file_end
    _patch(last.path, end, records)
    return last.path, end


def _record(kind, data):
    return struct.pack(">bbiI", 0x2A, kind, zlib.crc32(data) - (1 << 32 if zlib.crc32(data) & 1 << 31 else 0),
                       len(data)) + data


def test_cut_last_unit_of_work_is_a_warning_and_changes_nothing(capsys, copy):
    before = doc_of(capsys, "print", copy, "--format", "json", "--safe")[1]
    from amqtool.formats.leveldb.records import encode_entry_value

    entry = b"\x08\x04\x12\x08" + struct.pack(">q", 99) + encode_entry_value(5, 5)
    path, end = _append_after_last_unit(copy, _record(3, entry) + _record(6, b"trace")[:7])
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    # the torn second record's checksum fails too: inside the cut unit, a warning
    assert code == 1 and codes(doc)["leveldb-uow-cut"] == "warning"
    assert set(codes(doc).values()) == {"warning"}
    assert next(f for f in doc["findings"] if f["code"] == "leveldb-uow-cut")["offset"] == end
    code, after, _ = doc_of(capsys, "print", copy, "--format", "json", "--safe")
    assert code == 1 and after["unitsOfWork"]["cut"]["records"] == 1
    assert after["destinations"] == before["destinations"]


def _break_first_uow(path):
    buf = bytearray(path.read_bytes())
    off = next(r.offset for r in __import__("amqtool.formats.leveldb.recordlog", fromlist=["x"]).iter_records(buf)
               if r.kind == -1)
    data = struct.pack(">q", 12345)
    buf[off + 2:off + 6] = struct.pack(">I", zlib.crc32(data))
    buf[off + 10:off + 18] = data
    path.write_bytes(bytes(buf))


def test_broken_unit_of_work_chain(capsys, copy):
    """In a file that is not the last the replay ignores the chain (WARNING); in the last file the broker
    truncates at the break and drops the complete units after it (CRITICAL)."""
    _break_first_uow(copy / "0000000000000000.log")
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 1 and codes(doc) == {"leveldb-uow-broken": "warning"}
    _break_first_uow(copy / "0000000000010823.log")
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    # the dropped units are before the snapshot's position (in the index already), but the broker truncates
    # the file at the break, and with it the messages the index holds there
    assert code == 2 and codes(doc)["leveldb-units-dropped"] == "warning"
    assert codes(doc)["leveldb-entry-past-end"] == "critical"


def test_damaged_index_snapshot_is_critical(capsys, copy):
    """A write-ahead log record of the snapshot's LevelDB fails its checksum: LevelDB drops it and the rest of
    its 32 KiB block (64 more records, the whole log here), and with them the records of queues Q.A and Q.B,
    of durable subscription sub2-selector, and entries the broker delivers, which the record log, replayed
    from its start, says are live: CRITICAL ``leveldb-index-lost`` naming each destination and its sequences
    (the damage itself is a WARNING: the log judges it)."""
    log = copy / "0000000000018045.index" / "000003.log"
    b = bytearray(log.read_bytes())
    b[200] ^= 0x40
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-damaged"] == "warning"
    damaged = [f["message"] for f in doc["findings"] if f["code"] == "leveldb-index-damaged"]
    assert len(damaged) == 1 and "with it the 64 more record(s) after it in its 32 KiB block" in damaged[0]
    lost = sorted(f["message"].split(" (the index")[0] for f in doc["findings"] if f["code"] == "leveldb-index-lost")
    assert lost == ["queue://Q.A: 15 entries missing from the index (seq 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 5 "
                    "more)", "queue://Q.A: its collection record (key 4) is missing",
                    "queue://Q.B: 11 entries missing from the index (seq 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 and 1 more)",
                    "queue://Q.B: its collection record (key 5) is missing",
                    "subscription gen-client:sub2-selector: its collection record (key 3) is missing",
                    "topic://T.1: 5 entries missing from the index (seq 4, 5, 6, 7, 8)"]
    (copy / "0000000000018045.index" / "CURRENT").write_text("garbage\n")
    code, doc, _ = doc_of(capsys, "print", copy, "--format", "json", "--safe")
    assert code == 2 and doc["index"]["error"] and doc["verdict"] == "CRITICAL"


def test_garbage_in_the_last_log_is_critical_not_a_cut_unit(capsys, tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "store-version.txt").write_text("activemq_leveldb_store:1")
    (tmp_path / "s" / "0000000000000000.log").write_bytes(b"\x01" + os.urandom(4095))
    code, doc, _ = doc_of(capsys, "verify", tmp_path / "s", "--format", "json")
    assert code == 2 and "leveldb-not-a-record" in codes(doc)


# --- replicated ---------------------------------------------------------------------------------------------

def test_replicated_nodes_latest_position_and_agreement(capsys, tmp_path):
    nodes = tmp_path / "nodes"
    for n in ("node1", "node2", "node3"):
        copy_tree(STORE, nodes / n)
    # node3 is behind: its last log ends earlier (a slave that had not received the tail)
    last = nodes / "node3" / "0000000000010823.log"
    with load(detect(nodes / "node3")) as st:
        units = [r for r in _uow_ends(st)]
    os.truncate(last, units[-2] - 0x10823)
    code, doc, _ = doc_of(capsys, "verify", nodes, "--format", "json")
    assert doc["kind"] == "replicated-leveldb"
    s = doc["summary"]
    assert s["replicasAgree"] and s["latestPosition"] == 0x18045 and s["latestNode"].endswith(("node1", "node2"))
    assert "leveldb-replica-behind" in codes(doc)
    code, sdoc, _ = doc_of(capsys, "stat", nodes, "--format", "json")
    assert sdoc["replication"]["replicasAgree"]
    p = nodes / "node2" / "0000000000000000.log"
    b = bytearray(p.read_bytes())
    b[400] ^= 0x01
    p.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", nodes, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-replicas-disagree"] == "critical"


def _uow_ends(st):
    from amqtool.formats.leveldb import recordlog as L

    f = st.logs[-1]
    for r in L.iter_records(st.reader.buffer(f)):
        if isinstance(r, L.Stop):
            break
        if r.kind == L.UOW_END:
            yield f.position + r.end


def test_a_fleet_of_leveldb_stores(capsys, tmp_path):
    for n in ("a", "b"):
        shutil.copytree(STORE, tmp_path / "fleet" / n)
    code, out, err = run(capsys, "export", f"{tmp_path / 'fleet'}/*", "-o", tmp_path / "out", "--format", "jsonl",
                         "--engine", "local")
    assert code == 0, err
    stores = [json.loads(x) for p in (tmp_path / "out" / "stores").iterdir() for x in p.read_text().splitlines()]
    assert sorted((s["store"], s["kind"], s["rows"], s["verdict"]) for s in stores) == \
        [("a", "leveldb", 31, "OK"), ("b", "leveldb", 31, "OK")]


def test_damage_in_the_last_log_before_indexed_messages_is_critical_not_a_cut_unit(capsys, copy):
    """A bad CRC in the last log file, with messages the index snapshot holds after it: the broker truncates
    the file at the damaged record on start (``verifyAndGetEndOffset``) and can no longer read them. Before
    the fix verify saw only a cut unit of work (WARNING)."""
    last = copy / "0000000000010823.log"
    b = bytearray(last.read_bytes())
    b[100] ^= 0x01  # inside the file's first records, well before the Q.B and T.1 messages it holds
    last.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-entry-past-end"] == "critical"
    assert doc["summary"]["lostMessages"] > 0
    code, pdoc, _ = doc_of(capsys, "print", copy, "--format", "json", "--safe")
    # print counts every recovered message; verify's loss, only what a consumer would still receive
    assert code == 2 and pdoc["unreadableMessages"] >= doc["summary"]["lostMessages"]


def test_dropped_index_record_of_acknowledged_topic_entries_takes_its_block_with_it(capsys, tmp_path):
    """Fault campaign case (replicas/node-c, seed 25000106): the snapshot's write-ahead log record that put
    entry 4 of topic T.R fails its checksum. subR, the topic's only durable subscription, has acknowledged up
    to 4, so that record alone delivers nothing; but LevelDB drops the rest of its 32 KiB block with it, and
    with it subR's ack position (0 instead of 4: seq 1..3 come back) and entries of Q.R and T.R: CRITICAL,
    each named by ``leveldb-index-lost``."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/replicas/node-c/store", tmp_path / "store")
    flip_byte(store / "0000000000006079.index" / "000003.log", 877, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-damaged"] == "warning"
    lost = [f["message"] for f in doc["findings"] if f["code"] == "leveldb-index-lost"]
    assert any(m.startswith("subscription replica-client:subR: the ack position is 0 in the index, 4 by the log: "
                            "3 message(s) the subscription acknowledged come back (seq 1, 2, 3)") for m in lost)
    with load(detect(store)) as st:
        topic = next(d for d in st.destinations.values() if d.name == "T.R")
        assert [s.ack_position for s in topic.subscriptions] == [0]


def test_damaged_end_of_a_complete_unit_in_the_last_file_is_critical(capsys, tmp_path):
    """Fault campaign miss (killed-zerofill, seed 25000428): one bit of the CRC of the UOW_END that closes a
    complete unit of the last file. The broker truncates the file at the first bad record, dropping that
    whole unit (30 messages); a crash cannot leave it, since a record with a good checksum follows (the
    writer went on): CRITICAL, not the torn tail of a crash."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff"  # the UOW_END
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-uow-cut"] == "warning"  # the pristine store: the kill's cut
    b[970924] ^= 0x80
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-units-dropped"] == "critical"


@pytest.mark.parametrize("case,offset,mask", [("basic", 497, 0x04), ("basic", 559, 0x20),
                                              ("xa", 2478, 0x20), ("replicas/node-c", 824, 0x80)])
def test_dropped_index_record_drops_the_rest_of_its_block(capsys, tmp_path, case, offset, mask):
    """Fault campaign cases (basic 25000174 and 25000354, xa 25000236, replicas/node-c 25000220), first seen as
    false CRITICALs: a record of the snapshot's write-ahead log fails its checksum. LevelDB's log reader (and
    iq80's) then drops the rest of its 32 KiB block, "since 'length' itself may have been corrupted", not just
    the record: here every record after it, collections and entries the broker delivers among them. The
    record log, replayed from position 0, names what is lost (CRITICAL ``leveldb-index-lost``), and the load
    (what print, export and the fault harness's truth read) loses the same."""
    from tests.support import REPO

    src = FIXTURE / "store" if case == "basic" else REPO / "tests/data/leveldb" / case / "store"
    store = copy_tree(src, tmp_path / "store")
    with load(detect(store)) as st:
        pristine = {d.qualified: len(d.messages) for d in st.destinations.values()}
    index = next(store.glob("0*.index"))  # the snapshot (dirty.index and plist.index aside)
    flip_byte(index / "000003.log", offset, mask)
    before = tree_hashes(store)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert tree_hashes(store) == before
    damaged = [f["message"] for f in doc["findings"] if f["code"] == "leveldb-index-damaged"]
    assert code == 2 and codes(doc)["leveldb-index-damaged"] == "warning" and codes(doc)["leveldb-index-lost"]
    assert any("more record(s) after it in its 32 KiB block" in m for m in damaged)
    with load(detect(store)) as st:
        assert {d.qualified: len(d.messages) for d in st.destinations.values()} != pristine


@pytest.mark.parametrize("mask,why", [
    (0x06, "what it held cannot be told; judged against the record log replayed from its start"),
    (0x02, "its checksum names the one flipped bit, so what it held is known")])
def test_dropped_counters_record_strands_the_messages_of_a_queue(capsys, tmp_path, mask, why):
    """Bits flipped in the operation count of the snapshot's write-ahead log record of ``:collection-meta``:
    its checksum fails, LevelDB drops it with the two records after it (``:logs``, ``:producer_ids``), and
    its write batch no longer parses. The index damage itself is judged against the record log (two bits) or
    read with the bit flipped back (one bit): WARNING, every entry is there. But the counters the broker loads
    (``LevelDBClient.loadCounters``, no recount) are the older ``:collection-meta``, where Q.B's size is 0, and
    its cursor reads the store only while that count is above 0: the real broker, restarted on this copy
    (tools/Drain.java), hands out 0 of Q.B's 11 messages (15 of Q.A's 15): CRITICAL leveldb-queue-count-short.
    It was a WARNING while the fault harness did not count queue sizes. The older counters hold no last key for
    T.1 either, so sub1 counts 0 - 3 for its 5 pending messages (getMessageCount(clientId, sub) sizes its cursor
    the same way): CRITICAL leveldb-subscription-count-short (dirty.index's counters hold T.1's last key 8)."""
    store = copy_tree(FIXTURE / "store", tmp_path / "store")
    flip_byte(store / "0000000000018045.index" / "000003.log", 4170, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc) == {"leveldb-index-damaged": "warning", "leveldb-queue-count-short": "critical",
                                        "leveldb-subscription-count-short": "critical"}
    (sub1,) = [f for f in doc["findings"] if f["code"] == "leveldb-subscription-count-short" and "sub1" in f["message"]]
    assert sub1["details"] == {"pendingCount": -3, "stranded": 8}
    (msg,) = [f["message"] for f in doc["findings"] if f["code"] == "leveldb-index-damaged"]
    assert why in msg
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-queue-count-short"]
    assert f["message"].startswith("queue://Q.B:") and f["details"] == {"messageCount": 0, "stranded": 11}


def test_garbage_keys_of_a_damaged_table_block_are_a_warning(capsys, tmp_path):
    """Fault campaign miss (gc, seed 25000174): a flipped byte in an SST data block of a store whose first logs
    the broker's GC deleted. The block is read anyway (no paranoid checks) and its damaged keys make 15
    entries of a collection 0 that does not exist; the broker never reads them. Without the log's start the
    counters (``:collection-meta``) are the evidence: queue Q.G holds its 160 entries, topic T.G every
    sequence above subG's ack position: WARNING, not CRITICAL."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 248, 0x04)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    judged = {c: sev for c, sev in codes(doc).items() if sev != "info"}
    assert code == 1 and judged == {"leveldb-index-damaged": "warning", "leveldb-orphan-entries": "warning"}
    assert "15 index entr(ies) of collection 0" in json.dumps(doc)


def test_entry_lost_from_a_damaged_table_block_is_critical(capsys, tmp_path):
    """Fault campaign miss (jni-index-gc, seed 25000400): a flipped byte in a snappy-compressed SST block loses
    entry 299 of topic T.G, which subG (ack position 292) has not received; the store's first logs are
    collected. The counters prove it: T.G's last sequence is 300, and every sequence above the lowest ack
    position is a message owed (CRITICAL ``leveldb-index-lost`` naming the topic and the sequence)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/jni-index-gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 1116, 0x02)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-lost"] == "critical"
    lost = [f["message"] for f in doc["findings"] if f["code"] == "leveldb-index-lost"]
    assert len(lost) == 1 and lost[0].startswith("topic://T.G: seq 299 missing")


def test_damaged_ack_position_over_collected_entries_is_a_warning(capsys, tmp_path):
    """Fault campaign miss (gc, seed 26000052): a flipped byte in an SST block damages subG's ack position
    (292 reads as 0). The entries below 292 were collected by the broker's GC, so subG still receives exactly
    seq 293..300: nothing changes. The counters cannot prove the entries below the first one held were
    delivered (the ack position read is suspect): WARNING, not CRITICAL."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 786, 0x80)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and {c: s for c, s in codes(doc).items() if s != "info"} == {"leveldb-index-damaged": "warning"}
    with load(detect(store)) as st:
        topic = next(d for d in st.destinations.values() if d.name == "T.G")
        assert [s.ack_position for s in topic.subscriptions] == [0]
        assert [m.seq for m in topic.messages] == list(range(293, 301))


@pytest.mark.parametrize("case", ["jni-index", "jni-index-gc"])
def test_manifest_cut_before_its_version_is_critical(capsys, tmp_path, case):
    """Fault campaign miss (jni-index and jni-index-gc, seed 26000025): a flipped bit in the length of the
    MANIFEST's second record makes it run past the end of the file. LevelDB drops a record cut by the end of
    the file silently, but the first record holds only the comparator: without the next-file, log-number and
    last-sequence entries VersionSet::Recover refuses the descriptor and the index does not open (CRITICAL,
    not OK)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb" / case / "store", tmp_path / "store")
    manifest = next(store.glob("0*.index")) / "MANIFEST-000002"
    flip_byte(manifest, 40, 0x80)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-unreadable"] == "critical"
    assert "no next-file, log-number, last-sequence entry" in json.dumps(doc)


def test_manifest_cut_inside_the_edit_adding_the_table_is_critical(capsys, tmp_path):
    """Fault campaign miss (jni-index, seed 8333565: loss judged OK): a flipped bit in the length of the
    MANIFEST's last record, the edit adding table 000005.sst, makes it run past the end of the file. LevelDB
    drops it silently and opens an index without that table: the 31 messages and 7 destinations it held are
    gone for the broker, which replays the log only from the snapshot's position. A snapshot is copied with
    compactions suspended (``LevelDBClient.snapshotIndex``), so no crash leaves its MANIFEST cut: CRITICAL."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/jni-index/store", tmp_path / "store")
    flip_byte(store / "0000000000018045.index" / "MANIFEST-000002", 55, 0x80)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-damaged"] == "critical"
    assert any("the MANIFEST ends inside a record" in f["message"] and "added or deleted tables" in f["message"]
               for f in doc["findings"])


def test_damaged_length_of_a_dropped_counters_record_in_a_collected_store_strands_messages(capsys, tmp_path):
    """Fault campaign miss (gc, seed 27000389): a flipped bit in the length of a write-ahead log record of the
    snapshot, in a store whose first logs the broker's GC deleted. LevelDB drops it and the rest of its block
    (3 records); the record's write batch is self-delimiting, so it is read under the damaged length: it held
    ``:collection-meta``, and the records after it counters or keys written again later: the index damage is a
    WARNING. The counters the broker loads are then the older ones: Q.G's count is 111 for 160 messages, and the
    real broker restarted on this copy (tools/Drain.java) hands out 111: CRITICAL leveldb-queue-count-short (a
    WARNING while the fault harness did not count queue sizes; CRITICAL "cannot be told" before that)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000093.log", 228, 0x02)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and {c: s for c, s in codes(doc).items() if s != "info"} == {
        "leveldb-index-damaged": "warning", "leveldb-queue-count-short": "critical"}
    assert any("every key dropped is rewritten later or a counter" in f["message"] for f in doc["findings"])
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-queue-count-short"]
    assert f["details"] == {"messageCount": 111, "stranded": 49}


def test_renamed_destination_in_a_damaged_table_block_is_critical(capsys, tmp_path):
    """Fault campaign miss (jni-index-gc, seed 27000079): a flipped bit in a snappy SST block turns the
    collection record of topic T.G into "topic>//T.G"; the broker loads the topic under that name, and its
    subscriber gets its messages from another destination. The broker writes every destination record as its
    qualified name (createCollection(utf8(getQualifiedName))), so a record read from a damaged block that is
    not one is proven damage: CRITICAL ``leveldb-index-lost`` (it was a WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/jni-index-gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 949, 0x04)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-lost"] == "critical"
    assert any("names 'topic>//T.G', not a topic:// name" in f["message"] for f in doc["findings"])


def test_misspelt_destination_prefix_is_a_renamed_destination(capsys, tmp_path):
    """Fault campaign miss (snappy, seed 28000064): a flipped bit in an SST block turns queue Q.A's record into
    "queuu://Q.A". ActiveMQDestination.createDestination parses the meta by its known prefixes, so the broker
    loads a queue named "queuu://Q.A" (the load split at "://" and kept Q.A: the harness's truth said nothing
    changed). The record log names the change: CRITICAL; and the load now gives the broker's name."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/snappy/store", tmp_path / "store")
    flip_byte(store / "0000000000003c5a.index" / "000005.sst", 427, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and any(f["message"].startswith("queue://Q.A: its collection record (key 4) is changed")
                             for f in doc["findings"] if f["code"] == "leveldb-index-lost")
    with load(detect(store)) as st:
        assert "queue://queuu://Q.A" in {d.qualified for d in st.destinations.values()}


def test_queue_record_naming_a_topic_cannot_be_loaded():
    """DBManager.loadCollections casts createDestination(meta, QUEUE_TYPE) to ActiveMQQueue: a queue record
    whose meta carries another kind's prefix fails the cast (the broker cannot load it); a bare name is a
    destination of the record's kind; the kind's own prefix is the qualified name."""
    from amqtool.engines.leveldb.load import qualified_name
    from amqtool.errors import FormatError

    assert qualified_name("queue://Q.A", "queue") == "queue://Q.A"
    assert qualified_name("Q.A", "queue") == "queue://Q.A"
    assert qualified_name("queuu://Q.A", "queue") == "queue://queuu://Q.A"
    with pytest.raises(FormatError):
        qualified_name("topic://T", "queue")


def test_damaged_start_in_the_end_of_a_complete_unit_in_the_last_file_is_critical(capsys, tmp_path):
    """Fault campaign miss (a SIGKILLed store outside the suite, killed-b, seed 29000055): a flipped bit in the
    8-byte start position a complete unit's UOW_END names, in the last file. The broker truncates the file at
    that record (its checksum fails) and drops the unit; its stored CRC-32 is the one of the unit's true start,
    so the damage hit a whole record the writer went past, not a crash's torn tail: CRITICAL (it was a
    WARNING, a cut unit)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff"  # the UOW_END
    b[970920 + 10 + 7] ^= 0x01  # the low byte of the start it names
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-units-dropped"] == "critical"


def test_damaged_magic_of_the_end_of_a_complete_unit_in_the_last_file_is_critical(capsys, tmp_path):
    """Fault campaign miss (killed-b, seed 31000130): the magic byte of a complete unit's UOW_END in the last
    file. The broker's scan stops there and drops the unit; the record is otherwise whole (its start and
    checksum good) and a good record follows: damage, not a crash's cut (CRITICAL, it was a WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff"  # the UOW_END
    b[970920] ^= 0x40
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-units-dropped"] == "critical"


@pytest.mark.parametrize("case,offset,mask", [("snappy", 716, 0x10), ("jni-index-gc", 2293, 0x20)])
def test_restart_array_past_the_entries_is_read_past(capsys, tmp_path, case, offset, mask):
    """Fault campaign misses (snappy 30000106, jni-index-gc 28000223): a flipped bit in an SST block's restart
    array makes a restart point lie past the block's entries. A scan reads the block entry by entry from its
    first restart point, so every entry is still read (as the load reads them): the block is judged like one
    whose checksum fails (WARNING), and the log or the counters judge its entries; nothing is lost here."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb" / case / "store", tmp_path / "store")
    flip_byte(next(store.glob("0*.index")) / "000005.sst", offset, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and {c: s for c, s in codes(doc).items() if s != "info"} == {"leveldb-index-damaged": "warning"}
    assert any(f["message"] == "a restart point lies outside the block's entries" for f in doc["findings"])


def test_damaged_kind_of_the_end_of_a_complete_unit_in_the_last_file_is_critical(capsys, tmp_path):
    """Fault campaign miss (killed-b, seed 32000069): the kind byte of a complete unit's UOW_END in the last
    file (no checksum covers it). The broker's scan finds no end for the unit and drops it; the record is
    otherwise whole (it names the unit's start, its checksum is good) and a good record follows: damage, not
    a crash's cut (CRITICAL, it was a WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff"  # the UOW_END
    b[970921] ^= 0x10
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-units-dropped"] == "critical"


def test_writers_refuse_a_critical_source_unless_salvage(capsys, copy, tmp_path):
    """One rule (issue 25): export and create --from take verify's verdict on the LevelDB load they read. A
    DATA record an index entry needs fails its checksum (verify: CRITICAL): both refuse with exit 2 and write
    nothing; with --salvage they write what survives, exit 2 still, and list what they left out."""
    log = copy / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    with load(detect(copy)) as st:
        m = next(m for d in st.destinations.values() if d.kind == "queue" for m in d.messages)
        first = st.logs[0].position
    b[m.location - first + 10 + 5] ^= 0x01  # a byte of the message's DATA record (after its 10-byte header)
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2
    for argv, out in ((["export", copy, "-o", tmp_path / "x", "--format", "jsonl"], tmp_path / "x"),
                      (["create", tmp_path / "a", "--from", copy], tmp_path / "a")):
        code, _o, err = run(capsys, *argv)
        assert code == 2 and "refused" in err and "--salvage" in err and not out.exists(), argv
    code, _o, err = run(capsys, "export", copy, "-o", tmp_path / "x", "--format", "jsonl", "--salvage")
    assert code == 2 and (tmp_path / "x" / "messages").exists()
    code, _o, err = run(capsys, "create", tmp_path / "a", "--from", copy, "--salvage")
    assert code == 2 and (tmp_path / "a").is_dir()


@pytest.mark.parametrize("start,stop,verdict", [(970900, 970960, 2), (970950, 971000, 1)])
def test_zeroed_end_of_a_complete_unit_in_the_last_file(capsys, tmp_path, start, stop, verdict):
    """Fault campaign miss (killed-b, seeds 25000130 and 25000212, a SIGKILLed store outside the suite): zeros
    over the UOW_END closing the last complete unit and the start of the cut unit after it. The broker
    truncates the file at the zeros and drops the complete unit (30 messages); what proves it complete is
    dirty.index's write-ahead log, where the cut unit's entries are a later write batch whose DATA records
    lie whole past the zeros (amqtool.engines.leveldb.walunits): CRITICAL. Zeros inside the cut unit only
    lose nothing the crash did not: still the WARNING of the cut."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff" and b[970938:970940] == b"\x2a\x05"  # the UOW_END, the cut unit's DATA
    b[start:stop] = bytes(stop - start)
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == verdict
    assert codes(doc).get("leveldb-units-dropped") == ("critical" if verdict == 2 else None)


@pytest.mark.parametrize("offset,mask,verdict", [(970934, 0x08, 2), (970921, 0x01, 2), (970937, 0x00, 1)])
def test_damaged_end_of_the_last_unit_nothing_follows(capsys, tmp_path, offset, mask, verdict):
    """Fault campaign miss (lane lv51's m3-kill, a new SIGKILLed store, seed 5202017): one bit of the data of the
    UOW_END closing the last unit of the last file, with nothing after it but the zero fill. The broker
    truncates the file at the bad record and drops the unit (here: killed-zerofill with its cut unit zeroed,
    what a kill between two units leaves). RecordLog preallocates the file, so a write a crash tears leaves
    each byte as written or zero: a byte that is neither (the data's zero high bytes set, 970934; the kind
    byte 0xFF turned 0xFE, 970921) is damage, CRITICAL; the data's last byte zeroed (mask 0: zeroed) is what
    a torn write can leave, the WARNING of a cut."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    b = bytearray(log.read_bytes())
    assert b[970920:970922] == b"\x2a\xff" and b[970930:970934] == bytes(4)  # the UOW_END; its data's high bytes
    b[970938:] = bytes(len(b) - 970938)  # the cut unit: never written
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-uow-cut" not in codes(doc)  # (no snapshot, dirty.index dirty: warnings)
    if mask:
        b[offset] ^= mask
    else:
        b[offset] = 0
    log.write_bytes(bytes(b))
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == verdict
    assert codes(doc).get("leveldb-units-dropped") == ("critical" if verdict == 2 else None)


@pytest.mark.parametrize("offset,mask", [(2172, 0x08), (3939, 0x20), (1869, 0x40)])
def test_snapshot_block_that_does_not_decompress_or_parse_stops_the_broker(capsys, tmp_path, offset, mask):
    """gc seeds 31000142, 27000206 and 31000064 (each once judged a WARNING: C++ LevelDB's iterators skip such a
    block, and the counters proved nothing delivered lost), and lane lv51's new snappy store (m2-snappy, seed
    5202098, a false CRITICAL by the campaign's truth): a flipped byte leaves a block of a snapshot table that
    does not decompress (2172, 3939) or breaks mid-block (1869). The real broker on each copy of gc never
    recovers: its iq80 LevelDB throws in the open's compaction (FAILED_TO_UNCOMPRESS, IndexOutOfBoundsException;
    in listCollections' scan at start on m2-snappy), and the store stops and retries for ever, whatever the
    counters prove: CRITICAL, and the truth is a broker that does not start."""
    from tests.faults.leveldb import delivered
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000088.sst", offset, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and any(f["code"] == "leveldb-index-damaged" and f["severity"] == "critical"
                             and "iq80 LevelDB throws" in f["message"] for f in doc["findings"])
    assert not delivered(store).starts


def test_skipped_entry_record_of_an_acknowledged_topic_entry_is_a_warning(capsys, tmp_path):
    """Fault campaign miss (lane lv51's mix-killed, seed 5909021): the kind byte of an ADD_ENTRY in the replayed
    part of the last file flipped (3 -> 11). The replay skips it; the entry is a topic's that every durable
    subscription has acknowledged, so only the topic's own count changes (11 -> 10), which no cursor reads. The
    real broker on this copy recovers every subscription's pending messages and counts as before: WARNING, not
    CRITICAL leveldb-unknown-kind."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/mix-killed/store", tmp_path / "store")
    log = store / "00000000000468cd.log"
    assert log.read_bytes()[497:499] == b"\x2a\x03"
    flip_byte(log, 498, 0x08)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-unknown-kind"] == "warning"


def test_snapshot_table_whose_footer_is_damaged_stops_the_broker(capsys, tmp_path):
    """Fault campaign miss (lane lv51's mix-killed-small, seed 5909015, a false CRITICAL by the campaign's truth):
    a flipped bit in the magic number of a snapshot table's footer. The real broker on this copy never recovers:
    iq80 LevelDB throws "File is not a table (bad magic number)" and the store stops and retries for ever:
    CRITICAL, and the truth is a broker that does not start."""
    from tests.faults.leveldb import delivered
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/mix-killed-small/store", tmp_path / "store")
    flip_byte(store / "00000000000b7140.index" / "000056.sst", 807, 0x80)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and any(f["code"] == "leveldb-index-damaged" and f["severity"] == "critical"
                             and "iq80 LevelDB throws when it reads the table" in f["message"] for f in doc["findings"])
    assert not delivered(store).starts


def test_counters_whose_collection_key_the_damage_changed_prove_no_lost_collection(capsys, tmp_path):
    """Fault campaign miss (lane lv51's mix-killed-tiny, indexCompression=none, seed 5505100): a flipped bit in the
    raw table block holding the newest ``:collection-meta`` turns its key 6 into 0x0800000000000006. The counters
    then name a collection the index does not hold, and the index one they lack, one bit apart: the damage hit
    the counters' key, not the index. The real broker on this copy recovers exactly what it recovered from the
    store (collection 6 is a subscription's: its missing counter changes nothing): WARNING, not CRITICAL
    leveldb-index-lost."""
    from tests.faults.leveldb import delivered
    from tests.support import REPO

    src = REPO / "tests/data/leveldb/mix-killed-tiny/store"
    store = copy_tree(src, tmp_path / "store")
    flip_byte(store / "0000000000372a1d.index" / "000265.sst", 451, 0x08)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and {c: s for c, s in codes(doc).items() if s != "info"} == {"leveldb-index-damaged": "warning"}
    assert delivered(store).diff(delivered(src)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}


def test_snappy_data_record_under_a_damaged_kind_byte_is_skipped_by_the_replay(capsys, tmp_path):
    """Fault campaign miss (killed-snappy, seed 40000019): the kind byte of a snappy-compressed DATA record in
    the replayed part of the last file flipped (5 -> 13). The replay skips kinds it does not know ("Skip other
    records, they don't modify the index") and the message is read by its position without looking at the
    kind: the broker delivers the same messages. Its data is a (compressed) message, so nothing the replay
    applies changed: WARNING, not CRITICAL leveldb-unknown-kind."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snappy/store", tmp_path / "store")
    log = store / "00000000000220ef.log"
    assert log.read_bytes()[2236:2238] == b"\x2a\x05"
    flip_byte(log, 2237, 0x08)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-unknown-kind" not in codes(doc)
    assert doc["summary"]["messages"] == 282  # 6 + 270 + 6 as recovered.json


@pytest.mark.parametrize("case", ["mix-killed", "mix-killed-small"])
def test_deleted_log_holding_only_entries_no_one_is_delivered_is_no_loss(capsys, tmp_path, case):
    """Fault campaign misses (lane lv51's new SIGKILLed stores, seeds 5202039 and others: the first log deleted
    or cut short). dirty.index still holds entries whose DATA records were there: in mix-killed topic entries
    every durable subscription has acknowledged (the broker, on a copy without the file, recovers the same
    pending messages), in mix-killed-small entries of a topic with no durable subscription, which the broker
    drops at start. Neither is delivered to anyone: no CRITICAL leveldb-missing-log, and nothing lost."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb" / case / "store", tmp_path / "store")
    (store / "0000000000000000.log").unlink()
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code in (0, 1) and "leveldb-missing-log" not in codes(doc)  # (mix-killed-small: its cut unit)
    assert doc["summary"]["lostMessages"] == 0


def test_deleted_last_log_holding_a_complete_unit_is_critical(capsys, tmp_path):
    """Fault campaign miss (killed-snappy, seed 40000058): the last log file deleted. It held one complete
    unit of work (30 messages, replayed after the snapshot) and the cut one; verify said OK, the remaining
    files ending where the snapshot was taken. dirty.index's write-ahead log holds the complete unit's write
    batch and a later one (the cut unit's), both past the last remaining file: the first was written whole
    before the second began, so a log file holding it is missing: CRITICAL leveldb-missing-log."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snappy/store", tmp_path / "store")
    (store / "00000000000220ef.log").unlink()
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-missing-log"] == "critical"
    assert any("1 complete unit(s) of work (30 entries)" in f["message"] for f in doc["findings"])


def test_entries_a_damaged_block_brings_back_over_their_deletion_are_a_warning(capsys, tmp_path):
    """Fault campaign miss (gc, seed 28000064), seen once the campaign's truth exports with --salvage: a bit
    flipped in a snappy block of table 000005 changes a repeated literal, so 25 of Q.G's consumed entries
    come out with a sequence far above the MANIFEST's last one (no writer issued it) over their deletions,
    and without their location (position 0, in no log file). The broker cannot read those messages and
    delivers what it did before: WARNING, not CRITICAL leveldb-missing-log."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 1711, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-missing-log" not in codes(doc)
    assert any("24 more" in f["message"] and "no writer issued" in f["message"] for f in doc["findings"])


def test_last_log_cut_short_past_a_complete_unit_stays_the_warning_of_a_crash(capsys, tmp_path):
    """The counterpart (killed-snappy, seed 40000035): the last log file cut short inside its complete unit.
    dirty.index's write-ahead log again holds that unit's batch and the cut unit's past the file's new end,
    but the file the snapshot was taken at is there: an unsynced write cut by a crash can leave this, so it
    is the WARNING of a cut unit (issue 25's rule), not a missing log."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snappy/store", tmp_path / "store")
    os.truncate(store / "00000000000220ef.log", 16016)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-missing-log" not in codes(doc) and codes(doc)["leveldb-uow-cut"] == "warning"


def test_collection_record_of_no_known_type_is_critical(capsys, tmp_path):
    """Fault campaign miss (gc2, seed 41000146, a store outside the suite; the same byte of the committed gc
    store here): a bit of the durable subscription's collection record flipped in a snappy literal, turning
    its type field (2) into field 10. The record decodes with type 0, which LevelDBStore's start matches to
    nothing and ignores: subG is gone, T.G is dropped with the 8 messages owed to it. The counters hold
    collection 2: a live collection lost, CRITICAL (it was a WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    table = store / "000000000023142a.index" / "000005.sst"
    assert table.read_bytes()[876:881] == bytes.fromhex("080210041a")
    flip_byte(table, 878, 0x40)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-bad-collection"] == "critical"


@pytest.mark.parametrize("offset,mask", [(2453, 0x01), (2832, 0x04)])
def test_dropped_write_ahead_record_whose_checksum_names_the_flipped_bit(capsys, tmp_path, offset, mask):
    """Fault campaign misses (gc2, seeds 43000066 and 43000139): one bit flipped in the store's GC batch (235
    deletions of acknowledged T.G entries) of the snapshot's write-ahead log. LevelDB drops the record; the
    flip broke the batch's framing, so what it held could not be told: CRITICAL. The stored CRC-32C names the
    one bit whose change explains it (CRC-32C is linear), so the batch is read as written: only topic entries
    every subscription acknowledged, delivered to no one (WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc2/store", tmp_path / "store")
    flip_byte(store / "00000000001bad50.index" / "000192.log", offset, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and {c: s for c, s in codes(doc).items() if s != "info"} == {"leveldb-index-damaged": "warning"}
    assert any("names the one flipped bit" in f["message"] for f in doc["findings"])


# --- one rule: print, stat, export and create --from count the same messages ------------------------------

def _counts_of_every_command(capsys, store, tmp_path, salvage):
    """Messages per queue and per durable subscription ("client:name") as print, stat, export (local engine)
    and create --from --dry-run give them, and their exit codes."""
    import pyarrow.parquet as pq

    extra = ["--salvage"] if salvage else []
    codes_ = {}
    codes_["print"], pdoc, _ = doc_of(capsys, "print", store, "--format", "json", "--safe")
    printed = {}
    for d in pdoc["destinations"]:
        if d["type"] == "queue":
            printed[d["name"]] = len(d["live"])
        for s in d["subscriptions"]:
            printed[f"{s['clientId']}:{s['subscriptionName']}"] = len(s["live"])
    codes_["stat"], sdoc, _ = doc_of(capsys, "stat", store, "--format", "json")
    stat = {(r["subscription"] or r["name"]): r["messages"] for r in sdoc["queues"]
            if r["subscription"] or r["address"].startswith("queue://")}
    codes_["export"], _o, err = run(capsys, "export", store, "-o", tmp_path / "out", "--format", "parquet",
                                    "--engine", "local", *extra)
    exported = dict.fromkeys(printed, 0)
    for r in pq.read_table(tmp_path / "out" / "messages").to_pylist():
        exported[r["queue"]] = exported.get(r["queue"], 0) + 1
    codes_["create"], cdoc, _ = doc_of(capsys, "create", tmp_path / "new", "--from", store, "--dry-run",
                                       "--format", "json", *extra)
    return printed, stat, exported, cdoc, codes_, pdoc


def test_one_rule_on_an_index_block_bringing_back_entries_of_collected_logs(capsys, tmp_path):
    """Fault campaign class (gc, seed 28000064): a flipped byte of the snapshot's oldest table brings back 25
    consumed Q.G entries whose DATA records were in log files the GC deleted (below the first log file). The
    broker's queue cursor finds no file for them and skips them ("Could not load message seq"): it delivers
    160 Q.G messages. print and stat counted 185 (168 messages in all where export's rows had 160 + 8: 193
    against 168); now every command counts 160, and print lists the 25 apart."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "000000000023142a.index" / "000005.sst", 1711, 0x10)
    before = tree_hashes(store)
    printed, stat, exported, cdoc, codes_, pdoc = _counts_of_every_command(capsys, store, tmp_path, False)
    assert printed == stat == exported == {"Q.G": 160, "gc-client:subG": 8}
    assert set(codes_.values()) == {1}, codes_
    qg = next(d for d in pdoc["destinations"] if d["name"] == "Q.G")
    assert qg["recovered"] == 160 and len(qg["unreadable"]) == 25 and all(m["skipped"] for m in qg["unreadable"])
    assert sum(len(d["live"]) for d in pdoc["destinations"]) == 168
    assert cdoc["verdict"] == "WARNING" and len(cdoc["notConverted"]) == 25
    assert {q["name"]: q["messages"] for q in cdoc["queues"]} == {"Q.G": 160, "gc-client.subG": 8}
    code, vdoc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and vdoc["summary"]["messages"] == 168 and vdoc["summary"]["skippedEntries"] == 25
    assert tree_hashes(store) == before


def test_one_rule_on_a_truncated_log(capsys, tmp_path):
    """Fault campaign class (gc, seed 25000077): a middle log file cut short; its messages' DATA records are
    gone (the broker's read fails on them): no command lists or counts them as delivered."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    os.truncate(store / "00000000002129d2.log", 11333)
    printed, stat, exported, _cdoc, codes_, pdoc = _counts_of_every_command(capsys, store, tmp_path, True)
    assert printed == stat == exported == {"Q.G": 114, "gc-client:subG": 8}
    assert set(codes_.values()) == {2}, codes_
    qg = next(d for d in pdoc["destinations"] if d["name"] == "Q.G")
    assert len(qg["unreadable"]) == 46 and not any(m.get("skipped") for m in qg["unreadable"])
    code, vdoc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and vdoc["summary"]["messages"] == sum(len(d["live"]) for d in pdoc["destinations"]) == 122
    assert {q["name"]: q["messages"] for q in _cdoc["queues"]} == {"Q.G": 114, "gc-client.subG": 8}


# --- stores SIGKILLed while snapshotting their index (tests/data/leveldb/killed-snapshot, killed-two-snapshots)

@pytest.mark.parametrize("name,code_,path", [("killed-snapshot", "leveldb-snapshot-cut", "temp.index"),
                                             ("killed-two-snapshots", "leveldb-snapshot-left",
                                              "000000000000dc56.index")])
def test_a_kill_during_an_index_snapshot_is_a_warning(capsys, name, code_, path):
    """A snapshot cut mid-copy (temp.index) or the previous snapshot left beside the new one: what a SIGKILL
    while the broker snapshots its index leaves. The broker deletes them on start and loses nothing (its
    recovered.json equals print's, tested with every store): WARNING, as for other evidence of a crash."""
    from tests.support import REPO

    store = REPO / "tests/data/leveldb" / name / "store"
    before = tree_hashes(store)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc) == {code_: "warning"}
    assert [f["path"] for f in doc["findings"]] == [str(store / path)]
    assert doc["summary"]["lostMessages"] == 0
    assert tree_hashes(store) == before


def test_topic_entries_the_gc_collected_above_a_stored_ack_position_are_no_loss(capsys, tmp_path):
    """Fault campaign miss (subs, seed 25000104), a store written by the real LevelDBStore: durable
    subscriptions with selectors acked in rounds. Undamaged, T.S's entries 1..350 are gone while subRed's
    stored ack position is 214: the broker's topic GC deletes a prefix of the entries up to the subscriptions'
    in-memory GC positions, which ran ahead of subRed's stored one (the broker recovers 130 pending for it,
    pendingCount 266). A flipped byte of the snapshot's write-ahead log record (a counter, rewritten later)
    made verify judge the index from the counters, which took 215..350 for entries the damage lost:
    CRITICAL on a store that delivers exactly what it did. Only a gap after the first entry held is loss."""
    from tests.faults.leveldb import delivered
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/subs/store", tmp_path / "store")
    pristine = delivered(store)
    flip_byte(store / "000000000009571d.index" / "000068.log", 12, 0x08)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-index-lost" not in codes(doc), doc["findings"]
    assert codes(doc)["leveldb-index-damaged"] == "warning"
    assert delivered(store) == pristine
    with load(detect(store)) as st:
        topic = next(d for d in st.destinations.values() if d.kind == "topic")
        red = next(s for s in topic.subscriptions if s.name == "subRed")
        assert topic.messages[0].seq == 351 and red.ack_position == 214
        assert (red.pending_count, len(red.pending)) == (266, 130)


def test_damaged_dirty_index_table_proves_no_missing_log(capsys, tmp_path):
    """Fault campaign miss (gc2, seed 25000179), once dirty.index is read apart from the snapshot when its bytes
    differ: a flipped byte of one of its table blocks makes LevelDB skip the block, so older versions of keys
    deleted since (entries of consumed messages whose logs the GC deleted) show through. The broker never
    reads dirty.index: those entries prove no missing log file (it was CRITICAL leveldb-missing-log)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc2/store", tmp_path / "store")
    flip_byte(store / "dirty.index" / "000187.sst", 4805, 0x40)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 0 and "leveldb-missing-log" not in codes(doc)


def test_unreadable_dirty_index_table_proves_no_missing_log(capsys, tmp_path):
    """Fault campaign miss (subs, seed 31337032): a flipped byte of dirty.index's table 000061.sst lands in its
    index block, a snappy block that no longer decompresses, so none of the table's entries is read and older
    versions of keys it deleted (entries of messages consumed since, in logs the GC deleted) show through in
    the other tables. The broker never reads dirty.index: those entries prove no missing log file (it was
    CRITICAL leveldb-missing-log, 34 entries), as for a skipped block of a table read otherwise."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/subs/store", tmp_path / "store")
    flip_byte(store / "dirty.index" / "000061.sst", 6032, 0x01)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 0 and "leveldb-missing-log" not in codes(doc)
    os.unlink(store / "000000000001c3f0.log")  # the first log file really gone: still proven by the rest
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2


def test_dropped_dirty_index_log_record_proves_no_missing_log(capsys, tmp_path):
    """Fault campaign miss (gc2, seed 6161034): one bit flipped inside a key of dirty.index's write-ahead log
    record holding the GC's 235 deletions. LevelDB drops the record (its checksum fails), so the older versions
    of those keys show through: entries of consumed messages in logs the GC deleted. The broker never reads
    dirty.index (replay_init copies the snapshot over it): those entries prove no missing log file, and the key
    the flip renamed is read from the bytes the stored CRC names (it was CRITICAL leveldb-missing-log, 232
    entries, then 1)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc2/store", tmp_path / "store")
    flip_byte(store / "dirty.index" / "000192.log", 5054, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 0 and "leveldb-missing-log" not in codes(doc)


def test_damaged_first_byte_of_an_unfinished_last_unit_is_a_warning(capsys, tmp_path):
    """Fault campaign miss (killed-c of /work/leveldb-fresh2, seed 6161032; the suite's killed store is alike):
    the last log file holds one unit of work the SIGKILL cut (no UOW_END). A flipped magic byte at its start
    makes the broker truncate the file there, dropping what it dropped anyway: nothing delivered changes.
    WARNING (it was CRITICAL, "a last file without a single record is no log at all"); a complete unit after
    such a byte stays CRITICAL (leveldb-units-dropped)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed/store", tmp_path / "store")
    flip_byte(store / "00000000000623e7.log", 0, 0x02)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and {c: s for c, s in codes(doc).items() if s != "info"} == {"leveldb-not-a-record": "warning"}


@pytest.mark.parametrize("offset,mask", [(4745, 0x02), (16589, 0x80)])
def test_checksum_field_flip_in_a_replayed_file_is_a_warning(capsys, tmp_path, offset, mask):
    """Fault campaign misses (killed-snapshot, seeds 25000108 and 25000160): the snapshot was cut, so the
    broker replays the whole of 000000000000d27c.log, which is not the last file: its replay does not check
    CRCs there. A bit flipped in a record's checksum field leaves the data it applies intact: the stored CRC-32
    is one bit from the computed one. WARNING, not CRITICAL (a flipped data byte stays CRITICAL)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snapshot/store", tmp_path / "store")
    flip_byte(store / "000000000000d27c.log", offset, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-checksum-mismatch"] == "warning"
    assert "one bit apart" in next(f["message"] for f in doc["findings"] if f["code"] == "leveldb-checksum-mismatch")
    flip_byte(store / "000000000000d27c.log", offset, mask)
    flip_byte(store / "000000000000d27c.log", offset + 10, 0x01)  # the record's data instead
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-checksum-mismatch"] == "critical"


def test_verify_counts_the_messages_print_lists(capsys, copy):
    """One rule for verify's summary too (fault campaign, basic, seed 25000077): the last log cut at 20258
    takes the DATA records of Q.A's last message, all of Q.B and T.1's; T.1's first 3 entries are acknowledged
    by both subscriptions (no one receives them, so verify does not judge them) but print leaves them out of
    live all the same. verify counted 17 where print, stat and export count 14."""
    os.truncate(copy / "0000000000010823.log", 20258)
    code, pdoc, _ = doc_of(capsys, "print", copy, "--format", "json", "--safe")
    code, vdoc, _ = doc_of(capsys, "verify", copy, "--format", "json")
    assert code == 2 and vdoc["summary"]["messages"] == sum(len(d["live"]) for d in pdoc["destinations"]) == 14


def test_an_entry_record_whose_kind_byte_was_damaged_is_judged_by_what_skipping_it_changes(capsys, tmp_path):
    """Fault campaign misses (killed-b of /work/leveldb-fresh, killed-zerofill and killed-zerofill-2, seed
    5353039): the kind byte is outside the record's CRC-32, and the broker's replay skips a kind it does not know
    (LevelDBClient.replay_from: ``case kind => // Skip other records``). killed-zerofill's first UPDATE_ENTRY (at
    126) sets a subscription's ack position to 0, which reads as none: skipping it changes nothing (WARNING; it was
    CRITICAL, "the replay applies it as that kind"). Its ADD_ENTRY at 819, skipped, is a message lost: CRITICAL."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    log = store / "0000000000000000.log"
    flip_byte(log, 127, 0x80)  # kind 7 (UPDATE_ENTRY) -> 135
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-unknown-kind"] == "warning"
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-unknown-kind"]
    assert (f["offset"], f["details"]) == (126, {"kind": 135, "writtenAs": "UPDATE_ENTRY"})
    flip_byte(log, 127, 0x80)
    flip_byte(log, 820, 0x80)  # kind 3 (ADD_ENTRY) -> 131
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-unknown-kind"] == "critical"


def test_a_queue_count_left_below_its_entries_is_critical(capsys, tmp_path):
    """Fault campaign, killed-zerofill seed 25000091 (the harness now counts queue sizes): the kind byte of the
    ADD_ENTRY at 8223 flipped to 7 (UPDATE_ENTRY, a kind the replay applies): replay_from puts the entry but only
    LOG_ADD_ENTRY calls collectionIncrementSize, so Q.K1 holds 5 entries with a message count of 4. The broker's
    cursor (AbstractStoreCursor.fillBatch) reads the store only while its size, started from that count, is
    above 0: one message is never handed out (the real broker restarted on this copy, tools/Drain.java, hands out
    4 of Q.K1's 5). It was a WARNING (nothing but the crash's own findings)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-zerofill/store", tmp_path / "store")
    flip_byte(store / "0000000000000000.log", 8224, 0x04)  # kind 3 (ADD_ENTRY) -> 7
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-queue-count-short"] == "critical"
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-queue-count-short"]
    assert f["details"] == {"messageCount": 4, "stranded": 1} and f["message"].startswith("queue://Q.K1:")


def test_keys_read_from_a_dirty_index_block_whose_checksum_fails_bound_nothing(capsys, tmp_path):
    """Fault campaign miss (subs, seed 7301014): a bit flipped in the one snappy data block of dirty.index's
    table 000065 (a table the snapshot does not share). Its checksum fails; the block is read until a key
    breaks, and the last key read before the break is garbage that still sorts in order (6 bytes, a shape
    LevelDBClient never writes). The unread part of the block was taken to start after it, so collection 6's
    entries 21..23, deleted in that block, showed through from an older table pointing at logs the GC deleted:
    CRITICAL leveldb-missing-log, while the broker discards dirty.index on start. A key of no shape the store
    writes bounds nothing now (gc2's seed 25000090, a break after well-formed keys, stays judged)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/subs/store", tmp_path / "store")
    flip_byte(store / "dirty.index" / "000065.sst", 1760, 0x01)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code in (0, 1) and "leveldb-missing-log" not in codes(doc)


def test_collection_record_whose_own_key_field_changed_loads_the_same(capsys, tmp_path):
    """Fault campaign miss (f-killed-snappy of /work/leveldb-fresh, seed 7301022): a bit flipped in the key
    field inside a collection record of the snapshot's table (the value, not the index key). The broker keys a
    collection by its index key (LevelDBClient.listCollections: ``decodeLongKey(key)``; DBManager
    .loadCollections never reads the record's own key), so the store loads the same; the record log's evidence
    compared raw values and said CRITICAL leveldb-index-lost "its collection record is changed". Here jni-index:
    Q.A's record, key field 4 -> 68."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/jni-index/store", tmp_path / "store")
    flip_byte(store / "0000000000018045.index" / "000005.sst", 914, 0x40)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc) == {"leveldb-index-damaged": "warning"}


def test_damaged_unit_end_outside_the_last_file_is_a_warning(capsys, tmp_path):
    """Fault campaign miss (f-killsnap of /work/leveldb-fresh, seed 7302010; here killed-snapshot's only
    replayed UOW_END): a bit flipped in the 8-byte data of a replayed UOW_END in a file that is not the last. Only the
    last file's chain and CRCs are checked (RecordLog.verifyAndGetEndOffset); the replay writes a unit's batch at
    any UOW_END without reading its data (LevelDBClient.replay_from), so nothing the broker recovers changes:
    WARNING (it was CRITICAL leveldb-checksum-mismatch)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snapshot/store", tmp_path / "store")
    flip_byte(store / "000000000000d27c.log", 23735 + 10 + 6, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc)["leveldb-checksum-mismatch"] == "warning"


@pytest.mark.parametrize("offset,mask,severity", [
    (9467 + 10 + 5, 0x40, "warning"),  # Q.KT's seq 30, the last, becomes 0x40000000000001e: still the last
    (14217 + 10 + 5, 0x01, "critical"),  # seq 28 becomes 0x1000000001c: handed out after 29 and 30
    (14217 + 10 + 14, 0x01, "critical")])  # its value location: the entry points elsewhere
def test_replayed_entry_record_with_one_flipped_bit_is_judged_by_what_applying_it_delivers(
        capsys, tmp_path, offset, mask, severity):
    """Fault campaign miss (f-killsnap of /work/leveldb-fresh, seed 7302021): a bit flipped in the entry key of
    a replayed ADD_ENTRY in a file that is not the last. The replay checks no CRC there and applies it as read;
    CRC-32 being linear, the one bit that gives the stored CRC back is the damage, and the replay is run with
    the record as written and as read: the same entries of every queue in the same order, pointing at the same
    messages, is a WARNING (the sequence numbers reach no consumer); a message moved in its queue's order, or an
    entry pointing elsewhere, stays CRITICAL."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-snapshot/store", tmp_path / "store")
    flip_byte(store / "000000000000d27c.log", offset, mask)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert codes(doc)["leveldb-checksum-mismatch"] == severity and code == (1 if severity == "warning" else 2)


def test_collection_record_changed_in_a_damaged_block_is_proven_by_dirty_index(capsys, tmp_path):
    """Fault campaign miss (gc, seed 5353019, the loss/WARNING left open by the last stop): a bit flipped in the
    snappy block of the snapshot's table 000005 turns the durable subscription's client id 'gc-client' into
    'gc-Client'. The block's checksum fails and the broker reads it anyway: 'gc-client' finds no subscription,
    its 8 pending messages are lost. The first logs were GC'd (no record log to replay from 0) and the counters
    name no client. dirty.index's own copy of the table (the files are separate here, as any copy that broke the
    snapshot's hard links leaves them) holds the record as written, and a collection record is never rewritten:
    CRITICAL leveldb-index-lost (it was a WARNING)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    assert (store / "000000000023142a.index" / "000005.sst").stat().st_ino != \
        (store / "dirty.index" / "000005.sst").stat().st_ino
    flip_byte(store / "000000000023142a.index" / "000005.sst", 889, 0x20)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-lost"] == "critical"
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-index-lost"]
    assert f["details"] == {"collection": 2}


def test_consumed_entry_showing_through_a_damaged_block_over_a_collected_log_is_a_warning(capsys, tmp_path):
    """Fault campaign miss (gc2, seed 7303009): a bit flipped in a snappy data block of the snapshot's table
    000187. Its checksum fails and it is read anyway, but the deletion of Q.G's seq 24 it held no longer reads
    as that key, so seq 24's older version in another table shows through, pointing at 0x7e82, before the first
    log file. The broker's cursor skips it ("Could not load message seq"): nothing changes. The GC deletes a
    log only once no entry refers to it, so such an entry in the key range of the damaged block (its own
    version read from an intact table) is a consumed one brought back: WARNING, not CRITICAL
    leveldb-missing-log."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc2/store", tmp_path / "store")
    flip_byte(store / "00000000001bad50.index" / "000187.sst", 4630, 0x10)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and "leveldb-missing-log" not in codes(doc)
    assert any("Q.G seq 24" in f["message"] and "before the first log file" in f["message"]
               for f in doc["findings"])


def test_dirty_index_entries_showing_through_a_block_whose_checksum_fails_prove_no_missing_log(capsys, tmp_path):
    """Fault campaign miss (gc, seed 8333150): a bit flipped in a snappy data block of dirty.index's table
    000094. Its checksum fails and it is read anyway; the deletions it held read as other bytes, and 28 older
    versions of consumed entries show through, pointing into logs the GC deleted. The broker never reads
    dirty.index (it recovers from the snapshot), and entries in the key range of such a block prove nothing,
    as for a block LevelDB skips: not CRITICAL leveldb-missing-log (the store delivers the same)."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/gc/store", tmp_path / "store")
    flip_byte(store / "dirty.index" / "000094.sst", 773, 0x08)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 0 and "leveldb-missing-log" not in codes(doc)


def test_an_ack_position_update_retyped_as_a_trace_is_judged_by_what_skipping_it_loses(capsys, tmp_path):
    """Fault campaign miss (f-killgc of /work/leveldb-fresh, seed 8333649: loss judged OK): a flipped bit turned
    an UPDATE_ENTRY of a subscription's ack position (entry key p) after the snapshot into a TRACE, which the
    replay passes over (the kind byte is outside the CRC): the ack position stays behind and 3 acknowledged
    messages come back. No broker-written store holds a TRACE; one whose data is an entry record is judged by
    restoring it: here killed-gc's at 4974 (CRITICAL, 3 messages back), and at 931, whose skipping changes
    nothing the replay recovers (OK, as the truth says)."""
    from tests.support import REPO

    for offset, code in ((4974, 2), (931, 0)):
        store = copy_tree(REPO / "tests/data/leveldb/killed-gc/store", tmp_path / str(offset))
        flip_byte(store / "000000000006ecc9.log", offset + 1, 0x01)  # the kind byte follows the magic: 7 -> 6
        got, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
        assert got == code, offset
        assert ("leveldb-unknown-kind" in codes(doc)) is bool(code)


def test_a_last_log_cut_behind_entries_of_the_live_index_is_a_torn_tail(capsys, tmp_path):
    """Fault campaign miss (killed-gc, seeds 8333469 and 8333572; f-killgc of /work/leveldb-fresh, three more:
    a torn tail judged OK): the last log file cut at a unit boundary after the snapshot's position. Nothing in
    the log shows it, but dirty.index, the live index, holds entries at log positions past the new end: the
    broker writes a unit to the log before its index entries, so the file was cut after them and the units
    there are lost (the truth: torn). WARNING leveldb-log-cut."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/killed-gc/store", tmp_path / "store")
    log = store / "000000000006ecc9.log"
    # (1003: the unit boundary; a cut further on, at 1606, also cuts the record after it, which leveldb-uow-cut
    # names then: test_the_last_log_cut_inside_the_record_after_its_last_complete_unit_is_a_torn_tail)
    log.write_bytes(log.read_bytes()[:1003])
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc).get("leveldb-log-cut") == "warning"


def test_stray_key_of_a_subscription_collection_is_never_read(capsys, tmp_path):
    """Fault campaign miss (snappy, seed 7304016): a bit flipped in the snapshot table's block turns
    sub1's ack position key ('e' + collection + 'p') into 'e' + collection + 'q'. The replay writes the 'p' key
    again, and a subscription's collection holds its ack position alone (LevelDBClient.getAckPosition reads
    'p'; every dump of tests/data/leveldb agrees): the stray key is never read. The record log's evidence
    counted it as an entry that comes back: CRITICAL leveldb-index-lost; now WARNING."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/snappy/store", tmp_path / "store")
    flip_byte(store / "0000000000003c5a.index" / "000005.sst", 443, 0x01)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 1 and codes(doc) == {"leveldb-index-damaged": "warning"}


def test_topic_entries_a_damaged_block_lost_are_proven_by_dirty_index(capsys, tmp_path):
    """Fault campaign miss (subs, seed 7304038): a bit flipped in a snappy data block of the snapshot's table
    000061 makes it undecodable: T.S's entries 351..409, pending for subAll and subRed, are lost (118 deliveries).
    The first logs were GC'd and the counters prove no gap after the first entry held (the broker's topic GC
    runs ahead of stored ack positions), so it was a WARNING. dirty.index, the live index when the broker
    stopped, holds them from its own intact table, with their messages in the log: an entry added after the
    snapshot is replayed, one deleted after it is gone from dirty.index too. CRITICAL leveldb-index-lost."""
    from tests.support import REPO

    store = copy_tree(REPO / "tests/data/leveldb/subs/store", tmp_path / "store")
    flip_byte(store / "000000000009571d.index" / "000061.sst", 3560, 0x01)
    code, doc, _ = doc_of(capsys, "verify", store, "--format", "json")
    assert code == 2 and codes(doc)["leveldb-index-lost"] == "critical"
    (f,) = [f for f in doc["findings"] if f["code"] == "leveldb-index-lost"]
    assert f["details"] == {"destination": "topic://T.S", "entries": 59}
