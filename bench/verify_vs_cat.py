"""The race both verify benchmarks run (bench_kahadb_verify.py, bench_leveldb.py): ``cat`` of a store's log
files against an in-process verify of the same store, the page cache warmed first, best of ``runs`` each,
measured in the same run (wall and CPU seconds)."""
from __future__ import annotations

import resource
import subprocess
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Race:
    best_cat: float
    cpu_cat: float
    best_verify: float
    cpu_verify: float
    result: object  # the last verify's return value


def race(files: list, verify: Callable[[], object], runs: int) -> Race:
    cat_cmd = ["cat", *map(str, files)]
    subprocess.run(cat_cmd, stdout=subprocess.DEVNULL, check=True)  # warm the cache
    verify()
    best_cat = best_verify = cpu_cat = cpu_verify = float("inf")
    result = None
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cat_cmd, stdout=subprocess.DEVNULL, check=True)
        best_cat = min(best_cat, time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_cat = min(cpu_cat, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        c = time.process_time()
        t = time.perf_counter()
        result = verify()
        best_verify = min(best_verify, time.perf_counter() - t)
        cpu_verify = min(cpu_verify, time.process_time() - c)
    return Race(best_cat, cpu_cat, best_verify, cpu_verify, result)
