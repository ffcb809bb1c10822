"""Artemis database stores in a throwaway PostgreSQL: the oracle fixtures' and a demo store's journals written
into tables as ``JDBCJournalImpl`` writes them (tests/artemis_jdbc_writer.py), loaded back through ``print``
and ``verify``: live records, prepared and failed transactions equal the fixtures' manifests (written by
real Artemis code), the demo's messages per queue equal its manifest; then damaged rows."""
from __future__ import annotations

import base64
import json

import pytest

from tests.artemis_jdbc_writer import LARGE_DDL, NODE_MANAGER_DDL, JdbcJournalWriter, write_journal
from tests.pg_cluster import jdbc_env, pg_cluster  # noqa: F401
from tests.support import ORACLE


def _db(pg, name: str):
    url = pg.create_database(name)
    return url, pg.connect(name)


def _entry(r: dict) -> tuple:
    return r["id"], r["userRecordType"], r["isUpdate"], r["compactCount"], r["bodySize"], r["bodySha256"]


def _want(e: dict) -> tuple:
    return e["id"], e["type"], e["isUpdate"], e["compactCount"], e["len"], e["sha256"]


def _journals(doc: dict) -> dict:
    return {j["kind"]: j for j in doc["journals"]}


SCENARIOS = ["01_simple_adds", "02_add_update_delete", "03_transactions", "04b_after_compact", "06_bindings"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_oracle_journal_in_tables_loads_as_manifest(pg_cluster, jdbc_env, run_cli, scenario):
    if not (ORACLE / scenario).is_dir():
        pytest.skip("oracle fixtures not present")
    manifest = json.loads((ORACLE / scenario / "manifest.json").read_text())
    kind = "bindings" if scenario == "06_bindings" else "messages"
    url, conn = _db(pg_cluster, "o" + scenario[:2].lower() + scenario[2:3])
    with conn:
        other = "messages" if kind == "bindings" else "bindings"
        JdbcJournalWriter(conn, other)  # the other journal's table, empty
        write_journal(conn, ORACLE / scenario / "journal", kind)
    code, doc, _ = run_json(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 0 and doc["kind"] == "artemis-jdbc" and doc["verdict"] == "OK"
    j = _journals(doc)[kind]
    exp = manifest["expectedAfterLoad"]
    got = [_entry(r) for r in j["live"]]
    want = [_want(e) for e in exp["live"]]
    if scenario == "02_add_update_delete":
        # Deletes are SQL DELETEs in a table: id 100, deleted then added again, is live (a file journal's
        # load drops every record of an id any DELETE names). Everything else is the manifest's.
        assert [g for g in got if g[0] != 100] == want
        assert [g[0] for g in got].count(100) == 1
    else:
        assert got == want
    assert [(t["txId"], [_entry(r) for r in t["records"]], len(t["recordsToDelete"])) for t in j["prepared"]] == \
        [(t["txId"], [_want(r) for r in t["records"]], len(t["recordsToDelete"])) for t in exp["prepared"]]
    for t, w in zip(j["prepared"], exp["prepared"]):
        assert base64.urlsafe_b64decode(t["extraData"]).hex() == w["extraDataHex"]
    assert [t["txId"] for t in j["failed"]] == [t["txId"] for t in exp["failedTransactions"]]
    assert j["numberOfRecords"] == j["rows"]
    assert all(r["file"] == j["table"] and r["offset"] == r["seq"] for r in j["live"])
    code, vdoc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    assert code == 0, vdoc["findings"]
    codes = {f["code"] for f in vdoc["findings"]}
    assert codes <= {"tx-prepared", "tx-incomplete"}
    assert ("tx-prepared" in codes) == bool(exp["prepared"])


def run_json(run_cli, *args):
    code, out, err = run_cli(*args, "--format", "json")
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 4 * 1024 * 1024, file_size=1024 * 1024, seed=11, paging=False)  # page-store tables: not read yet
    return path


def write_paging(conn, paging_dir, prefix: str = "PAGE_STORE") -> None:
    """The file store's paging directories as ``PagingStoreFactoryDatabase`` keeps them: ``directory.txt`` in
    the page-store table listing one id per address, a ``<prefix><id>`` table per address with ``address.txt``
    (a SimpleString) and its ``.page`` files, each a large object."""
    from amqtool.formats.artemis.primitives import Writer

    conn.execute(LARGE_DDL.format(t=prefix))
    directory = Writer()
    for n, d in enumerate(sorted(p for p in paging_dir.iterdir() if p.is_dir())):
        gid = f"{n + 1}"
        directory.simple_string(gid)
        table = prefix + gid
        conn.execute(LARGE_DDL.format(t=table))
        address = (d / "address.txt").read_text().strip()
        conn.execute(f"INSERT INTO {table}(FILENAME, EXTENSION, DATA) VALUES ('address.txt', 'txt', "
                     "lo_from_bytea(0, %s))", (Writer().simple_string(address).getvalue(),))
        for page in sorted(d.glob("*.page")):
            conn.execute(f"INSERT INTO {table}(FILENAME, EXTENSION, DATA) VALUES (%s, 'page', lo_from_bytea(0, %s))",
                         (page.name, page.read_bytes()))
    conn.execute(f"INSERT INTO {prefix}(FILENAME, EXTENSION, DATA) VALUES ('directory.txt', 'txt', "
                 "lo_from_bytea(0, %s))", (directory.getvalue(),))


def write_demo(pg, db: str, demo, broker_xml=None):
    url, conn = _db(pg, db)
    with conn:
        if (demo / "data" / "paging").is_dir() and any((demo / "data" / "paging").iterdir()):
            write_paging(conn, demo / "data" / "paging")
        write_journal(conn, demo / "data" / "bindings", "bindings")
        write_journal(conn, demo / "data" / "journal", "messages")
        conn.execute(NODE_MANAGER_DDL.format(t="node_manager_store"))
        conn.execute("INSERT INTO node_manager_store(ID, STATE) VALUES (0, 'L')")
        conn.execute("INSERT INTO node_manager_store(ID, HOLDER_ID, HOLDER_EXPIRATION_TIME) VALUES "
                     "(1, 'primary-1', (EXTRACT(EPOCH FROM now()) * 1000)::bigint + 600000)")
        conn.execute("INSERT INTO node_manager_store(ID) VALUES (2)")
        conn.execute("INSERT INTO node_manager_store(ID, NODE_ID) VALUES (3, '6a3e7a1c-1111-2222-3333-444455556666')")
        conn.execute(LARGE_DDL.format(t="large_messages"))
        for f in sorted((demo / "data" / "large-messages").glob("*.msg")):
            conn.execute("INSERT INTO large_messages(FILENAME, EXTENSION, DATA) VALUES (%s, 'msg', lo_from_bytea(0, %s))",
                         (f.name, f.read_bytes()))
    return url


def test_demo_store_in_tables(pg_cluster, jdbc_env, run_cli, demo, tmp_path):
    manifest = json.loads((demo / "manifest.json").read_text())
    url = write_demo(pg_cluster, "demo", demo)
    code, doc, _ = run_json(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 0 and doc["verdict"] == "OK"
    by_queue = {q["name"]: q["messages"] for q in doc["queueSummary"]["queues"]}
    want = {q: len(v) for q, v in manifest["expected"]["liveByQueue"].items()}
    assert {q: by_queue.get(q, 0) for q in want} == want
    assert doc["queueSummary"]["preparedMessages"] == sum(len(t["messageIds"]) for t in manifest["expected"]["prepared"])
    nm = doc["nodeManager"]
    assert (nm["state"], nm["primaryLock"]["state"], nm["primaryLock"]["holder"], nm["backupLock"]["state"]) == \
        ("ACTIVE", "held", "primary-1", "free")
    assert nm["nodeId"] == "6a3e7a1c-1111-2222-3333-444455556666"
    lm = {m["messageId"]: m["size"] for m in doc["largeMessages"]}
    assert lm == {int(f.stem): f.stat().st_size for f in (demo / "data" / "large-messages").glob("*.msg")}

    # The same store found from broker.xml's <database-store>, with --style artemis.
    xml = tmp_path / "etc" / "broker.xml"
    xml.parent.mkdir()
    xml.write_text(f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <store><database-store>
    <jdbc-connection-url>{url}</jdbc-connection-url>
    <bindings-table-name>BINDINGS</bindings-table-name>
    <message-table-name>MESSAGES</message-table-name>
    <large-message-table-name>LARGE_MESSAGES</large-message-table-name>
    <node-manager-store-table-name>NODE_MANAGER_STORE</node-manager-store-table-name>
  </database-store></store></core></configuration>""")
    code, vdoc, _ = run_json(run_cli, "verify", "--broker-xml", str(xml))
    assert code == 0, vdoc["findings"]
    assert {f["code"] for f in vdoc["findings"]} == {"tx-prepared", "artemis-jdbc-node-manager"}
    code, out, _ = run_cli("print", "--broker-xml", str(xml), "--style", "artemis", "--safe")
    assert code == 0
    assert "B I N D I N G S  J O U R N A L" in out and "### Surviving Records Summary ###" in out
    counts = out.split("### Message Counts ###")
    assert len(counts) == 3  # bindings and messages each end with their counts
    assert f"message count={doc['queueSummary']['messages']}" in counts[2]


def test_damaged_rows(pg_cluster, jdbc_env, run_cli, demo):
    url = write_demo(pg_cluster, "damaged_demo", demo)
    with pg_cluster.connect("damaged_demo") as c:
        # a message record's body cut short, an unknown record type, a large-message row without its record
        c.execute("UPDATE messages SET record = substring(record from 1 for 5), variableSize = 5 WHERE seq = "
                  "(SELECT MIN(seq) FROM messages WHERE userRecordType = 45 AND recordType = 11)")
        c.execute("INSERT INTO large_messages(FILENAME, EXTENSION, DATA) VALUES ('999999.msg', 'msg', "
                  "lo_from_bytea(0, 'x'))")
    code, vdoc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    codes = [f["code"] for f in vdoc["findings"]]
    assert code == 2 and "artemis-jdbc-undecodable" in codes and "large-message-orphan" in codes
    with pg_cluster.connect("damaged_demo") as c:
        c.execute("INSERT INTO messages(id, recordType, compactCount, txId, userRecordType, variableSize, record, "
                  "txDataSize, txData, txCheckNoRecords, seq) VALUES (5, 42, 0, 0, 45, 0, '', 0, '', 0, 999999)")
        c.execute("INSERT INTO messages(id, recordType, compactCount, txId, userRecordType, variableSize, record, "
                  "txDataSize, txData, txCheckNoRecords, seq) VALUES (0, 19, 0, 777, -1, 0, '', 0, '', 0, 1000000)")
    code, doc, _ = run_json(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 2 and doc["verdict"] == "CRITICAL"
    code, vdoc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    bad = {f["code"]: f for f in vdoc["findings"]}
    assert bad["artemis-jdbc-unknown-record-type"]["path"] == "MESSAGES:seq=999999"
    assert bad["artemis-jdbc-rollback-unknown"]["details"]["txId"] == 777


def test_url_alone_finds_the_kind_and_bad_tables(pg_cluster, jdbc_env, run_cli):
    url, conn = _db(pg_cluster, "empty_artemis")
    with conn:
        conn.execute("CREATE TABLE unrelated(x int)")
    code, doc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    assert code == 3 and "no broker store here" in doc["error"]
    code, doc, _ = run_json(run_cli, "print", "--jdbc-url", url, "--reclaimed")
    assert code == 3


@pytest.fixture(scope="module")
def paged_demo(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("paged") / "store"
    create_demo(path, 4 * 1024 * 1024, file_size=1024 * 1024, seed=5, paging=True)
    return path


def test_page_store_tables(pg_cluster, jdbc_env, run_cli, paged_demo):
    from amqtool.formats.artemis.paging import scan_page

    url = write_demo(pg_cluster, "paged_demo", paged_demo)
    code, doc, _ = run_json(run_cli, "print", "--jdbc-url", url, "--safe")
    assert code == 0
    want = {}
    for d in (paged_demo / "data" / "paging").iterdir():
        if d.is_dir():
            addr = (d / "address.txt").read_text().strip()
            want[addr] = {p.name: len(scan_page(p.read_bytes())[0]) for p in d.glob("*.page")}
    got = {s["address"]: {p["file"]: p["records"] for p in s["pages"]} for s in doc["pageStores"]}
    assert got == want and sum(len(v) for v in want.values()) > 0
    code, vdoc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    assert code == 0, vdoc["findings"]  # paged large messages keep their .msg rows: no orphan
    assert vdoc["summary"]["pages"] == sum(len(v) for v in want.values())
    table = doc["pageStores"][0]["table"]
    page = doc["pageStores"][0]["pages"][0]
    with pg_cluster.connect("paged_demo") as c:
        c.execute(f"UPDATE {table} SET DATA = lo_from_bytea(0, substring(lo_get(DATA) from 1 for 40)) "
                  "WHERE FILENAME = %s", (page["file"],))
    code, vdoc, _ = run_json(run_cli, "verify", "--jdbc-url", url)
    bad = [f for f in vdoc["findings"] if f["code"] == "page-not-framed"]
    assert code == 2 and len(bad) == 1 and bad[0]["path"] == f"{table}:{page['file']}"
