"""Sizes for people: one convention everywhere, binary units (KiB, MiB, GiB), as the brokers' own sizes are.

Artemis reads ``10MB`` in broker.xml as 10 MiB (``ByteUtil.convertTextBytes``: every unit is a power of 1024),
so amqtool shows sizes the same way, and where an operator typed a size it echoes their text beside the bytes
it means (``1TB (1.0 TiB)``), so a unit misunderstanding is visible at once.
"""
from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def binary(n: float | None) -> str:
    """``n`` bytes as ``B`` (whole) or one decimal of the largest binary unit below it; ``-`` for None."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in _UNITS:
        if n < 1024 or unit == _UNITS[-1]:
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def as_given(text: str | None, n: int | None) -> str:
    """The size an operator gave, echoed as typed with its value in binary units when they differ."""
    shown = binary(n)
    if text is None or text.strip() == shown or text.strip() == str(n):
        return shown
    return f"{text.strip()} ({shown})"
