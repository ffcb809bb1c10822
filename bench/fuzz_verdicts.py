"""``make fuzz``: the fault campaign at scale (issue 25): at least 100,000 faults over small demo stores and
the broker-written fixtures, judged by ``verify`` against the truth of the broker-equal loaders, in at most
30 minutes on two cores. Prints the confusion table (truth by verdict) and each miss with the seed that
reproduces it (``python -c 'from tests.faults.campaign import reproduce; ...'``).

    python bench/fuzz_verdicts.py [--faults N] [--minutes M] [--seed S] [--workers W] [--demos D]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.faults import campaign  # noqa: E402
from tests.faults.model import confusion  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", type=int, default=100_000)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--demos", type=int, default=4)
    args = ap.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-") as tmp:
        stores = campaign.pristine_stores(Path(tmp), demos=args.demos)
        per_store = -(-args.faults // len(stores))
        done = [0]

        def tick(chunk):
            done[0] += len(chunk)
            el = time.monotonic() - start
            print(f"\r{done[0]} faults, {el:.0f} s, {done[0] / el:.0f}/s", end="", file=sys.stderr, flush=True)

        outcomes = campaign.run(stores, per_store, args.seed, workers=args.workers,
                                deadline=start + args.minutes * 60, on_chunk=tick)
    elapsed = time.monotonic() - start
    print(file=sys.stderr)
    print(f"seed {args.seed}: {len(outcomes)} faults over {len(stores)} stores "
          f"({', '.join(n for n, _ in stores)}) in {elapsed:.0f} s = {len(outcomes) / elapsed:.1f} faults/s "
          f"on {args.workers} workers")
    print(confusion(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
