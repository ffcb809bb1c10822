"""``amqtool export STORE [STORE ...]`` with the local engine: one dataset of a fleet (demo Artemis stores,
one with a node id; KahaDB fixture copies; one damaged, one empty). Each store's rows, without the
``store`` column, equal its single-store export's rows; the ``stores`` table has one row per input with its
verdict; a store that fails halfway leaves no row; store selection (lists, patterns, URIs) and naming."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from amqtool.engines.export.fleet import (
    FleetRequest, FleetStore, expand_stores, is_fleet, name_stores, plan_stores, run_fleet_export,
)
from amqtool.errors import AmqtoolError, UsageError
from tests.engines.export_store import normalise
from tests.engines.fleet_stores import NODE_ID, build_fleet, fleet_rows_by_store, read_table, single_rows
from tests.support import KAHADB, tree_hashes


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, Path]:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


def _export(fleet, out, fmt="parquet", **kw):
    return run_fleet_export(FleetRequest(stores=[str(p) for p in fleet.values()], out=str(out), fmt=fmt,
                                         engine="local", **kw))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_rows_per_store_equal_single_store_export(fleet, tmp_path, fmt):
    before = {n: tree_hashes(p) for n, p in fleet.items()}
    doc, verdict = _export(fleet, tmp_path / "out", fmt)
    messages = fleet_rows_by_store(tmp_path / "out", "messages", fmt)
    bindings = fleet_rows_by_store(tmp_path / "out", "bindings", fmt)
    subscriptions = fleet_rows_by_store(tmp_path / "out", "subscriptions", fmt)
    # the empty store is not a store; verify calls the damaged one CRITICAL: refused without --salvage
    exported = {n for n, p in fleet.items() if n not in ("site-1/empty", "site-0/damaged")}
    assert set(messages) == exported and set(bindings) == exported
    # durable subscriptions: the Classic stores' (the KahaDB and LevelDB fixtures have some), none of an Artemis one
    assert set(subscriptions) == {n for n in exported if n.startswith(("site-1/kaha-", "site-1/leveldb-"))}
    by_name = {s["store"]: s for s in doc["stores"]}
    for name in exported:
        single_out = tmp_path / f"single-{len(name)}-{hash(name)}"
        want_m, want_b, single = single_rows(fleet[name], single_out, fmt)
        assert messages[name] == want_m, name
        assert bindings[name] == want_b, name
        assert subscriptions.get(name, []) == normalise(read_table(single_out / "subscriptions", fmt)), name
        for sub in subscriptions.get(name, []):  # the LevelDB fixture's sub2-selector has none pending
            assert sub["pending"] == sum(1 for m in messages[name] if m["queue"] == sub["queue"])
        assert all(sub["pending"] for sub in subscriptions.get(name, []) if sub["subscription_name"] != "sub2-selector")
        assert by_name[name]["rows"] == single["rows"] == len(want_m) > 0
        assert by_name[name]["messages"] == single["messages"]
        assert by_name[name]["problemCount"] == single["problemCount"]
        assert by_name[name]["bindings"] == single["bindings"] == len(want_b)
    assert doc["rows"] == sum(len(v) for v in messages.values())
    assert doc["subscriptions"] == sum(len(v) for v in subscriptions.values()) == 5  # basic 2, mkahadb 1, leveldb 2
    assert verdict.name == "CRITICAL"  # the damaged store (and the empty one is UNKNOWN)
    assert {n: tree_hashes(p) for n, p in fleet.items()} == before  # the stores are only read


def test_stores_table_and_partitions(fleet, tmp_path):
    out = tmp_path / "out"
    doc, _ = _export(fleet, out)
    stores = {r["store"]: r for r in read_table(out / "stores", "parquet")}
    assert set(stores) == set(fleet)
    assert [s["store"] for s in doc["stores"]] == list(fleet)  # in the order given
    for name, r in stores.items():
        assert r["path"] == str(fleet[name])
        want = {k: v for k, v in doc["stores"][list(fleet).index(name)].items()}
        assert (r["verdict"], r["rows"], r["files"], r["bytes"]) == \
            (want["verdict"], want["rows"], want["files"], want["bytes"])
    assert stores[NODE_ID]["node_id"] == NODE_ID and stores[NODE_ID]["kind"] == "artemis"
    assert stores["site-1/empty"]["verdict"] == "UNKNOWN" and stores["site-1/empty"]["kind"] is None
    assert "it is empty: no Artemis journal, KahaDB or LevelDB store found here" in stores["site-1/empty"]["problem"]
    assert (stores["site-1/empty"]["rows"], stores["site-1/empty"]["files"]) == (0, 0)
    dmg = stores["site-0/damaged"]  # a file Artemis refuses to start with: verify's CRITICAL, refused
    assert dmg["verdict"] == "CRITICAL" and "format version -1" in dmg["problem"] and "--salvage" in dmg["problem"]
    assert dmg["rows"] == 0 and not (out / "messages" / "store=site-0%2Fdamaged").exists()
    for name in ("site-0/broker-2", "site-1/broker-1"):
        assert stores[name]["verdict"] == "OK" and stores[name]["files"] >= 4 and stores[name]["node_id"] is None
    if KAHADB.is_dir():
        assert stores["site-1/kaha-basic"]["kind"] == "kahadb" and stores["site-1/kaha-basic"]["verdict"] == "OK"
    assert doc["storesByVerdict"] == {"OK": len(fleet) - 2, "WARNING": 0, "CRITICAL": 1, "UNKNOWN": 1}
    # Parquet: messages partitioned by store then queue (Spark's escaping: '/' is %2F), bindings by store
    assert (out / "messages" / "store=site-0%2Fbroker-2").is_dir()
    assert all(p.name.startswith("queue=") for p in (out / "messages" / "store=site-0%2Fbroker-2").iterdir())
    assert (out / "bindings" / f"store={NODE_ID}").is_dir()
    assert not (out / "messages" / "store=site-1%2Fempty").exists()
    assert json.loads((out / "export.json").read_text())["stores"] == doc["stores"]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_an_artemis_only_fleet_has_an_empty_subscriptions_table(fleet, tmp_path, fmt):
    """As every table a fleet has: written (empty, with its schema) when no store gives it a row."""
    from amqtool.engines.export.schema import FLEET_SUBSCRIPTION_COLUMNS

    artemis = {n: p for n, p in fleet.items() if "/broker-" in n or n == NODE_ID}
    assert len(artemis) == 3
    run_fleet_export(FleetRequest(stores=[str(p) for p in artemis.values()], out=str(tmp_path / "out"), fmt=fmt,
                                  engine="local"))
    assert read_table(tmp_path / "out" / "subscriptions", fmt) == []
    assert read_table(tmp_path / "out" / "messages", fmt)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        f = next((tmp_path / "out" / "subscriptions").glob("*.parquet"))
        assert pq.read_schema(f).names == [c[0] for c in FLEET_SUBSCRIPTION_COLUMNS]


def test_a_store_failing_halfway_leaves_no_rows(fleet, tmp_path, monkeypatch):
    """A store whose export raises after its first batch (an I/O error reading it): its row says why, and
    none of its rows reach the dataset; the other stores are whole."""
    from amqtool.engines.export import local

    victim = str(fleet["site-0/broker-2"])
    real = local.LocalArtemisExport.batches

    def batches(self, use_native=None):
        for i, b in enumerate(real(self, use_native)):
            yield b
            if str(self._store.root).startswith(victim) and i == 0:
                raise OSError(errno.EIO, "Input/output error", victim)

    monkeypatch.setattr(local.LocalArtemisExport, "batches", batches)
    doc, _ = _export(fleet, tmp_path / "out")
    row = {s["store"]: s for s in doc["stores"]}["site-0/broker-2"]
    assert row["verdict"] == "UNKNOWN" and row["rows"] == 0 and "Input/output error" in row["problem"]
    messages = fleet_rows_by_store(tmp_path / "out", "messages", "parquet")
    assert "site-0/broker-2" not in messages and "site-1/broker-1" in messages
    assert "site-0/broker-2" not in fleet_rows_by_store(tmp_path / "out", "bindings", "parquet")


def test_no_space_fails_the_whole_export(fleet, tmp_path, monkeypatch):
    from amqtool.engines.export import writers

    real = writers.FileMaker.open_file
    calls = []

    def open_file(self, relative):
        calls.append(relative)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, relative)

    monkeypatch.setattr(writers.FileMaker, "open_file", open_file)
    with pytest.raises(AmqtoolError, match="No space left on device"):
        _export(fleet, tmp_path / "out")
    assert os.listdir(tmp_path) == []  # neither the output nor its work directory


def test_store_selection(tmp_path, monkeypatch):
    for p in ("b/x-1", "b/x-2", "b/y-1", "b/[lit]", "c/x-9"):
        (tmp_path / p).mkdir(parents=True)
    (tmp_path / "b" / "x-file").write_text("")
    monkeypatch.chdir(tmp_path)
    b = str(tmp_path / "b")
    assert expand_stores(["b/x-*"]) == [f"{b}/x-1", f"{b}/x-2"]  # directories only, sorted
    assert expand_stores(["b/[lit]"]) == [f"{b}/[lit]"]  # an existing name is taken literally
    assert expand_stores([f"file://{b}/y-1", "b/y-1", f"{b}/../b/y-1"]) == [f"{b}/y-1"]  # once each
    lst = tmp_path / "list"
    lst.write_text(f"# nightly backups\n\n  b/y-1  \nc/*\n{b}/x-1\n")
    assert expand_stores(["b/x-2"], str(lst)) == [f"{b}/x-2", f"{b}/y-1", str(tmp_path / "c/x-9"), f"{b}/x-1"]
    with pytest.raises(UsageError, match="no store directory matches 'b/z-\\*'"):
        expand_stores(["b/z-*"])
    with pytest.raises(UsageError, match="only local file:// URIs"):
        expand_stores(["file://host/b"])
    (tmp_path / "empty-list").write_text("# nothing\n")
    with pytest.raises(UsageError, match="no stores to export"):
        expand_stores([], str(tmp_path / "empty-list"))
    assert is_fleet(["b/x-*"]) and is_fleet(["a", "b"]) and is_fleet([], "list")
    assert not is_fleet(["b/[lit]"]) and not is_fleet(["b/x-1"]) and not is_fleet([])


def test_store_names():
    def names(*stores):
        fs = [FleetStore(i, p, node_id=n) for i, (p, n) in enumerate(stores)]
        name_stores(fs)
        return [s.name for s in fs]

    assert names(("/b/s1/x", "N1"), ("/b/s2/x", None), ("/b/s2/y", "N2")) == ["N1", "s2/x", "N2"]
    # two backups of one broker share its node id: their paths tell them apart
    assert names(("/b/mon/x", "N1"), ("/b/tue/x", "N1"), ("/b/tue/y", "N2")) == ["mon/x", "tue/x", "N2"]
    assert names(("/b/only", None)) == ["only"]  # a fleet of one: its own name
    assert names(("/b/x", None), ("/b/x/y", None)) == ["x", "y"]  # the root itself is one of the stores
    assert names(("/a/N1", None), ("/a/q", "N1")) == ["N1", "N1#2"]


def test_survey_reads_no_journal(fleet):
    stores = plan_stores([str(fleet[NODE_ID]), str(fleet["site-1/empty"])])
    assert stores[0].node_id == NODE_ID and stores[0].kind == "artemis" and stores[0].error is None
    assert stores[0].bytes == sum(p.stat().st_size for p in (fleet[NODE_ID] / "data").glob("*/*.*mq")) + \
        sum(p.stat().st_size for p in (fleet[NODE_ID] / "data" / "bindings").glob("*.bindings"))
    assert stores[1].error and stores[1].kind is None


def test_cli_fleet(run_cli, fleet, tmp_path):
    paths = [str(p) for p in fleet.values()]
    code, stdout, _ = run_cli("export", *paths, "-o", tmp_path / "o", "--engine", "local", "--report", "json", "-q")
    doc = json.loads(stdout)
    assert code == 2 and doc["verdict"] == "CRITICAL" and doc["storeCount"] == len(fleet)
    assert doc["format"] == "parquet" and (tmp_path / "o" / "stores").is_dir()  # a fleet's default format
    root = next(iter(fleet.values())).parents[1]
    code, stdout, _ = run_cli("export", f"{root}/site-*/broker-*", "-o", tmp_path / "t", "-f", "jsonl",
                              "--engine", "local", "-q")
    assert code == 0 and stdout.startswith("exported ")
    assert "from 3 stores (3 OK, 0 with problems, 0 critical, 0 not read or checked)" in " ".join(stdout.split())
    code, _, stderr = run_cli("export", *paths, "-o", tmp_path / "x", "-f", "xml", "-q")
    assert code == 3 and "a fleet export writes tables" in stderr
    code, _, stderr = run_cli("export", f"{root}/nothing-*", "-o", tmp_path / "y", "-q")
    assert code == 3 and "no store directory matches" in stderr
    code, _, stderr = run_cli("export", *paths[:2], "-o", tmp_path / "z", "--broker-xml", tmp_path / "b.xml", "-q")
    assert code == 3 and "--broker-xml names the directories of one store" in stderr
    lst = tmp_path / "stores.txt"
    lst.write_text(f"# two of them\n{paths[0]}\n\n{root}/site-1/kaha-*\n")
    code, stdout, _ = run_cli("export", "--stores-from", lst, "-o", tmp_path / "l", "-f", "jsonl", "--engine", "local",
                              "--report", "json", "-q")
    doc = json.loads(stdout)
    assert [s["path"] for s in doc["stores"]] == [paths[0]] + sorted(str(p) for n, p in fleet.items() if "kaha-" in n)
    assert code == 0 and doc["storesByVerdict"]["OK"] == doc["storeCount"] == 1 + sum("kaha-" in n for n in fleet)


def test_queue_matching_nothing_in_the_fleet_is_a_warning(run_cli, fleet, tmp_path):
    """As for one store: --queue that matches no queue of any store warns, naming the queues there are; a
    pattern matching a queue of one store is fine."""
    paths = [str(p) for n, p in fleet.items() if "kaha-" in n]
    code, stdout, _ = run_cli("export", *paths, "-o", tmp_path / "a", "--engine", "local", "--queue", "nomatch*",
                              "--report", "json", "-q")
    doc = json.loads(stdout)
    assert code == 1 and doc["verdict"] == "WARNING" and doc["rows"] == 0
    assert "no queue of any store matches --queue nomatch*" in doc["queueMismatch"]
    assert "fx." in doc["queueMismatch"]  # the KahaDB fixtures' queues are named
    some = doc["queueMismatch"].split("queues: ")[1].split(", ")[0]
    code, stdout, _ = run_cli("export", *paths, "-o", tmp_path / "b", "--engine", "local", "--queue", some,
                              "--report", "json", "-q")
    doc = json.loads(stdout)
    assert code == 0 and "queueMismatch" not in doc and doc["rows"] > 0


def test_store_progress_figures(fleet, tmp_path):
    seen = []
    doc, _ = run_fleet_export(FleetRequest(stores=[str(p) for p in fleet.values()], out=str(tmp_path / "o"),
                                           engine="local"), store_progress=seen.append)
    assert [f["done"] for f in seen] == list(range(1, len(fleet) + 1)) and {f["total"] for f in seen} == {len(fleet)}
    assert [f["rows"] for f in seen] == [sum(s["rows"] for s in doc["stores"][:i + 1]) for i in range(len(fleet))]
    assert seen[-1]["bytes"] == seen[-1]["totalBytes"] == doc["bytes"] > 0
    assert seen[-1]["slowest"] in fleet and seen[-1]["slowestSeconds"] == max(f["slowestSeconds"] for f in seen)


def test_spark_store_watcher(tmp_path):
    """The driver's view of the tasks' marker files: a sliced store is done when all its slices are, a store
    of a group at once; each store reported once, a retried attempt's marker ignored."""
    from amqtool.engines.export.fleet import FleetProgress
    from amqtool.engines.export.spark_export import _StoreWatcher

    stores = {i: FleetStore(i, f"/s/{i}", name=f"s{i}", bytes=10 * (i + 1)) for i in range(3)}
    seen = []
    w = _StoreWatcher(str(tmp_path), FleetProgress(3, 60, seen.append), stores)
    w.expected[0] = 2
    (tmp_path / "0-0.attempt-1").write_text("5 1.5\n")
    (tmp_path / "1-0.attempt-2").write_text("7 0.5\n")
    (tmp_path / ".2-0.attempt-3").write_text("9 9\n")  # not yet renamed into place
    w.poll()
    assert [(f["done"], f["rows"], f["bytes"]) for f in seen] == [(1, 7, 20)]
    (tmp_path / "0-1.attempt-4").write_text("6 2.0\n")
    (tmp_path / "0-1.attempt-5").write_text("6 2.0\n")  # a second attempt of the same part
    w.poll()
    assert [(f["done"], f["rows"], f["slowest"], f["slowestSeconds"]) for f in seen][-1] == (2, 18, "s0", 3.5)
    w.store_done(0, 11, 3.5)  # already reported: not again
    w.store_done(2, 0, 0.0)
    w.poll()
    assert [f["done"] for f in seen] == [1, 2, 3]
