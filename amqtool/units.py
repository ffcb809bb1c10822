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


def check_number(value, option: str, *, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None, also: tuple = ()):
    """The one validator of numeric options: ``value`` (None passes: the option was not given) must be a
    finite number with ``minimum <= value <= maximum`` and ``value > above``, or one of ``also`` (e.g. -1 for
    "unlimited"). Returns it; UsageError (exit 3, one line naming the option) otherwise."""
    import math

    from amqtool.errors import UsageError

    if value is None or value in also:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{option} must be a finite number, not {value}")
    bounds = []
    if above is not None:
        bounds.append(f"above {above:g}")
    if minimum is not None:
        bounds.append(f"at least {minimum:g}")
    if maximum is not None:
        bounds.append(f"at most {maximum:g}")
    ok = ((minimum is None or value >= minimum) and (maximum is None or value <= maximum)
          and (above is None or value > above))
    if not ok:
        extra = f" (or {', '.join(str(a) for a in also)})" if also else ""
        raise UsageError(f"{option} must be {' and '.join(bounds)}{extra}, not {value:g}")
    return value
