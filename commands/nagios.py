"""``--nagios``: the Nagios/Icinga plugin form of ``verify`` and ``check``, after the monitoring-plugins
development guidelines (https://www.monitoring-plugins.org/doc/guidelines.html):

* one line on stdout, ``AMQTOOL <STATUS> - <text> | <perfdata>``, and the exit code 0 OK, 1 WARNING,
  2 CRITICAL, 3 UNKNOWN;
* perfdata ``'label'=value[UOM];[warn];[crit];[min];[max]`` items separated by spaces, UOM one of none,
  ``s``, ``%``, ``B``, ``c``; the label always quoted (it may hold a path);
* thresholds ``-w``/``-c`` in the guidelines' range syntax: ``10`` (alert outside 0..10), ``10:`` (below
  10), ``~:10`` (above 10), ``10:20`` (outside 10..20), ``@10:20`` (inside 10..20). ``-w LABEL=RANGE``
  applies to that figure; a bare ``RANGE`` to the command's main figure (verify: ``live_ratio``; check:
  ``headroom_pct``). Both options repeat.

The status is the worse of the command's verdict and the thresholds' verdicts.
"""
from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import typer

from amqtool.errors import AmqtoolError, UsageError, Verdict

NAGIOS_OPTION = typer.Option(False, "--nagios", help="Nagios/Icinga plugin output: one status line with perfdata.")
WARNING_OPTION = typer.Option(None, "--warning", "-w", metavar="[LABEL=]RANGE",
                              help="--nagios: WARNING when the figure is outside RANGE (repeatable).")
CRITICAL_OPTION = typer.Option(None, "--critical", "-c", metavar="[LABEL=]RANGE",
                               help="--nagios: CRITICAL when the figure is outside RANGE (repeatable).")


@dataclass(frozen=True)
class Range:
    """A threshold range of the guidelines: alert when the value is outside [start, end] (inside with @)."""

    text: str
    start: float
    end: float
    inside: bool = False

    @classmethod
    def parse(cls, text: str) -> "Range":
        t = text.strip()
        inside = t.startswith("@")
        body = t[1:] if inside else t
        try:
            if ":" in body:
                lo, hi = body.split(":", 1)
                start = -math.inf if lo == "~" else float(lo) if lo else 0.0
                end = float(hi) if hi else math.inf
            else:
                start, end = 0.0, float(body)
        except ValueError:
            raise UsageError(f"threshold {text!r} is not a range (10, 10:, ~:10, 10:20 or @10:20)") from None
        if start > end:
            raise UsageError(f"threshold {text!r}: start is above end")
        return cls(t, start, end, inside)

    def perf(self) -> str:
        """The range as perfdata carries it: plain numbers (``1e12`` as 1000000000000), the same meaning."""
        if self.start == -math.inf:
            body = "~:" + ("" if self.end == math.inf else _num(self.end))
        elif self.end == math.inf:
            body = f"{_num(self.start)}:"
        elif self.start == 0:
            body = _num(self.end)
        else:
            body = f"{_num(self.start)}:{_num(self.end)}"
        return ("@" if self.inside else "") + body

    def alerts(self, value: float) -> bool:
        within = self.start <= value <= self.end
        return within if self.inside else not within


@dataclass
class Figure:
    label: str
    value: float
    uom: str = ""
    minimum: float | None = None
    maximum: float | None = None


def parse_thresholds(values: list[str] | None, default_label: str, labels: set[str]) -> dict[str, Range]:
    """``[LABEL=]RANGE`` options -> {label: Range}; an unknown label is a usage error (exit 3)."""
    out: dict[str, Range] = {}
    for v in values or []:
        label, sep, rng = v.partition("=")
        if not sep:
            label, rng = default_label, v
        if label not in labels:
            raise UsageError(f"threshold label {label!r}: one of {', '.join(sorted(labels))}")
        out[label] = Range.parse(rng)
    return out


def brief(text: str, limit: int = 160) -> str:
    """One finding's message shortened for the status line (the plugin output stays one readable line)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _num(v: float) -> str:
    """A number as perfdata wants it: digits, a point, a sign; never an exponent."""
    if v == int(v):
        return str(int(v))
    return f"{v:.6f}".rstrip("0").rstrip(".")


def _perf(f: Figure, warn: Range | None, crit: Range | None) -> str:
    label = f.label.replace("'", "_").replace("=", "_")
    parts = [f"{_num(f.value)}{f.uom}", warn.perf() if warn else "", crit.perf() if crit else "",
             "" if f.minimum is None else _num(f.minimum), "" if f.maximum is None else _num(f.maximum)]
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return f"'{label}'=" + ";".join(parts)


def status_line(verdict: Verdict, text: str, figures: list[Figure], warn: dict[str, Range],
                crit: dict[str, Range], label_of=lambda f: f.label) -> tuple[Verdict, str]:
    """(final status, the plugin line). ``label_of(figure)`` names the threshold a figure answers to (a
    per-filesystem figure answers to its kind's label)."""
    status = verdict
    alerts = []
    for f in figures:
        key = label_of(f)
        c, w = crit.get(key), warn.get(key)
        if c is not None and c.alerts(f.value):
            status = max(status, Verdict.CRITICAL)
            alerts.append(f"{f.label}={_num(f.value)}{f.uom} (critical {c.text})")
        elif w is not None and w.alerts(f.value):
            status = max(status, Verdict.WARNING)
            alerts.append(f"{f.label}={_num(f.value)}{f.uom} (warning {w.text})")
    if alerts:
        text = "; ".join(alerts) + "; " + text
    perf = " ".join(_perf(f, warn.get(label_of(f)), crit.get(label_of(f))) for f in figures)
    line = f"AMQTOOL {status.name} - {text.replace('|', '/')}"
    return status, (line + (f" | {perf}" if perf else ""))


@contextmanager
def nagios_guard() -> Iterator[None]:
    """An error becomes ``AMQTOOL UNKNOWN - <error>`` on stdout and exit 3 (a plugin always says something)."""
    try:
        yield
    except typer.Exit:
        raise
    except (AmqtoolError, OSError) as err:
        message = str(err) if isinstance(err, AmqtoolError) else (err.strerror or str(err))
        sys.stdout.write(f"AMQTOOL UNKNOWN - {message.replace('|', '/')}\n")
        raise typer.Exit(Verdict.UNKNOWN.exit_code)


def emit(verdict: Verdict, text: str, figures: list[Figure], warn, crit, label_of=lambda f: f.label) -> None:
    status, line = status_line(verdict, text, figures, warn, crit, label_of)
    sys.stdout.write(line + "\n")
    raise typer.Exit(status.exit_code)
