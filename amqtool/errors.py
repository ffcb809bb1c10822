"""The amqtool error tree, verdicts and exit codes: the one place they are defined.

Exit codes follow the monitoring-plugin convention (DESIGN.md, "The command line"):

* ``0`` OK
* ``1`` WARNING
* ``2`` CRITICAL: corruption, data at risk, a limit breached
* ``3`` UNKNOWN: could not check (bad arguments, unreadable or unknown input, missing capability,
  broker running)

Every error raised on purpose by the library is an :class:`AmqtoolError`; its ``exit_code`` says how the
command line ends. Anything else that escapes is a bug.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Verdict(enum.IntEnum):
    """A judgement and its exit code. Ordered, so ``max()`` of findings gives the overall verdict."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3

    @property
    def exit_code(self) -> int:
        return int(self)


class Severity(str, enum.Enum):
    """Severity of one finding. ``INFO`` is reported but never changes the verdict."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
    UNKNOWN = "unknown"

    @property
    def verdict(self) -> Verdict:
        return {
            Severity.INFO: Verdict.OK,
            Severity.WARNING: Verdict.WARNING,
            Severity.CRITICAL: Verdict.CRITICAL,
            Severity.UNKNOWN: Verdict.UNKNOWN,
        }[self]


@dataclass(frozen=True)
class Finding:
    """One observation of a judging command (verify, check, compact --dry-run).

    ``code`` is a stable, documented kebab-case identifier (see man/); ``message`` is one line for people.
    ``offset`` is a byte position in ``path`` where one applies.
    """

    severity: Severity
    code: str
    message: str
    path: str | None = None
    offset: int | None = None
    details: dict = field(default_factory=dict, compare=False)

    def to_json(self) -> dict:
        doc = {
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "offset": self.offset,
        }
        if self.details:
            doc["details"] = self.details
        return doc


def overall_verdict(findings) -> Verdict:
    """The worst verdict among ``findings`` (OK when there are none)."""
    return max((f.severity.verdict for f in findings), default=Verdict.OK)


def _noun(path: str) -> str:
    """How to name ``path`` in a message: a directory, a file, or (gone, a dangling or looping link) a path."""
    import os

    try:
        return "directory" if os.path.isdir(path) else "file" if os.path.exists(path) else "path"
    except (OSError, ValueError):
        return "path"


class AmqtoolError(Exception):
    """Base of every error amqtool raises on purpose. The message is one line, PostgreSQL style:
    what failed, which file, at what offset, expected vs found."""

    exit_code: int = Verdict.UNKNOWN.exit_code

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            # (formats never open files; this only looks at what the path names, for the reader's sake)
            noun = "file" if self.offset is not None else _noun(self.path)
            where = f'{noun} "{self.path}"'
            if self.offset is not None:
                where += f" at offset {self.offset}"
            where += ": "
        return where + self.message


class UsageError(AmqtoolError):
    """Bad arguments or options (exit 3, not Click's 2)."""


class FormatError(AmqtoolError):
    """Bytes that do not follow the format: the one error a codec raises for bad input."""


class UnknownStoreError(AmqtoolError):
    """A path that holds no store amqtool recognises (or cannot be read)."""


class StoreLockedError(AmqtoolError):
    """A writing command found a broker holding the store (``server.lock``, KahaDB ``lock``)."""


class StoreSwitchedError(AmqtoolError):
    """A store's files changed while they were read (an amqtool writer switched them over): what was read is
    not one consistent state."""


class CapabilityError(AmqtoolError):
    """A needed capability is missing on this machine (the C extension, O_DIRECT, a JVM, ...)."""


class DataAtRiskError(AmqtoolError):
    """A writing command stopped because going on would put data at risk (exit 2)."""

    exit_code = Verdict.CRITICAL.exit_code
