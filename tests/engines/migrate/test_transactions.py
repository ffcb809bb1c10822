"""Transactions in a migration: messages of a prepared XA transaction are reported and left out, or with
``--include-prepared`` written in a prepared Artemis transaction carrying the same Xid; messages of an
unresolved local transaction are never migrated. The store is written here with amqtool's KahaDB journal
writer (the broker's batch layout and checksums) and real OpenWire messages."""
from __future__ import annotations

import json

from amqtool.commands.main import main
from amqtool.engines.artemis.load import load_journal
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.engines.kahadb.compact.write import JournalWriter
from amqtool.formats.artemis.primitives import Xid
from amqtool.formats.kahadb.commands import EntryType
from amqtool.formats.kahadb.protobuf import encode_field, encode_varint
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.engines.migrate import openwire_builder as B

N = {n: i for i, n in enumerate(MESSAGE_COLUMN_NAMES)}
DEST = encode_field(1, 0) + encode_field(2, "it.q")
XA = encode_field(2, encode_field(1, 4711) + encode_field(2, b"branch-1") + encode_field(3, b"gtx-1"))
LOCAL = encode_field(1, encode_field(1, "ID:conn-1") + encode_field(1, 9))


def _frame(t: int, body: bytes) -> bytes:
    return bytes([t]) + encode_varint(len(body)) + body


def _add(w, seq: int, tx: bytes | None = None) -> None:
    ow = B.message(28, B.text_content(f"m-{seq}"), props=[("seq", 5, seq)], dest=(100, "it.q"), seq=seq)
    body = (encode_field(1, tx) if tx is not None else b"") + encode_field(2, DEST)
    body += encode_field(3, f"ID:test-1:1:1:{seq}") + encode_field(4, ow)
    w.append(_frame(EntryType.ADD_MESSAGE, body))


def make_store(root):
    root.mkdir()
    w = JournalWriter(root, 1 << 20, True)
    for i in (1, 2, 3):
        _add(w, i)
    _add(w, 4, XA)
    _add(w, 5, XA)
    w.append(_frame(EntryType.PREPARE, encode_field(1, XA)))
    _add(w, 6, LOCAL)  # never committed: the broker rolls it back at start
    w.close()
    return root


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def seqs(rows, state):
    return sorted(int(next(p["value"] for p in r[N["properties"]] if p["name"] == "seq"))
                  for r in rows if r[N["transaction_state"]] == state)


def test_prepared_left_out_and_reported(tmp_path, capsys):
    src = make_store(tmp_path / "kahadb")
    code, out, err = run(capsys, "create", tmp_path / "a", "--from", src, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "WARNING", err  # something was left out
    (tx,) = doc["preparedTransactions"]
    assert tx["messages"] == 2 and not tx["migrated"] and tx["id"].startswith("XID:[4711,")
    assert doc["openLocalTransactions"] == {"transactions": 1, "messages": 1}
    assert doc["messages"] == 3
    with LocalArtemisExport(detect(tmp_path / "a"), ExportOptions()) as ex:
        rows = list(ex.rows())
    assert seqs(rows, "committed") == [1, 2, 3] and seqs(rows, "prepared") == []
    assert run(capsys, "verify", tmp_path / "a")[0] == 0


def test_include_prepared_keeps_the_xid(tmp_path, capsys):
    src = make_store(tmp_path / "kahadb")
    code, out, err = run(capsys, "create", tmp_path / "b", "--from", src, "--include-prepared", "--format", "json")
    doc = json.loads(out)
    assert doc["preparedTransactions"][0]["migrated"] and doc["counts"]["preparedMessages"] == 2
    assert doc["counts"]["preparedTransactions"] == 1 and doc["messages"] == 5
    store = detect(tmp_path / "b")
    with LocalArtemisExport(store, ExportOptions()) as ex:
        rows = list(ex.rows())
    assert seqs(rows, "committed") == [1, 2, 3] and seqs(rows, "prepared") == [4, 5]
    with open_journal(store.messages) as opened:
        res = load_journal(opened)
    (ptx,) = res.prepared
    assert Xid.decode(ptx.extra) == Xid(4711, b"branch-1", b"gtx-1")
    assert len(ptx.records) == 2 + 2  # two messages, one reference each
