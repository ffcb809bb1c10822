"""The current journal file cut short at a record boundary (``verify``'s ``current-file-cut``).

Artemis fills every journal file to the journal's file size before it is used: ``JournalFilesRepository``'s
``createFile0`` creates ``<name>.tmp``, ``fill(fileSize)``, writes the header, and only then renames it to its
name (a reused file keeps its size: ``reinitializeFile`` rewrites the header only). So no journal file of a
broker is shorter than the others, and a crash does not shorten one: it tears the record being written, which
the scanner stops at (``torn-tail``). A newest file shorter than the journal's others that ends exactly where
its last record ends (or right after its header) was cut at a record boundary: the records written after the
cut are lost, though no byte of a torn record shows it. What they held is gone with them (acknowledgements cut
off bring their messages back), so this is judged as a torn tail of the current file: a warning.

Only the files loaded after the last file that still holds records beyond the cut are judged: a cut of an older
file is judged by what its lost records held (``damaged-tail``). A journal whose files have several sizes (its
journal-file-size changed between uses) gives no common size and is not judged.
"""
from __future__ import annotations

from collections import Counter

from amqtool.errors import Finding, Severity

_HEADER = 16


def journal_file_size(result) -> int | None:
    """The size every other file of the journal loaded as ``result`` shares, or None (fewer than two files, or
    no size most of them share)."""
    sizes = Counter(f.size for f in result.files)
    if len(result.files) < 2:
        return None
    size, n = sizes.most_common(1)[0]
    return size if n * 2 > len(result.files) else None


def cut_current_file(result) -> Finding | None:
    """WARNING ``current-file-cut`` when the newest data file of ``result`` (or a file after it, emptied of
    its records) is shorter than the journal's file size and ends at its last record's end, else None."""
    size = journal_file_size(result)
    if size is None:
        return None
    data = [s.index for s in result.scans if s.has_data]
    first = data[-1] if data else 0
    for scan in result.scans[first:]:
        jf = scan.file
        if jf.size >= size:
            continue
        end = scan.last_data_pos if scan.records else _HEADER
        if jf.size != end:
            continue  # a cut inside a record is a torn tail; one inside the fill after the last record loses nothing
        if scan.records:
            what = ("the newest journal file", "its last record ends there: it was cut at a record boundary, and the "
                    "records written after the cut are lost (acknowledgements among them bring their messages back)")
        else:
            what = ("a journal file after the newest one holding records",
                    "it holds its header and no record: either the newest file cut right after its header (the "
                    "records it held are lost) or a free file cut (nothing is lost), which its bytes cannot tell")
        return Finding(
            Severity.WARNING, "current-file-cut",
            f"{what[0]} is {jf.size} bytes while the journal's files are {size} (Artemis fills every file to its "
            f"size before use, then renames it into place), and {what[1]}", str(jf.path), jf.size,
            {"size": jf.size, "journalFileSize": size})
    return None
