"""Zeroed ranges that end inside the header of a live record (issue 25: verify said CRITICAL while the truth
was latent), over the KahaDB and mKahaDB fixtures: for each record of every journal file, a range of zeros
from 1..500 bytes before it to 1..4 bytes into its 5-byte header, drawn with ``--seed``, ``--per-store`` of
them a fixture; each judged by verify's engine against the truth of tests/faults/kahadb.py (both
directions: latent must be WARNING, loss CRITICAL). Prints the confusion table and each miss.

    python bench/fuzz_kahadb_zeroed.py [--per-store 150] [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.faults.kahadb import KahaCampaign, confusion  # noqa: E402
from tests.faults.model import Fault  # noqa: E402
from tests.support import KAHADB  # noqa: E402

STORES = (("basic", "kahadb"), ("gc", "kahadb"), ("tx", "kahadb"), ("mkahadb", "mkahadb"))


def faults(campaign: KahaCampaign, rng: random.Random, count: int) -> list[Fault]:
    out = []
    for d in campaign.sites.dirs:
        for log in d.logs:
            for prev, rec in zip(log.records, log.records[1:]):
                start = max(0, rec[0] - rng.choice((1, 2, 8, 40, 200, 500)))
                out.append(Fault("zero", log.rel, start, rec[0] + rng.randrange(1, 5) - start,
                                 label="zeroed into a header"))
    rng.shuffle(out)
    return out[:count]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-store", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not KAHADB.is_dir():
        print("KahaDB fixtures not present")
        return 0
    outcomes = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-zeroed-") as tmp:
        for name, sub in STORES:
            c = KahaCampaign(name, KAHADB / name / sub, Path(tmp))
            for i, fault in enumerate(faults(c, random.Random(args.seed), args.per_store)):
                c.sites.draw = lambda _rng, f=fault: f  # this fault, whatever the seed
                outcomes.append(c.run_one(i))
    print(confusion(outcomes))
    print(f"{len(outcomes)} faults in {time.monotonic() - t0:.0f} s")
    return 1 if any(not o.ok for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
