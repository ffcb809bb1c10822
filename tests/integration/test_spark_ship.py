"""``--ship`` on a real Spark standalone cluster on loopback: a master and two workers of one core each, one
of which resolves ``python3`` to the system Python, where amqtool (and pyarrow) are not installed. The
export ships the running environment (``spark.archives``); both executors unpack it and run tasks, and each
store's rows equal the local engine's. Daemons started here are stopped by PID."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from amqtool.engines.export.fleet import FleetRequest, run_fleet_export
from tests.engines.fleet_stores import build_fleet, fleet_rows_by_store, read_table
from tests.integration.test_spark_standalone import _free_port, _stop, _wait_port

pytestmark = [pytest.mark.spark, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"


def _lacks_amqtool(env: dict) -> bool:
    p = subprocess.run(["python3", "-c", "import amqtool"], env=env, capture_output=True, cwd="/")
    return p.returncode != 0 and b"No module named 'amqtool'" in p.stderr


@pytest.fixture
def cluster(tmp_path):
    import pyspark

    if not os.path.exists(SYSTEM_PYTHON):
        pytest.skip(f"no {SYSTEM_PYTHON} to play a worker without amqtool")
    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "VIRTUAL_ENV", "PYTHON"))}
    base.update(SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1")
    venv_path = f"{REPO / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    envs = {"with": dict(base, PATH=venv_path, SPARK_WORKER_DIR=str(tmp_path / "work-with")),
            "without": dict(base, PATH="/usr/bin:/bin", SPARK_WORKER_DIR=str(tmp_path / "work-without"))}
    if not _lacks_amqtool(envs["without"]):
        pytest.skip(f"{SYSTEM_PYTHON} has amqtool installed: cannot play a worker without it")
    assert not _lacks_amqtool(envs["with"])
    port, ui = _free_port(), _free_port()
    procs = []
    try:
        mlog = tmp_path / "master.log"
        master = subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=envs["with"], stdout=open(mlog, "wb"), stderr=subprocess.STDOUT)
        procs.append(master)
        _wait_port(port, master, mlog)
        url = f"spark://127.0.0.1:{port}"
        for name, env in envs.items():
            wport, wui = _free_port(), _free_port()
            wlog = tmp_path / f"worker-{name}.log"
            worker = subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                 str(wport), "--webui-port", str(wui), "--cores", "1", "--memory", "1g", url],
                env=env, stdout=open(wlog, "wb"), stderr=subprocess.STDOUT)
            procs.append(worker)
            _wait_port(wport, worker, wlog)
            deadline = time.monotonic() + 90
            while b"Successfully registered with master" not in wlog.read_bytes():
                assert time.monotonic() < deadline, wlog.read_text()[-2000:]
                time.sleep(0.5)
        yield url, {name: Path(env["SPARK_WORKER_DIR"]) for name, env in envs.items()}
    finally:
        for p in reversed(procs):
            _stop(p)
    assert all(p.poll() is not None for p in procs)


def test_shipped_environment_serves_a_worker_without_amqtool(cluster, tmp_path, monkeypatch, ship_cache):
    from amqtool.engines.export.spark import get_session

    url, work_dirs = cluster
    fleet = build_fleet(tmp_path / "fleet", demos=4)
    stores = [str(p) for p in fleet.values()]
    local = tmp_path / "local"
    ldoc, _ = run_fleet_export(FleetRequest(stores=stores, out=str(local), engine="local"))

    monkeypatch.setenv("XDG_CACHE_HOME", str(ship_cache))  # not the user's cache
    monkeypatch.setenv("AMQTOOL_SPARK_DRIVER_MEMORY", "1g")
    lines: list[str] = []
    spark = get_session(url, log_path=str(tmp_path / "driver.log"), ship=True, status=lines.append)
    try:
        sc = spark.sparkContext
        deadline = time.monotonic() + 120
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and one executor a worker
            assert time.monotonic() < deadline, "both executors never registered"
            time.sleep(0.5)
        assert sc.getConf().get("spark.pyspark.python") == "./environment/bin/python"
        assert sc.pythonExec == "./environment/bin/python" and os.environ.get("PYSPARK_PYTHON") != sc.pythonExec
        # every task's Python is the shipped one, unpacked in its executor's directory, on both workers
        probe = sc.parallelize(range(8), 8).map(
            lambda _: (__import__("os").getcwd(), __import__("sys").prefix,
                       __import__("amqtool").__file__)).collect()
        for cwd, prefix, amqtool_file in probe:
            assert prefix == cwd + "/environment" and amqtool_file.startswith(prefix + "/lib/"), (cwd, prefix)
        assert {("work-with" if "work-with/" in c else "work-without") for c, _, _ in probe} == \
            {"work-with", "work-without"}
        out = tmp_path / "cluster"
        doc, _ = run_fleet_export(FleetRequest(stores=stores, out=str(out), engine="spark"), spark_session=spark)
    finally:
        spark.stop()
    (archive,) = list((ship_cache / "amqtool").glob("env-*.tar.gz"))
    assert lines in ([f"shipping new environment archive {archive}"], [f"shipping cached environment archive {archive}"])
    for table in ("messages", "bindings", "subscriptions"):
        assert fleet_rows_by_store(out, table, "parquet") == fleet_rows_by_store(local, table, "parquet")
    assert read_table(out / "stores", "parquet") == read_table(local / "stores", "parquet")
    assert doc["stores"] == ldoc["stores"] and doc["engine"] == "spark"
    for name, work in work_dirs.items():  # each worker's executor unpacked the archive and ran tasks
        (executor,) = [d for d in work.glob("app-*/*") if d.is_dir()]
        assert (executor / "environment" / "bin" / "python").is_symlink(), name
        assert "Finished task" in (executor / "stderr").read_text(errors="replace"), name

    # the control: without shipping, tasks take the workers' own python3, and one of them has no amqtool
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")
    spark = get_session(url, log_path=str(tmp_path / "driver2.log"), ship=False)
    try:
        sc = spark.sparkContext
        deadline = time.monotonic() + 120
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:
            assert time.monotonic() < deadline, "both executors never registered"
            time.sleep(0.5)
        probe = sc.parallelize(range(8), 8).map(
            lambda _: (__import__("os").getcwd(), __import__("importlib.util").util.find_spec("amqtool") is not None))
        seen = dict(probe.collect())
    finally:
        spark.stop()
    found = {("work-with" if "work-with/" in cwd else "work-without"): ok for cwd, ok in seen.items()}
    assert found == {"work-with": True, "work-without": False}, seen
