"""Run a fault campaign over one store: draw faults from its structure, damage a working copy, judge it
with ``verify`` (in process: the same engine the command runs), compute the truth, undo.

Each fault's seed is ``base_seed * 1_000_003 + i``: ``reproduce(store, seed)`` redraws exactly that fault.
A fault drawn again is judged once (its outcome is kept per campaign).
"""
from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from tests.faults import artemis, journal_truth
from tests.faults.model import Outcome, classify


def verify_verdict(root: Path, keep: contextlib.ExitStack | None = None) -> tuple[str, tuple]:
    """``amqtool verify ROOT``'s verdict and finding codes, from the engine the command calls (``keep``: see
    :func:`judged`)."""
    return judged(root, keep)[:2]


def judged(root: Path, keep: contextlib.ExitStack | None = None) -> tuple[str, tuple, tuple | None]:
    """:func:`verify_verdict`, and ``(store, loads, gaps)``: the Artemis store verify detected, the journal
    loads it judged (``VerifyReport.loads``, open until ``keep`` closes) and each file's scan and gaps as the
    load saw them (``VerifyReport.gaps``); None without ``keep``, for another kind of store, or when verify gave
    up. The loads are the loader's (``load_journal``), not verify's findings: the truth and the oracle read the
    same loads (as the export does), which spares each a second scan of every journal."""
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.errors import AmqtoolError, overall_verdict
    from amqtool.store.layout import detect

    loaded = None
    try:
        store = detect(root)
        if store.kind == "kahadb":
            from amqtool.engines import kahadb

            findings, _ = kahadb.verify_store(store)
        else:
            report = verify_store(store, keep=keep)
            findings = report.findings
            if keep is not None:
                loaded = (store, report.loads, report.gaps)
    except AmqtoolError as err:
        return "UNKNOWN", (type(err).__name__,), None
    codes = tuple(sorted({f.code for f in findings if f.severity.value != "info"}))
    return overall_verdict(findings).name, codes, loaded


class Campaign:
    """One pristine store copied once into a scratch directory, then damaged and restored fault by fault."""

    def __init__(self, name: str, source: Path, scratch: Path | None = None):
        self.name = name
        self._tmp = tempfile.mkdtemp(prefix="amqtool-faults-", dir=scratch)
        self.root = Path(self._tmp) / "store"
        shutil.copytree(source, self.root, symlinks=True)
        self.sites = artemis.ArtemisSites.read(self.root)
        self.truth = journal_truth.reader(self.root)  # what the broker delivers; a bare journal's load
        self.bare = isinstance(self.truth, journal_truth.LoadedReader)
        self.pristine = self.truth.pristine
        # what the pristine store already shows is no proof that a damaged copy is no broker's
        self.orphans_ok = frozenset() if self.bare else artemis.restart_orphans(self.root)
        # and what the pristine store already shows that the oracle's model deems no broker's is none either
        self.flaws = artemis.pristine_flaws(self.root, journal_only=self.bare, orphans_ok=self.orphans_ok)
        # fault -> (truth, verdict, diff, codes): a fault drawn again (a whole file deleted or emptied, the
        # same byte flipped: a quarter of a large campaign's draws) damages the store to the same bytes, as
        # its undo restores them exactly, so verify and the truth give what they gave
        self._seen: dict = {}

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fault(self, seed: int):
        return self.sites.draw(random.Random(seed))

    def run_one(self, seed: int, *, again: bool = False) -> Outcome:
        """The outcome of the fault ``seed`` draws (``again``: judged anew even if it was drawn before)."""
        return self.judge(self.fault(seed), seed, again=again)

    def judge(self, fault, seed: int = 0, *, again: bool = False) -> Outcome:
        """The outcome of ``fault`` (``seed``: the one that drew it, for the report)."""
        known = None if again else self._seen.get(fault)
        if known is not None:
            truth, verdict, diff, codes = known
            return Outcome(self.name, seed, fault, truth, verdict, dict(diff), codes)
        undo = fault.apply(self.root)
        try:
            with contextlib.ExitStack() as keep:
                verdict, codes, loaded = judged(self.root, keep)
                damaged = self.truth.damaged(self.root, loaded)
                # the oracle reads the damaged store (the same loads, still open): classified before the undo
                truth, diff = classify(self.pristine, damaged, lambda d: self.sites.torn(fault),
                                       lambda: bool(artemis.broker_could_write(self.root, loaded,
                                                                               journal_only=self.bare,
                                                                               orphans_ok=self.orphans_ok,
                                                                               known=self.flaws)),
                                       moved=self.truth.moved)
        finally:
            undo()
        self._seen[fault] = (truth, verdict, diff, codes)
        return Outcome(self.name, seed, fault, truth, verdict, dict(diff), codes)

    def judge_findings(self, fault, code: str | None = None) -> tuple[Outcome, list]:
        """The outcome of ``fault`` and the findings (of ``code``, else all) ``verify`` gives the damaged store."""
        from amqtool.engines.artemis.verify import verify_store
        from amqtool.store.layout import detect

        outcome = self.judge(fault)
        undo = fault.apply(self.root)
        try:
            return outcome, [f for f in verify_store(detect(self.root)).findings if code in (None, f.code)]
        finally:
            undo()

    def run(self, base_seed: int, count: int) -> Iterator[Outcome]:
        for i in range(count):
            yield self.run_one(base_seed * 1_000_003 + i)
