"""The truth of the Artemis row-fault campaign checked against the real ``JDBCJournalImpl`` (issue 25).

The campaign's truth (tests/faults/jdbc.py) starts from amqtool's load of the journal tables. Here a sample of
the campaign's faults is committed to a copy of the damaged database and loaded by Artemis' own
``JDBCJournalImpl.load`` (the oracle of /work/shared/tools/artemis-oracle/jdbc, built from the commit the
fixtures were written with): the committed records (id, user record type, update flag, bytes) in order, the
prepared and the failed transactions, and whether the load throws must be amqtool's.

The oracle cannot be built in CI (its sources are fetched, never committed): the test runs when
``JDBC_ORACLE_DIR`` names a built one (``build.sh`` of that directory) and is skipped otherwise."""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.faults import jdbc
from tests.pg_cluster import PASSWORD, USER, pg_cluster  # noqa: F401

ORACLE = Path(os.environ.get("JDBC_ORACLE_DIR", "/nonexistent"))
SAMPLE = 40

pytestmark = [pytest.mark.slow, pytest.mark.integration,
              pytest.mark.skipif(not (ORACLE / "classes" / "JdbcOracle.class").is_file(),
                                 reason="JDBC_ORACLE_DIR does not name a built JDBCJournalImpl oracle")]


def oracle_load(port: int, db: str, table: str) -> tuple[list, dict]:
    url = f"jdbc:postgresql://127.0.0.1:{port}/{db}?user={USER}&password={PASSWORD}"
    cp = f"classes:{(ORACLE / 'cp.txt').read_text().strip()}:/usr/share/java/slf4j-nop.jar"
    r = subprocess.run(["java", "-cp", cp, "JdbcOracle", "load", url, table], cwd=ORACLE, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        return [], {"throws": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    summary = lines[-1]
    records = [(x["id"], x["userRecordType"], x["isUpdate"], x["len"], x["sha256"]) for x in lines[:-1]]
    prepared = [(p["txId"], [tuple(x) for x in p["records"]]) for p in summary["preparedTxs"]]
    return records, {"prepared": prepared, "failed": sorted(summary["failedTx"])}


def amqtool_load(store, table: str) -> tuple[list, dict]:
    from amqtool.engines.jdbc import artemis

    data = artemis.load(store)
    j = next(x for x in data.journals if x.table.lower() == table.lower())
    if j.load_fails:
        return [], {"throws": True}
    r = j.result

    def sha(rec):
        return hashlib.sha256(r.body(rec)).hexdigest()

    def utype(rec):  # the broker reads userRecordType as a byte
        return (rec.user_record_type + 128) % 256 - 128

    records = [(rec.id, utype(rec), rec.is_update, rec.body_len, sha(rec)) for rec in r.live]
    prepared = [(tx.tx_id, [(rec.id, utype(rec), rec.is_update, sha(rec)) for rec in tx.records]) for tx in r.prepared]
    return records, {"prepared": prepared, "failed": sorted(tx.tx_id for tx in r.failed)}


def test_the_truths_load_is_jdbcjournalimpls(pg_cluster, tmp_path):
    from amqtool.engines.jdbc import artemis

    base = "oracle_base"
    jdbc.artemis_store(pg_cluster, base, tmp_path)
    with pg_cluster.connect(base) as c:
        sites = jdbc.ArtemisJdbcSites.read(c, [r[0] for r in c.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'page_store%' OR tablename = 'large_messages'")])
    checked = 0
    for seed in range(25 * 1_000_003, 25 * 1_000_003 + SAMPLE):
        fault = sites.draw(random.Random(seed))
        if fault.table not in ("messages", "bindings"):
            continue
        copy = "oracle_copy"
        with pg_cluster.connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
            admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{base}"')
        with pg_cluster.connect(copy, autocommit=False) as c:
            try:
                fault.apply(c)
            except Exception:  # noqa: BLE001 - refused by the database: the campaign skips it too
                continue
            c.commit()
        store = artemis.open_store(jdbc._target(pg_cluster.db_url(copy)))
        for table in ("bindings", "messages"):
            want = oracle_load(pg_cluster.port, copy, table.upper())
            got = amqtool_load(store, table)
            if "throws" in want[1]:
                assert "throws" in got[1], (fault.describe(), table, want[1])
                continue
            assert got == want, (fault.describe(), table)
        checked += 1
    assert checked >= SAMPLE // 2
