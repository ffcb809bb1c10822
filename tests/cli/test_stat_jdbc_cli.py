"""Issue 27: ``stat --jdbc-url`` (print, verify and export had one; stat had none). A demo store written into
Artemis' tables gives the queue figures stat gives on the same store's files; the KahaDB ``basic`` fixture
written into Classic's tables gives the queue rows stat gives on the KahaDB store."""
from __future__ import annotations

import json

import pytest

from tests.engines.test_jdbc_artemis import demo, write_demo  # noqa: F401 - fixture
from tests.engines.test_export_jdbc import classic_url  # noqa: F401 - fixture
from tests.pg_cluster import jdbc_env, pg_cluster  # noqa: F401
from tests.support import KAHADB

AT = 1717200000000
FIGURES = ("messages", "bytes", "oldest", "newest", "scheduled", "expired", "redelivered", "prepared", "paged",
           "large")


def _json(run_cli, *args):
    code, out, err = run_cli(*args, "--format", "json")
    return code, json.loads(out), err


def test_artemis_tables_give_the_files_figures(pg_cluster, jdbc_env, run_cli, demo, tmp_path):
    url = write_demo(pg_cluster, "stat_demo", demo)
    code, doc, err = _json(run_cli, "stat", "--jdbc-url", url, "--at", AT)
    assert code == 0, err
    _, files, _ = _json(run_cli, "stat", demo, "--at", AT)
    assert doc["kind"] == "artemis-jdbc" and doc["verdict"] == "OK"
    pick = lambda d: {r["name"]: tuple(r[k] for k in FIGURES) for r in d["queues"]}  # noqa: E731
    assert pick(doc) == pick(files) and sum(r["messages"] for r in doc["queues"]) > 0
    assert [j["journal"] for j in doc["journals"]] == ["bindings", "messages"]
    assert doc["journals"][1]["liveRecords"] > 0 and doc["totals"]["messages"] == files["totals"]["messages"]
    code, text, _ = run_cli("stat", "--jdbc-url", url, "--at", AT)
    assert code == 0 and text.startswith("queues (artemis-jdbc")


def test_classic_tables_give_the_kahadb_rows(pg_cluster, jdbc_env, run_cli, classic_url):
    code, doc, err = _json(run_cli, "stat", "--jdbc-url", classic_url, "--at", AT)
    assert code in (0, 1), err
    _, kaha, _ = _json(run_cli, "stat", KAHADB / "basic" / "kahadb", "--at", AT)
    assert doc["kind"] == "classic-jdbc"
    queues = lambda d: {r["name"]: (r["messages"], r["oldest"], r["newest"])  # noqa: E731
                        for r in d["queues"] if r["subscription"] is None and r["routingType"] == "queue"
                        and r["messages"]}  # a destination the broker knows with nothing in it: either way
    got, want = queues(doc), queues(kaha)
    # the writer made fx.audit's first message a prepared XA send: not live, held for the destination
    audit = got.pop("fx.audit")
    w = want.pop("fx.audit")
    assert got == want and audit[0] == w[0] - 1
    assert next(r for r in doc["queues"] if r["name"] == "fx.audit" and r["subscription"] is None)["prepared"] == 1
    code, text, _ = run_cli("stat", "--jdbc-url", classic_url, "--at", AT)
    assert code == {"OK": 0, "WARNING": 1}[doc["verdict"]] and text.startswith("queues (classic-jdbc") and "fx.orders" in text


def test_bad_url_is_one_error_line(run_cli):
    code, doc, err = _json(run_cli, "stat", "--jdbc-url", "jdbc:postgresql://127.0.0.1:1/none")
    assert code == 3 and doc["verdict"] == "UNKNOWN" and err.count("\n") == 1


def test_artemis_tables_stat_verdict_is_verify_verdict(pg_cluster, jdbc_env, run_cli, demo):
    # issue 25, one rule: stat judged an Artemis JDBC store by the load's own findings only (load_verdict), so
    # a large message whose .msg row is gone (verify: CRITICAL large-message-missing) was OK to stat
    url = write_demo(pg_cluster, "stat_verdict", demo)
    with pg_cluster.connect("stat_verdict") as conn:
        conn.execute("DELETE FROM large_messages WHERE FILENAME = (SELECT min(FILENAME) FROM large_messages)")
    vcode, vdoc, _ = _json(run_cli, "verify", "--jdbc-url", url)
    code, doc, _ = _json(run_cli, "stat", "--jdbc-url", url, "--at", AT)
    assert vcode == 2 and "large-message-missing" in {f["code"] for f in vdoc["findings"]}, vdoc["findings"]
    assert (code, doc["verdict"]) == (vcode, vdoc["verdict"])


def test_artemis_tables_print_verdict_is_verify_verdict_in_every_style(pg_cluster, jdbc_env, run_cli, demo):
    # issue 25, one rule: print's JSON document said the load's own verdict (OK: a missing .msg row is no row
    # the load meets) while its exit code was verify's (2); with --journal or --style artemis the exit code
    # itself was the load's (0)
    url = write_demo(pg_cluster, "print_verdict", demo)
    with pg_cluster.connect("print_verdict") as conn:
        conn.execute("DELETE FROM large_messages WHERE FILENAME = (SELECT min(FILENAME) FROM large_messages)")
    vcode, vdoc, _ = _json(run_cli, "verify", "--jdbc-url", url)
    assert vcode == 2 and "large-message-missing" in {f["code"] for f in vdoc["findings"]}, vdoc["findings"]
    code, doc, _ = _json(run_cli, "print", "--jdbc-url", url, "--safe")
    assert (code, doc["verdict"]) == (2, "CRITICAL")
    code, doc, _ = _json(run_cli, "print", "--jdbc-url", url, "--safe", "--journal", "messages")
    assert (code, doc["verdict"]) == (2, "CRITICAL") and [j["kind"] for j in doc["journals"]] == ["messages"]
    code, _, _ = run_cli("print", "--jdbc-url", url, "--safe", "--style", "artemis")
    assert code == 2
