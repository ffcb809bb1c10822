"""What the files of a journal show of a compaction that committed, when no live record does.

``verify`` weighs a fileID missing between data files, and a short file named inside the journal's ids, by
whether the journal can have freed files itself; a compaction frees files and gives the freed ones new ids.
A live record with a compactCount above 0 shows a compaction, but only while such a record lives: once every
record the compactor copied has been deleted, nothing live carries a compactCount, while the compactor's
output files stay in the journal (real JournalImpl stores show it: a store killed during its second compaction,
whose first compaction's records had all died since).

The compactor's outputs keep another mark: ``AbstractJournalUpdateTask.openFile`` takes a file from the
repository (a new file named after the id it was created with, or a pooled free file keeping its old name),
renames it ``.cmp`` and writes a header with ``nextOrderingID++``, which starts at the lowest fileID of the
files compacted; the commit renames it back to its ``.amq`` name. A file of records whose header fileID is
below the number in its name is such an output: a file the broker creates is named after its fileID
(``JournalFilesRepository.createFileName``), and a freed file it reinitialises gets a new, higher fileID
under its old name. (A header whose fileID was damaged tags none of the file's records: such a file holds
no data and shows nothing here.)
"""
from __future__ import annotations

from amqtool.store.journal_writer import name_number


def compactor_outputs(result) -> list:
    """The data files (holding records of their own) of the load ``result`` that a compaction wrote: header
    fileID below the number in the file's name."""
    out = []
    for scan in result.scans:
        n = name_number(scan.file.name, result.opened.journal.spec.prefix)
        if scan.has_data and n is not None and scan.file.file_id < n:
            out.append(scan.file)
    return out
