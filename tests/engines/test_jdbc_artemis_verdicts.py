"""Artemis database stores judged as the broker loads them (issue 25, cases 12, 15 and 19), in a throwaway
PostgreSQL (tests/pg_cluster.py), the demo written as JDBCJournalImpl writes it (tests/artemis_jdbc_writer.py).

On main c381a60: the export of a paged demo held 1414 rows against the file store's 2177 (paging left out,
exit 0); a deleted ADD row whose references survive was verify OK; a NULL seq/compactCount/variableSize
row was verify OK."""
from __future__ import annotations

import json

import pytest

from tests.engines.export_store import normalise, read_jsonl_table
from tests.engines.test_jdbc_artemis import write_demo
from tests.pg_cluster import jdbc_env, pg_cluster  # noqa: F401


@pytest.fixture(scope="module")
def paged_demo(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("paged") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7, paging=True)
    return path


def _rows(out):
    return sorted(normalise(read_jsonl_table(out / "messages")), key=lambda r: (r["message_id"], r["queue"]))


def _live_message_with_refs(conn) -> int:
    """A message with an ADD row and unacknowledged ADD_REF rows."""
    return conn.execute(
        "SELECT id FROM messages m WHERE userRecordType = 45 AND recordType = 11 AND EXISTS (SELECT 1 FROM messages "
        "r WHERE r.id = m.id AND r.userRecordType = 32) AND NOT EXISTS (SELECT 1 FROM messages a WHERE a.id = m.id "
        "AND a.userRecordType = 33) ORDER BY id DESC LIMIT 1").fetchone()[0]


def test_paged_rows_are_exported_as_the_file_store_exports_them(pg_cluster, jdbc_env, run_cli, paged_demo, tmp_path):
    # case 15: the page-store tables were left out (1414 of 2177 rows), exit 0
    url = write_demo(pg_cluster, "verdicts_paged", paged_demo)
    code, out, err = run_cli("export", "--jdbc-url", url, "-o", tmp_path / "db", "-f", "jsonl", "--engine", "local",
                             "--report", "json")
    doc = json.loads(out)
    code_f, out_f, _ = run_cli("export", paged_demo, "-o", tmp_path / "file", "-f", "jsonl", "--engine", "local",
                               "--report", "json")
    want = json.loads(out_f)
    assert (code, doc["verdict"]) == (code_f, want["verdict"]) == (0, "OK"), (doc["findings"], err)
    assert doc["rows"] == want["rows"] and doc["rowsByQueue"] == want["rowsByQueue"]
    assert any(r["paged"] for r in _rows(tmp_path / "db"))
    assert _rows(tmp_path / "db") == _rows(tmp_path / "file")


def test_a_reference_without_its_message_row_is_critical(pg_cluster, jdbc_env, run_cli, paged_demo, tmp_path):
    # case 12: the ADD row of a message deleted, its ADD_REF rows left: the broker's load drops the references
    url = write_demo(pg_cluster, "verdicts_orphan", paged_demo)
    with pg_cluster.connect("verdicts_orphan") as c:
        mid = _live_message_with_refs(c)
        c.execute("DELETE FROM messages WHERE id = %s AND userRecordType = 45", (mid,))
    code, out, _ = run_cli("verify", "--jdbc-url", url, "--format", "json")
    doc = json.loads(out)
    (f,) = [f for f in doc["findings"] if f["code"] == "ref-without-message"]
    assert code == 2 and f["severity"] == "critical" and f["details"]["messageId"] == mid
    assert f["details"]["messageRowLater"] is False
    code, _, err = run_cli("export", "--jdbc-url", url, "-o", tmp_path / "o", "-f", "jsonl", "--engine", "local")
    assert code == 2 and "ref-without-message" in err and not (tmp_path / "o").exists()


def test_a_row_with_null_numbers_is_read_as_the_broker_reads_it(pg_cluster, jdbc_env, run_cli, paged_demo, tmp_path):
    # case 19: NULL compactCount, seq and variableSize on a message's ADD row: JDBC reads 0, PostgreSQL sorts
    # the row last, after the message's references, which the broker's load then drops
    url = write_demo(pg_cluster, "verdicts_nulls", paged_demo)
    with pg_cluster.connect("verdicts_nulls") as c:
        mid = _live_message_with_refs(c)
        c.execute("UPDATE messages SET compactCount = NULL, seq = NULL, variableSize = NULL WHERE id = %s AND "
                  "userRecordType = 45", (mid,))
    code, out, err = run_cli("verify", "--jdbc-url", url, "--format", "json")
    assert "Traceback" not in err
    doc = json.loads(out)
    by_code = {f["code"]: f for f in doc["findings"]}
    assert code == 2 and by_code["ref-without-message"]["details"] == {
        "messageId": mid, "queueIds": by_code["ref-without-message"]["details"]["queueIds"], "messageRowLater": True}
    nulls = by_code["artemis-jdbc-null-column"]
    assert nulls["severity"] == "warning" and set(nulls["details"]["columns"]) == {"compactCount", "seq", "variableSize"}
    # --salvage writes what the tables hold (the message included) and lists the finding
    code, out, _ = run_cli("export", "--jdbc-url", url, "-o", tmp_path / "o", "-f", "jsonl", "--engine", "local",
                           "--salvage", "--report", "json")
    doc = json.loads(out)
    assert code == 2 and doc["verdict"] == "CRITICAL"
    assert "ref-without-message" in {f["code"] for f in doc["findings"]}
