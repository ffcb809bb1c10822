"""bench/fuzz_verdicts.py's ``--stores`` and ``--kahadb-stores``: which directories they take and the names given."""
from __future__ import annotations

import pytest

from tests.support import KAHADB, bench_module


def _bench():
    return bench_module("fuzz_verdicts")


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


def test_stores_refuses_a_file_in_one_line(tmp_path, capsys):
    # a shell glob over a fixtures folder takes its README too: a one-line usage error, not a worker's traceback
    (tmp_path / "SOURCES.md").write_text("x")
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--stores", str(tmp_path / "SOURCES.md")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "SOURCES.md is not one" in err and "Traceback" not in err


def test_stores_refuses_a_directory_that_is_no_store(tmp_path, capsys):
    # checked before any worker starts (a worker met it first and died with a traceback)
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--stores", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no Artemis journal" in err and "Traceback" not in err
