"""Issue 27: two stores under one path. ``amqtool verify`` with no path, in a directory holding an Artemis store
and a KahaDB store, checked only the KahaDB one and said OK. The reading commands now check every store
found, name it, and judge by the worst; the writing commands refuse (exit 3) and name the stores."""
from __future__ import annotations

import json

import pytest

from tests.support import KAHADB, ORACLE, copy_tree, tree_hashes


@pytest.fixture
def two(tmp_path, kahadb_fixtures):
    """``artemis/data/journal`` with a torn tail (verify: WARNING) beside a healthy ``kahadb/`` (OK)."""
    root = tmp_path / "stores"
    copy_tree(ORACLE / "05b_torn_tail_truncated" / "journal", root / "artemis" / "data" / "journal")
    copy_tree(KAHADB / "gc" / "kahadb", root / "kahadb")
    return root


def test_verify_with_no_path_checks_both_and_judges_by_the_worst(two, run_cli, monkeypatch):
    monkeypatch.chdir(two)
    before = tree_hashes(two)
    code, out, _ = run_cli("verify", "-f", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "WARNING" and doc["kind"] == "several"  # it was 0 and OK
    assert [(s["kind"], s["path"], s["verdict"]) for s in doc["stores"]] == [
        ("kahadb", str(two / "kahadb"), "OK"), ("artemis", str(two / "artemis" / "data"), "WARNING")]
    assert {f["store"] for f in doc["findings"]} <= {s["path"] for s in doc["stores"]}
    assert any(f["store"] == str(two / "artemis" / "data") and f["severity"] == "warning" for f in doc["findings"])
    code, text, _ = run_cli("verify", "--wide")
    assert code == 1 and f"== artemis store {two / 'artemis' / 'data'}" in text
    assert f"== kahadb store {two / 'kahadb'}" in text and text.endswith("verdict: WARNING\n")
    code, out, _ = run_cli("verify", "-f", "jsonl")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["record"] for r in rows].count("store") == 2 and rows[-1]["verdict"] == "WARNING"
    assert tree_hashes(two) == before


def test_one_store_is_as_before(two, run_json):
    code, doc, _ = run_json("verify", two / "kahadb")
    assert (code, doc["kind"], doc["verdict"]) == (0, "kahadb", "OK") and "stores" not in doc


def test_stat_and_print_show_both(two, run_cli, run_json):
    code, doc, _ = run_json("stat", two)
    assert doc["kind"] == "several" and {s["kind"] for s in doc["stores"]} == {"artemis", "kahadb"}
    _, k, _ = run_json("stat", two / "kahadb")
    _, a, _ = run_json("stat", two / "artemis")
    assert doc["totals"]["messages"] == k["totals"]["messages"] + a["totals"]["messages"]
    assert sorted((r["store"], r["name"]) for r in doc["queues"]) == sorted(
        [(str(two / "kahadb"), r["name"]) for r in k["queues"]]
        + [(str(two / "artemis" / "data"), r["name"]) for r in a["queues"]])
    code, out, _ = run_cli("stat", two, "--wide")
    assert out.count("== ") == 2 and "2 stores:" in out
    code, out, _ = run_cli("print", two, "-f", "json")
    doc = json.loads(out)
    assert doc["kind"] == "several" and [s.get("kind") for s in doc["stores"]] == ["kahadb", "artemis"]
    code, out, _ = run_cli("print", two)
    assert f"== kahadb store {two / 'kahadb'}" in out and f"== artemis store {two / 'artemis' / 'data'}" in out


@pytest.mark.parametrize("argv", [["compact", "--dry-run"], ["recover", "--dry-run"],
                                  ["export", "-o", "OUT", "-f", "jsonl", "--engine", "local"]])
def test_writers_ask_which(two, run_cli, tmp_path, argv):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code, out, err = run_cli(argv[0], two, *argv[1:])
    assert code == 3 and "2 stores under" in err and str(two / "kahadb") in err
    assert str(two / "artemis" / "data") in err
