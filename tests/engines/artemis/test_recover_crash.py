"""``recover -o DEST`` killed at every durable step and at random instants: DEST is either absent or the
complete result, never half a store; the source is never written."""
from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amqtool.store import atomic
from tests.engines.artemis.recover_helpers import break_record, live_state, records
from tests.support import ORACLE, REPO, tree_hashes

_CHILD = ("import sys\nfrom amqtool.commands.main import main\n"
          "print('ready', flush=True)\nsys.exit(main(['recover', sys.argv[1], '-o', sys.argv[2], '--quiet', "
          "'--salvage', '--format', 'json']))\n")  # --salvage: the store is CRITICAL to verify (issue 25)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    if not ORACLE.is_dir():
        pytest.skip("oracle fixtures not found")
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("crash") / "broker"
    create_demo(root, 4 * 1024 * 1024, file_size=512 * 1024, seed=9)
    recs = records(root / "data" / "journal")
    for i in (5, 50, 150):
        break_record(*recs[i], 0)
    ref = tmp_path_factory.mktemp("ref") / "dest"
    p = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(ref)], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2, p.stderr  # verify's verdict on the source
    expected = {sub: live_state(ref / sub) for sub in ("journal", "bindings")}
    return root, expected, tree_hashes(root)


def _check(dest: Path, expected) -> str:
    if not dest.exists():
        return "absent"
    for sub, want in expected.items():
        assert live_state(dest / sub) == want
    return "complete"


def _no_leftover_beside(dest: Path) -> list[str]:
    return [p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.amqtool-recover-")]


def test_killed_at_every_durable_step(tmp_path, damaged):
    src, expected, hashes = damaged
    outcomes = []
    n = 1
    while True:
        dest = tmp_path / f"d{n}"
        p = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(dest)], cwd=REPO, capture_output=True,
                           text=True, env={**__import__("os").environ, atomic.FAULT_ENV: f"*:{n}:kill"})
        outcome = _check(dest, expected)  # asserts a DEST that exists is the complete result
        if p.returncode != -signal.SIGKILL:
            assert p.returncode == 2 and outcome == "complete"  # ran to the end: fewer steps than n
            break
        outcomes.append(outcome)
        n += 1
        assert n < 400
    # absent up to the rename, complete after it (only the directory fsyncs follow the rename)
    k = outcomes.index("complete") if "complete" in outcomes else len(outcomes)
    assert outcomes == ["absent"] * k + ["complete"] * (len(outcomes) - k)
    assert k > 5 and len(outcomes) - k <= 2, outcomes
    assert tree_hashes(src) == hashes


@pytest.mark.slow
def test_sigkill_at_random_instants(tmp_path, damaged):
    src, expected, hashes = damaged
    rnd = random.Random(17)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(src), str(tmp_path / "timing")], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    p.wait()
    duration = time.perf_counter() - t0
    seen = {"absent": 0, "complete": 0}
    for i in range(25):
        dest = tmp_path / f"k{i}"
        p = subprocess.Popen([sys.executable, "-c", _CHILD, str(src), str(dest)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0, duration * 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        seen[_check(dest, expected)] += 1
        # a killed run may leave its temporary directory beside DEST, never anything at DEST
        for name in _no_leftover_beside(dest):
            shutil.rmtree(dest.parent / name)
    assert tree_hashes(src) == hashes
    assert seen["absent"] > 0
