"""bench/fuzz_verdicts.py's ``--kahadb-stores``: which directories it takes and the names it gives them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support import KAHADB

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "fuzz_verdicts.py"


def _bench():
    spec = importlib.util.spec_from_file_location("fuzz_verdicts", _BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures absent")
def test_kahadb_stores_named_after_their_folder():
    got = _bench().kaha_store_list([KAHADB / "basic" / "kahadb", KAHADB / "mkahadb" / "mkahadb",
                                    KAHADB / "tx" / "kahadb", KAHADB / "basic" / "kahadb"])
    assert [n for n, _ in got] == ["basic", "mkahadb", "tx", "basic-2"]
    assert got[1][1] == KAHADB / "mkahadb" / "mkahadb"


def test_kahadb_stores_refuses_a_directory_without_journal(tmp_path, capsys):
    (tmp_path / "db.data").write_bytes(b"")
    bench = _bench()
    with pytest.raises(ValueError, match="not a KahaDB store"):
        bench.kaha_store_list([tmp_path])
    with pytest.raises(SystemExit) as exc:
        bench.main(["--kahadb-stores", str(tmp_path)])
    assert exc.value.code == 2
    assert "not a KahaDB store directory" in capsys.readouterr().err
