"""The Spark data source ``spark.read.format("amqtool")`` (one local[2] session for the module): on every
fixture, the demo store and a fleet, its tables hold exactly the rows ``amqtool export`` (local engine) writes;
pushed-down filters narrow what is read (bytes counted); Spark SQL filters by a property, groups by store and
queue and joins messages to subscriptions; the inputs are never written."""
from __future__ import annotations

from pathlib import Path

import pytest

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.fleet import FleetRequest, plan_stores, run_fleet_export
from tests.engines.export_store import build_store, normalise, read_parquet_table
from tests.engines.fleet_stores import build_fleet
from tests.engines.leveldb.stores import CASES as LEVELDB_CASES
from tests.support import KAHADB, ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS, BROKER_STORES, tree_hashes

pytestmark = pytest.mark.spark

TABLES = ("messages", "bindings", "subscriptions")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from amqtool.engines.export.spark import get_session
    from amqtool.spark import register

    session = get_session("local[2]", log_path=str(tmp_path_factory.mktemp("spark") / "spark.log"))
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return path


def fixture_stores() -> dict[str, Path]:
    """Every store fixture: the Artemis oracle journals, public broker stores and broker-written stores, the
    KahaDB stores and the LevelDB stores (one node's directory each)."""
    out = {f"oracle/{s}": ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({f"public/{p.parent.parent.name}": p.parent for p in PUBLIC_JOURNALS})
    out.update({f"messages/{p.name}": p for p in BROKER_STORES})
    if KAHADB.is_dir():
        out.update({f"kahadb/{d.name}": d for d in sorted(KAHADB.iterdir()) if (d / "manifest.json").is_file()})
    out.update({f"leveldb/{'-'.join(c.parts[-2:])}": c / "store" for c in LEVELDB_CASES})
    return out


def spark_rows(df, norm: bool = True) -> list[dict]:
    """A DataFrame's rows as the export's Parquet tables read back (bytes, properties as dicts), normalised."""
    out = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        if isinstance(d.get("body"), bytearray):
            d["body"] = bytes(d["body"])
        out.append(d)
    return normalise(out) if norm else out


def by_store(rows: list[dict]) -> list[dict]:
    """Rows of several stores, normalised store by store, in store order."""
    stores: dict[str, list] = {}
    for r in rows:
        stores.setdefault(str(r["store"]), []).append({**r, "store": str(r["store"])})
    return [r for name in sorted(stores) for r in normalise(stores[name])]


def read(spark, paths, table="messages", **options):
    reader = spark.read.format("amqtool").option("table", table)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load([str(p) for p in paths] if isinstance(paths, list) else str(paths))


def exported(path: Path, out: Path, **req) -> dict[str, list[dict]]:
    run_export(ExportRequest(path=str(path), out=str(out), fmt="parquet", engine="local", **req))
    return {t: normalise(read_parquet_table(out / t)) for t in TABLES}


def test_every_fixture_and_the_demo_store_give_the_exports_rows(spark, demo, tmp_path):
    stores = {**fixture_stores(), "demo": demo}
    before = {name: tree_hashes(p) for name, p in stores.items()}
    # (salvaged: oracle/05a's zeroed end is no crash's, and verify calls it CRITICAL; both sides salvage alike)
    want = {name: exported(path, tmp_path / str(i), salvage=True) for i, (name, path) in enumerate(stores.items())}
    label = {fs.path: fs.name for fs in plan_stores([str(p) for p in stores.values()])}
    for table in TABLES:
        # every store in one read (the small ones share partitions: Artemis, KahaDB and LevelDB stores in one
        # task), in small slices: the demo store's 6 MiB is read by several tasks, each loading it
        got: dict[str, list[dict]] = {}
        for r in spark_rows(read(spark, list(stores.values()), table, partitionBytes=str(2 << 20), salvage="true"),
                            norm=False):
            got.setdefault(r.pop("store"), []).append(r)
        for name, path in stores.items():
            assert normalise(got.pop(label[str(path)], [])) == want[name][table], (name, table)
        assert got == {}, table
    for name in stores:
        assert want[name]["messages"] or name.startswith(("oracle/", "public/")), name  # the stores hold rows
    # the Spark engine's export too (this data source's read path, written in tasks)
    run_export(ExportRequest(path=str(demo), out=str(tmp_path / "spark"), fmt="parquet", engine="spark"),
               spark_session=spark)
    for table in TABLES:
        assert normalise(read_parquet_table(tmp_path / "spark" / table)) == want["demo"][table], table
    assert {name: tree_hashes(p) for name, p in stores.items()} == before


@pytest.mark.parametrize("opts", [{"safe": True, "queues": ("events.*", "Undefined*")}, {"queues": ("orders",)}])
def test_options_give_the_rows_export_gives_with_them(spark, tmp_path, opts):
    store = build_store(tmp_path / "broker")  # CRITICAL on purpose (a queue with no binding): salvaged by both
    want = exported(store, tmp_path / "out", salvage=True, **opts)["messages"]
    got = spark_rows(read(spark, store, safe=str(opts.get("safe", False)).lower(), queue=",".join(opts["queues"]),
                          salvage="true"))
    assert got == want and want


def test_include_prepared_false_leaves_out_the_prepared_rows(spark, tmp_path):
    store = build_store(tmp_path / "broker")
    rows = spark_rows(read(spark, store, salvage="true"))
    assert {r["transaction_state"] for r in rows} == {"committed", "prepared"}
    without = spark_rows(read(spark, store, includePrepared="false", salvage="true"))
    assert without == [r for r in rows if r["transaction_state"] != "prepared"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, Path]:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def fleet_export(fleet, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fleet-export") / "out"
    run_fleet_export(FleetRequest(stores=[str(p) for p in fleet.values()], out=str(out), engine="local"))
    return out


def test_a_fleet_gives_the_fleet_exports_rows(spark, fleet, fleet_export, tmp_path):
    """Both engines' fleet exports (the Spark engine reads through this data source's partitions and reader,
    and writes in its tasks) and the data source: the same rows, table by table."""
    paths = list(fleet.values())
    run_fleet_export(FleetRequest(stores=[str(p) for p in paths], out=str(tmp_path / "spark"), engine="spark"),
                     spark_session=spark)
    for table in (*TABLES, "stores"):
        want = by_store(read_parquet_table(fleet_export / table))
        got = by_store(spark_rows(read(spark, paths, table, partitionBytes=str(1 << 20)), norm=False))
        assert got == want, table
        assert got and list(got[0])[0] == "store"
        assert by_store(read_parquet_table(tmp_path / "spark" / table)) == want, table
    stores = {r["store"]: r for r in spark_rows(read(spark, paths, "stores"), norm=False)}
    assert stores["site-1/empty"]["verdict"] == "UNKNOWN" and stores[next(iter(fleet))]["verdict"] in ("OK", "WARNING")


def test_spark_sql_filters_by_property_groups_and_joins(spark, fleet, fleet_export):
    paths = [str(p) for p in fleet.values()]
    read(spark, paths).createOrReplaceTempView("messages")
    read(spark, paths, "subscriptions").createOrReplaceTempView("subscriptions")
    rows = by_store(read_parquet_table(fleet_export / "messages"))
    subs = by_store(read_parquet_table(fleet_export / "subscriptions"))

    # a property: every row whose properties map has the key, with its value
    key, value = next((k, v) for r in rows for k, v in (r["properties"] or {}).items() if v is not None)
    got = spark.sql(f"select store, message_id, queue from messages where properties['{key}'] = '{value}'").collect()
    want = {(r["store"], r["message_id"], r["queue"]) for r in rows if (r["properties"] or {}).get(key) == value}
    assert {tuple(r) for r in got} == want and want

    # group by store and queue
    counts = {(r["store"], r["queue"]): r["n"] for r in
              spark.sql("select store, queue, count(*) as n from messages group by store, queue").collect()}
    want = {}
    for r in rows:
        want[(r["store"], r["queue"])] = want.get((r["store"], r["queue"]), 0) + 1
    assert counts == want and len({s for s, _ in counts}) > 2

    # join messages to subscriptions: each durable subscription's rows, which its pending column counts
    joined = spark.sql("select s.store, s.queue, s.pending, count(m.message_id) as n from subscriptions s "
                       "left join messages m on m.store = s.store and m.queue = s.queue "
                       "group by s.store, s.queue, s.pending").collect()
    assert len(joined) == len(subs) and subs
    assert all(r["n"] == r["pending"] for r in joined)


def test_pushed_queue_filter_reads_no_other_queues_messages(demo):
    """In process (no Spark): the reader with ``queue = q`` pushed reads, for rows, exactly q's message
    bodies in the journal and the page files of q's address, and gives exactly the export's rows of q."""
    from pyspark.sql.datasource import EqualTo

    from amqtool.engines.export.datasource import READ, AmqtoolDataSource
    from amqtool.engines.export.local import LocalArtemisExport
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.artemis.paging import store_pages
    from amqtool.store.layout import detect

    def scan(filters):
        ds = AmqtoolDataSource({"path": str(demo), "partitionBytes": str(2 << 20)})
        reader = ds.reader(ds.schema())
        assert list(reader.pushFilters(filters)) == filters  # Spark still evaluates them
        READ.bytes = 0
        batches = [b for p in reader.partitions() for b in reader.read(p)]
        return sum(b.num_rows for b in batches), READ.bytes, batches

    store = detect(str(demo))
    with LocalArtemisExport(store, ExportOptions()) as ex:
        ex.binding_rows()
        queues = {q.name: q.address for q in ex.bindings.queues.values()}
        body, total = {}, 0  # queue -> journal body bytes of the messages with a row on it; all of them
        for _mid, rec, refs in ex.message_refs():
            total += rec.body_len
            for q in {ex.bindings.queue_name(r[0]) for r in refs}:
                body[q] = body.get(q, 0) + rec.body_len
    pages = {}
    for ps, pid in store_pages(store):
        pages[ps.address] = pages.get(ps.address, 0) + ps.page_path(pid).stat().st_size
    assert pages, "the demo store pages some address"

    all_rows, all_bytes, _ = scan([])
    assert all_bytes == total + sum(pages.values())
    paged_queue = max((q for q, a in queues.items() if a in pages), key=lambda q: body.get(q, 0))
    rows, nbytes, batches = scan([EqualTo(("queue",), paged_queue)])
    with LocalArtemisExport(store, ExportOptions(queues=(paged_queue,))) as ex:
        want = sum(b.num_rows for b in ex.batches())
    assert rows == want and 0 < rows < all_rows
    assert {q for b in batches for q in b.column("queue").to_pylist()} == {paged_queue}
    # each of its messages' bodies once, its address's page files; nothing of any other queue
    assert nbytes == body.get(paged_queue, 0) + pages[queues[paged_queue]] < all_bytes


def test_a_store_gone_after_planning_fails_its_task_with_one_line(tmp_path):
    """In process: planned with the store there, read after it is removed: an error naming the store (Spark
    retries the task, then fails the job with this line), never a store silently without rows."""
    import shutil

    from amqtool.engines.artemis.demo import create_demo
    from amqtool.engines.export.datasource import AmqtoolDataSource
    from amqtool.errors import AmqtoolError

    a, b = tmp_path / "a", tmp_path / "b"
    for i, p in enumerate((a, b)):
        create_demo(p, 4 * 1024 * 1024, file_size=1024 * 1024, seed=3 + i)
    for table in ("messages", "bindings", "stores"):
        ds = AmqtoolDataSource({"paths": f'["{a}", "{b}"]', "table": table})
        reader = ds.reader(ds.schema())
        parts = reader.partitions()
        moved = tmp_path / "moved"
        shutil.move(str(b), moved)
        try:
            with pytest.raises(AmqtoolError) as err:
                [batch for p in parts for batch in reader.read(p)]
            assert str(err.value) == f"{b}: the store is gone (it was there when the query was planned)"
        finally:
            shutil.move(str(moved), b)


def test_a_store_gone_before_planning_is_a_stores_row_without_rows(spark, tmp_path):
    import shutil

    from amqtool.engines.artemis.demo import create_demo

    a, b = tmp_path / "a", tmp_path / "b"
    for i, p in enumerate((a, b)):
        create_demo(p, 4 * 1024 * 1024, file_size=1024 * 1024, seed=3 + i)
    shutil.rmtree(b)
    b.mkdir()  # nothing recognisable there any more: as the fleet export, a row UNKNOWN and no rows
    stores = {r["store"]: r["verdict"] for r in read(spark, [a, b], "stores").collect()}
    assert stores == {"a": "OK", "b": "UNKNOWN"}
    assert {r["store"] for r in read(spark, [a, b]).select("store").distinct().collect()} == {"a"}


def test_spark_pushes_store_and_queue_filters_to_the_reader(spark, tmp_path):
    """Through Spark's planner: ``store = ...`` leaves the other store's slices unplanned, and the rows of
    ``queue = ...`` / ``queue IN (...)`` are exactly the export's rows of those queues."""
    from amqtool.engines.artemis.demo import create_demo

    a, b = tmp_path / "a", tmp_path / "b"
    for i, p in enumerate((a, b)):
        create_demo(p, 4 * 1024 * 1024, file_size=1024 * 1024, seed=5 + i)
    df = read(spark, [a, b], partitionBytes=str(1 << 20))
    whole = df.rdd.getNumPartitions()
    only_a = df.where("store = 'a'").rdd.getNumPartitions()
    assert 0 < only_a < whole and only_a == read(spark, [a], partitionBytes=str(1 << 20)).rdd.getNumPartitions()

    want = exported(a, tmp_path / "out")["messages"]
    queues = sorted({r["queue"] for r in want})
    one = spark_rows(df.where(f"store = 'a' and queue = '{queues[0]}'").drop("store"))
    assert one == [r for r in want if r["queue"] == queues[0]] and one
    two = spark_rows(df.where(f"store = 'a' and queue in ('{queues[0]}', '{queues[-1]}')").drop("store"))
    assert two == [r for r in want if r["queue"] in (queues[0], queues[-1])]
