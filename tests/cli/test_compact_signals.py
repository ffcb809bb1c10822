"""Two amqtool writers on one store exclude each other (issue 26 item 5), and a SIGTERM around the
compaction's commit point leaves a clean store: before it the compaction is rolled back, after it the
roll-forward is finished before the process exits (issue 26 item 6), as Artemis' next start would finish it.

The writer is a real ``amqtool compact`` subprocess stopped (SIGSTOP) at an exact checkpoint by the test-only
fault plan (``AMQTOOL_FAULT=<point>:<n>:stop``); the test acts while it is stopped, then lets it go on.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amqtool.formats.artemis.control import CONTROL_FILE_NAME
from tests.engines.artemis.compact_helpers import build_store, state
from tests.support import REPO




def _amqtool(*args, env=None, **kw):
    return subprocess.Popen([str(REPO / ".venv" / "bin" / "amqtool"), *map(str, args)],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def _wait_stopped(proc, limit=120.0):
    """Until ``proc`` is stopped (state T) at its checkpoint; fails if it exits first."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"writer exited {proc.returncode} before its checkpoint: {proc.stderr.read()}")
        with open(f"/proc/{proc.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.02)
    raise AssertionError("writer never reached its checkpoint")


def _store(tmp_path) -> Path:
    return build_store(tmp_path / "j", n=1200)


def _leftovers(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith((".cmp", ".tmp")) or n.startswith(CONTROL_FILE_NAME))


def _verify(d: Path) -> dict:
    out = subprocess.run([str(REPO / ".venv" / "bin" / "amqtool"), "verify", str(d), "-f", "json"],
                         capture_output=True, text=True)
    doc = json.loads(out.stdout)
    return out.returncode, doc


def _live(d: Path):
    live = state(d)[0]
    return sorted(e[0] for e in live if not (e[2] and e[1] in (34, 36)))


def test_a_second_writer_exits_3_at_once_naming_the_holder(tmp_path):
    d = _store(tmp_path)
    first = _amqtool("compact", d, "-f", "json", env={"AMQTOOL_FAULT": "pre-commit:1:stop"})
    try:
        _wait_stopped(first)
        second = _amqtool("compact", d)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 3 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert f"another amqtool (PID {first.pid}" in lines[0] and str(d) in lines[0]
        second = _amqtool("compact", d, "-f", "json")
        out, _ = second.communicate(timeout=120)
        doc = json.loads(out)
        assert second.returncode == 3 and doc["verdict"] == "UNKNOWN" and str(d) in doc["error"]
        # readers need no lock: a dry run goes through
        dry = _amqtool("compact", d, "--dry-run", "-f", "json")
        dry.communicate(timeout=120)
        assert dry.returncode in (0, 1)
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(out)["journals"][0]["action"] == "compacted"


def test_the_writer_lock_dies_with_its_process(tmp_path):
    d = _store(tmp_path)
    first = _amqtool("compact", d, env={"AMQTOOL_FAULT": "pre-commit:1:stop"})
    _wait_stopped(first)
    first.kill()
    first.wait()
    again = _amqtool("compact", d, "-f", "json")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert _leftovers(d) == []


@pytest.mark.parametrize("point, committed", [
    ("pre-commit:1", False),  # every .cmp durable, no control file yet: rolled back
    ("rename:1", False),      # the first step (a free file taken as .cmp): rolled back
    ("commit:1", True),       # the control file durable: rolled forward before exiting
    ("unlink:1", True),       # in the middle of the switch-over
    ("fsync-dir:3", None),    # somewhere around the commit: either, but clean
])
def test_sigterm_around_the_commit_point_leaves_a_clean_store(tmp_path, point, committed):
    d = _store(tmp_path)
    live = _live(d)
    names_before = sorted(os.listdir(d))
    proc = _amqtool("compact", d, "-f", "json", env={"AMQTOOL_FAULT": f"{point}:stop"})
    _wait_stopped(proc)
    os.kill(proc.pid, signal.SIGTERM)  # pending while stopped: delivered at that very instant
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "amqtool: interrupted (SIGTERM)"
    assert _leftovers(d) == [], "the signal left a half-done compaction behind"
    code, doc = _verify(d)
    assert code == 0 and doc["verdict"] == "OK", doc
    assert _live(d) == live
    if committed is False:
        assert sorted(os.listdir(d)) == names_before
    elif committed is True:
        assert sorted(os.listdir(d)) != names_before  # the compaction was finished, not undone


@pytest.mark.parametrize("kind", ["messages", "broker"])
def test_two_creates_of_one_journal_exclude_each_other(tmp_path, kind):
    target = tmp_path / "new"
    first = _amqtool("create", target, "--kind", kind, "-f", "json", env={"AMQTOOL_FAULT": "fsync:1:stop"})
    try:
        _wait_stopped(first)
        second = _amqtool("create", target, "--kind", kind)
        _out, err = second.communicate(timeout=120)
        assert second.returncode == 3
        lines = err.strip().splitlines()
        # the output's own lock (amqtool.store.output) or the store's writer lock, whichever is met first
        assert len(lines) == 1 and "another amqtool" in lines[0] and str(first.pid) in lines[0], err
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    code, doc = _verify(target)
    assert code == 0, doc
