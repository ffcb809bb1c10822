"""Issue 27: text an operator can read at 80 columns. Tables drop their least important columns (named in a
footnote) before any cell wraps, ``--wide`` shows them all; print's long lines are folded, never cut, and
``--style artemis`` stays the broker's own lines whatever the width."""
from __future__ import annotations

import json
import re

import pytest

from amqtool.commands.tables import Col, fit_columns, table_lines
from amqtool.engines.artemis.demo import create_demo
from tests.support import BROKER_STORES, KAHADB

DEMO_START = 1717200000000


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit") / "demo"
    manifest = create_demo(root, 6 * 1024 * 1024, file_size=1024 * 1024, seed=13)
    return root, manifest


def test_columns_are_dropped_by_rank_and_named():
    cols = [Col("name"), Col("n", 0, True), Col("low", 3), Col("mid", 2), Col("also-low", 3)]
    rows = [["a-long-queue-name", "12", "x" * 10, "y" * 10, "z" * 10]]
    assert fit_columns(cols, rows, 200) == [0, 1, 2, 3, 4]
    assert fit_columns(cols, rows, 45) == [0, 1, 2, 3]  # the rightmost of the lowest rank goes first
    assert fit_columns(cols, rows, 33) == [0, 1, 3]
    assert fit_columns(cols, rows, 5) == [0, 1]  # rank 0 always stays
    lines = table_lines(cols, rows, width=33)
    assert " ".join(" ".join(lines[3:]).split()) == "(not shown: low, also-low; --wide shows every column)"
    assert all(len(x) <= 33 for x in lines) and "a-long-queue-name" in lines[2]
    wide = table_lines(cols, rows, width=33, wide=True)
    assert "also-low" in wide[0] and not wide[-1].startswith("(not shown")


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_stat_table_cells_never_wrap(demo, run_cli, run_json, monkeypatch, columns):
    """Before: at 80 columns every header and name was squeezed to 4-5 characters over several lines
    ("queu/e"); at 100 and 120 the timestamps still wrapped."""
    root, _ = demo
    monkeypatch.setenv("COLUMNS", str(columns))
    _, doc, _ = run_json("stat", root, "--at", DEMO_START)
    code, out, _ = run_cli("stat", root, "--at", DEMO_START)
    lines = out.splitlines()
    assert code == 0 and max(len(x) for x in lines) <= columns
    start = next(i for i, x in enumerate(lines) if x.startswith("queue "))
    header, table = lines[start], lines[start + 2:lines.index("", start)]
    rows = {x.split()[0]: x for x in table if not x.startswith("(not shown")}
    assert set(rows) == {r["name"] for r in doc["queues"]}  # every queue on one line, its name whole
    for r in doc["queues"]:  # and its figures whole, under their headers
        cells = rows[r["name"]].split()
        assert cells[header.split().index("messages")] == str(r["messages"])
    if columns == 80:
        assert "(not shown: address, oldest (UTC)" in out
    _, wide, _ = run_cli("stat", root, "--at", DEMO_START, "--wide")
    assert "not shown" not in wide and "oldest (UTC)" in wide and "reclaim frees" in wide


def test_print_lines_fit_80_and_120_and_lose_nothing(demo, run_cli, monkeypatch):
    """Before: 8,571 of print's lines were over 100 columns on the 64 MiB demo."""
    root, _ = demo
    _, whole, _ = run_cli("print", root, "--wide")
    assert max(len(x) for x in whole.splitlines()) > 120  # there are long lines to fold
    for columns in (80, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        code, out, _ = run_cli("print", root)
        assert code == 0 and max(len(x) for x in out.splitlines()) <= columns
        assert "".join(out.split()) == "".join(whole.split())  # folded, not cut: every character, in order


@pytest.mark.skipif(not BROKER_STORES, reason="no broker-written stores")
def test_style_artemis_is_never_folded(run_cli, monkeypatch):
    store = BROKER_STORES[0]
    monkeypatch.chdir(store)
    outs = []
    for columns in ("80", "400"):
        monkeypatch.setenv("COLUMNS", columns)
        outs.append(run_cli("print", ".", "--style", "artemis")[1])
    assert outs[0] == outs[1] and max(len(x) for x in outs[0].splitlines()) > 80


def test_check_findings_fit_80(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, doc, _ = (lambda r: (r[0], json.loads(r[1]), r[2]))(run_cli("check", "disk-space", tmp_path, "-f", "json"))
    code, out, _ = run_cli("check", "disk-space", tmp_path)
    assert max(len(x) for x in out.splitlines()) <= 80
    # each finding's words, in order, folded over its lines; the figures masked: the two runs read the file
    # system's free space a moment apart, while other processes write (a CI run saw 44.3 GiB, then 44.2)
    def words(text: str) -> str:
        return re.sub(r"\d+(\.\d+)?", "#", " ".join(text.split()))

    for f in doc["findings"]:
        assert words(f["message"]) in words(out)
    assert out.splitlines()[-1] == f"verdict: {doc['verdict']}"


def test_kahadb_print_pins_jsonl_is_the_pins(run_cli, run_json):
    """Before: ``print --pins -f jsonl`` on KahaDB printed the records, as without --pins."""
    if not KAHADB.is_dir():
        pytest.skip("no KahaDB fixtures")
    store = KAHADB / "gc" / "kahadb"
    _, doc, _ = run_json("print", store, "--pins", "--drain", "fx.gc.keep")
    code, out, _ = run_cli("print", store, "--pins", "--drain", "fx.gc.keep", "-f", "jsonl")
    rows = [json.loads(x) for x in out.splitlines()]
    *pins, summary = rows
    assert code == 0 and summary["record"] == "summary" and summary["verdict"] == doc["verdict"]
    want = [p["file"] for st in doc["stores"] for p in st["pins"]]
    assert [p["file"] for p in pins] == want == ["db-6.log", "db-7.log", "db-8.log"]
    assert all(p["record"] == "pin" and p["directory"] == doc["stores"][0]["directory"] for p in pins)
    assert summary["stores"][0]["drain"]["filesFreed"] == ["db-6.log", "db-7.log"]


def test_cells_are_data_never_markup_or_control():
    """A queue may be called ``[red]x`` or hold an escape sequence: the table shows it, never acts on it."""
    lines = table_lines([Col("queue"), Col("n", 0, True)], [["[red]x[/red] :smile:", "1"], ["\x1b[31mq\nr", "2"]],
                        width=80)
    assert lines[2].startswith("[red]x[/red] :smile:") and lines[3].startswith("\\x1b[31mq\\x0ar")
    assert len(lines) == 4 and not any("\x1b" in x for x in lines)


def test_wide_characters_fold_by_the_columns_they_take():
    """A message body in Japanese takes two columns a character: folded by columns, not characters."""
    from amqtool.commands.tables import cells, fold

    line = "   body=" + "日本語のテキスト、" * 12
    pieces = fold(line, 40)
    assert all(cells(p) <= 40 for p in pieces) and len(pieces) > 5
    assert "".join(p.strip() for p in pieces) == line.strip()


def test_info_findings_of_one_code_are_counted_past_the_first_three(capsys, monkeypatch):
    """A healthy compacted journal gives one INFO ``stale-records`` per reused file (hundreds on a large store):
    text shows three, then counts the rest, and never folds a WARNING away; ``--wide`` shows every one."""
    from amqtool.commands.output import render_findings_text
    from amqtool.errors import Finding, Severity

    monkeypatch.setenv("COLUMNS", "200")
    info = [Finding(Severity.INFO, "stale-records", f"old bytes {i}", "j/f.amq", i) for i in range(40)]
    warn = [Finding(Severity.WARNING, "torn-tail", f"torn {i}", "j/g.amq", i) for i in range(5)]
    render_findings_text(info[:20] + warn + info[20:])
    lines = capsys.readouterr().out.splitlines()
    assert [x.split()[0] for x in lines].count("WARNING") == 5
    assert sum("stale-records" in x and "old bytes" in x for x in lines) == 3
    assert lines[-1].split(None, 3)[:3] == ["INFO", "stale-records", "-:"] and "37 more like these" in lines[-1]
    render_findings_text(info + warn, wide=True)
    assert len(capsys.readouterr().out.splitlines()) == 45
