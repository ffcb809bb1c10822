"""The one table every command prints, designed for 80 columns; and the compact values that go in it.

A cell never wraps. Each column has a rank: rank 0 is always shown, and while the table is wider than the
terminal the column of the highest rank (the last of equal ranks) is dropped, and named in a footnote line,
so an operator at 80 columns (a pipe, a cron mail) reads whole values in fewer columns instead of every
column squeezed to "queu/e". A wide terminal gets them all; ``--wide`` shows every column whatever the
width (``--format json`` always has every figure). Only when the rank-0 columns alone overflow does a cell
lose its end, marked with an ellipsis.

Rich lays the table out (markup and highlighting off: a queue may be called ``[red]``). Titles and
footnotes are plain lines, written without padding, so the text has no trailing blanks.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

import typer

from amqtool.commands.output import terminal_width

WIDE_OPTION = typer.Option(False, "--wide", help="Text: every table column, whole lines and every INFO finding, "
                           "whatever the terminal's width.")


@dataclass(frozen=True)
class Col:
    """A table column: its header, its rank (0: always shown; higher ranks are dropped first) and whether
    its values are figures (right-aligned)."""

    header: str
    rank: int = 0
    figure: bool = False


def _rich_table(columns: Sequence[Col], rows: list[Sequence[str]]):
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for c in columns:
        table.add_column(c.header, justify="right" if c.figure else "left", no_wrap=True, overflow="ellipsis")
    for r in rows:
        table.add_row(*r)
    return table


def printable(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` (a queue name is data: an escape sequence in it
    must not reach the terminal, nor a newline break a table row)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def natural_width(columns: Sequence[Col], rows: list[Sequence[str]]) -> int:
    """The width the table takes with every value whole: each column as wide as its widest value, and the
    gaps between columns."""
    if not columns:
        return 0
    widths = [max([len(c.header)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    return sum(widths) + 2 * (len(columns) - 1)


def fit_columns(columns: Sequence[Col], rows: list[Sequence[str]], width: int) -> list[int]:
    """Indexes of the columns shown at ``width``: the lowest-ranked dropped one by one (among equal ranks,
    the rightmost first) until the rest fit; rank-0 columns always stay."""
    keep = list(range(len(columns)))
    while natural_width([columns[i] for i in keep], [[r[i] for i in keep] for r in rows]) > width:
        droppable = [i for i in keep if columns[i].rank > 0]
        if not droppable:
            break
        worst = max(droppable, key=lambda i: (columns[i].rank, i))
        keep.remove(worst)
    return keep


def table_lines(columns: Sequence[Col], rows: Iterable[Sequence[str]], *, wide: bool = False,
                width: int | None = None) -> list[str]:
    """The lines of a table fitted to ``width`` (default: the terminal's), then a footnote naming the
    columns left out."""
    from rich.console import Console

    rows = [[printable(c) for c in r] for r in rows]
    width = terminal_width() if width is None else width
    keep = list(range(len(columns))) if wide else fit_columns(columns, rows, width)
    shown = [columns[i] for i in keep]
    cells = [[r[i] for i in keep] for r in rows]
    render_width = max(width, natural_width(shown, cells)) if wide else width
    console = Console(width=render_width, markup=False, highlight=False, emoji=False, color_system=None,
                      force_terminal=False, force_jupyter=False, legacy_windows=False)
    with console.capture() as cap:
        console.print(_rich_table(shown, cells))
    lines = [line.rstrip() for line in cap.get().splitlines()]
    dropped = [c.header for i, c in enumerate(columns) if i not in keep]
    if dropped:
        lines.extend(fold(f"(not shown: {', '.join(dropped)}; --wide shows every column)", width))
    return lines


def print_table(title: str | None, columns: Sequence[Col], rows: Iterable[Sequence[str]], *,
                wide: bool = False) -> None:
    """A title line (folded to the width, never cut), then :func:`table_lines`, on stdout."""
    out = sys.stdout
    if title:
        for line in fold(title, terminal_width(), indent="  ") if not wide else [title]:
            out.write(line + "\n")
    for line in table_lines(columns, rows, wide=wide):
        out.write(line + "\n")


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal: one per character, two for an East Asian wide one."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _fitting(text: str, room: int) -> int:
    """How many leading characters of ``text`` fit in ``room`` columns."""
    if text.isascii():
        return min(room, len(text))
    from rich.cells import get_character_cell_size

    used = 0
    for i, c in enumerate(text):
        used += get_character_cell_size(c)
        if used > room:
            return i
    return len(text)


def fold(line: str, width: int, indent: str | None = None) -> list[str]:
    """``line`` broken into pieces of at most ``width`` columns, at a blank or after a comma when one is
    near, else mid-word; continuation pieces are indented by the line's own indent plus four blanks (or by
    ``indent``), so a folded line reads as one. Nothing is left out."""
    if cells(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    cont = indent if indent is not None else " " * (lead + 4)
    if len(cont) > width // 2:
        cont = "    "
    out, rest, first = [], line, True
    while rest:
        room = width - (0 if first else len(cont))
        fits = _fitting(rest, room)
        if fits >= len(rest):
            out.append(rest if first else cont + rest)
            break
        cut = _break_at(rest, max(1, fits))
        piece, rest = rest[:cut].rstrip(" "), rest[cut:].lstrip(" ")
        out.append(piece if first else cont + piece)
        first = False
    return out


def _break_at(text: str, room: int) -> int:
    """Where to cut ``text`` to at most ``room`` characters: after the last blank or comma in the second
    half of the room, else at ``room``."""
    if text[room] == " ":
        return room
    at = max(text.rfind(" ", room // 2, room), text.rfind(",", room // 2, room))
    return at + 1 if at >= 0 else room


def fold_lines(lines: Iterable[str], width: int | None = None, wide: bool = False) -> Iterable[str]:
    """Every line folded to ``width`` (default: the terminal's; :func:`fold`); whole with ``wide``."""
    if wide:
        yield from lines
        return
    width = terminal_width() if width is None else width
    for line in lines:
        if len(line) <= width and line.isascii():
            yield line
        else:
            yield from fold(line, width)


# Compact values: one form for each kind of figure, the same in every table.

def age(seconds: int | None) -> str:
    """An age as its largest whole unit: ``907d``, ``3h``, ``12m``, ``40s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n:
            return f"{seconds // n}{unit}"
    return f"{seconds}s"


def size(n: int | None) -> str:
    """Bytes in binary units (:func:`amqtool.units.binary`), ``-`` when unknown."""
    from amqtool.units import binary

    return binary(n)


def count(n: int | None) -> str:
    return "-" if n is None else str(n)


def ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.1%}"


def when(millis: int | None) -> str:
    """An instant (epoch ms) in UTC to the minute: ``2024-06-01 00:00``; ``-`` when unknown."""
    if not millis:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
