"""``amqtool create``: pre-create Artemis journals as a broker does on first start, or write a realistic demo
broker store with a manifest of exactly what it holds.

Plain create (:func:`create_journals`) mirrors ``JournalImpl`` start-up on an empty directory
(``ensureMinFiles`` + ``pushOpenedFile``, through :class:`~amqtool.store.journal_writer.JournalWriter`):

* bindings: ``activemq-bindings-{1,2}.bindings``, 1 MiB each (JournalStorageManager fixes both numbers);
* messages: ``journal-min-files`` (default 2, and never fewer than 2 because one file is pre-opened) files of
  ``journal-file-size`` (default 10 MiB), ``activemq-data-N.amq``;
* every file zero-filled, headed (format version 2, userVersion 0, fileID N) and created as ``.tmp`` then
  renamed. A directory that already holds journal files is refused; nothing in it is touched.

The demo (:func:`create_demo`) lives in :mod:`amqtool.engines.artemis.demo`.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import UsageError
from amqtool.store import atomic, locks
from amqtool.store.brokerxml import parse_byte_size
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES, JournalSpec

KINDS = ("bindings", "messages", "broker")
# Names as `artemis create` writes them into broker.xml (data/large-messages, not the code default
# data/largemessages); `amqtool print` finds both.
BROKER_DIRS = {"bindings": "bindings", "journal": "journal", "paging": "paging", "large-messages": "large-messages"}
_JOURNAL_SUFFIXES = (".amq", ".bindings", ".amq.tmp", ".amq.cmp", ".bindings.tmp", ".bindings.cmp",
                     "journal-rename-control.ctr")


def parse_size(text: str, what: str = "size") -> int:
    """``64MiB``, ``1GiB``, ``10485760`` ... (Artemis' byte-size syntax). UsageError when invalid."""
    try:
        n = parse_byte_size(str(text))
    except UsageError:
        raise UsageError(f"invalid {what} {text!r} (expected e.g. 64MiB, 1GiB, 10485760)") from None
    if n <= 0:
        raise UsageError(f"{what} must be positive")
    return n


@dataclass
class CreatedJournal:
    kind: str
    directory: Path
    file_size: int
    min_files: int
    files: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"kind": self.kind, "directory": str(self.directory), "fileSize": self.file_size,
                "minFiles": self.min_files, "files": self.files}


def journal_entries(directory: Path) -> list[str]:
    """Names in ``directory`` that belong to an Artemis journal (files, leftovers, control file)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        what = "exists and is not a directory" if directory.exists() else "a parent directory is a file"
        raise UsageError(what, path=str(directory)) from None
    return sorted(n for n in names if n.endswith(_JOURNAL_SUFFIXES))


def refuse_existing_journal(directory: Path) -> None:
    """UsageError when ``directory`` already holds journal files; StoreLockedError when a broker holds
    its node-manager lock or its instance's ``lock/cli.lock``."""
    existing = journal_entries(directory)
    if existing:
        raise UsageError(f"refusing to touch an existing journal ({existing[0]}"
                         + (f" and {len(existing) - 1} more" if len(existing) > 1 else "") + ")",
                         path=str(directory))
    # the instance's cli.lock too, found from any directory inside it (a broker may be starting there)
    locks.ensure_not_locked(locks.artemis_lock_files(directory, locks.instance_above([directory])))


def _create_one(directory: Path, spec: JournalSpec, file_size: int, min_files: int) -> CreatedJournal:
    w = JournalWriter.create(directory, spec, file_size=file_size, min_files=min_files, sync="close")
    w.close()
    cj = CreatedJournal(spec.kind, directory, w.file_size, w.min_files)
    cj.files = [{"name": f.name, "fileId": f.file_id, "size": os.path.getsize(f.path)} for f in w.files()]
    return cj


def resolve_messages_settings(file_size: int | None, min_files: int | None) -> tuple[int, int]:
    fs = MESSAGES.default_file_size if file_size is None else int(file_size)
    mf = MESSAGES.min_files if min_files is None else int(min_files)
    if fs < 1024:
        raise UsageError(f"journal file size {fs} is too small (at least 1024 bytes)")
    if fs > 2**31 - 1:
        raise UsageError("journal file size must be below 2 GiB (Artemis keeps it in an int)")
    if mf < 1:
        raise UsageError("--min-files must be at least 1")
    return fs, mf


def create_journals(path: str | os.PathLike, kind: str = "messages", *, file_size: int | None = None,
                    min_files: int | None = None) -> list[CreatedJournal]:
    """Pre-create journals at ``path`` as Artemis does on first start.

    ``kind``: ``messages`` or ``bindings`` (``path`` is the journal directory) or ``broker`` (``path`` is a
    broker instance; ``data/{bindings,journal,paging,large-messages}`` are created, the journals in the
    first two). ``file_size``/``min_files`` apply to the message journal only: the bindings journal is
    always 2 files of 1 MiB.
    """
    if kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
    root = Path(path)
    if kind == "bindings" and (file_size is not None or min_files is not None):
        raise UsageError("the bindings journal always has 2 files of 1 MiB (JournalStorageManager); "
                         "--file-size and --min-files apply to the message journal")
    fs, mf = resolve_messages_settings(file_size, min_files)
    # The checks run under amqtool's writer lock: a create running meanwhile is named, not its half-made files.
    if kind == "bindings":
        with _writing([root]):
            refuse_existing_journal(root)
            return [_create_one(root, BINDINGS, BINDINGS.default_file_size, BINDINGS.min_files)]
    if kind == "messages":
        with _writing([root]):
            refuse_existing_journal(root)
            return [_create_one(root, MESSAGES, fs, mf)]
    data = root / "data"
    bdir, jdir = data / BROKER_DIRS["bindings"], data / BROKER_DIRS["journal"]
    atomic.ensure_free_space(_existing_parent(root), 2 * BINDINGS.default_file_size + max(mf, 2) * fs)
    with _writing([bdir, jdir]):
        refuse_existing_journal(bdir)
        refuse_existing_journal(jdir)
        out = [_create_one(bdir, BINDINGS, BINDINGS.default_file_size, BINDINGS.min_files),
               _create_one(jdir, MESSAGES, fs, mf)]
    for name in ("paging", "large-messages"):
        (data / BROKER_DIRS[name]).mkdir(parents=True, exist_ok=True)
    atomic.fsync_dir(data)
    return out


@contextlib.contextmanager
def _writing(directories: list[Path]):
    """amqtool's writer lock (:class:`~amqtool.store.locks.WriterLock`) on the journal directories being
    created, which are made first for it (a lock needs the directory); when the block fails (another amqtool
    creates the same journal, a write error), the directories it made and left empty are removed again."""
    made: list[Path] = []
    for d in directories:
        if not os.path.isdir(d):
            refuse_existing_journal(Path(d))  # its own clear error for a file in the way
        missing = []
        p = Path(d).absolute()
        while not p.exists():
            missing.append(p)
            p = p.parent
        for m in reversed(missing):
            m.mkdir()
            made.append(m)
    try:
        with locks.WriterLock(directories):
            yield
    except BaseException:
        for m in reversed(made):
            with contextlib.suppress(OSError):
                m.rmdir()  # only when empty: nothing another run wrote is touched
        raise


def _existing_parent(p: Path) -> Path:
    p = p.absolute()
    while not p.exists():
        p = p.parent
    return p
