"""Transactions in a migration: messages of a prepared XA transaction are reported and left out, or with
``--include-prepared`` written in a prepared Artemis transaction carrying the same Xid; messages of an
unresolved local transaction are never migrated. Also: destinations Artemis would reject, a scheduler
store beside the source, redelivered messages. Stores are written here (:mod:`kahadb_builder`)."""
from __future__ import annotations

import json

from amqtool.commands.main import main
from amqtool.engines.artemis.load import load_journal
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.formats.artemis.primitives import Xid
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.engines.migrate.kahadb_builder import LOCAL, XA, Store

N = {n: i for i, n in enumerate(MESSAGE_COLUMN_NAMES)}


def make_store(root):
    s = Store(root)
    for i in (1, 2, 3):
        s.add(i)
    s.add(4, tx=XA)
    s.add(5, tx=XA)
    s.prepare(XA)
    s.add(6, tx=LOCAL)  # never committed: the broker rolls it back at start
    return s.close()


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(path):
    with LocalArtemisExport(detect(path), ExportOptions()) as ex:
        return list(ex.rows())


def seq(r) -> int:
    return int(next(p["value"] for p in r[N["typed_properties"]] if p["name"] == "seq"))


def seqs(rows, state):
    return sorted(seq(r) for r in rows if r[N["transaction_state"]] == state)


def test_prepared_left_out_and_reported(tmp_path, capsys):
    src = make_store(tmp_path / "kahadb")
    code, out, err = run(capsys, "create", tmp_path / "a", "--from", src, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "WARNING", err  # something was left out
    (tx,) = doc["preparedTransactions"]
    assert tx["messages"] == 2 and not tx["migrated"] and tx["id"].startswith("XID:[4711,")
    assert doc["openLocalTransactions"] == {"transactions": 1, "messages": 1}
    assert doc["messages"] == 3
    rows = rows_of(tmp_path / "a")
    assert seqs(rows, "committed") == [1, 2, 3] and seqs(rows, "prepared") == []
    assert run(capsys, "verify", tmp_path / "a")[0] == 0


def test_include_prepared_keeps_the_xid(tmp_path, capsys):
    src = make_store(tmp_path / "kahadb")
    code, out, err = run(capsys, "create", tmp_path / "b", "--from", src, "--include-prepared", "--format", "json")
    doc = json.loads(out)
    assert doc["preparedTransactions"][0]["migrated"] and doc["counts"]["preparedMessages"] == 2
    assert doc["counts"]["preparedTransactions"] == 1 and doc["messages"] == 5
    store = detect(tmp_path / "b")
    rows = rows_of(tmp_path / "b")
    assert seqs(rows, "committed") == [1, 2, 3] and seqs(rows, "prepared") == [4, 5]
    with open_journal(store.messages) as opened:
        res = load_journal(opened)
    (ptx,) = res.prepared
    assert Xid.decode(ptx.extra) == Xid(4711, b"branch-1", b"gtx-1")
    assert len(ptx.records) == 2 + 2  # two messages, one reference each


def test_rejected_names_scheduler_store_and_redeliveries(tmp_path, capsys):
    s = Store(tmp_path / "data" / "kahadb")
    s.add(1, dest=(0, "orders.#"))
    s.add(2, dest=(2, "ID:temp-1"))
    s.add(3, dest=(0, "ok"), redelivery=2)
    s.add(4, dest=(0, "ok"))
    src = s.close()
    sched = tmp_path / "data" / "scheduler"
    sched.mkdir()
    (sched / "db-1.log").write_bytes(b"\0" * 16)
    code, out, err = run(capsys, "create", tmp_path / "a", "--from", src, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "WARNING", err
    skipped = {d["destination"]: d["reason"] for d in doc["skippedDestinations"]}
    assert set(skipped) == {"orders.#", "ID:temp-1"}
    assert "wildcard" in skipped["orders.#"] and "temporary" in skipped["ID:temp-1"]
    assert doc["schedulerStores"] == [str(sched)]
    assert [q["name"] for q in doc["queues"]] == ["ok"] and doc["messages"] == 2
    rows = rows_of(tmp_path / "a")
    assert {seq(r): r[N["delivery_count"]] for r in rows} == {3: 2, 4: 0}
