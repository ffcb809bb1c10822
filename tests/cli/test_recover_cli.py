"""`amqtool recover` on the command line: usage errors are exit 3 with one line, DEST must be new, jsonl and
text carry the same verdict, the man page documents every option."""
from __future__ import annotations

import json
import re

import pytest

from tests.engines.artemis.recover_helpers import break_record, oracle_copy, records
from tests.support import ORACLE, REPO

pytestmark = pytest.mark.skipif(not ORACLE.is_dir(), reason="oracle fixtures not found")


@pytest.mark.parametrize("args", [
    [],  # neither -o nor --dry-run
    ["-o", "{dest}", "--dry-run"],
    ["--dry-run", "--queue", "orders"],  # --queue without --undelete
])
def test_usage_errors(tmp_path, run_cli, args):
    src = oracle_copy("01_simple_adds", tmp_path / "src")
    code, out, err = run_cli("recover", src, *[a.format(dest=tmp_path / "d") for a in args])
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1


def test_destination_must_be_new_and_outside_the_source(tmp_path, run_cli):
    src = oracle_copy("01_simple_adds", tmp_path / "src")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _out, err = run_cli("recover", src, "-o", tmp_path / "full")
    assert code == 3 and "not an empty directory" in err
    code, _out, err = run_cli("recover", src, "-o", src / "inside")
    assert code == 3 and "lies inside the input" in err
    assert not (src / "inside").exists()


def test_unknown_store_is_exit_3(tmp_path, run_cli):
    (tmp_path / "empty").mkdir()
    code, _out, err = run_cli("recover", tmp_path / "empty", "--dry-run")
    assert code == 3 and err.strip()


def test_jsonl_and_text(tmp_path, run_cli):
    src = oracle_copy("01_simple_adds", tmp_path / "src")
    path, rec = records(src)[7]
    break_record(path, rec, 0)
    code, out, _err = run_cli("recover", src, "--dry-run", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 2  # verify calls the damaged record CRITICAL (issue 25); a dry run reports it
    lost = [r for r in rows if r.get("kind") == "record"]
    assert [r["recordId"] for r in lost] == [rec[5]]
    summary = [r for r in rows if r["record"] == "summary"][0]
    assert summary["verdict"] == "CRITICAL" and summary["counts"]["recordsLost"] == 1
    # a CRITICAL source is refused unless --salvage, nothing written
    code, out, err = run_cli("recover", src, "-o", tmp_path / "dest")
    assert code == 2 and "damaged-record" in err and "--salvage" in err and not (tmp_path / "dest").exists()
    code, out, _err = run_cli("recover", src, "-o", tmp_path / "dest", "--salvage")
    assert code == 2
    assert f"id={rec[5]}" in out and "records kept 259, records lost 1" in " ".join(out.split())

def _text_figures(text: str) -> str:
    return " ".join(text.split())  # folded lines joined again


def test_text_figures_are_the_json_figures(tmp_path, run_cli):
    """Issue 27: the text said "transactions not committed 0" while the JSON said openTransactionsDropped 1.
    A KahaDB transaction whose COMMIT batch is damaged is open: the rewrite drops it (as the broker rolls it
    back); every figure of the text is the JSON's, under the same label list."""
    from amqtool.commands.recover_cmd import COUNT_LABELS, KAHADB_LABELS
    from amqtool.formats.kahadb.commands import EntryType
    from tests.engines.kahadb.test_compact import _copy
    from tests.engines.kahadb.test_recover_kahadb import _batches, _break

    root = _copy(tmp_path, "tx")
    batches = list(_batches(root))
    sends = {}  # transaction key -> batches holding its sends
    for p, b, cmds in batches:
        for c in cmds:
            if getattr(c, "transaction", None) is not None and c.type is EntryType.ADD_MESSAGE:
                sends.setdefault(c.transaction.key, set()).add((p, b.offset))
    victim = next((p, b) for p, b, cmds in batches for c in cmds
                  if c.type is EntryType.COMMIT and getattr(c, "transaction", None) is not None
                  and (p, b.offset) not in sends.get(c.transaction.key, ())
                  and all(x.type is EntryType.COMMIT for x in cmds))
    _break(*victim)
    _, out, _ = run_cli("recover", root, "--dry-run", "-f", "json")
    doc = json.loads(out)
    code, text, _ = run_cli("recover", root, "--dry-run", "--wide")
    journal = doc["journals"][0]
    assert journal["openTransactionsDropped"] >= 1  # the case of the issue
    for key, label in COUNT_LABELS:
        value = doc["counts"][key]
        assert f"{label} {value if key != 'bytesSkipped' else ''}".strip() in _text_figures(text), key
    for key, label in KAHADB_LABELS:
        if key != "bytesSkipped":
            assert f"{label} {journal[key]}" in _text_figures(text), key
    assert "not committed" not in text


def test_out_of_space_names_recover_not_compaction(tmp_path, run_cli, monkeypatch):
    """Issue 27: recover's out-of-space error said "compaction not started"."""
    from amqtool.store import atomic

    src = oracle_copy("01_simple_adds", tmp_path / "src")

    class _St:
        f_bavail, f_frsize = 1, 4096
    monkeypatch.setattr(atomic.os, "statvfs", lambda p: _St())
    code, out, err = run_cli("recover", src, "-o", tmp_path / "dest")
    assert code == 3 and "not enough free space" in err and "compaction" not in err
    assert not (tmp_path / "dest").exists()


def test_man_page_documents_the_options():
    page = (REPO / "man" / "amqtool-recover.1").read_text()
    for opt in ("--output", "--dry-run", "--undelete", "--queue", "--since", "--until", "--format",
                "--broker-xml", "--quiet"):
        assert opt.replace("-", r"\-") in page, opt
    for field in ("recordsKept", "recordsLost", "bytesSkipped", "recordId", "messageId", "queue"):
        assert field in page, field
    assert re.search(r"\.SH EXIT STATUS", page)
