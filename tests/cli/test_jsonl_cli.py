"""``--format jsonl`` is one JSON object a line on every command (issue 13 item 14: verify, create, check and
compact printed one pretty-printed document). Each item of the JSON document's lists is a line tagged with its
``record`` kind; the last line, ``"record": "summary"``, carries the rest, the verdict included."""
from __future__ import annotations

import json

import pytest

from tests.support import ORACLE, copy_tree


def _lines(run_cli, *args):
    code, out, _ = run_cli(*args, "--format", "jsonl")
    lines = out.splitlines()
    docs = [json.loads(line) for line in lines]
    assert all(isinstance(d, dict) for d in docs) and len(docs) == len(lines) >= 1
    return code, docs


@pytest.mark.parametrize("command", ["verify", "compact-dry-run", "compact", "check", "create"])
def test_every_line_is_an_object_and_the_last_one_judges(run_cli, run_json, tmp_path, command):
    journal = copy_tree(ORACLE / "04a_before_compact" / "journal", tmp_path / "j")
    args = {
        "verify": ["verify", journal],
        "compact-dry-run": ["compact", journal, "--dry-run"],
        "compact": ["compact", copy_tree(journal, tmp_path / "j2")],
        "check": ["check", "disk-space", tmp_path],
        "create": ["create", tmp_path / "new", "--kind", "bindings"],
    }[command]
    code, docs = _lines(run_cli, *args)
    *items, summary = docs
    assert summary["record"] == "summary" and "verdict" in summary
    assert all(d["record"] in ("finding", "journal") for d in items)
    if command in ("verify", "check", "compact-dry-run"):  # read-only: the JSON document of the same run
        jcode, doc, _ = run_json(*args)
        assert (code, summary["verdict"]) == (jcode, doc["verdict"])
        assert [d for d in items if d["record"] == "finding"] == [{"record": "finding", **f} for f in doc["findings"]]


def test_an_error_is_one_summary_line(run_cli, tmp_path):
    code, docs = _lines(run_cli, "verify", tmp_path / "missing")
    assert code == 3 and docs == [{"record": "summary", "verdict": "UNKNOWN",
                                   "error": f'path "{tmp_path / "missing"}": no such file or directory'}]
