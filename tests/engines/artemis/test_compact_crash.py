"""Crash safety of compaction: stopped at every durable step (fault-injection hook) and SIGKILLed at 100+
random instants, the store always loads to the same live set once Artemis' start-up rules have run on it
(``artemis_startup``, an independent re-implementation of ``checkControlFile`` + ``cleanupTmpFiles``), and
before that amqtool's read-only view reports the interrupted compaction and already sees the same state.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amqtool.engines.artemis import compact as C
from amqtool.errors import AmqtoolError
from amqtool.store import atomic
from tests.engines.artemis.compact_helpers import (
    artemis_startup,
    build_store,
    compact,
    pending_codes,
    state,
)
from tests.support import REPO, tree_hashes


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    d = build_store(tmp_path_factory.mktemp("crash") / "j", n=900, seed=11)
    before = state(d)
    after = state(d, bump=True)
    return d, before, after


def _check_recovers(d: Path, tmp: Path, before, after, where=None) -> str:
    """The store at ``d`` (left by an interrupted compaction) loads to the old or the new state: the old
    one (compactCounts unchanged) when the compaction had not committed, the new one when it had."""
    view = state(d)
    assert view in (before, after), where
    copy = tmp / "recovered"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(d, copy)
    artemis_startup(copy, "amq")
    assert pending_codes(copy) == []
    recovered = state(copy)
    assert recovered == view, where
    return "old" if recovered == before else "new"


@pytest.mark.parametrize("pool", [-1, 3])
def test_stopped_at_every_checkpoint(tmp_path, pristine, pool):
    src, before, after = pristine
    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    with atomic.record_checkpoints() as points:
        compact(probe, pool_files=pool)
    kinds = {p for p, _ in points}
    assert {"write", "fsync", "fsync-dir", "rename", "unlink"} <= kinds
    outcomes = {}
    ctr_gone = next(i for i, (p, w) in enumerate(points, 1) if p == "unlink" and w.endswith(C.CONTROL_FILE_NAME))
    for n in range(1, len(points) + 1):
        d = tmp_path / f"n{n}"
        shutil.copytree(src, d)
        with atomic.fault("*", n):
            with pytest.raises(atomic.InjectedFault):
                compact(d, pool_files=pool)
        # until Artemis (or amqtool) finishes it, the interrupted compaction is visible (after the control
        # file's unlink only its directory fsync remains: the compaction is complete)
        if n > ctr_gone:
            assert pending_codes(d) == []
        else:
            # (stopped at the very first step, before the first free file is taken, nothing has changed yet)
            assert set(pending_codes(d)) & {"leftover-cmp", "control-file-rollforward", "control-file-discard",
                                            "leftover-tmp"} or tree_hashes(d) == tree_hashes(src), (n, points[n - 1])
        outcomes[n] = _check_recovers(d, tmp_path, before, after)
        shutil.rmtree(d)
    # the commit point is the control file's rename: everything before rolls back, everything after forward
    commit = next(i for i, (p, w) in enumerate(points, 1) if p == "rename" and w.endswith(C.CONTROL_FILE_NAME))
    assert all(outcomes[n] == "old" for n in range(1, commit + 1))
    assert all(outcomes[n] == "new" for n in range(commit + 1, len(points) + 1))


@pytest.mark.parametrize("pool", [-1, 3])
def test_io_error_at_every_checkpoint(tmp_path, pristine, pool):
    """An error (EIO) at any durable step, as opposed to a crash, runs compaction's own clean-up; that must
    leave the store loading to the old state before the commit point and to the new one after it. An error
    in the directory fsync that follows the control file's rename once made the clean-up delete the .cmp
    files the committed control file names: Artemis' roll-forward then deleted the old files too (a bindings
    journal lost every queue)."""
    import errno

    src, before, after = pristine
    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    with atomic.record_checkpoints() as points:
        compact(probe, pool_files=pool)
    commit = next(i for i, (p, w) in enumerate(points, 1) if p == "rename" and w.endswith(C.CONTROL_FILE_NAME))
    outcomes = {}
    for n in range(1, len(points) + 1):
        d = tmp_path / f"e{n}"
        shutil.copytree(src, d)
        seen = [0]

        def fail(point, where, n=n):
            seen[0] += 1
            if seen[0] == n:
                raise OSError(errno.EIO, "injected I/O error", where)

        atomic.hook = fail
        try:
            with pytest.raises(AmqtoolError):
                compact(d, pool_files=pool)
        finally:
            atomic.hook = None
        outcomes[n] = _check_recovers(d, tmp_path, before, after, (n, points[n - 1]))
        shutil.rmtree(d)
    assert all(outcomes[n] == "old" for n in range(1, commit + 1)), points[commit - 1]
    assert all(outcomes[n] == "new" for n in range(commit + 1, len(points) + 1))


_CHILD = """
import sys
from pathlib import Path
from amqtool.engines.artemis import compact as C
from amqtool.store.layout import detect
d = Path(sys.argv[1])
jd = detect(d).journals()[0]
print("ready", flush=True)
prep = C.plan_journal(jd, C.settings_for(jd, pool_files=int(sys.argv[2])))
C.compact_in_place(prep)
print("done", flush=True)
"""


def _spawn(d: Path, pool: int, env=None):
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(d), str(pool)], cwd=REPO, stdout=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, text=True)


@pytest.mark.slow
def test_sigkill_at_random_instants(tmp_path, pristine):
    src, before, after = pristine
    rnd = random.Random(20240601)
    # how long a compaction takes once the child is ready
    d = tmp_path / "timing"
    shutil.copytree(src, d)
    p = _spawn(d, 3)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    assert p.stdout.readline().strip() == "done"
    duration = time.perf_counter() - t0
    p.wait()
    shutil.rmtree(d)
    outcomes = {"old": 0, "new": 0, "done": 0}
    runs = 110
    for i in range(runs):
        d = tmp_path / f"k{i}"
        shutil.copytree(src, d)
        pool = rnd.choice((-1, 3))
        if i % 3 == 2:
            # a real SIGKILL at the n-th durable step, through the hook
            p = _spawn(d, pool, {atomic.FAULT_ENV: f"*:{rnd.randint(1, 60)}:kill"})
            p.stdout.readline()
            p.wait()
        else:
            p = _spawn(d, pool)
            assert p.stdout.readline().strip() == "ready"
            time.sleep(rnd.uniform(0, duration * 1.2))
            p.send_signal(signal.SIGKILL)
            p.wait()
        if p.returncode == 0:
            outcomes["done"] += 1
        else:
            assert p.returncode == -signal.SIGKILL
        outcome = _check_recovers(d, tmp_path, before, after)
        if p.returncode != 0:
            outcomes[outcome] += 1
        shutil.rmtree(d)
    # the random instants really fell before and after the commit point
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
