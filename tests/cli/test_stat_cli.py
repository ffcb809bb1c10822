"""`amqtool stat` (issue 19): per-queue, per-address and per-journal figures equal the demo manifest, the
KahaDB fixture manifests, print's queueSummary and compact's dry-run figures; stat never writes."""
from __future__ import annotations

import hashlib
import json

import pytest

from amqtool.engines.artemis.demo import create_demo
from tests.support import KAHADB, ORACLE, ORACLE_SCENARIOS

DEMO_START = 1717200000000  # the demo broker's clock starts here (2024-06-01T00:00:00Z)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("stat") / "demo"
    manifest = create_demo(root, 8 * 1024 * 1024, file_size=1024 * 1024, seed=13)
    return root, manifest


def _rows(doc):
    return {(r["name"], r["subscription"]): r for r in doc["queues"]}


def _hashes(root):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_queue_rows_equal_the_demo_manifest(demo, run_json):
    root, manifest = demo
    before = _hashes(root)
    code, doc, _ = run_json("stat", root, "--at", DEMO_START)
    assert code == 0 and doc["verdict"] == "OK" and doc["kind"] == "artemis" and doc["now"] == DEMO_START
    rows = _rows(doc)
    live = manifest["expected"]["liveByQueue"]
    pending = manifest["expected"]["paging"]["pendingByQueue"]
    assert {name for name, _ in rows} == set(live)
    for name, entries in live.items():
        r = rows[(name, None)]
        # the broker's count (QueueImpl.getMessageCount): journal references plus the paged part (issue 27)
        assert r["messages"] - r["paged"] == len(entries) == manifest["expected"]["messageCounts"][name], name
        assert r["bytes"] == sum(e["recordSize"] for e in entries), name
        assert r["large"] == sum(1 for e in entries if "largeMessageFile" in e), name
        assert r["redelivered"] == sum(1 for e in entries if e.get("deliveryCount", 0) > 0), name
        assert r["scheduled"] == sum(1 for e in entries if e.get("scheduledDeliveryTime", 0) > DEMO_START), name
        assert r["paged"] == len(pending.get(name, ())), name
    assert sum(r["scheduled"] for r in rows.values()) > 0  # the demo schedules some: the count is exercised
    assert sum(r["paged"] for r in rows.values()) > 0
    prepared_refs = sum(1 for tx in manifest["expected"]["prepared"] for rec in tx["records"]
                        if rec["userRecordType"] == 32)
    assert sum(r["prepared"] for r in rows.values()) == prepared_refs > 0
    assert doc["totals"]["messages"] == manifest["counts"]["refsLive"] + sum(len(v) for v in pending.values())
    assert _hashes(root) == before  # read-only


def test_scheduled_and_expired_follow_the_instant(demo, run_json):
    root, manifest = demo
    _, late, _ = run_json("stat", root, "--at", 2 ** 62)
    rows = late["queues"]
    assert sum(r["scheduled"] for r in rows) == 0  # every schedule has passed by then
    assert all(r["oldestAgeSeconds"] is None or r["oldestAgeSeconds"] > 0 for r in rows)


def test_oldest_and_newest_are_the_message_timestamps(demo):
    """The in-place header read equals the full decode (BrokerState.message) for every live message."""
    from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state
    from amqtool.engines.artemis.journal_print import PrintOptions, load_store
    from amqtool.engines.stat import stat_store
    from amqtool.store.layout import detect

    root, _ = demo
    store = detect(str(root))
    loads = {}
    expect: dict[str, list[int]] = {}
    for journal, result in load_store(store, PrintOptions()):
        loads[journal.kind] = result
        if journal.kind == "messages":
            state = build_broker_state(loads.get("bindings"), result, decode=REF_TYPES)
            for name, mids in state.live_by_queue().items():
                stamps = [state.message(mid).timestamp for mid in mids]
                expect[name] = [min(stamps), max(stamps)]
    doc = stat_store(store, now=DEMO_START)
    got = {r["name"]: [r["oldest"], r["newest"]] for r in doc["queues"] if r["messages"] - r["paged"]}
    assert got == expect and len(got) >= 5


def test_messages_equal_print_queue_summary(demo, run_json):
    root, _ = demo
    _, printed, _ = run_json("print", root, "--safe")
    _, doc, _ = run_json("stat", root)
    assert {q["name"]: q["messages"] for q in printed["queueSummary"]["queues"]} == \
        {r["name"]: r["messages"] - r["paged"] for r in doc["queues"]}


def test_messages_include_the_paged_ones(demo, run_json):
    """Issue 27: a queue whose messages are all paged showed messages 0 beside paged 488. Artemis'
    QueueImpl.getMessageCount adds the page subscription's count: ``messages`` is that total, in every
    output (JSON, text, prometheus)."""
    root, manifest = demo
    pending = manifest["expected"]["paging"]["pendingByQueue"]
    live = manifest["expected"]["liveByQueue"]
    _, doc, _ = run_json("stat", root, "--at", DEMO_START)
    rows = {r["name"]: r for r in doc["queues"]}
    only_paged = [q for q in pending if pending[q] and not live.get(q)]
    assert only_paged  # the demo has a queue whose backlog is all in page files
    for q in rows:
        assert rows[q]["messages"] == len(live.get(q, ())) + len(pending.get(q, ())), q
    q = only_paged[0]
    assert rows[q]["messages"] == rows[q]["paged"] == len(pending[q]) > 0


def test_messages_include_the_paged_ones_in_text_and_prometheus(demo, run_cli, monkeypatch):
    root, manifest = demo
    pending = manifest["expected"]["paging"]["pendingByQueue"]
    live = manifest["expected"]["liveByQueue"]
    q = next(q for q in pending if pending[q] and not live.get(q))
    _, prom, _ = run_cli("stat", root, "--at", DEMO_START, "--format", "prometheus")
    line = next(x for x in prom.splitlines() if x.startswith("amqtool_queue_messages{") and f'queue="{q}"' in x)
    assert float(line.rsplit(" ", 1)[1]) == len(pending[q])
    monkeypatch.setenv("COLUMNS", "200")
    _, text, _ = run_cli("stat", root, "--at", DEMO_START, "--wide")
    header = next(x for x in text.splitlines() if x.startswith("queue "))
    cells = next(x for x in text.splitlines() if x.startswith(q + " ")).split()
    names = header.split()
    assert cells[names.index("messages")] == str(len(pending[q])) == cells[names.index("paged")]


def test_address_and_journal_rows(demo, run_json):
    root, manifest = demo
    _, doc, _ = run_json("stat", root, "--reclaim")
    paging = manifest["expected"]["paging"]
    by_address = {a["address"]: a for a in doc["addresses"]}
    assert set(by_address) == {s["address"] for s in paging["stores"]}
    for s in paging["stores"]:
        a = by_address[s["address"]]
        assert a["pageFiles"] == s["numberOfPages"]
        assert a["bytes"] == sum(p["size"] for p in s["pages"])
        pending_pages = {m["page"] for m in paging["messages"]
                         if m["address"] == s["address"] and m["deliverable"] and m["pendingQueues"]}
        assert a["pagesToConsume"] == len(pending_pages)
        assert a["pagedMessages"] == sum(1 for m in paging["messages"]
                                         if m["address"] == s["address"] and m["deliverable"] and m["pendingQueues"])
    journals = {j["journal"]: j for j in doc["journals"]}
    _, dry, _ = run_json("compact", root, "--dry-run")
    _, reclaim, _ = run_json("compact", root, "--dry-run", "--reclaim-only")
    for kind, rel in (("bindings", "data/bindings"), ("messages", "data/journal")):
        j = journals[kind]
        m = manifest["expected"]["journals"][kind]
        assert j["files"] == len(m["files"]) and j["bytes"] == sum(f["size"] for f in m["files"])
        planned = next(x for x in dry["journals"] if x["journal"] == kind)
        assert j["liveBytes"] == planned["liveBytes"] and j["liveRatio"] == planned["liveRatio"]
        assert j["compactFrees"] == planned["reclaimedBytes"] and j["compactNeeded"] == planned["needed"]
        freed = next(x for x in reclaim["journals"] if x["journal"] == kind)
        assert j["reclaimOnlyFrees"] == freed["reclaimedBytes"]
    assert doc["totals"]["journalBytes"] == sum(j["bytes"] for j in doc["journals"])


def test_sort_top_and_jsonl(demo, run_json, run_cli, monkeypatch):
    root, _ = demo
    monkeypatch.setenv("COLUMNS", "200")
    _, by_bytes, _ = run_json("stat", root)
    sizes = [r["bytes"] for r in by_bytes["queues"]]
    assert sizes == sorted(sizes, reverse=True)
    _, by_msgs, _ = run_json("stat", root, "--sort", "messages", "--top", "3")
    assert len(by_msgs["queues"]) == 3
    assert [r["messages"] for r in by_msgs["queues"]] == sorted((r["messages"] for r in by_bytes["queues"]),
                                                                reverse=True)[:3]
    assert by_msgs["totals"] == by_bytes["totals"]  # --top trims rows, not totals
    _, oldest, _ = run_json("stat", root, "--sort", "oldest")
    stamps = [r["oldest"] for r in oldest["queues"]]
    known = [s for s in stamps if s is not None]
    assert known == sorted(known) and stamps[:len(known)] == known  # rows without a time last
    code, out, _ = run_cli("stat", root, "--format", "jsonl")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and lines[-1]["record"] == "summary" and lines[-1]["verdict"] == "OK"
    assert sum(1 for x in lines if x["record"] == "queue") == len(by_bytes["queues"])
    assert sum(1 for x in lines if x["record"] == "journal") == 2
    code, text, _ = run_cli("stat", root)
    assert code == 0 and "orders" in text and "journals" in text


def test_bad_input(run_cli, tmp_path):
    assert run_cli("stat", tmp_path / "nowhere")[0] == 3
    assert run_cli("stat", tmp_path, "--top", "-1")[0] == 3
    assert run_cli("stat", tmp_path, "--sort", "size")[0] == 3


@pytest.mark.parametrize("scenario", ORACLE_SCENARIOS)
def test_oracle_fixtures_equal_queue_summary(scenario, run_json):
    path = ORACLE / scenario / "journal"
    code, doc, _ = run_json("stat", path)
    assert code in (0, 1, 2) and doc["journals"]
    _, printed, _ = run_json("print", path, "--safe")
    summary = printed.get("queueSummary")
    if summary is not None:
        assert sum(r["messages"] for r in doc["queues"]) == sum(q["messages"] for q in summary["queues"])


@pytest.mark.parametrize("dataset,store", [("basic", "kahadb"), ("tx", "kahadb"), ("gc", "kahadb"),
                                           ("mkahadb", "mkahadb")])
def test_kahadb_fixtures_hold_back_counts(dataset, store, run_json):
    if not KAHADB.is_dir():
        pytest.skip(f"KahaDB fixtures not found at {KAHADB}")
    manifest = json.loads((KAHADB / dataset / "manifest.json").read_text())
    code, doc, _ = run_json("stat", KAHADB / dataset / store)
    assert code == 0
    rows = _rows(doc)
    for dest, d in manifest["destinations"].items():
        name = dest.rsplit("/", 1)[1]
        assert rows[(name, None)]["messages"] == d["live"], dest
        for sub, s in d.get("durable_subscriptions", {}).items():
            if "pending" in s:
                assert rows[(name, sub.replace("/", ":"))]["messages"] == s["pending"], sub
    live_sizes = {}
    for m in manifest["messages"]:
        live_sizes.setdefault(m["destination"], 0)
    assert doc["totals"]["journalBytes"] == sum(f["size"] for f in manifest["files"]
                                                if f["path"].rsplit("/", 1)[1].startswith("db-")
                                                and f["path"].endswith(".log"))
    for j in doc["journals"]:
        assert j["reclaimOnlyFrees"] is not None and 0 <= j["reclaimOnlyFrees"] <= j["bytes"]


def test_kahadb_prepared_sends_are_held_back(tmp_path, run_cli, run_json):
    """A crash right after an XA PREPARE (the mkahadb fixture's mk-tx-1: its COMMIT and everything after it
    zeroed in fx.m.one's store, the index dropped so the journal is replayed, and the txStore, whose COMMIT
    would resolve it, not written yet): the transaction's sends count as prepared on their destination, not
    as live messages."""
    import os
    import shutil

    if not KAHADB.is_dir():
        pytest.skip(f"KahaDB fixtures not found at {KAHADB}")
    manifest = json.loads((KAHADB / "mkahadb" / "manifest.json").read_text())
    tx = next(t for t in manifest["transactions"] if t["transaction"] == "mk-tx-1")
    held = sum(1 for fx in tx["fx_ids"] if "fx.m.one" in fx)
    store = tmp_path / "mkahadb"
    shutil.copytree(KAHADB / "mkahadb" / "mkahadb", store)
    for dirpath, _, names in os.walk(store):
        for n in names:
            os.chmod(os.path.join(dirpath, n), 0o644)
    sub = store / "queue#3a#2f#2ffx.m.one"
    code, out, _ = run_cli("print", sub, "--format", "jsonl", "--safe")
    rows = [json.loads(x) for x in out.splitlines()]
    prepare = next(r for r in rows if r.get("type") == "KAHA_PREPARE_COMMAND")
    path = sub / prepare["file"]
    end = prepare["offset"] + prepare["length"]
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # as if the broker stopped right after the PREPARE
        fh.seek(end)
        fh.write(b"\0" * (size - end))
    for later in sub.glob("db-*.log"):
        if int(later.stem.split("-")[1]) > int(path.stem.split("-")[1]):
            later.unlink()
    for index in ("db.data", "db.redo"):
        (sub / index).unlink()
    shutil.rmtree(store / "txStore")
    _, printed, _ = run_json("print", store, "--safe")
    open_tx = [t for s in printed["stores"] for t in s["transactions"] if t["state"] == "prepared"]
    assert len(open_tx) == 1 and open_tx[0]["sendsTo"] == {"0:fx.m.one": held}
    code, doc, _ = run_json("stat", store)
    rows = _rows(doc)
    assert rows[("fx.m.one", None)]["prepared"] == held == 2
    assert sum(r["prepared"] for r in doc["queues"]) == held
    assert code == 1 and doc["verdict"] == "WARNING"  # a store with a prepared transaction, as print says


# --- the verdict is verify's (issue 25, "one rule for every command that judges") ------------------------

def _judged(run_json, path):
    """(exit code, verdict) of verify, print and stat on ``path``."""
    out = {}
    for command in ("verify", "print", "stat"):
        args = (command, path, "--safe") if command == "print" else (command, path)
        code, doc, _ = run_json(*args)
        out[command] = (code, doc["verdict"])
    return out


def test_random_bytes_named_like_a_journal_file_is_unknown_for_stat_too(tmp_path, run_json):
    # stat said CRITICAL where verify and print say UNKNOWN (not a store): its verdict came from the files
    # compaction refuses, not from verify
    import random

    (tmp_path / "activemq-data-1.amq").write_bytes(random.Random(25).randbytes(1 << 20))
    judged = _judged(run_json, tmp_path)
    assert judged == {c: (3, "UNKNOWN") for c in ("verify", "print", "stat")}, judged


def test_stat_text_says_its_verdict_and_where_to_read_why(tmp_path, run_cli):
    # the tables of a store that is not OK gave no hint why stat exited 1, 2 or 3: the last line says so
    import random

    (tmp_path / "activemq-data-1.amq").write_bytes(random.Random(25).randbytes(1 << 20))
    code, out, _ = run_cli("stat", str(tmp_path))
    assert code == 3
    text = " ".join(out.split())  # long lines fold at 80 columns
    assert text.endswith(f"verdict: UNKNOWN (verify's; 'amqtool verify {tmp_path}' lists the findings)"), out


@pytest.mark.parametrize("which", ["first", "last"])
def test_a_lone_truncated_journal_file_gets_verify_verdict_from_stat(demo, tmp_path, run_json, which):
    # a lone message journal file cut short: verify WARNING (a torn tail), stat OK
    root, _ = demo
    files = sorted((root / "data" / "journal").glob("*.amq"), key=lambda p: int(p.stem.split("-")[-1]))
    victim = files[0] if which == "first" else files[-1]
    lone = tmp_path / "lone"
    lone.mkdir()
    data = victim.read_bytes()
    end = len(data.rstrip(b"\0"))
    (lone / victim.name).write_bytes(data[:end * 2 // 3])
    judged = _judged(run_json, lone)
    assert judged["stat"] == judged["verify"] == judged["print"], judged
    assert judged["verify"][0] != 0, judged  # the cut is seen at all
