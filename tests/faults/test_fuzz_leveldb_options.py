"""bench/fuzz_leveldb.py's ``--stores``: which directories it takes (a directory of stores, or a store's own)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import bench_module


def _bench():
    return bench_module("fuzz_leveldb")


def _case(d: Path) -> Path:
    (d / "store").mkdir(parents=True)
    (d / "recovered.json").write_text("{}")
    return d


def test_a_stores_own_directory_is_taken(tmp_path, monkeypatch):
    # `--stores /work/leveldb-fresh/f-*` (a shell glob of stores' own directories) ran none of them: only a
    # directory of stores was read, and a store's directory holds store/ and recovered.json, no store
    monkeypatch.delenv("AMQTOOL_TEST_LEVELDB_STORES", raising=False)
    a, b = _case(tmp_path / "f-a"), _case(tmp_path / "f-b")
    got = dict(_bench().store_cases([a]))
    assert got.get("f-a") == a and "f-b" not in got
    got = dict(_bench().store_cases([tmp_path]))  # the directory of stores: both
    assert got.get("f-a") == a and got.get("f-b") == b


def test_a_directory_with_no_store_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("AMQTOOL_TEST_LEVELDB_STORES", raising=False)
    (tmp_path / "store").mkdir()  # a store's inside, not a store
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--stores", str(tmp_path / "store")])
    assert exc.value.code == 2
    assert "holds no LevelDB store" in capsys.readouterr().err
