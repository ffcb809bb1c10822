"""A campaign over several pristine stores, in parallel worker processes: what ``make test`` runs on a fixed
seed and ``bench/fuzz_verdicts.py`` (``make fuzz``) runs at scale.

Work is cut into chunks of faults of one store, handed out round the stores; each worker builds a
:class:`~tests.faults.runner.Campaign` per store once (a working copy in /dev/shm when it is there) and runs
its chunks. Outcomes come back in chunk order, so a seed always reproduces its fault:
``reproduce(store, seed)``.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from pathlib import Path

from tests.faults.model import Outcome

_campaigns: dict = {}
_SCRATCH = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None


def _run_chunk(job: tuple[str, str, str, int, int]) -> list[Outcome]:
    from tests.faults.runner import Campaign

    name, source, scratch, base_seed, count = job
    c = _campaigns.get(name)
    if c is None:  # one working copy per store and worker, under the run's scratch directory
        c = _campaigns[name] = Campaign(name, Path(source), Path(scratch))
    return list(c.run(base_seed, count))


def pristine_stores(workdir: Path, *, demos: int = 2) -> list[tuple[str, Path]]:
    """The stores a campaign damages: small demo stores (seeds 1..demos; paging, large messages, XA) and the
    broker-written stores of the fixtures."""
    from tests.faults.stores import campaign_demo, fixtures

    out = []
    for seed in range(1, demos + 1):
        out.append((f"demo-s{seed}", campaign_demo(workdir / f"demo-s{seed}", seed)))
    return out + fixtures()


def given_stores(paths: list[Path]) -> list[tuple[str, Path]]:
    """(name, root) of the stores at ``paths`` for :func:`run`: each named by its directory, with its parent's
    name when two share one."""
    names = [p.name for p in paths]
    return [(p.name if names.count(p.name) == 1 else f"{p.parent.name}/{p.name}", p) for p in paths]


def run(stores: list[tuple[str, Path]], faults_per_store: int, base_seed: int, *, workers: int = 2,
        chunk: int = 250, deadline: float | None = None, on_chunk=None) -> list[Outcome]:
    """Run ``faults_per_store`` faults on each store (seeds from ``base_seed``) over ``workers`` processes;
    stop handing out chunks after ``deadline`` (time.monotonic()). ``on_chunk(outcomes)`` sees each chunk."""
    scratch = tempfile.mkdtemp(prefix="amqtool-campaign-", dir=_SCRATCH)
    jobs = []
    # chunks go round the stores (a deadline leaves every store its share); a chunk's seeds:
    # ((base_seed * 1000 + store index) * 1000 + chunk number) * 1_000_003 + i
    for start in range(0, faults_per_store, chunk):
        for k, (name, path) in enumerate(stores):
            jobs.append((name, str(path), scratch, (base_seed * 1000 + k) * 1000 + start // chunk,
                         min(chunk, faults_per_store - start)))
    out: list[Outcome] = []
    # fresh interpreters, not forks: the test process holds other threads by the time the campaign runs (a
    # Spark gateway's), and a forked worker can inherit one of their locks held for ever
    ctx = multiprocessing.get_context("spawn")
    try:
        with ctx.Pool(workers) as pool:
            for outcomes in pool.imap(_run_chunk, jobs):
                out.extend(outcomes)
                if on_chunk is not None:
                    on_chunk(outcomes)
                if deadline is not None and time.monotonic() > deadline:
                    break
            pool.terminate()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def reproduce(store: Path, seed: int) -> Outcome:
    """The outcome of the fault ``seed`` draws on ``store`` (for a miss a campaign printed)."""
    from tests.faults.runner import Campaign

    with Campaign(store.name, store, _SCRATCH) as c:
        return c.run_one(seed)


