"""No JVM outlives amqtool (issue 26 item 10): ``export --engine spark`` killed while its driver JVM starts
or works leaves no process and no file behind, whatever the instant (SIGTERM) and even under SIGKILL.

SIGTERM 1.0-1.4 s into the export used to leave the driver JVM (``-Xmx6g``, a py4j port) running under init,
and it recreated ``.OUT.amqtool-tmp-PID/spark-local`` after amqtool's clean-up. The instants here are events
(the JVM process exists; spark-local exists; the output's temporary directory exists) plus a few random
delays; the assertions depend on none of them.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import REPO, tree_hashes

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    # a healthy store (verify: OK), so that an export that ends before the signal exits 0: the suite's built
    # export store is CRITICAL on purpose, and its refusal (exit 2) raced the signal
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 8 * 1024 * 1024, file_size=1024 * 1024, seed=3)
    return path


def _processes_naming(text: str, but: int | None = None) -> list[int]:
    """PIDs (other than ``but``) whose command line contains ``text`` (the JVM's names the output path in
    its --conf)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == but:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def _watchdogs(mark: str) -> list[int]:
    """The driver JVM watchdogs (spark.py) started by the export that ran with ``AMQTOOL_TEST_MARK=mark`` in its
    environment (inherited by its children): another export on this machine (another test process's) has its
    own watchdog, which is none of this test's business."""
    out = []
    for pid in _processes_naming("for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if f"AMQTOOL_TEST_MARK={mark}".encode() in fh.read().split(b"\0"):
                    out.append(pid)
        except OSError:
            continue
    return out


def _wait_for(cond, limit=240.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _start(store, out: Path, mark: str):
    return subprocess.Popen([str(REPO / ".venv" / "bin" / "amqtool"), "export", str(store), "-o", str(out),
                             "-f", "jsonl", "--engine", "spark", "--master", "local[2]", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, AMQTOOL_TEST_MARK=mark))


def _spark_local(parent: Path) -> bool:
    return any((p / "spark-local").exists() for p in parent.glob(".*amqtool-tmp*"))


INSTANTS = ["jvm", "spark-local", "delay", "delay", "kill-jvm-up"]


@pytest.mark.parametrize("trial", range(len(INSTANTS)))
def test_a_killed_spark_export_leaves_no_jvm_and_no_file(store, tmp_path, trial):
    instant = INSTANTS[trial]
    before_src = tree_hashes(store)
    work = tmp_path / "w"
    work.mkdir()
    out = work / "OUT"
    mark = f"{os.getpid()}-{trial}-{time.monotonic_ns()}"
    proc = _start(store, out, mark)
    sig = signal.SIGKILL if instant.startswith("kill") else signal.SIGTERM
    if instant in ("jvm", "kill-jvm-up"):
        assert _wait_for(lambda: _processes_naming(str(work), proc.pid) or proc.poll() is not None)
    elif instant == "spark-local":
        assert _wait_for(lambda: _spark_local(work) or proc.poll() is not None)
    else:
        time.sleep(random.Random(trial).uniform(0.5, 4.0))
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=240)
    # -15: the signal came before amqtool had started at all (its handler not yet installed)
    if sig == signal.SIGTERM and proc.returncode not in (0, -signal.SIGTERM):
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert err.strip().splitlines()[-1] == "amqtool: interrupted (SIGTERM)", err
    # no JVM (nor its watchdog) outlives amqtool, not even a SIGKILLed one
    assert _wait_for(lambda: not _processes_naming(str(work)), 60), _processes_naming(str(work))
    assert _wait_for(lambda: not _watchdogs(mark), 60), _watchdogs(mark)
    # and nothing is recreated afterwards (after a SIGKILL amqtool's own temporary directory stays until
    # its next run removes it: not a JVM's doing)
    if sig == signal.SIGTERM and proc.returncode != 0:
        assert sorted(p.name for p in work.iterdir()) == []
        assert not _spark_local(work)
    assert tree_hashes(store) == before_src
