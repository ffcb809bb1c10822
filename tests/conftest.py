"""Shared pytest fixtures (data helpers live in tests/support.py)."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import settings

from tests.support import KAHADB

# Hypothesis: derandomized by default so a CI run is reproducible (as dulwich's "ci" profile);
# HYPOTHESIS_PROFILE=explore searches with fresh randomness, for a local bug hunt.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# One JVM serves every Spark session of the test process (PySpark keeps its gateway after a session stops), and
# a JVM's driver class path is fixed when it is launched: the JDBC driver the database-store export adds
# (spark.jars) would be missing when an earlier module launched it. Each `amqtool export` is its own process,
# so only the suite needs this: every test JVM is launched with the PostgreSQL driver when it is installed.
_PG_JAR = "/usr/share/java/postgresql.jar"
if os.path.isfile(_PG_JAR):
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--jars {_PG_JAR} pyspark-shell")


@pytest.fixture
def run_cli(capsys):
    """Run ``amqtool`` in-process; returns (exit code, stdout, stderr)."""
    from amqtool.commands.main import main

    def run(*args: str):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def run_json(run_cli):
    """Run ``amqtool ... --format json`` and parse stdout; returns (exit code, document, stderr)."""

    def run(*args: str):
        code, out, err = run_cli(*args, "--format", "json")
        return code, json.loads(out), err

    return run


@pytest.fixture(scope="session")
def kahadb_fixtures():
    """The ActiveMQ 5.17 KahaDB fixtures (read-only; copy before changing)."""
    if not KAHADB.is_dir():
        pytest.skip(f"KahaDB fixtures not found at {KAHADB}")
    return KAHADB


@pytest.fixture
def ramfs(tmp_path):
    """A ramfs mount: a filesystem without O_DIRECT (tmpfs has it since Linux 6.6). Needs root."""
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    if os.system(f"mount -t ramfs ramfs {mnt} 2>/dev/null") != 0:
        pytest.skip("cannot mount ramfs (needs root)")
    yield mnt
    os.system(f"umount {mnt}")


_HEAVY_MARKS = ("integration", "spark", "slow")


def pytest_collection_modifyitems(config, items):
    """Files with a test that starts brokers or clusters (marked integration) run first, then those that start a
    JVM (spark) or run a long campaign (slow), then the rest, each group in collection order: `make test` hands
    whole files to two processes (pytest-xdist, its scope reordering off: it would hand out files with many
    tests first, and so the longest, single-test ones last), and a long file handed out last would run alone at
    the end while the other process idles."""
    rank: dict = {}
    for item in items:
        marks = [i for i, m in enumerate(_HEAVY_MARKS) if item.get_closest_marker(m)]
        rank[item.path] = min(rank.get(item.path, len(_HEAVY_MARKS)), *marks, len(_HEAVY_MARKS))
    items.sort(key=lambda item: rank[item.path])  # stable: each file keeps its order
