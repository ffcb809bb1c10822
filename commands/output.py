"""What every command shares: the stderr console, JSON and text emission, progress, and the exit path.

Rules (DESIGN.md "The command line"): stdout carries data, stderr carries status, warnings and progress.
Progress bars only on a terminal and never with ``--quiet``. Rich never interprets journal bytes: data
goes to stdout through plain writes, and the stderr console has markup and highlighting off.
"""
from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import typer

from amqtool.errors import AmqtoolError, Finding, StoreSwitchedError, Verdict


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


FORMAT_OPTION = typer.Option(OutputFormat.text, "--format", "-f", help="Output format: text, json or jsonl.")
QUIET_OPTION = typer.Option(False, "--quiet", "-q", help="No progress and no status lines on stderr.")


def stderr_console():
    """A Rich console on stderr that never interprets the text it prints."""
    from rich.console import Console

    return Console(stderr=True, markup=False, highlight=False, emoji=False)


def terminal_width() -> int:
    """The width text is fitted to: ``COLUMNS`` when set, else the terminal's, else 80 (piped)."""
    import shutil

    return max(40, shutil.get_terminal_size(fallback=(80, 24)).columns)


def write_json(doc: dict) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False))
    sys.stdout.write("\n")


def write_jsonl(rows: Iterable[dict]) -> None:
    """One JSON object per line on stdout."""
    out = sys.stdout
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        out.write("\n")


# --format jsonl for commands whose JSON is one document: each item of its lists becomes a line tagged with
# the list it came from ("record": "finding", "journal", "file", ...), then one last line, "record": "summary",
# with everything else, the verdict included. One JSON object a line, always; the last line judges.
_RECORD_NAMES = {"findings": "finding", "journals": "journal", "stores": "store", "results": "result",
                 "queues": "queue", "addresses": "address", "problems": "problem", "lost": "lost",
                 "undeleted": "undeleted", "unrecoverable": "unrecoverable"}


def write_document(doc: dict, fmt: "OutputFormat", lists: tuple[str, ...] = ("findings", "journals")) -> None:
    """``doc`` as one JSON document (json) or as JSON lines (jsonl, see above)."""
    if fmt is not OutputFormat.jsonl:
        write_json(doc)
        return
    rest = {k: v for k, v in doc.items() if k not in lists or not isinstance(v, list)}

    def rows():
        for key in lists:
            items = doc.get(key)
            if isinstance(items, list):
                for item in items:
                    yield {"record": _RECORD_NAMES.get(key, key), **(item if isinstance(item, dict) else {"value": item})}
        yield {"record": "summary", **rest}

    write_jsonl(rows())


def write_lines(lines: Iterable[str]) -> None:
    """Plain text lines on stdout, byte-faithful: no markup, no wrapping."""
    out = sys.stdout
    for line in lines:
        out.write(line)
        out.write("\n")


# INFO findings of one code shown in text before the rest are counted on one line: a healthy compacted journal
# gives one ``stale-records`` per reused file, hundreds on a large store, which would bury a WARNING among them
INFO_SHOWN = 3


def render_findings_text(findings: list[Finding], wide: bool = False) -> None:
    """Findings on stdout, each ``SEVERITY code path[@offset]: message``, folded to the terminal's width
    (continuation lines indented; whole lines with ``wide``). Every WARNING and CRITICAL is shown; of the INFO
    findings of one code, the first :data:`INFO_SHOWN`, then one line counting the rest (``--wide`` and
    ``--format json`` show them all)."""
    from collections import Counter

    width = terminal_width()
    shown: Counter = Counter()
    for f in findings:
        info = f.severity.value == "info"
        if info and not wide:
            shown[f.code] += 1
            if shown[f.code] > INFO_SHOWN:
                continue
        where = f.path or "-"
        if f.offset is not None:
            where += f"@{f.offset}"
        _write_folded(f"{f.severity.value.upper():8} {f.code:28} {where}: {f.message}", width, wide)
    for code, n in shown.items():
        if n > INFO_SHOWN:
            _write_folded(f"{'INFO':8} {code:28} -: {n - INFO_SHOWN} more like these (--wide or --format json "
                          "lists every finding)", width, wide)


def _write_folded(line: str, width: int, wide: bool) -> None:
    from amqtool.commands.tables import fold

    for piece in ([line] if wide else fold(line, width, indent="    ")):
        sys.stdout.write(piece + "\n")


def show_progress(quiet: bool) -> bool:
    """Progress only on an interactive stderr, never with --quiet or under cron (no TTY)."""
    return not quiet and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _bytes_column():
    """Bytes done / total and the rate, in the binary units every other amqtool size uses (Rich's own
    columns count in GB)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    from amqtool.units import binary

    class BytesColumn(ProgressColumn):
        def render(self, task) -> Text:
            total = f"/{binary(task.total)}" if task.total is not None else ""
            rate = f" {binary(task.speed)}/s" if task.speed else ""
            return Text(f"{binary(task.completed)}{total}{rate}")

    return BytesColumn()


@contextmanager
def progress(description: str, total: int | None, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (bytes), or a no-op callback when progress is off.

    Yields ``advance(n)``; Rich refreshes at most a few times a second.
    """
    if not show_progress(quiet):
        yield lambda n: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        _bytes_column(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
        refresh_per_second=4,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def finish(verdict: Verdict) -> None:
    """End the command with the verdict's exit code."""
    raise typer.Exit(verdict.exit_code)


def fail(err: AmqtoolError, fmt: OutputFormat | None = None) -> None:
    """One clear line on stderr, then the error's exit code. Never a traceback.

    With ``--format json`` (or jsonl) a document with the verdict and the error goes to stdout first, so
    programs always get parseable output.
    """
    if fmt in (OutputFormat.json, OutputFormat.jsonl):
        verdict = Verdict.CRITICAL if err.exit_code == Verdict.CRITICAL.exit_code else Verdict.UNKNOWN
        try:
            write_document({"verdict": verdict.name, "error": str(err)}, OutputFormat(fmt))
            sys.stdout.flush()
        except OSError as out:
            # standard output itself fails (`> file` on a full disk): say that, and try nothing more there,
            # not even the interpreter's flush at exit
            sys.stdout = open(os.devnull, "w")
            err = AmqtoolError(f"writing to standard output failed: {out.strerror or out}")
    sys.stderr.write(f"amqtool: error: {err}\n")
    raise typer.Exit(err.exit_code)


def bug(exc: BaseException) -> None:
    """An unexpected exception is a bug: a short traceback without local variables, exit 3.

    Only frames and exception text are printed (never ``locals``), so message payloads cannot leak.
    """
    sys.stderr.write("amqtool: internal error (this is a bug; please report it):\n")
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8)
    sys.stderr.write("".join(tb))
    raise typer.Exit(Verdict.UNKNOWN.exit_code)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C so every cleanup (temporary outputs, Spark
    work directories) runs the same way; the exit code is 128 + the signal number, as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def interrupted(err: KeyboardInterrupt) -> int:
    """Say so on stderr; the exit code of an interrupted run (130 for SIGINT)."""
    import signal

    signum = err.signum if isinstance(err, Terminated) else signal.SIGINT
    sys.stderr.write(f"amqtool: interrupted ({signal.Signals(signum).name})\n")
    return 128 + signum


@contextmanager
def one_document() -> Iterator[None]:
    """Everything the block writes to stdout is held back and written out only when the block ends well
    (``typer.Exit`` included), so a document is never left half written: on an error, the error document
    replaces it (``guarded`` writes it) instead of following a truncated one.

    The held text goes to an anonymous temporary file past 64 MiB (nothing is left behind, even after a
    kill), so memory does not grow with the document.
    """
    import io
    import shutil
    import tempfile

    real = sys.stdout
    sys.stdout.flush()
    spool = tempfile.SpooledTemporaryFile(max_size=64 << 20, mode="w+b")
    text = io.TextIOWrapper(spool, encoding=getattr(real, "encoding", None) or "utf-8",
                            errors=getattr(real, "errors", None) or "strict", write_through=True)
    sys.stdout = text
    ok = False
    try:
        yield
        ok = True
    except typer.Exit:
        ok = True
        raise
    finally:
        sys.stdout = real
        if ok:
            text.flush()
            spool.seek(0)
            real.flush()
            target = getattr(real, "buffer", None)
            if target is not None:
                shutil.copyfileobj(spool, target, 1 << 20)
                target.flush()
            else:
                real.write(spool.read().decode(text.encoding, text.errors))
                real.flush()
        text.close()


def consistent_read(directories, read: Callable[[], None], *, broker_running: Callable[[], bool],
                    wait_seconds: float = 600.0) -> None:
    """Run ``read`` (which writes one document through :func:`one_document`) so that what it reports is the
    store before or after a writer's switch, never a mixture.

    ``read`` runs once; if the directories changed meanwhile (or the read failed while they changed) and no
    broker holds the store (a running broker changes them all the time, and a reader of a live store is
    told so elsewhere), the half-read document is dropped, amqtool writers still working on the store are
    waited for, and ``read`` runs again, once. Changed again, it is exit 3 with one error document.
    """
    from amqtool.store import locks

    for attempt in (1, 2):
        before = locks.directory_state(directories)
        failure = None
        try:
            with one_document():
                try:
                    read()
                except (AmqtoolError, OSError, typer.Exit) as err:  # Exit: a verdict, judged on this read
                    failure = err
                if locks.directory_state(directories) != before and not broker_running():
                    raise StoreSwitchedError("the store changed while it was read (a writer switched its files)",
                                        path=str(directories[0]) if directories else None)
                if failure is not None:
                    raise failure
        except StoreSwitchedError as err:
            if attempt == 2:
                raise StoreSwitchedError(f"{err.message} twice in a row; try again when no compaction runs",
                                    path=err.path) from None
            held = locks.wait_for_writers(directories, wait_seconds)
            if held is not None:
                raise StoreSwitchedError(f"an amqtool writer has held {held} for {wait_seconds:.0f} s while this "
                                    "read waited for it; try again later", path=held) from None
            continue
        return


@contextmanager
def guarded(fmt: OutputFormat | None = None) -> Iterator[None]:
    """Run a command body, mapping errors to one stderr line (and a JSON document) and the right exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except AmqtoolError as err:
        fail(err, fmt)
    except KeyboardInterrupt as err:
        raise typer.Exit(interrupted(err))
    except BrokenPipeError:
        # `amqtool print ... | head`: the reader went away; that is not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        finally:
            raise typer.Exit(0)
    except OSError as err:
        fail(AmqtoolError(f"{err.strerror or err}", path=getattr(err, "filename", None)), fmt)
    except Exception as exc:  # noqa: BLE001 - last-resort bug report
        stopped = _interrupt_behind(exc)
        if stopped is not None:
            raise typer.Exit(interrupted(stopped)) from None
        bug(exc)


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM an exception wraps, if any: a signal that arrives while a module is imported can
    be raised inside a class body's ``__set_name__``, which CPython 3.11 re-raises as a RuntimeError caused by
    it ("Error calling __set_name__"); that run was interrupted, not broken."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
