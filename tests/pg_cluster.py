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


@pytest.fixture(scope="session")
def pg_cluster():
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed")
    if not PG_BINS or not (PG_BINS[0] / "initdb").exists():
        pytest.skip("PostgreSQL server not installed (apt-get install -y postgresql)")
    bindir = PG_BINS[0]
    run_as = None
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the cluster as")
        run_as = "postgres"
    base = Path(tempfile.mkdtemp(prefix="amqtool-pg-"))
    data = base / "data"
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if run_as:
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    port = _free_port()
    try:
        r = _run([str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=scram-sha-256",
                  f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"], run_as)
        if r.returncode != 0:
            pytest.skip(f"initdb failed: {r.stderr.strip()[-400:]}")
        opts = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={base} -c fsync=off"
        r = _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60",
                  "-o", opts, "start"], run_as)
        if r.returncode != 0:
            log = (base / "log").read_text(errors="replace")[-400:] if (base / "log").exists() else ""
            pytest.skip(f"pg_ctl start failed: {r.stderr.strip()[-300:]} {log}")
        yield PgCluster(base, port, bindir, run_as)
    finally:
        if (data / "postmaster.pid").exists():
            _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"], run_as)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def jdbc_env(monkeypatch):
    """Credentials for amqtool through the environment (never argv)."""
    monkeypatch.setenv("AMQTOOL_JDBC_USER", USER)
    monkeypatch.setenv("AMQTOOL_JDBC_PASSWORD", PASSWORD)
