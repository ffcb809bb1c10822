"""``make fuzz``: the fault campaign at scale (issue 25): at least 100,000 faults over small demo stores and
the broker-written fixtures (Artemis, then KahaDB and mKahaDB: ``--kahadb`` of them), judged by ``verify``
against the truth of the broker-equal loaders, in at most 30 minutes on two cores (``--minutes``: it stops at
its deadline and says how many it reached). Prints the confusion table (truth by verdict) and each miss with
the seed that reproduces it (``python -c 'from tests.faults.campaign import reproduce; ...'``), and the
rate: faults per second of wall time and per CPU-second of the workers (the machine may be shared).

    python bench/fuzz_verdicts.py [--faults N] [--minutes M] [--seed S] [--workers W] [--demos D]
    python bench/fuzz_verdicts.py --stores DIR [DIR...] [--faults N] [--seed S]
    python bench/fuzz_verdicts.py --kahadb 1.0 --kahadb-stores DIR [DIR...] [--faults N] [--seed S]

``--stores``: the campaign over the given Artemis stores instead (each a store root, e.g. one written by the
real JournalImpl with tests/data/artemis/tools/gen.sh), the KahaDB fixtures left out; ``--faults`` is then
spread over them. Each store is copied, never written.

``--kahadb-stores``: the KahaDB share of the faults over the given stores instead of the four KahaDB fixtures
(each a KahaDB store directory holding ``db-*.log``, or an mKahaDB root; e.g. those a real 5.17 broker wrote
under /work/kahadb-fresh). Each is named after its directory (its parent's when the directory is called
``kahadb`` or ``mkahadb``), copied, never written.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.faults import campaign  # noqa: E402
from tests.faults.model import confusion  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", type=int, default=100_000)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--demos", type=int, default=4)
    ap.add_argument("--kahadb", type=float, default=0.2, help="share of the faults on the KahaDB fixtures")
    ap.add_argument("--stores", nargs="+", type=Path, metavar="DIR",
                    help="Artemis store roots to damage instead of the demos and fixtures")
    ap.add_argument("--kahadb-stores", nargs="+", type=Path, metavar="DIR",
                    help="KahaDB store directories or mKahaDB roots to damage instead of the KahaDB fixtures")
    args = ap.parse_args(argv)
    try:
        kaha_stores = kaha_store_list(args.kahadb_stores) if args.kahadb_stores else None
    except ValueError as err:
        ap.error(str(err))
    if args.stores:
        args.kahadb = 0.0
        bad = [str(p) for p in args.stores if not p.is_dir()]
        if bad:
            ap.error(f"--stores takes store directories: {', '.join(bad)} is not one")
        from amqtool.errors import AmqtoolError
        from amqtool.store.layout import detect

        for p in args.stores:
            try:
                detect(p)
            except AmqtoolError as err:
                ap.error(f"--stores {p}: {err.message}")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-") as tmp:
        stores = (campaign.given_stores(args.stores) if args.stores
                  else campaign.pristine_stores(Path(tmp), demos=args.demos))
        done = [0]

        def tick(chunk):
            done[0] += len(chunk)
            el = time.monotonic() - start
            print(f"\r{done[0]} faults, {el:.0f} s, {done[0] / el:.0f}/s", end="", file=sys.stderr, flush=True)

        kaha_faults = int(args.faults * args.kahadb)
        per_store = -(-(args.faults - kaha_faults) // len(stores))
        outcomes = campaign.run(stores, per_store, args.seed, workers=args.workers,
                                deadline=start + args.minutes * 60 * (1 - args.kahadb), on_chunk=tick)
        kaha = _kahadb(kaha_faults, args.seed, args.workers, start + args.minutes * 60, Path(tmp), kaha_stores)
    elapsed = time.monotonic() - start
    print(file=sys.stderr)
    total = len(outcomes) + len(kaha)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers', reaped when their pools closed
    cpu = ru.ru_utime + ru.ru_stime
    distinct = len({(o.store, o.fault) for o in outcomes}) + len({(o.store, o.fault) for o in kaha})
    print(f"seed {args.seed}: {total} faults of the {args.faults} asked for ({distinct} distinct: a fault drawn "
          f"again is judged once), {len(outcomes)} over {len(stores)} Artemis stores "
          f"({', '.join(n for n, _ in stores)}) and {len(kaha)} over the KahaDB "
          + (f"stores ({', '.join(n for n, _ in kaha_stores)})" if kaha_stores else "fixtures"))
    print(f"in {elapsed:.0f} s = {total / elapsed:.1f} faults/s on {args.workers} workers; "
          f"{cpu:.0f} s of worker CPU = {total / max(cpu, 1e-9):.1f} faults per CPU-second "
          f"({1000 * cpu / max(total, 1):.1f} ms a fault)")
    print(confusion(outcomes))
    if kaha:
        from tests.faults.kahadb import confusion as kaha_confusion

        print(f"KahaDB and mKahaDB {'stores' if kaha_stores else 'fixtures'}: {len(kaha)} faults")
        print(kaha_confusion(kaha))
    return 0 if all(o.ok for o in outcomes + kaha) else 1


_KAHA = (("basic", "kahadb"), ("gc", "kahadb"), ("tx", "kahadb"), ("mkahadb", "mkahadb"))
_kaha_campaigns: dict = {}


def kaha_store_list(dirs: list[Path]) -> list[tuple[str, Path]]:
    """``--kahadb-stores``: (name, directory) for each given KahaDB store directory (``db-*.log`` in it) or
    mKahaDB root (sub-stores holding them); a directory that is neither is a ValueError naming it."""
    out, names = [], set()
    for d in dirs:
        d = Path(d)
        if not d.is_dir() or not (any(d.glob("db-*.log")) or any(d.glob("*/db-*.log"))):
            raise ValueError(f"{d}: not a KahaDB store directory (no db-*.log) nor an mKahaDB root")
        name = d.resolve().parent.name if d.resolve().name in ("kahadb", "mkahadb") else d.resolve().name
        base, k = name, 1
        while name in names:
            k += 1
            name = f"{base}-{k}"
        names.add(name)
        out.append((name, d))
    return out


def _kaha_chunk(job):
    from tests.faults.kahadb import KahaCampaign

    name, source, scratch, seeds = job
    c = _kaha_campaigns.get(name)
    if c is None:
        c = _kaha_campaigns[name] = KahaCampaign(name, Path(source), Path(scratch) / str(os.getpid()))
    return [c.run_one(s) for s in seeds]


def _kahadb(count: int, seed: int, workers: int, deadline: float, tmp: Path,
            stores: list[tuple[str, Path]] | None = None) -> list:
    """``count`` faults over the KahaDB fixtures (tests/faults/kahadb.py), or over ``stores`` (name,
    directory) when given, in chunks over ``workers``."""
    import multiprocessing

    from tests.support import KAHADB

    if stores is None:
        if not KAHADB.is_dir():
            return []
        stores = [(name, KAHADB / name / sub) for name, sub in _KAHA]
    if count <= 0:
        return []
    per = -(-count // len(stores))
    jobs = [(name, str(source), str(tmp / "kaha"), range(base, min(base + 100, (seed * 10 + k) * 1_000_000 + per)))
            for k, (name, source) in enumerate(stores)
            for base in range((seed * 10 + k) * 1_000_000, (seed * 10 + k) * 1_000_000 + per, 100)]
    out: list = []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for chunk in pool.imap_unordered(_kaha_chunk, jobs):
            out.extend(chunk)
            if time.monotonic() > deadline:
                break
        pool.terminate()
    return out


if __name__ == "__main__":
    sys.exit(main())
