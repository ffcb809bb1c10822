"""The settings, names and figures of a compaction: Artemis' thresholds (``JournalImpl.needsCompact``),
the broker.xml settings it follows, and the report a run fills in (the command's JSON)."""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.errors import UsageError
from amqtool.formats.artemis.control import CONTROL_FILE_NAME
from amqtool.formats.artemis.records import (
    HEADER_SIZE,
)
from amqtool.store.journal_files import OpenedJournal
from amqtool.store.layout import MESSAGES, JournalDir

COMPACT_SPLIT_LINE = 2  # JournalImpl.COMPACT_SPLIT_LINE
MAX_COMPACT_COUNT = 127  # the byte saturates (JournalInternalRecord.setCompactCount)
UPDATE_FACTOR = 10  # JournalImpl.UPDATE_FACTOR
REPLACEABLE_MESSAGE_TYPES = (34, 36)  # UPDATE_DELIVERY_COUNT, SET_SCHEDULED_DELIVERY_TIME
DEFAULT_MAX_ATTIC_FILES = 10  # journal-max-attic-files
INVALID_PREPARE_COUNT = -1  # a numberOfRecords no counter can equal: the transaction stays failed
CONTROL_TMP_NAME = CONTROL_FILE_NAME + ".amqtool-tmp"


@dataclass
class CompactSettings:
    """The journal settings compaction follows (broker.xml names)."""

    file_size: int
    min_files: int = 2  # journal-min-files (bindings: 2)
    pool_files: int = -1  # journal-pool-files
    compact_min_files: int = 10  # journal-compact-min-files
    compact_percentage: int = 30  # journal-compact-percentage
    max_attic_files: int = DEFAULT_MAX_ATTIC_FILES
    replaceable_types: tuple[int, ...] = ()


@dataclass
class OutputFile:
    name: str  # final name (without .cmp)
    file_id: int  # header fileID
    records: int = 0
    used: int = HEADER_SIZE  # bytes up to the end of the last record


@dataclass
class OldFileFate:
    name: str
    file_id: int
    size: int
    had_data: bool
    fate: str = ""  # reinitialised | deleted | attic
    new_file_id: int | None = None


@dataclass
class JournalCompaction:
    """What compaction of one journal found, planned and did (the JSON figures)."""

    kind: str
    directory: str
    settings: CompactSettings
    files_before: int = 0
    bytes_before: int = 0
    data_files: int = 0
    live_records: int = 0
    live_bytes: int = 0
    prepared: int = 0
    failed: int = 0
    max_id: int = -1
    outputs: list[OutputFile] = field(default_factory=list)
    old_files: list[OldFileFate] = field(default_factory=list)
    files_after: int = 0
    bytes_after: int = 0
    needed: bool = False
    reasons: list[str] = field(default_factory=list)
    action: str = "planned"  # planned | compacted | copied | skipped | nothing-to-do
    pending: list[dict] = field(default_factory=list)  # interrupted-compaction leftovers found first
    recovered: list[str] = field(default_factory=list)  # what finishing an interrupted compaction did
    warnings: list[str] = field(default_factory=list)
    max_id_marker: bool = False
    carried_over: object | None = None  # -o of a whole store: store_copy.CarriedOver (pages, large messages)

    @property
    def live_ratio(self) -> float:
        capacity = self.data_files * self.settings.file_size
        return (self.live_bytes / capacity) if capacity else 1.0

    @property
    def reclaimed_bytes(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    def to_json(self) -> dict:
        s = self.settings
        return {
            "journal": self.kind,
            "directory": self.directory,
            "action": self.action,
            "needed": self.needed,
            "reasons": self.reasons,
            "settings": {
                "fileSize": s.file_size, "minFiles": s.min_files, "poolFiles": s.pool_files,
                "compactMinFiles": s.compact_min_files, "compactPercentage": s.compact_percentage,
            },
            "before": {"files": self.files_before, "bytes": self.bytes_before, "dataFiles": self.data_files},
            "after": {"files": self.files_after, "bytes": self.bytes_after, "dataFiles": len(self.outputs)},
            "liveRecords": self.live_records,
            "liveBytes": self.live_bytes,
            "liveRatio": round(self.live_ratio, 6),
            "reclaimedBytes": self.reclaimed_bytes,
            "preparedTransactions": self.prepared,
            "failedTransactions": self.failed,
            "maxID": self.max_id,
            "maxIdMarker": self.max_id_marker,
            "outputFiles": [{"name": o.name, "fileID": o.file_id, "records": o.records, "usedBytes": o.used}
                            for o in self.outputs],
            "oldFiles": [{"name": f.name, "fileID": f.file_id, "size": f.size, "hadData": f.had_data,
                          "fate": f.fate, "newFileID": f.new_file_id} for f in self.old_files],
            "pending": self.pending,
            "recovered": self.recovered,
            "warnings": self.warnings,
            "carriedOver": self.carried_over.to_json() if self.carried_over is not None else None,
        }


# --- naming ---------------------------------------------------------------------------------------------

def name_number(prefix: str, name: str) -> int:
    """``JournalFilesRepository.getFileNameID``: the number between ``<prefix>-`` and the first ``.``, else
    between the last ``-`` and the first ``.``; -1 when neither parses."""
    base = name.split(".", 1)[0]
    for text in (base[len(prefix) + 1:] if base.startswith(prefix + "-") else None, base.rsplit("-", 1)[-1]):
        if text is not None and text.isdigit():
            return int(text)
    return -1


def infer_file_size(opened: OpenedJournal, default: int) -> int:
    """The journal's fileSize when no configuration says: the most common size of its files (ties: the
    larger), else ``default``."""
    sizes: dict[int, int] = {}
    for f in opened.files:
        sizes[f.size] = sizes.get(f.size, 0) + 1
    if not sizes:
        return default
    return max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]


def needs_compact(data_files: int, file_size: int, live_bytes: int, adds: int, replaceable_updates: int,
                  settings: CompactSettings) -> list[str]:
    """``JournalImpl.needsCompact`` (§4.1): the reasons compaction is due, empty when it is not.

    Disabled when compact-min-files is 0. Both rules need more data files than compact-min-files; the
    update factor uses integer division as Java's long division does.
    """
    reasons: list[str] = []
    if settings.compact_min_files == 0 or data_files <= settings.compact_min_files:
        return reasons
    if adds > 0 and replaceable_updates > 0 and replaceable_updates // adds > UPDATE_FACTOR:
        reasons.append(f"replaceable updates / adds = {replaceable_updates // adds} > {UPDATE_FACTOR}")
    margin = int(data_files * file_size * (settings.compact_percentage / 100.0))
    if live_bytes < margin:
        reasons.append(f"live bytes {live_bytes} < {settings.compact_percentage}% of {data_files} data files "
                       f"x {file_size} B ({margin})")
    return reasons


def settings_for(journal: JournalDir, broker=None, *, file_size: int | None = None, min_files: int | None = None,
                 pool_files: int | None = None, compact_min_files: int | None = None,
                 compact_percentage: int | None = None, opened_size_hint: int | None = None) -> CompactSettings:
    """The settings for one journal: flags over broker.xml over Artemis' defaults. The bindings journal
    always has 1 MiB files and 2 minimum files (JournalStorageManager); the message journal's file size
    comes from journal-file-size, else from the files themselves."""
    is_messages = journal.spec is MESSAGES
    s = CompactSettings(file_size=0, replaceable_types=REPLACEABLE_MESSAGE_TYPES if is_messages else ())
    if broker is not None:
        s.pool_files = broker.journal_pool_files
        s.compact_min_files = broker.journal_compact_min_files
        s.compact_percentage = broker.journal_compact_percentage
        if is_messages:
            s.min_files = broker.journal_min_files
            s.file_size = broker.journal_file_size
        s.max_attic_files = getattr(broker, "journal_max_attic_files", DEFAULT_MAX_ATTIC_FILES) or DEFAULT_MAX_ATTIC_FILES
    if not is_messages:
        s.file_size = journal.spec.default_file_size
        s.min_files = 2
    if file_size is not None:
        s.file_size = file_size
    if min_files is not None and is_messages:
        s.min_files = min_files
    if pool_files is not None:
        s.pool_files = pool_files
    if compact_min_files is not None:
        s.compact_min_files = compact_min_files
    if compact_percentage is not None:
        s.compact_percentage = compact_percentage
    if s.compact_min_files < 0 or not (0 <= s.compact_percentage <= 100):
        raise UsageError("journal-compact-min-files must be >= 0 and journal-compact-percentage 0..100")
    if s.file_size == 0 and opened_size_hint:
        s.file_size = opened_size_hint
    return s
