"""The row-fault campaign of the database stores (issue 25) at other seeds and demo sizes than the suite's:
tests/faults/jdbc.py's faults on an Artemis JDBC journal (a paged demo of ``--demo-size`` written with seed
``--demo-seed``) and a Classic JDBC store (the KahaDB ``basic`` fixture's messages), in one throwaway
PostgreSQL on loopback (tests/pg_cluster.py, stopped at the end), each judged by verify's engine in a
savepoint against the broker-order truth. Prints, per store kind and seed, the confusion table (truth by
verdict) with each miss and the seed that reproduces it, then the cost: faults per second of wall time and
per CPU-second of this process and the database server's.

A fault ``seed`` of kind ``k`` is drawn exactly as tests/faults/test_jdbc_faults.py draws it
(``SEED * 1_000_003 + (0 | 500_000) + i``), so a miss is reproduced there with that campaign seed.

    python bench/fuzz_jdbc.py [--seeds 7,11,101] [--faults 500] [--demo-size 3MiB] [--demo-seed 3]
                              [--kinds artemis,classic]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.faults import jdbc  # noqa: E402


def _size(text: str) -> int:
    from amqtool.engines.artemis.create import parse_size

    return parse_size(text, "--demo-size")


def _server_cpu(pg) -> float:
    """CPU seconds of the cluster's processes (postmaster and its children), from /proc."""
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    pid = int((pg.dir / "data" / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(p.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="7,11,101", help="campaign seeds, comma-separated (the suite's is 25)")
    ap.add_argument("--faults", type=int, default=500, help="faults per store kind and seed")
    ap.add_argument("--demo-size", default="3MiB", help="the Artemis demo's size (the suite's: 3MiB)")
    ap.add_argument("--demo-seed", type=int, default=3, help="the Artemis demo's seed (the suite's: 3)")
    ap.add_argument("--kinds", default="artemis,classic")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    kinds = [k for k in args.kinds.split(",") if k]
    from tests.pg_cluster import start_cluster, stop_cluster

    pg = start_cluster()
    bad = 0
    try:
        with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-jdbc-") as tmp:
            for kind in kinds:
                campaign = jdbc.open_campaign(kind, pg, Path(tmp), demo_seed=args.demo_seed,
                                              demo_size=_size(args.demo_size), db=f"fuzz_{kind}")
                if campaign is None:
                    print(f"{kind}: skipped (fixture not present)")
                    continue
                for seed in seeds:
                    cpu0, srv0, t0 = time.process_time(), _server_cpu(pg), time.monotonic()
                    outcomes = campaign.run(jdbc.campaign_seeds(kind, seed, args.faults))
                    wall, cpu, srv = time.monotonic() - t0, time.process_time() - cpu0, _server_cpu(pg) - srv0
                    misses = [o for o in outcomes if not o.ok]
                    bad += len(misses)
                    print(f"== {kind}, campaign seed {seed}, demo {args.demo_size} seed {args.demo_seed}: "
                          f"{len(outcomes)} faults judged ({campaign.rejected} refused by the database so far)")
                    print(jdbc.confusion(outcomes))
                    print("misses by (truth, verdict):", dict(Counter((o.truth, o.verdict) for o in misses)))
                    print(f"{len(outcomes) / wall:.1f} faults/s; {1000 * cpu / max(len(outcomes), 1):.1f} ms of "
                          f"harness CPU and {1000 * srv / max(len(outcomes), 1):.1f} ms of server CPU a fault\n")
                    sys.stdout.flush()
                campaign.close()
    finally:
        stop_cluster(pg)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{bad} miss(es) in all; {ru.ru_maxrss // 1024} MiB peak memory")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
