"""The database goes away in the middle of ``export --jdbc-url`` (issue 26 item 10): one clear line naming the
cause, exit 3, no traceback, and nothing left of the output. Each test has its own throwaway PostgreSQL
cluster, stopped with ``pg_ctl stop -m immediate`` at a chosen instant of the export (the first message row
written), so the session-wide cluster of the other tests is not disturbed."""
from __future__ import annotations

import os

import pytest

from amqtool.commands.main import main
from tests.classic_jdbc_writer import kahadb_messages
from tests.engines.test_jdbc_classic import build
from tests.pg_cluster import ClusterUnavailable, _run, jdbc_env, start_cluster, stop_cluster  # noqa: F401
from tests.support import KAHADB

BASIC = KAHADB / "basic"


@pytest.fixture
def cluster():
    if not BASIC.is_dir():
        pytest.skip("KahaDB fixtures not found")
    try:
        c = start_cluster()
    except ClusterUnavailable as err:
        pytest.skip(str(err))
    try:
        yield c
    finally:
        stop_cluster(c)


def stop_immediately(c) -> None:
    r = _run([str(c.bin / "pg_ctl"), "-D", str(c.dir / "data"), "-m", "immediate", "-w", "stop"], c.run_as)
    assert r.returncode == 0, r.stderr


def _leftovers(root) -> list[str]:
    return sorted(n for n in os.listdir(root) if n != "in")


def test_local_export_when_postgresql_stops(tmp_path, cluster, jdbc_env, monkeypatch, capsys):
    url, _ = build(cluster, "stops", kahadb_messages(BASIC / "kahadb"))
    from amqtool.engines.export import jdbc as export_jdbc
    from amqtool.engines.jdbc import classic

    monkeypatch.setattr(classic, "FETCH_ROWS", 20)  # the rows come in several fetches: the stop hits one
    real = export_jdbc.classic_rows
    stopped = []

    def rows_then_stop(row, ctx, summary):
        if not stopped:
            stopped.append(True)
            stop_immediately(cluster)
        return real(row, ctx, summary)

    monkeypatch.setattr(export_jdbc, "classic_rows", rows_then_stop)
    (tmp_path / "in").mkdir()
    code = main(["export", "--jdbc-url", url, "--engine", "local", "-f", "jsonl", "-o", str(tmp_path / "out"), "-q"])
    out, err = capsys.readouterr()
    assert stopped
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("amqtool: error: "), err
    assert "internal error" not in err and "Traceback" not in err
    assert url.split("//", 1)[1].split("/", 1)[0] in lines[0]  # names the server
    assert any(w in lines[0] for w in ("terminating connection", "server closed", "connection", "shut down"))
    assert _leftovers(tmp_path) == []  # no output, no temporary directory


@pytest.mark.spark
def test_spark_export_when_postgresql_stops(tmp_path, cluster, jdbc_env, monkeypatch, capsys):
    # With Spark the cause ("connection refused") was only in Spark's log.
    url, _ = build(cluster, "stops_spark", kahadb_messages(BASIC / "kahadb"))
    from amqtool.engines.export import jdbc as export_jdbc

    real = export_jdbc.SparkClassicJdbcExport.dataframe
    stopped = []

    def stop_then_read(self):
        stopped.append(True)
        stop_immediately(cluster)  # after the bounds were read, before Spark's JDBC source connects
        return real(self)

    monkeypatch.setattr(export_jdbc.SparkClassicJdbcExport, "dataframe", stop_then_read)
    (tmp_path / "in").mkdir()
    code = main(["export", "--jdbc-url", url, "--engine", "spark", "--master", "local[1]", "-f", "jsonl",
                 "-o", str(tmp_path / "out"), "-q"])
    out, err = capsys.readouterr()
    assert stopped
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("amqtool: error: "), err
    assert "Traceback" not in err and "An error occurred while calling" not in err
    assert "refused" in lines[0].lower(), lines[0]
    assert not (tmp_path / "out").exists()
