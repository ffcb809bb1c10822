"""A throwaway PostgreSQL cluster for the JDBC tests (Debian's ``postgresql`` package).

``initdb`` in a fresh temporary directory, ``pg_ctl start`` on a free 127.0.0.1 port (Unix socket in the same
directory), password authentication (scram-sha-256) for one superuser; stopped by ``pg_ctl stop`` and the
directory removed at the end of the session. PostgreSQL refuses to run as root, so as root the cluster runs
as the ``postgres`` system user (``runuser``). Tests skip with the reason when it cannot be had.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
USER = "amq"
PASSWORD = "amq-secret-1"


@dataclass
class PgCluster:
    dir: Path
    port: int
    bin: Path
    run_as: str | None

    @property
    def url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    def db_url(self, db: str) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{db}"

    def connect(self, db: str = "postgres", autocommit: bool = True):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, dbname=db, user=USER, password=PASSWORD,
                               autocommit=autocommit)

    def create_database(self, name: str) -> str:
        with self.connect() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}"')
            c.execute(f'CREATE DATABASE "{name}"')
        return self.db_url(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], run_as: str | None, **kw) -> subprocess.CompletedProcess:
    if run_as:
        cmd = ["runuser", "-u", run_as, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


class ClusterUnavailable(Exception):
    """PostgreSQL cannot be had here (the reason is the message)."""


def start_cluster() -> PgCluster:
    """initdb + pg_ctl start on a free loopback port (see the module docstring); ClusterUnavailable if not."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ClusterUnavailable("psycopg is not installed") from None
    if not PG_BINS or not (PG_BINS[0] / "initdb").exists():
        raise ClusterUnavailable("PostgreSQL server not installed (apt-get install -y postgresql)")
    bindir = PG_BINS[0]
    run_as = None
    pw = None
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise ClusterUnavailable("running as root and there is no postgres user to run the cluster as") from None
        run_as = "postgres"
    base = Path(tempfile.mkdtemp(prefix="amqtool-pg-"))
    cluster = PgCluster(base, _free_port(), bindir, run_as)
    data = base / "data"
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if pw is not None:
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    r = _run([str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=scram-sha-256",
              f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"], run_as)
    if r.returncode != 0:
        stop_cluster(cluster)
        raise ClusterUnavailable(f"initdb failed: {r.stderr.strip()[-400:]}")
    opts = (f"-c listen_addresses=127.0.0.1 -c port={cluster.port} -c unix_socket_directories={base} "
            "-c fsync=off")
    r = _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60",
              "-o", opts, "start"], run_as)
    if r.returncode != 0:
        log = (base / "log").read_text(errors="replace")[-400:] if (base / "log").exists() else ""
        stop_cluster(cluster)
        raise ClusterUnavailable(f"pg_ctl start failed: {r.stderr.strip()[-300:]} {log}")
    return cluster


def stop_cluster(cluster: PgCluster) -> None:
    """pg_ctl stop (fast) when it runs, then remove its directory."""
    data = cluster.dir / "data"
    if (data / "postmaster.pid").exists():
        _run([str(cluster.bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"], cluster.run_as)
    shutil.rmtree(cluster.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster():
    try:
        cluster = start_cluster()
    except ClusterUnavailable as err:
        pytest.skip(str(err))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture
def jdbc_env(monkeypatch):
    """Credentials for amqtool through the environment (never argv)."""
    monkeypatch.setenv("AMQTOOL_JDBC_USER", USER)
    monkeypatch.setenv("AMQTOOL_JDBC_PASSWORD", PASSWORD)
