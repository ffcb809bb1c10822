"""The fault campaign's throughput against a baseline commit, in one run (issue 25: ``make fuzz`` must judge
100,000 faults in 30 minutes on two cores), and proof that the two give the same outcomes.

The baseline's tree (``git archive REF``, its C extension built, or copied when native/ did not change) and
this tree each run the same campaign, same seed and fault count, in child processes, one after the other
(``--rounds`` times, alternating, so that the load of a shared machine falls on both alike):

* Artemis: ``--faults`` over 4 demo stores and the broker-written fixture (as ``make fuzz``), then
* KahaDB: a ``--kahadb`` share on the KahaDB and mKahaDB fixtures (as ``make fuzz``).

It prints each side's faults per second (wall, and per worker CPU-second), the ratio, the projected time of
``make fuzz``'s 100,000 faults on this machine, and whether every outcome (store, seed, fault, truth, verdict,
finding codes, and the Artemis truth's figures) is the same on both sides: it exits 1 when one differs.

    python bench/fuzz_speed.py [--baseline REF] [--candidate REF] [--seed S] [--faults N] [--kahadb SHARE]
                               [--rounds R] [--workers W]

The machine is shared: compare the two sides of one run (and the CPU-seconds of the workers, which load
disturbs less than wall time), never a figure with one of another run. A short run also counts each worker's
set-up (its imports, a copy and a reading of each pristine store) that ``make fuzz`` pays once in 100,000
faults, so its projection is an upper bound.

Measured (issue 25, branch ``speed`` against main 5173f10, 2,000 faults, 20% KahaDB, two workers, load
average 8-10 on two cores): seed 25, 22.7 -> 27.8 faults per worker CPU-second (x1.22), wall x1.20;
seed 31337, 23.5 -> 29.1 (x1.24), wall x1.32; both seeds' 2,000 outcomes identical. Per fault in one
process, set-up left out (the campaign's first 250 faults of a store, CPU time, main and branch alternated
twice): demo-s1 37-40 -> 30-32 ms (x1.25), the broker-written fixture 75 -> 54-56 ms (x1.37); the KahaDB
fixtures x1.0-1.2 (noise as large as the gain). What was done: the Artemis truth takes the pristine rows of
every message whose decoder input is unchanged and reads verify's journal loads instead of loading them
again, the KahaDB truth keeps each record's digest by its bytes, and binding records are decoded once for
all the readers of a load.

Measured (issue 25, branch ``fuzzrate`` e129211 against main f86b5be, seed 4025, 3,000 faults, 20% KahaDB, two
workers, two rounds alternated, load average 9-10 on two cores): 24.5 -> 30.4 faults per worker CPU-second
(x1.24; rounds 25.3/23.7 -> 28.5/32.5), wall x1.47; all 3,000 outcomes identical (truth, verdict, codes and
the Artemis truth's figures). In one process (seed 5151, 150 faults on each Artemis store, 100 on each KahaDB
fixture, CPU time, main then the branch, load average 7): Artemis 34.8 -> 26.4 ms a fault (the broker-written
fixture 66.7 -> 35.1; verify's share 24.9 -> 16.1 ms), KahaDB 18.9 -> 19.3 (untouched). What was done: a retyped tail's candidate record ends are found in C (``native.checksize_ends``: the
Python scan of every end of up to 1 MiB took 0.1-0.5 s each time a fault damaged the last record of an older
file), verify's message-undecodable check decodes without building Arrow batches (``check_messages``), and
the export's Arrow schema is built once.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
_CHILD = "AMQTOOL_FUZZ_SPEED_TREE"  # set in a child run: the tree it measures, whose code every process imports
if os.environ.get(_CHILD) is None:
    # (not in a child, nor in its spawned campaign workers, which run this module's top again: they must import
    # the measured tree's code, first on their path)
    sys.path.insert(0, str(HERE))


def _child(args) -> int:
    """Run the campaign in this tree (cwd) and write its outcomes and timing to ``args.out``."""
    import resource

    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
    import amqtool
    import fuzz_verdicts
    from tests.faults import campaign

    import multiprocessing

    # every process of the campaign runs the measured tree's code: this one and its spawned workers
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        origins = _origins() + pool.apply(_origins)
    assert all(Path(o).resolve().is_relative_to(Path(os.environ[_CHILD]).resolve()) for o in origins), origins
    with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-speed-") as tmp:
        stores = campaign.pristine_stores(Path(tmp), demos=args.demos)
        kaha_faults = int(args.faults * args.kahadb)
        per_store = -(-(args.faults - kaha_faults) // len(stores))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        outcomes = campaign.run(stores, per_store, args.seed, workers=args.workers)
        kaha = fuzz_verdicts._kahadb(kaha_faults, args.seed, args.workers, float("inf"), Path(tmp))
        elapsed = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = [["artemis", o.store, o.seed, o.fault.describe(), o.truth, o.verdict, list(o.codes),
             sorted(o.diff.items())] for o in outcomes]
    # (the KahaDB chunks come back in the order they finish: sorted, so that two runs compare fault by fault)
    rows += sorted([["kahadb", o.store, o.seed, o.fault.describe(), o.truth, o.verdict, list(o.codes)] for o in kaha],
                   key=lambda r: (r[1], r[2]))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    Path(args.out).write_text(json.dumps({"elapsed": elapsed, "cpu": cpu, "artemis": len(outcomes),
                                          "kahadb": len(kaha), "outcomes": rows}))
    return 0


def _origins() -> list[str]:
    import amqtool
    from tests.faults import campaign, runner

    return [amqtool.__file__, campaign.__file__, runner.__file__]


def _tree(ref: str, tmp: Path, name: str) -> Path:
    """The source tree of commit ``ref`` at ``tmp / name``, with its C extension."""
    tree = tmp / name
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(HERE), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    same_native = subprocess.run(["git", "-C", str(HERE), "diff", "--quiet", ref, "--", "native", "setup.py"]).returncode == 0
    built = list((HERE / "amqtool").glob("_native*.so"))
    if same_native and built:
        shutil.copy2(built[0], tree / "amqtool" / built[0].name)
    else:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, "AMQTOOL_REQUIRE_NATIVE": "1"})
    return tree


def _run(tree: Path, args, out: Path) -> dict:
    cmd = [sys.executable, str(HERE / "bench" / "fuzz_speed.py"), "--child", "--out", str(out),
           "--seed", str(args.seed), "--faults", str(args.faults), "--kahadb", str(args.kahadb),
           "--workers", str(args.workers), "--demos", str(args.demos)]
    from tests.support import FIXTURES  # the same fixtures for both trees

    env = {**os.environ, "PYTHONPATH": str(tree), "AMQTOOL_FIXTURES": str(FIXTURES), _CHILD: str(tree)}
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    return json.loads(out.read_text())


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="the commit to compare with (default main)")
    ap.add_argument("--candidate", help="the commit to measure (default: this working tree as it is)")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--faults", type=int, default=2000)
    ap.add_argument("--kahadb", type=float, default=0.2, help="share of the faults on the KahaDB fixtures")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--demos", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    with tempfile.TemporaryDirectory(prefix="amqtool-fuzz-speed-") as tmp:
        tmp = Path(tmp)
        base = _tree(args.baseline, tmp, "baseline")
        this = HERE if args.candidate is None else _tree(args.candidate, tmp, "candidate")
        runs: dict[str, list] = {"baseline": [], "this tree": []}
        for r in range(args.rounds):
            for name, tree in (("baseline", base), ("this tree", this)):
                load = _load()
                got = _run(tree, args, tmp / f"{name.replace(' ', '_')}-{r}.json")
                got["load"] = (load, _load())
                runs[name].append(got)
                n = got["artemis"] + got["kahadb"]
                print(f"round {r + 1} {name:<9}: {n} faults in {got['elapsed']:.1f} s = {n / got['elapsed']:.1f}/s "
                      f"({n / max(got['cpu'], 1e-9):.1f} per worker CPU-second); load average {load} -> {_load()}",
                      flush=True)
    rate = {k: sum(g["artemis"] + g["kahadb"] for g in v) / sum(g["elapsed"] for g in v) for k, v in runs.items()}
    cpu = {k: sum(g["artemis"] + g["kahadb"] for g in v) / sum(g["cpu"] for g in v) for k, v in runs.items()}
    print(f"seed {args.seed}, {args.faults} faults ({args.kahadb:.0%} KahaDB), {args.workers} workers, "
          f"baseline {args.baseline}, this tree {args.candidate or HERE}")
    print(f"faults/s (wall): baseline {rate['baseline']:.1f}, this tree {rate['this tree']:.1f}: "
          f"x{rate['this tree'] / rate['baseline']:.2f}")
    print(f"faults per worker CPU-second: baseline {cpu['baseline']:.1f}, this tree {cpu['this tree']:.1f}: "
          f"x{cpu['this tree'] / cpu['baseline']:.2f}")
    for k in rate:
        print(f"projected 100,000 faults ({k}): {100_000 / rate[k] / 60:.1f} min at this load, "
              f"{100_000 / cpu[k] / 2 / 60:.1f} min on two idle cores")
    same = all(a["outcomes"] == b["outcomes"] for a in runs["baseline"] for b in runs["this tree"])
    if same:
        print(f"outcomes identical: {len(runs['baseline'][0]['outcomes'])} (store, seed, fault, truth, verdict, codes)")
        return 0
    a, b = runs["baseline"][0]["outcomes"], runs["this tree"][0]["outcomes"]
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    print(f"OUTCOMES DIFFER: {len(diff)} of {len(a)} (lengths {len(a)} and {len(b)}); first ones:")
    for x, y in diff[:10]:
        print(f"  baseline  {x}\n  this tree {y}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
