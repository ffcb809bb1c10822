"""create: plain journals as Artemis' first start; demo stores that load back to exactly their manifest."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from amqtool.engines.artemis.create import create_journals, parse_size
from amqtool.engines.artemis.demo import create_demo
from amqtool.engines.artemis.load import load_journal
from amqtool.errors import StoreLockedError, UsageError
from amqtool.formats.artemis.message import CoreMessage, LargeMessage
from amqtool.formats.artemis.records import decode_header
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.support import tree_hashes

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "store"
    seen = []
    manifest = create_demo(root, 8 * MiB, seed=5, live_ratio=0.3, file_size=1 * MiB, progress=seen.append)
    return root, manifest, seen


def _loaded(root: Path):
    store = detect(root)
    out = {}
    for kind, jd in (("bindings", store.bindings), ("messages", store.messages)):
        oj = open_journal(jd)
        out[kind] = load_journal(oj)
    return store, out


def _live_json(res) -> list[dict]:
    return [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
             "compactCount": r.compact_count, "bodySize": r.body_len, "bodySha256": res.body_sha256(r)}
            for r in res.live]


# --- plain create ------------------------------------------------------------------------------------------

def test_messages_journal_defaults(tmp_path):
    (cj,) = create_journals(tmp_path / "journal")
    names = sorted(os.listdir(tmp_path / "journal"))
    assert names == ["activemq-data-1.amq", "activemq-data-2.amq"]
    for i, n in enumerate(names, 1):
        data = (tmp_path / "journal" / n).read_bytes()
        assert len(data) == 10 * MiB
        h = decode_header(data)
        assert (h.version, h.user_version, h.file_id) == (2, 0, i)
        assert not any(data[16:])
    assert [f["fileId"] for f in cj.files] == [1, 2]


def test_messages_journal_options(tmp_path):
    create_journals(tmp_path / "j", "messages", file_size=parse_size("128KiB"), min_files=4)
    names = sorted(os.listdir(tmp_path / "j"))
    assert names == [f"activemq-data-{i}.amq" for i in range(1, 5)]
    assert {os.path.getsize(tmp_path / "j" / n) for n in names} == {128 * 1024}


def test_broker_layout(tmp_path):
    out = create_journals(tmp_path / "b", "broker", file_size=256 * 1024)
    assert [c.kind for c in out] == ["bindings", "messages"]
    data = tmp_path / "b" / "data"
    assert sorted(os.listdir(data)) == ["bindings", "journal", "large-messages", "paging"]
    assert sorted(os.listdir(data / "bindings")) == ["activemq-bindings-1.bindings", "activemq-bindings-2.bindings"]
    store, loaded = _loaded(tmp_path / "b")
    assert store.bindings and store.messages
    for res in loaded.values():
        assert res.live == [] and res.prepared == [] and res.failed == []


def test_existing_journal_is_refused_untouched(tmp_path):
    create_journals(tmp_path / "j", "messages", file_size=64 * 1024)
    before = tree_hashes(tmp_path)
    for kind in ("messages", "broker"):
        target = tmp_path / "j" if kind == "messages" else tmp_path
        if kind == "broker":
            (tmp_path / "data").mkdir()
            os.rename(tmp_path / "j", tmp_path / "data" / "journal")
            before = tree_hashes(tmp_path)
        with pytest.raises(UsageError, match="existing journal"):
            create_journals(target, kind, file_size=64 * 1024)
        assert tree_hashes(tmp_path) == before


def test_leftover_tmp_counts_as_a_journal(tmp_path):
    d = tmp_path / "j"
    d.mkdir()
    (d / "activemq-data-3.amq.tmp").write_bytes(b"x")
    with pytest.raises(UsageError):
        create_journals(d)


def test_bindings_size_options_are_refused(tmp_path):
    with pytest.raises(UsageError):
        create_journals(tmp_path / "b", "bindings", file_size=MiB)
    assert not (tmp_path / "b").exists()


def test_locked_directory_is_refused(tmp_path):
    import fcntl

    d = tmp_path / "journal"
    d.mkdir()
    with open(d / "serverlock.1", "wb") as fh:
        fcntl.lockf(fh, fcntl.LOCK_EX)
        with pytest.raises(StoreLockedError):
            create_journals(d)
    assert os.listdir(d) == ["serverlock.1"]


@pytest.mark.parametrize("bad", ["", "abc", "-1", "0", "12XB"])
def test_parse_size_rejects(bad):
    with pytest.raises(UsageError):
        parse_size(bad)


def test_parse_size():
    assert parse_size("64MiB") == 64 * MiB
    assert parse_size("1GiB") == 1024 * MiB
    assert parse_size("10485760") == 10 * MiB


# --- demo --------------------------------------------------------------------------------------------------

def test_demo_layout_and_no_leftovers(demo):
    root, manifest, seen = demo
    assert sorted(os.listdir(root)) == ["data", "manifest.json"]
    assert sorted(os.listdir(root / "data")) == ["bindings", "journal", "large-messages", "paging"]
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]  # the temporary dir is gone
    for sub in ("bindings", "journal"):
        assert not [n for n in os.listdir(root / "data" / sub) if not n.endswith((".amq", ".bindings"))]
    assert json.loads((root / "manifest.json").read_text()) == manifest
    assert sum(seen) == 8 * MiB  # progress adds up to the requested size
    total = sum(os.path.getsize(Path(d) / n) for d, _, ns in os.walk(root / "data") for n in ns)
    assert 6 * MiB <= total <= 12 * MiB


def test_demo_journals_load_to_the_manifest(demo):
    root, manifest, _ = demo
    _, loaded = _loaded(root)
    for kind in ("bindings", "messages"):
        exp = manifest["expected"]["journals"][kind]
        res = loaded[kind]
        assert _live_json(res) == exp["live"], kind
        assert len(res.live) == exp["liveRecordCount"]
        assert res.max_id == exp["maxId"]
        assert res.failed == [] and res.anomaly_counts == {}
        files = [{"name": f.name, "fileId": f.file_id, "size": f.size} for f in res.files]
        assert files == exp["files"]
    res = loaded["messages"]
    (p,) = res.prepared
    (ep,) = manifest["expected"]["prepared"]
    assert p.tx_id == ep["txId"] and p.extra.hex() == ep["extraDataHex"]
    assert [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update, "bodySize": r.body_len,
             "bodySha256": res.body_sha256(r)} for r in p.records] == ep["records"]
    assert loaded["bindings"].prepared == []


def test_demo_bindings_hold_every_address_and_queue(demo):
    root, manifest, _ = demo
    from amqtool.formats.artemis.userrecords import AddressBindingRecord, QueueBindingRecord

    _, loaded = _loaded(root)
    res = loaded["bindings"]
    addrs, queues, counters = {}, {}, []
    for r in res.live:
        body = res.body(r)
        if r.user_record_type == R.ADDRESS_BINDING_RECORD:
            addrs[r.id] = AddressBindingRecord.decode(body, record_id=r.id)
        elif r.user_record_type == R.QUEUE_BINDING_RECORD:
            queues[r.id] = QueueBindingRecord.decode(body, record_id=r.id)
        elif r.user_record_type == R.ID_COUNTER_RECORD:
            counters.append(r.id)
    assert {a["id"]: a["name"] for a in manifest["addresses"]} == {k: v.name for k, v in addrs.items()}
    for q in manifest["queues"]:
        got = queues[q["id"]]
        assert (got.name, got.address, got.routing_type_name, got.filter_string, got.user) == \
               (q["name"], q["address"], q["routingType"], q["filter"], q["user"])
    assert {q["routingType"] for q in manifest["queues"]} == {"ANYCAST", "MULTICAST"}
    assert any(q["filter"] for q in manifest["queues"])
    assert counters == manifest["idGenerator"]["counterRecordIds"]
    # ids were generated below the last value the ID generator stored
    assert max(r.id for r in loaded["messages"].live) < manifest["idGenerator"]["lastValue"]


def test_demo_live_messages_per_queue(demo):
    """Recompute refs minus acks per queue from the loaded journal and compare with liveByQueue."""
    root, manifest, _ = demo
    _, loaded = _loaded(root)
    res = loaded["messages"]
    qname = {q["id"]: q["name"] for q in manifest["queues"]}
    msgs, refs, acks, dcount, sched = {}, {}, {}, {}, {}
    for r in res.live:
        body = res.body(r)
        t = r.user_record_type
        if t == R.ADD_MESSAGE_PROTOCOL:
            m = CoreMessage.decode(body)
            msgs[r.id] = ("text" if m.headers.type == 3 else "bytes", m.body, len(body))
        elif t == R.ADD_LARGE_MESSAGE:
            lm = LargeMessage.decode(body)
            data = (root / "data" / "large-messages" / f"{r.id}.msg").read_bytes()
            assert lm.large_size == len(data)  # _AMQ_LARGE_SIZE is the .msg file size
            msgs[r.id] = ("large", data, len(body))
        elif t == R.ADD_REF:
            refs.setdefault(r.id, []).append(int.from_bytes(body, "big"))
        elif t == R.ACKNOWLEDGE_REF:
            acks.setdefault(r.id, set()).add(int.from_bytes(body, "big"))
        elif t == R.UPDATE_DELIVERY_COUNT:
            dcount[(r.id, int.from_bytes(body[:8], "big"))] = int.from_bytes(body[8:], "big")
        elif t == R.SET_SCHEDULED_DELIVERY_TIME:
            sched[(r.id, int.from_bytes(body[:8], "big"))] = int.from_bytes(body[8:], "big")
    got: dict[str, list] = {n: [] for n in qname.values()}
    for mid in sorted(msgs):
        kind, body, rsize = msgs[mid]
        for q in refs.get(mid, []):
            if q in acks.get(mid, set()):
                continue
            e = {"messageId": mid, "type": kind, "bodySize": len(body),
                 "bodySha256": hashlib.sha256(body).hexdigest(), "recordSize": rsize}
            got[qname[q]].append((e, dcount.get((mid, q)), sched.get((mid, q))))
    exp = manifest["expected"]["liveByQueue"]
    assert set(got) == set(exp)
    for q, entries in exp.items():
        assert [g[0] for g in got[q]] == [{k: e[k] for k in ("messageId", "type", "bodySize", "bodySha256",
                                                               "recordSize")} for e in entries], q
        assert [g[1] for g in got[q]] == [e.get("deliveryCount") for e in entries]
        assert [g[2] for g in got[q]] == [e.get("scheduledDeliveryTime") for e in entries]
    assert manifest["expected"]["messageCounts"] == {q: len(v) for q, v in exp.items()}
    kinds = {e["type"] for v in exp.values() for e in v}
    assert kinds == {"text", "bytes", "large"}


def test_demo_has_every_record_kind(demo):
    root, manifest, _ = demo
    c = manifest["counts"]
    for key in ("committedTx", "rolledBackTx", "acks", "deletes", "largeMessages", "duplicateIds",
                "deliveryCountUpdates", "scheduledUpdates"):
        assert c[key] > 0, key
    types = manifest["expected"]["journals"]["messages"]["liveRecordsByUserRecordType"]
    assert {"30", "32", "33", "36", "37", "45"} <= set(types)
    assert set(manifest["expected"]["journals"]["bindings"]["liveRecordsByUserRecordType"]) == {"21", "22", "24", "44"}
    assert 0.2 <= c["actualLiveRatio"] <= 0.4


def test_demo_large_messages_match_their_files(demo):
    root, manifest, _ = demo
    large = manifest["expected"]["largeMessages"]
    assert large
    on_disk = sorted(os.listdir(root / "data" / "large-messages"))
    assert on_disk == sorted(Path(e["file"]).name for e in large)
    for e in large:
        data = (root / e["file"]).read_bytes()
        assert len(data) == e["size"] and hashlib.sha256(data).hexdigest() == e["sha256"]


def test_demo_is_deterministic(tmp_path, demo):
    root, manifest, _ = demo
    again = create_demo(tmp_path / "again", 8 * MiB, seed=5, live_ratio=0.3, file_size=1 * MiB)
    assert again == manifest
    assert tree_hashes(tmp_path / "again" / "data") == tree_hashes(root / "data")
    other = create_demo(tmp_path / "other", 8 * MiB, seed=6, live_ratio=0.3, file_size=1 * MiB)
    assert other["expected"]["liveByQueue"] != manifest["expected"]["liveByQueue"]


@pytest.mark.parametrize("ratio", [0.1, 0.6])
def test_demo_live_ratio(tmp_path, ratio):
    m = create_demo(tmp_path / "d", 6 * MiB, seed=2, live_ratio=ratio, file_size=MiB, large_messages=False)
    assert abs(m["counts"]["actualLiveRatio"] - ratio) < 0.06
    assert m["expected"]["largeMessages"] == []
    assert os.listdir(tmp_path / "d" / "data" / "large-messages") == []


def test_demo_refuses_non_empty_directory(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep").write_bytes(b"x")
    with pytest.raises(UsageError):
        create_demo(tmp_path / "d", 8 * MiB)
    assert os.listdir(tmp_path / "d") == ["keep"]
    assert os.listdir(tmp_path) == ["d"]


def test_demo_into_empty_directory(tmp_path):
    (tmp_path / "d").mkdir()
    create_demo(tmp_path / "d", 5 * MiB, file_size=MiB)
    assert (tmp_path / "d" / "manifest.json").is_file()


def test_demo_failure_leaves_nothing(tmp_path):
    from amqtool.store import atomic

    with atomic.fault("rename", 1):  # the first rename (a journal file): a failure at any step
        with pytest.raises(atomic.InjectedFault):
            create_demo(tmp_path / "d", 5 * MiB, file_size=MiB)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kw", [dict(live_ratio=1.5), dict(live_ratio=-0.1), dict(size=MiB),
                                dict(file_size=16 * 1024)])
def test_demo_bad_arguments(tmp_path, kw):
    size = kw.pop("size", 8 * MiB)
    with pytest.raises(UsageError):
        create_demo(tmp_path / "d", size, **kw)
    assert not (tmp_path / "d").exists()


# --- paging (issue 8) --------------------------------------------------------------------------------------

def test_demo_paging_matches_the_paging_engine(demo):
    """Every paged message with its page, number, page-transaction state and queue states, as the
    broker's cursors (amqtool.engines.artemis.paging) see them, equals the manifest's paging section."""
    from amqtool.engines.artemis import paging as P

    root, manifest, _ = demo
    pg = manifest["expected"]["paging"]
    store = detect(root)
    view = P.load_view(store)
    keys = ("page", "messageNumber", "messageId", "transactionId", "pageTransaction", "queues", "queueStates",
            "pendingQueues", "deliverable")
    got = sorted(({"address": e.address, **{k: e.to_json()[k] for k in keys}}
                  for e in P.iter_paged_entries(store, view)), key=lambda d: (d["address"], d["page"], d["messageNumber"]))
    exp = sorted(({k: e[k] for k in ("address",) + keys} for e in pg["messages"]),
                 key=lambda d: (d["address"], d["page"], d["messageNumber"]))
    assert got == exp
    states = {e["pageTransaction"] for e in pg["messages"]}
    assert {None, "committed", "prepared", "not-found"} <= states
    qstates = {s for e in pg["messages"] for s in e["queueStates"].values()}
    assert {"acked", "pending"} <= qstates
    qid = {q["name"]: q["id"] for q in manifest["queues"]}
    assert {qid[k]: v for k, v in pg["counters"].items()} == view.counters()
    assert pg["counters"] == {k: len(v) for k, v in pg["pendingByQueue"].items() if v}
    rows = {}
    for entry, q in P.iter_paged_rows(store, view):
        rows.setdefault(q, []).append(entry.message.message_id)
    assert {k: sorted(v) for k, v in rows.items()} == {qid[k]: v for k, v in pg["pendingByQueue"].items() if v}


def test_demo_page_files(demo):
    from amqtool.formats.artemis.paging import PagedMessage, decode_page, encode_page_record, scan_page

    root, manifest, _ = demo
    pg = manifest["expected"]["paging"]
    c = manifest["counts"]
    assert c["pagesDeleted"] > 0 and c["pageCompleteRecords"] > 0 and c["pageCounterSnapshots"] > 0
    assert c["pagedLargeMessages"] == 1
    assert {s["address"] for s in pg["stores"]} == {"telemetry", "backlog"}
    for s in pg["stores"]:
        folder = root / s["folder"]
        assert (folder / "address.txt").read_text() == s["address"] + "\n"
        names = sorted(n for n in os.listdir(folder) if n != "address.txt")
        assert names == [p["file"] for p in s["pages"]]
        assert s["currentPage"] == max(p["pageId"] for p in s["pages"])
        for p in s["pages"]:
            data = (folder / p["file"]).read_bytes()
            assert len(data) == p["size"]
            spans, end = scan_page(data)
            assert end.clean and len(spans) == p["records"]
            msgs, _ = decode_page(data)
            assert b"".join(encode_page_record(m) for m in msgs) == data  # encode(decode(bytes)) == bytes
            assert all(m.address == s["address"] for m in msgs)
    # deleted pages leave a gap at the start, never in the middle
    for s in pg["stores"]:
        ids = [p["pageId"] for p in s["pages"]]
        assert ids == list(range(ids[0], ids[0] + len(ids)))
    types = manifest["expected"]["journals"]["messages"]["liveRecordsByUserRecordType"]
    assert {"35", "39", "40", "42"} <= set(types)


def test_demo_without_paging(tmp_path):
    m = create_demo(tmp_path / "d", 5 * MiB, file_size=MiB, paging=False)
    assert m["expected"]["paging"] is None
    assert os.listdir(tmp_path / "d" / "data" / "paging") == []
    assert "telemetry" not in {a["name"] for a in m["addresses"]}


@pytest.mark.parametrize("n", [0, 5, 8, 9, 4096, 3 * MiB + 7])
def test_demo_bodies_have_the_size_asked_for(tmp_path, n):
    from amqtool.engines.artemis.demo.broker import _Demo

    d = _Demo(tmp_path, 8 * MiB, 1, 0.3, MiB, 2, None, True)
    assert len(d._bytes_body(n, 123)) == n
