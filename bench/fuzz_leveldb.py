"""The LevelDB fault campaign (issue 25) at other seeds than the suite's: tests/engines/leveldb
/test_leveldb_faults.py's faults (tests/faults/leveldb.py), drawn from ``--seed`` * 1000 + i, over the
LevelDB stores of the suite (the fixture, tests/data/leveldb) and those under ``--stores`` directories (as
``AMQTOOL_TEST_LEVELDB_STORES`` gives them: real-writer stores kept outside the repository), each judged by
verify's engine against the truth of the broker-equal load. Prints each store's confusion table (truth by
verdict) with every miss and the seed that reproduces it (the test's ``FOUND`` takes such seeds).

    python bench/fuzz_leveldb.py [--seed 31337] [--faults 60] [--stores DIR ...] [--max-mib 64]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def store_cases(stores: list[Path]) -> list[tuple[str, Path]]:
    """(name, case directory) of the suite's LevelDB stores, then of each of ``stores``: a directory of
    stores (``AMQTOOL_TEST_LEVELDB_STORES``'s form, replica sets included) or one store's own directory
    (``store/`` and ``recovered.json``, as /work/leveldb-fresh/f-* are: a shell glob of stores gives those).
    A store copied into the suite is taken once. ValueError for a directory holding no store."""
    import importlib

    import tests.engines.leveldb.stores as st

    cases: list[tuple[str, Path]] = []
    for extra in [None] + list(stores):  # the suite's cases, then each directory's
        one = extra is not None and st._is_case(extra)
        if extra is not None:
            os.environ["AMQTOOL_TEST_LEVELDB_STORES"] = str(extra.parent if one else extra)
        importlib.reload(st)
        found = [(n, c) for c, n in zip(st.CASES, st.CASE_IDS) if not one or c.resolve() == extra.resolve()]
        if extra is not None and not any(c.parent == extra or c.parent.parent == extra or c == extra
                                         for _n, c in found):
            raise ValueError(f"{extra} holds no LevelDB store (store/ and recovered.json), nor is one")
        for name, case in found:
            if all(case != c and name != n for n, c in cases):  # a store copied into the suite: once
                cases.append((name, case))
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--faults", type=int, default=60, help="faults per store")
    ap.add_argument("--stores", nargs="*", type=Path, default=[],
                    help="directories of real-writer stores (AMQTOOL_TEST_LEVELDB_STORES's form), or stores' "
                         "own directories")
    ap.add_argument("--max-mib", type=int, default=64, help="skip stores whose logs are larger")
    args = ap.parse_args(argv)
    from tests.faults.leveldb import LevelDBSites, delivered, verify_verdict
    from tests.faults.model import Outcome, classify, confusion

    try:
        cases = store_cases(args.stores)
    except ValueError as err:
        ap.error(str(err))
    total, bad = 0, 0
    everything = []
    for name, case in cases:
        if sum(p.stat().st_size for p in (case / "store").glob("*.log")) > args.max_mib << 20:
            continue
        with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-leveldb-") as tmp:
            root = Path(shutil.copytree(case / "store", Path(tmp) / "store", symlinks=True))
            sites = LevelDBSites.read(root)
            pristine = delivered(root)
            untouched = verify_verdict(root)
            outcomes = []
            for i in range(args.faults):
                seed = args.seed * 1000 + i
                fault = sites.draw(random.Random(seed))
                undo = fault.apply(root)
                try:
                    verdict, codes = verify_verdict(root)
                    damaged = delivered(root)
                finally:
                    undo()
                truth, diff = classify(pristine, damaged, lambda d, f=fault: sites.torn(f))
                outcomes.append(Outcome(name, seed, fault, truth, verdict, diff, codes, untouched[0]))
        misses = [o for o in outcomes if not o.ok]
        total += len(outcomes)
        bad += len(misses)
        everything += outcomes
        print(f"== {name} ({case}): untouched {untouched[0]} {','.join(untouched[1])}; {len(outcomes)} faults, "
              f"{len(misses)} miss(es)")
        if misses:
            print(confusion(outcomes))
        sys.stdout.flush()
    print(f"== all {len(cases)} stores, seed {args.seed}")
    print(confusion(everything))
    print("misses by (truth, verdict):", dict(Counter((o.truth, o.verdict) for o in everything if not o.ok)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
