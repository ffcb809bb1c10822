"""A real Spark standalone cluster on loopback: a master and a worker launched from PySpark's own
``bin/spark-class`` (PySpark 4 ships no ``sbin/start-master.sh``), an export with ``--master
spark://127.0.0.1:PORT``, the same rows as the local engine, and both daemons stopped by PID."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.engines.export_store import EXPECTED, build_store, normalise, read_parquet_table

pytestmark = [pytest.mark.spark, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"port {port} never opened: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def cluster(tmp_path):
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(tmp_path / "work"), PYSPARK_PYTHON=str(REPO / ".venv" / "bin" / "python"))
    port, ui, wport, wui = (_free_port() for _ in range(4))
    procs = []
    try:
        mlog = tmp_path / "master.log"
        master = subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=open(mlog, "wb"), stderr=subprocess.STDOUT)
        procs.append(master)
        _wait_port(port, master, mlog)
        url = f"spark://127.0.0.1:{port}"
        wlog = tmp_path / "worker.log"
        worker = subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(wport),
             "--webui-port", str(wui), "--cores", "2", "--memory", "2g", url],
            env=env, stdout=open(wlog, "wb"), stderr=subprocess.STDOUT)
        procs.append(worker)
        _wait_port(wport, worker, wlog)
        deadline = time.monotonic() + 60
        while b"Successfully registered with master" not in wlog.read_bytes():
            assert time.monotonic() < deadline, wlog.read_text()[-2000:]
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            _stop(p)
    assert all(p.poll() is not None for p in procs)


def test_export_on_standalone_cluster(cluster, tmp_path, ship_cache):
    store = build_store(tmp_path / "broker")
    amqtool = str(REPO / ".venv" / "bin" / "amqtool")
    out = tmp_path / "cluster"
    p = subprocess.run([amqtool, "export", str(store), "-o", str(out), "-f", "parquet", "--master", cluster,
                        "--report", "json", "--salvage"], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, AMQTOOL_SPARK_DRIVER_MEMORY="1g",
                                XDG_CACHE_HOME=str(ship_cache)))  # a cluster master ships amqtool
    doc = json.loads(p.stdout)
    # the built store is CRITICAL on purpose (a queue with no binding): salvaged, exit 2 (verify's verdict)
    assert p.returncode == 2 and doc["engine"] == "spark", p.stderr[-2000:]
    local = tmp_path / "local"
    q = subprocess.run([amqtool, "export", str(store), "-o", str(local), "-f", "parquet", "--engine", "local", "-q",
                        "--salvage"], capture_output=True, text=True, timeout=300)
    assert q.returncode == 2
    got = normalise(read_parquet_table(out / "messages"))
    assert got == normalise(read_parquet_table(local / "messages"))
    assert {(r["message_id"], r["queue"]): r["transaction_state"] for r in got} == EXPECTED
