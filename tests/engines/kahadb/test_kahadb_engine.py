"""KahaDB engine: replayed live state against every fixture manifest, and damaged copies."""
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from amqtool.errors import Severity, UnknownStoreError
from amqtool.engines.kahadb import print_document, verify_store, iter_record_rows
from amqtool.store.layout import detect

DATASETS = ["basic", "tx", "mkahadb", "gc"]


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def manifest(fx, ds):
    return json.loads((fx / ds / "manifest.json").read_text())


def live_by_destination(doc):
    out, subs = {}, {}
    for st in doc["stores"]:
        for d in st["destinations"]:
            name = f"/{d['type']}/{d['name']}"
            out[name] = {m["properties"]["fx_id"] for m in d["live"]}
            for s in d["subscriptions"]:
                subs[f"{s['clientId']}/{s['subscriptionName']}"] = {m["properties"]["fx_id"] for m in s["live"]}
    return out, subs


@pytest.mark.parametrize("ds", DATASETS)
def test_live_messages_equal_manifest(kahadb_fixtures, ds):
    man = manifest(kahadb_fixtures, ds)
    store = detect(kahadb_fixtures / ds)
    assert store.kind == "kahadb" and store.multi == (ds == "mkahadb")
    before = tree_hash(kahadb_fixtures / ds)
    doc = print_document(store, safe=True)
    assert tree_hash(kahadb_fixtures / ds) == before
    live, subs = live_by_destination(doc)
    by_fx = {m["fx_id"]: m for m in man["messages"]}
    for dest, info in man["destinations"].items():
        want = set(info["live_fx_ids"])
        assert len(want) == info["live"]
        assert live.get(dest, set()) == want, dest
        subs_here = info.get("durable_subscriptions", {})
        for sub, sinfo in subs_here.items():
            msgs = [m for m in man["messages"] if m["destination"] == dest and m.get("live")]
            if "pending_for" in (msgs[0] if msgs else {}):
                want_sub = {m["fx_id"] for m in msgs if sub.split("/")[1] in m["pending_for"]}
            else:  # one subscription: pending = the live topic messages
                assert len(subs_here) == 1
                want_sub = {m["fx_id"] for m in msgs}
            if "pending" in sinfo:
                assert len(want_sub) == sinfo["pending"]
            assert subs[sub] == want_sub, sub
    # Bodies: size and sha256 as sent; --safe leaves no body anywhere.
    text = json.dumps(doc)
    for st in doc["stores"]:
        for d in st["destinations"]:
            for m in d["live"]:
                exp = by_fx[m["properties"]["fx_id"]]
                if exp["message_id"] is not None:
                    assert m["messageId"] == exp["message_id"]
                assert m["bodySha256"] == exp["body_sha256"] and m["bodySize"] == exp["size"]
                assert m["timestamp"] == exp.get("broker_timestamp", m["timestamp"])
                assert m["messageType"] == exp["jms_type"]
                assert "body" not in m and "bodyBase64" not in m
                words = exp["body_prefix"].partition("|")[2]
                if len(words) >= 15:
                    assert words not in text


@pytest.mark.parametrize("ds", DATASETS)
def test_fixtures_verify_clean(kahadb_fixtures, ds):
    findings, summary = verify_store(detect(kahadb_fixtures / ds))
    bad = [f for f in findings if f.severity is not Severity.INFO]
    assert bad == []
    man = manifest(kahadb_fixtures, ds)
    assert summary["live"] == sum(d["live"] for d in man["destinations"].values())
    gaps = [f for f in findings if f.code == "kahadb-gc-gap"]
    if ds == "gc":
        assert gaps and gaps[0].details["fileIds"] == [1, 2, 3, 4, 5]
    if ds == "mkahadb":
        assert len(summary["stores"]) == 5 and summary["stores"][-1]["directory"].endswith("txStore")


def test_transactions_in_tx_fixture(kahadb_fixtures):
    doc = print_document(detect(kahadb_fixtures / "tx"), safe=True)
    txs = doc["stores"][0]["transactions"]
    states = sorted(t["state"] for t in txs)
    assert states.count("committed") == 5 and states.count("rolled-back") == 4
    assert all(t["kind"] == "local" for t in txs)


def test_unsafe_print_has_bodies(kahadb_fixtures):
    doc = print_document(detect(kahadb_fixtures / "gc"), safe=False)
    man = manifest(kahadb_fixtures, "gc")
    m = doc["stores"][0]["destinations"][0]["live"][0]
    exp = next(x for x in man["messages"] if x["fx_id"] == m["properties"]["fx_id"])
    if exp["jms_type"] == "TextMessage":
        assert m["body"].startswith(exp["body_prefix"])
    else:
        import base64
        assert hashlib.sha256(base64.b64decode(m["bodyBase64"])).hexdigest() == exp["body_sha256"]


def test_pins_and_drain(kahadb_fixtures):
    doc = print_document(detect(kahadb_fixtures / "basic"), safe=True, pins=True, drain="queue://fx.audit")
    pins = {p["file"]: p for p in doc["stores"][0]["pins"]}
    assert pins["db-12.log"]["firstReason"] == "not-checkpointed"
    r = pins["db-1.log"]["reasons"]
    assert {x["reason"] for x in r} >= {"live-messages", "subscription-record"}
    audit = next(x for x in r if x.get("destination") == "queue://fx.audit")
    assert audit["messages"] == 11
    # fx.audit alone never pins all files: topic messages for sub-b are everywhere.
    assert doc["stores"][0]["drain"]["filesFreed"] == []
    gc = print_document(detect(kahadb_fixtures / "gc"), safe=True, pins=True, drain="fx.gc.keep")
    pins = {p["file"]: p for p in gc["stores"][0]["pins"]}
    assert pins["db-6.log"]["pinned"] and pins["db-6.log"]["firstReason"] == "live-messages"
    assert gc["stores"][0]["drain"]["filesFreed"] == ["db-6.log", "db-7.log"]


def test_record_rows(kahadb_fixtures):
    rows = list(iter_record_rows(detect(kahadb_fixtures / "tx"), safe=True))
    assert len(rows) == 159
    assert sum(r["type"] == "KAHA_COMMIT_COMMAND" for r in rows) == 5
    assert not any("body" in r for r in rows)


def copy(fx, ds, tmp_path) -> Path:
    dst = tmp_path / ds
    shutil.copytree(fx / ds, dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


def test_flipped_byte_is_critical_at_file_and_offset(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    log = root / "kahadb" / "db-4.log"
    data = bytearray(log.read_bytes())
    from amqtool.formats.kahadb import journal as jr

    from amqtool.engines.kahadb.indexed import read_indexed

    # a batch holding a message the index still delivers (damage to one it does not read is latent: a
    # WARNING, tests/engines/kahadb/test_verdicts_kahadb.py)
    dests, _ = read_indexed(root / "kahadb")
    live = {m.offset for d in dests.values() for m in d.messages if m.file_id == 4}
    batches = [e for e in jr.scan_file(bytes(data)) if isinstance(e, jr.Batch)]
    victim = [b for b in batches if b.data_offset in live][2]
    from amqtool.formats.kahadb.commands import decode_command
    from amqtool.formats.kahadb.openwire import decode_message

    payload = bytes(data[victim.data_offset + 5:victim.end])
    body = decode_message(decode_command(payload).message, 11).body_bytes()
    data[victim.data_offset + 5 + payload.find(body) + len(body) // 2] ^= 0x5A  # in the message body
    log.write_bytes(data)
    before = tree_hash(root)
    findings, _ = verify_store(detect(root))
    assert tree_hash(root) == before
    hits = [f for f in findings if f.code == "kahadb-checksum-mismatch"]
    assert len(hits) == 1 and hits[0].severity is Severity.CRITICAL
    assert hits[0].path == str(log) and hits[0].offset == victim.offset


def test_removed_referenced_file_is_critical(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "basic", tmp_path)
    (root / "kahadb" / "db-3.log").unlink()
    findings, _ = verify_store(detect(root))
    miss = [f for f in findings if f.code == "kahadb-missing-journal-file"]
    assert miss and miss[0].severity is Severity.CRITICAL and miss[0].details["fileId"] == 3


def test_truncated_tail_is_warning(kahadb_fixtures, tmp_path):
    root = copy(kahadb_fixtures, "gc", tmp_path)
    log = root / "kahadb" / "db-8.log"
    from amqtool.formats.kahadb import journal as jr

    from amqtool.formats.kahadb.protobuf import encode_field

    # A torn write: a new batch started after the checkpoint, only its first 60 bytes reached the disk. The
    # file keeps its preallocated length (Journal.rotateWriteFile sized it before its first write): a file
    # cut short is no crash's (test_damaged_control_record.py), and keeps the end marker the preallocation wrote
    # into its last five bytes (one without it was cut or zeroed: test_kahadb_faults.py)
    data = log.read_bytes()
    end = [e for e in jr.scan_file(data) if isinstance(e, jr.End)][0].offset
    body = encode_field(1, "LOADED torn")
    batch = jr.encode_batch([bytes([0, len(body)]) + body] * 20)
    torn = data[:end] + batch[:60]
    log.write_bytes(torn + bytes(len(data) - len(torn) - len(jr.EOF_RECORD)) + jr.EOF_RECORD)
    findings, _ = verify_store(detect(root))
    tail = [f for f in findings if f.code == "kahadb-truncated-tail"]
    assert tail and tail[0].severity is Severity.WARNING and tail[0].offset == end
    assert not [f for f in findings if f.severity is Severity.CRITICAL]


def test_random_bytes_and_empty_dirs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UnknownStoreError):
        detect(empty)
    rnd = tmp_path / "random"
    rnd.mkdir()
    (rnd / "db-1.log").write_bytes(os.urandom(70000))
    (rnd / "db.data").write_bytes(os.urandom(9000))
    findings, _ = verify_store(detect(rnd))
    codes = {f.code for f in findings}
    assert "kahadb-not-a-journal" in codes and "kahadb-index-unreadable" in codes


def test_lone_random_log_is_not_a_store(tmp_path):
    # issue 25 case 21's rule for KahaDB: random bytes named db-1.log, nothing else, is no broker's data:
    # UNKNOWN not-a-store, as for an Artemis directory (it was CRITICAL kahadb-not-a-journal)
    rnd = tmp_path / "random"
    rnd.mkdir()
    (rnd / "db-1.log").write_bytes(os.urandom(70000))
    findings, _ = verify_store(detect(rnd))
    assert [(f.code, f.severity) for f in findings] == [("not-a-store", Severity.UNKNOWN)]
    assert findings[0].details["files"] == [str(rnd / "db-1.log")]


def test_open_transaction_and_journal_ahead(kahadb_fixtures, tmp_path):
    """Append a batch with a transactional ADD after the checkpoint: both findings appear."""
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb.protobuf import encode_field

    root = copy(kahadb_fixtures, "gc", tmp_path)
    log = root / "kahadb" / "db-8.log"
    data = bytearray(log.read_bytes())
    end = [e for e in jr.scan_file(bytes(data)) if isinstance(e, jr.End)][0].offset
    txi = encode_field(1, encode_field(1, "ID:test-1") + encode_field(1, 9))
    body = (encode_field(1, txi) + encode_field(2, encode_field(1, 0) + encode_field(2, "fx.gc.q"))
            + encode_field(3, "ID:test-1:1:1:1") + encode_field(4, b"\x00") + encode_field(5, 4))
    payload = bytes([1]) + bytes([len(body)]) + body
    batch = jr.encode_batch([payload])
    data[end:end + len(batch)] = batch
    log.write_bytes(bytes(data))
    findings, _ = verify_store(detect(root))
    codes = {f.code: f for f in findings}
    assert codes["kahadb-journal-ahead-of-index"].details["replayFrom"] == f"8:{end + 28}"
    assert codes["kahadb-open-transaction"].severity is Severity.WARNING


def test_activemq_xml(kahadb_fixtures, tmp_path):
    from amqtool.store.kahadb_layout import from_activemq_xml

    root = copy(kahadb_fixtures, "tx", tmp_path)
    conf = tmp_path / "inst" / "conf"
    conf.mkdir(parents=True)
    xml = (kahadb_fixtures / "tools" / "broker-tx.xml").read_text().replace("${fx.data}", str(root))
    (conf / "activemq.xml").write_text(xml)
    st = from_activemq_xml(conf / "activemq.xml")
    assert st.directories == [root / "kahadb"] and st.settings["journalMaxFileLength"] == "65536"


def test_pins_name_the_durable_subscriptions_that_owe_topic_messages(kahadb_fixtures):
    FX = kahadb_fixtures
    # Issue 13 item 10: a file pinned by topic messages said "topic://fx.events: N live message(s)"; the broker
    # frees it only when the subscriptions that still owe them consume or unsubscribe. Per subscription, the
    # counts over all files equal what the manifest says each still owes.
    doc = print_document(detect(FX / "basic"), pins=True)
    (st,) = doc["stores"] if "stores" in doc else [doc]
    owed: dict[str, int] = {}
    for p in st["pins"]:
        for r in p["reasons"]:
            if r["reason"] == "live-messages" and r["destination"] == "topic://fx.events":
                for sub, n in r["subscriptions"].items():
                    owed[sub] = owed.get(sub, 0) + n
                assert "owed to fx-durable-a:sub-a" in r["detail"] or "owed to fx-durable-b:sub-b" in r["detail"]
    subs = manifest(FX, "basic")["destinations"]["/topic/fx.events"]["durable_subscriptions"]
    assert owed == {k.replace("/", ":"): v["pending"] for k, v in subs.items()}


def test_draining_a_subscription_frees_what_only_it_owes(kahadb_fixtures):
    FX = kahadb_fixtures
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.pins import _gc, match_destinations, match_subscriptions

    (d,) = load_store(detect(FX / "basic"))
    queues = set().union(*(match_destinations(d, q) for q in ("fx.audit", "fx.orders", "fx.bulk")))
    topic = match_destinations(d, "topic://fx.events")
    a, b = (frozenset(match_subscriptions(d, s)) for s in ("fx-durable-a:sub-a", "topic://fx.events|fx-durable-b:sub-b"))
    assert len(a) == len(b) == 1
    _, queues_gone = _gc(d, queues)
    _, only_b = _gc(d, queues, b)
    _, both = _gc(d, queues, a | b)
    _, topic_gone = _gc(d, queues | topic)
    # sub-a still owes 50 messages spread over the files: draining sub-b alone frees nothing more;
    # draining both subscriptions frees what draining the whole topic frees
    assert only_b == queues_gone and both == topic_gone and both > queues_gone


def test_a_cut_before_the_checkpoint_is_judged_by_what_the_index_lost(kahadb_fixtures, tmp_path):
    # campaign seed 43021000479: gc (a clean stop) with its newest file db-8.log cut at 39466, before the
    # checkpoint's own producer-audit and ack-map records (lastUpdate 8:39989). The file is shorter than its
    # preallocated 65536, but what the cut lost is what the index names (index-ahead-of-journal,
    # checkpoint-unreadable), and the broker's full replay delivers the same: no kahadb-truncated-file
    root = copy(kahadb_fixtures, "gc", tmp_path)
    log = root / "kahadb" / "db-8.log"
    log.write_bytes(log.read_bytes()[:39466])
    findings, _ = verify_store(detect(root))
    assert "kahadb-truncated-file" not in {f.code for f in findings}
    assert not [f for f in findings if f.severity is Severity.CRITICAL]


@pytest.mark.parametrize("args", [["create", "--from", "{src}", "{out}"], ["create", "--from", "{src}", "{out}", "--salvage"],
                                  ["export", "{src}", "-o", "{out}"]])
def test_writing_commands_refuse_a_source_that_is_no_store(tmp_path, capsys, args):
    # random bytes named db-1.log, nothing else: verify's UNKNOWN not-a-store; create --from migrated it into an
    # empty Artemis store and exited 1 (salvaging nothing is still nothing)
    from amqtool.commands.main import main

    src = tmp_path / "random"
    src.mkdir()
    (src / "db-1.log").write_bytes(os.urandom(70000))
    out = tmp_path / "out"
    code = main([a.format(src=src, out=out) for a in args])
    err = capsys.readouterr().err
    assert code == 3 and not out.exists()
    assert "not-a-store" in err and "nothing was written" in err and "Traceback" not in err
