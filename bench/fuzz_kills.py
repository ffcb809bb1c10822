"""Kill every writer at random instants (issue 26): export (local engine), recover -o, compact -o, compact in
place, create, create --from KahaDB. After each kill (SIGKILL or SIGTERM):

* the source is intact (sha256 of every file, before and after; compact in place: it verifies clean once the
  next compaction has finished what the kill interrupted);
* the output is absent, or complete and valid (an export has its export.json; a store verifies);
* the next run (any writer beside the output) leaves no temporary file (``.<name>.amqtool-*``).

Each trial forks the already-imported CLI (no interpreter start-up per trial), so thousands of trials fit in
minutes. ``make fuzz`` runs 2,000 trials; the test suite runs 200 (tests/cli/test_kill_writers.py).

    python bench/fuzz_kills.py [--trials N] [--seed S]
"""
from __future__ import annotations

import argparse
import faulthandler
import hashlib
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the fixtures: AMQTOOL_FIXTURES, else ../shared/fixtures beside the checkout (as tests/support.py)
KAHADB = Path(os.environ.get("AMQTOOL_FIXTURES") or REPO.parent / "shared" / "fixtures") / "kahadb" / "basic"
# No writer of these small stores takes more than seconds: a child still running after this long is stuck,
# killed and reported, so that a hang fails the run instead of stopping it for good (the suite once waited
# 80 minutes on a child forked from a process that held other threads' locks).
HANG_SECONDS = 120.0

# writer name -> (argv maker, output kind); argv makers get (source store, kahadb copy, output path)
WRITERS = {
    "export": (lambda s, k, o: ["export", s, "-o", o, "-f", "jsonl", "--engine", "local", "-q"], "export"),
    "recover": (lambda s, k, o: ["recover", s, "-o", o, "-q"], "store"),
    "compact-o": (lambda s, k, o: ["compact", s, "-o", o, "-q"], "store"),
    "create": (lambda s, k, o: ["create", o, "--file-size", "64KiB", "--min-files", "4", "-q"], "journal"),
    "create-from": (lambda s, k, o: ["create", o, "--from", k, "-q"], "store"),
    "compact-in-place": (lambda s, k, o: ["compact", s, "-q"], None),
}


def tree_hashes(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Hung(Exception):
    """A child ran past HANG_SECONDS (it was killed)."""


def run_cli(argv: list, *, kill_after: float | None = None, sig: int = signal.SIGKILL,
            stderr: str | os.PathLike | None = None, stdout: str | os.PathLike | None = None) -> int:
    """Run ``amqtool argv`` in a forked child (stdout to ``stdout`` or /dev/null, stderr to ``stderr`` or
    /dev/null); with
    ``kill_after``, send ``sig`` that many seconds in. Returns the exit status (negative: the signal that
    ended it); raises :class:`Hung` for a child still running after HANG_SECONDS.

    Forking is only safe from a process with one thread (a lock another thread held at the fork stays held
    in the child for ever): run this module as a script, never inside a process that has started threads
    (a test process with a Spark gateway)."""
    from amqtool.commands.main import main

    pid = os.fork()
    if pid == 0:  # the child: the CLI, as a process of its own
        code = 3
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if stdout else null, 1)
            os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if stderr else null, 2)
            faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hung child's stacks, on stderr
            code = main([str(a) for a in argv])
        finally:
            os._exit(code if isinstance(code, int) else 3)
    if kill_after is not None:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(min(0.002, max(0.0, deadline - time.monotonic())))
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + HANG_SECONDS
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGUSR1)
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    stacks = Path(stderr).read_text(errors="replace")[-4000:] if stderr else "(stderr not kept)"
    raise Hung(f"amqtool {' '.join(map(str, argv))} still running after {HANG_SECONDS:.0f} s; its threads:\n"
               f"{stacks}")


def warm_up(argv: list) -> None:
    """Run ``argv`` once in this process, so the forked trials start with its modules imported."""
    import contextlib
    import io

    from amqtool.commands.main import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main([str(a) for a in argv])
    # verify too: every output is checked with it
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["verify", str(argv[1]), "-q"])


def leftovers(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".amqtool-" in n)


def output_ok(kind: str, out: Path) -> str | None:
    """None when ``out`` is a complete, valid output of ``kind``; else what is wrong."""
    import json

    if kind == "export":
        try:
            doc = json.loads((out / "export.json").read_text())
        except (OSError, ValueError) as err:
            return f"export without a readable export.json: {err}"
        return None if doc.get("rows", 0) > 0 else "export.json says no rows"
    code = run_cli(["verify", out, "-q"])
    return None if code in (0, 1) else f"verify exits {code}"


def make_sources(root: Path) -> tuple[Path, Path]:
    from amqtool.engines.artemis.demo import create_demo

    store = root / "store"
    create_demo(store, 4 * 1024 * 1024, file_size=256 * 1024, seed=11)
    kaha = root / "kahadb"
    shutil.copytree(KAHADB, kaha)
    return store, kaha


def trial(rng: random.Random, root: Path, store: Path, kaha: Path, name: str, timings: dict) -> list[str]:
    """One kill of writer ``name``; returns the problems found (empty: all good)."""
    make, kind = WRITERS[name]
    problems = []
    work = root / "out"
    work.mkdir()
    out = work / "o"
    src = store
    if name == "compact-in-place":
        src = root / "inplace"
        shutil.copytree(store, src)
    before = tree_hashes(src) if name != "compact-in-place" else None
    kbefore = tree_hashes(kaha) if name == "create-from" else None
    full = timings.get(name)
    if full is None:  # how long an uninterrupted run takes: kill instants are drawn over it
        warm_up(make(src, kaha, root / "warm"))
        shutil.rmtree(root / "warm", ignore_errors=True)
        t0 = time.monotonic()
        run_cli(make(src, kaha, out))
        timings[name] = full = max(time.monotonic() - t0, 0.01)
        shutil.rmtree(work)
        work.mkdir()
        if name == "compact-in-place":
            shutil.rmtree(src)
            shutil.copytree(store, src)
    sig = rng.choice((signal.SIGKILL, signal.SIGKILL, signal.SIGTERM))
    at = rng.uniform(0, full * 1.05)
    errfile = root / "stderr"
    code = run_cli(make(src, kaha, out), kill_after=at, sig=sig, stderr=errfile)
    err = errfile.read_text(errors="replace").strip()
    tag = f"{name} {signal.Signals(sig).name} at {at:.3f}s (exit {code}: {err[-300:]!r})"
    if before is not None and tree_hashes(src) != before:
        problems.append(f"{tag}: the source changed")
    if kbefore is not None and tree_hashes(kaha) != kbefore:
        problems.append(f"{tag}: the KahaDB source changed")
    # SIGTERM: finished first (0, 1), interrupted with one line (143), or ended by the signal itself before
    # amqtool's handler was installed (-15: nothing written yet)
    if sig == signal.SIGTERM and (code not in (0, 1, 143, -15) or "Traceback" in err or err.count("\n") > 0
                                  and code == 143):
        problems.append(f"{tag}: SIGTERM gave exit {code}")
    if kind is not None and out.exists():  # written aside and renamed: present means complete
        why = output_ok(kind, out)
        if why:
            problems.append(f"{tag}: output present but {why}")
    if name == "compact-in-place":
        # the next compaction finishes what the kill interrupted; then the store verifies clean
        kept = root / f"killed-{time.monotonic_ns()}"
        shutil.copytree(src, kept)  # as the kill left it: kept (and named) if what follows fails
        c = run_cli(["compact", src, "-q"], stderr=root / "next-stderr")
        report = root / "verify.txt"
        v = run_cli(["verify", src], stdout=report)
        if c not in (0, 1) or v not in (0, 1):
            problems.append(f"{tag}: after the next compact (exit {c}) verify exits {v}; the store as the kill "
                            f"left it is kept in {kept}; verify said:\n{report.read_text(errors='replace')[-3000:]}")
        else:
            shutil.rmtree(kept)
        shutil.rmtree(src)
    else:
        # the next run writing beside it removes what the kill left: one trial in eight runs a real writer,
        # the others its first step alone (the sweep every writer's claim makes), which costs no fsyncs
        if rng.random() < 0.125:
            nxt = run_cli(["create", work / "next", "--file-size", "64KiB", "-q"])
            if nxt != 0:
                problems.append(f"{tag}: the next run exits {nxt}")
        else:
            from amqtool.store import output

            notice, output.notice = output.notice, None  # (the real runs name what they remove on stderr)
            try:
                output.sweep_leftovers(work)
            finally:
                output.notice = notice
        left = leftovers(work)
        if left:
            problems.append(f"{tag}: left after the next run: {left}")
    shutil.rmtree(work)
    return problems


def run(trials: int, seed: int = 0, root: Path | None = None, report=print) -> list[str]:
    rng = random.Random(seed)
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="amqtool-fuzz-kills-")) if own else root
    try:
        store, kaha = make_sources(root)
        names = list(WRITERS)
        timings: dict[str, float] = {}
        problems: list[str] = []
        counts = dict.fromkeys(names, 0)
        for i in range(trials):
            name = names[i % len(names)]
            counts[name] += 1
            try:
                problems += trial(rng, root, store, kaha, name, timings)
            except Hung as err:
                problems.append(f"{name}: {err}")
                shutil.rmtree(root / "out", ignore_errors=True)
                shutil.rmtree(root / "inplace", ignore_errors=True)
        report(f"{trials} kills: " + ", ".join(f"{n} {c}" for n, c in counts.items())
               + f"; uninterrupted run times (s): " + ", ".join(f"{n} {t:.2f}" for n, t in timings.items()))
        return problems
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed after)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    print(f"seed {args.seed}")
    problems = run(args.trials, args.seed, root=args.work)
    for p in problems:
        print("PROBLEM:", p)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
