"""The one rule of the commands that read a store and then judge it or write from it (issue 25).

``verify`` is the judge. Every other command that reaches a verdict on a source (``export``, a fleet's rows,
``create --from``, ``recover``) takes verify's findings on what it read, by calling verify's engine for
the store's kind, and adds its own problems (a message it could not write is a WARNING); it never works
the verdict out with checks of its own. The export feeds verify the load it exports
(:func:`amqtool.engines.artemis.verify.verify_store` with ``loads``), so the journal is scanned once.

Writing from a source (``export``, ``create --from``, ``recover``, and ``compact``, which rewrites its source and
would drop what the damaged bytes held): a source verify calls CRITICAL is refused
with exit 2 (:class:`SourceCriticalError`: "corruption, data at risk"; the command could not do it safely)
unless ``--salvage`` is given; then the command writes what survives and lists what it leaves out
(:func:`left_out`: the findings that prove a loss). A journal file that cannot be read is refused too, with
exit 3 (:class:`SourceUnreadableError`: could not check): its records may acknowledge or delete others, so
without it the live state is unknown and acknowledged messages would come back. Any other part that cannot
be read (a page file, a large message's body) is UNKNOWN for what it holds, and the rest is written.
"""
from __future__ import annotations

from typing import Callable, Iterable

from amqtool.errors import AmqtoolError, DataAtRiskError, Finding, Severity, Verdict, overall_verdict

# findings listed in a writing command's document: everything that weighs on the verdict
LISTED = (Severity.CRITICAL, Severity.WARNING, Severity.UNKNOWN)
MAX_LISTED = 100


class SourceRefusedError(AmqtoolError):
    """A writing command refused its source, ``--salvage`` not given; ``findings``: verify's (a fleet's row
    takes its verdict from them)."""

    def __init__(self, message: str, *, path: str | None = None, findings: list | None = None):
        super().__init__(message, path=path)
        self.findings = findings or []


class SourceCriticalError(SourceRefusedError, DataAtRiskError):
    """Refused: verify calls the source CRITICAL (exit 2)."""


class SourceUnreadableError(SourceRefusedError):
    """Refused: a journal file cannot be read, so which messages are live is unknown (exit 3): the records
    in it may acknowledge or delete others, which would come back."""


def judge_store(store, progress: Callable[[int], None] | None = None) -> list[Finding]:
    """verify's findings on ``store`` (any kind verify reads): what ``create --from`` and ``recover`` weigh
    before writing from it. The export does not call this: it judges the load it exports (no second scan)."""
    kind = store.kind
    if kind == "kahadb":
        from amqtool.engines.kahadb import verify_store

        return verify_store(store, progress=progress)[0]
    if kind in ("leveldb", "replicated-leveldb"):
        from amqtool.engines.leveldb.verify import verify_store

        return verify_store(store, progress=progress)[0]
    if kind == "artemis-jdbc":
        from amqtool.engines.jdbc.artemis import verify_store

        return verify_store(store, progress=progress)[0]
    if kind == "classic-jdbc":
        from amqtool.engines.jdbc.classic import verify_store

        return verify_store(store, progress=progress)[0]
    from amqtool.engines.artemis.verify import verify_store

    return verify_store(store, progress=progress).findings


def judge_for_writing(store, salvage: bool, *, command: str) -> list[Finding]:
    """:func:`judge_store`, then :func:`refuse_unless_salvage`: what ``recover`` calls before reading a source
    its own way. With ``salvage``, a source verify cannot read through (an I/O error mid-file) is still
    salvaged: the error becomes an UNKNOWN ``source-unchecked`` finding."""
    try:
        findings = judge_store(store)
    except AmqtoolError as err:
        if not salvage:
            raise
        findings = [Finding(Severity.UNKNOWN, "source-unchecked", f"verify could not read the source: {err}",
                            str(getattr(store, "root", "")) or None)]
    refuse_unless_salvage(findings, salvage, command=command, path=str(getattr(store, "root", "")) or None)
    return findings


def verdict_of(findings: Iterable[Finding], problems: int = 0) -> Verdict:
    """The verdict of a command that read a source: verify's on its findings, at least WARNING when the
    command met ``problems`` of its own (messages it could not write)."""
    v = overall_verdict(findings)
    return max(v, Verdict.WARNING) if problems else v


def first_of(findings: Iterable[Finding], severity: Severity) -> Finding | None:
    return next((f for f in findings if f.severity is severity), None)


def describe(f: Finding) -> str:
    """One line for a finding: code, where, message."""
    where = f.path or ""
    if f.offset is not None:
        where += f"@{f.offset}"
    return f"{f.code}" + (f" ({where})" if where else "") + f": {f.message}"


def refuse_unless_salvage(findings: list[Finding], salvage: bool, *, command: str, path: str | None,
                          remedy: str = "--salvage writes what survives and lists what it leaves out") -> None:
    """Raise :class:`SourceCriticalError` when verify calls the source CRITICAL and ``salvage`` is not set, and
    :class:`SourceUnreadableError` when it is no store at all (``not-a-store``), even with ``salvage``.
    ``remedy``: what the message offers instead (``compact`` points to ``recover``: compaction drops what the
    damaged bytes held, which ``recover`` can still salvage)."""
    # not a store (random bytes named like journal files): nothing to write from, salvaged or not
    nothing = next((f for f in findings if f.severity is Severity.UNKNOWN and f.code == "not-a-store"), None)
    if nothing is not None:
        raise SourceUnreadableError(f"{command} refused: {describe(nothing)}; nothing was written", path=path,
                                    findings=findings)
    if salvage:
        return
    crit = [f for f in findings if f.severity is Severity.CRITICAL]
    if crit:
        more = f" (and {len(crit) - 1} more critical finding(s))" if len(crit) > 1 else ""
        raise SourceCriticalError(
            f"{command} refused: verify calls this store CRITICAL, {describe(crit[0])}{more}; nothing was "
            f"written. {remedy}", path=path, findings=findings)
    blind = [f for f in findings if f.severity is Severity.UNKNOWN and f.details.get("journalFile")]
    if blind:
        raise SourceUnreadableError(
            f"{command} refused: {describe(blind[0])}; without it which messages are live is unknown "
            f"(acknowledgements in it would be lost, bringing acknowledged messages back); nothing was written. "
            f"--salvage writes what the readable files hold", path=path, findings=findings)


def left_out(findings: Iterable[Finding]) -> list[dict]:
    """The findings a salvaging (or merely warned) writing command lists as what it leaves out or could
    not check: critical, warning and unknown ones, at most :data:`MAX_LISTED`."""
    out = [f.to_json() for f in findings if f.severity in LISTED]
    return out[:MAX_LISTED]


# what compact's refusal offers: compaction rewrites the files from what loads, so the damaged bytes (and
# what recover could still read from them) would be gone
COMPACT_REMEDY = ("Run 'amqtool recover' to salvage what the damaged bytes still hold first; --salvage compacts "
                  "anyway and drops them")


def refuse_compaction(findings: list[Finding], salvage: bool, path: str | None) -> None:
    """``compact`` (in place or ``-o``) of a store verify calls CRITICAL: refused with exit 2 unless ``salvage``
    (:func:`refuse_unless_salvage`). A WARNING store (a torn tail, as a crash leaves) is compacted."""
    refuse_unless_salvage(findings, salvage, command="compact", path=path, remedy=COMPACT_REMEDY)
