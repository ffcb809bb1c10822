"""What an interrupted compaction's ``.cmp`` outputs show the data files lost.

``JournalImpl.compact`` copies the live records of the data files it compacts into new files named ``.cmp``
(``JournalCompactor``, given the ids of the live map when it starts: their adds and updates, and the
transactions still pending), and only once they are complete writes the control file and renames them. Killed before that, the
``.cmp`` files stay, and the broker deletes them at its next start (``cleanupTmpFiles``) and loads the old
files: they change nothing. But they are a copy of what was live when the compaction started: a record they
carry that the data files neither hold nor delete (a delete goes to the current file, never compacted in the
same pass) was in a data file that is damaged or gone since.
"""
from __future__ import annotations

import os
from pathlib import Path

from amqtool.engines.artemis.load import LoadResult, load_journal
from amqtool.formats.artemis.records import HEADER_SIZE, decode_header
from amqtool.errors import Finding, FormatError, Severity
from amqtool.store.journal_files import JournalFile, OpenedJournal


def cmp_journal(opened: OpenedJournal) -> OpenedJournal | None:
    """The leftover ``.cmp`` files of ``opened`` (those Artemis deletes at start) as a journal of their own,
    in fileID order; None when there are none (or none readable)."""
    files = []
    for p in opened.pending:
        if p.code != "leftover-cmp":
            continue
        path = Path(p.path)
        try:
            size = os.stat(path).st_size
            with open(path, "rb") as fh:
                header = decode_header(fh.read(HEADER_SIZE), path=str(path))
        except (OSError, FormatError):
            continue
        if header.file_id < 0 or size < HEADER_SIZE:
            continue
        files.append(JournalFile(path=path, name=path.name, size=size, header=header))
    if not files:
        return None
    files.sort(key=lambda f: (f.file_id, f.name))
    return OpenedJournal(opened.journal, files)


def copied_not_held(result: LoadResult, deleted) -> list[int]:
    """Ids of the adds a leftover compaction copied that the data files of ``result`` neither hold live nor
    delete (``deleted()``: every id a delete record of theirs names, asked only when some add is not held), in
    the copy's order. The copies are no checked records: one whose id was damaged in the ``.cmp`` file (which
    changes nothing) is known by its body, that of an add the data files hold, or, alone, by an id one bit from
    a deleted one."""
    copies = cmp_journal(result.opened)
    if copies is None:
        return []
    held = {r.id for r in result.live}
    with copies:
        copied = load_journal(copies)
        lost = [r for r in copied.live if not r.is_update and r.id not in held]
        if not lost:
            return []
        deleted = deleted()
        lost = [r for r in lost if r.id not in deleted]
        bodies = {(r.user_record_type, result.body_sha256(r)) for r in result.live if not r.is_update}
        lost = [r for r in lost if (r.user_record_type, copied.body_sha256(r)) not in bodies]
    if len(lost) == 1 and any(lost[0].id ^ (1 << k) in deleted for k in range(64)):
        return []
    return [r.id for r in lost]


def lost_copies_finding(result: LoadResult) -> Finding | None:
    """CRITICAL ``compaction-copy-lost`` when a leftover compaction copied adds the data files lost."""
    if not any(p.code == "leftover-cmp" for p in result.opened.pending):
        return None
    from amqtool.engines.artemis.evidence import deleted_ids

    lost = copied_not_held(result, lambda: deleted_ids(result.opened))
    if not lost:
        return None
    shown = ", ".join(map(str, lost[:5])) + (f" ... ({len(lost)} in all)" if len(lost) > 5 else "")
    return Finding(
        Severity.CRITICAL, "compaction-copy-lost",
        f"an interrupted compaction's .cmp files copied record(s) {shown} when they were live, and the data "
        f"files neither hold nor delete them: a data file lost them (the broker deletes the .cmp files at start "
        f"and loads the data files)", str(result.opened.journal.directory), None, {"ids": lost[:100]})
