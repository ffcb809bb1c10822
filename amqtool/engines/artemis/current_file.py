"""Which file of a journal was the broker's current one: where a crash mid-write leaves a torn tail.

``verify`` judges bytes after the last valid record of a file by whether that file is the one the broker was
writing (a torn tail, what a crash leaves: a warning) or one it had moved on from (a damaged tail: what it
lost there is weighed by the evidence, and a cut of such a file is loss). The file being written is the newest
file holding records -- unless the broker had just moved to a new file and the record it was writing there is
the one torn: ``JournalImpl.moveNextFile`` opens the next file only for a record that does not fit in the
current one, so that record is the new file's first, at offset 16, and nothing after it was written. Such a file
holds no valid record, so it is not a data file to the load, yet it is the current file: the broker's own load
takes a file without records for a free one (``JournalImpl.load`` hands it to ``addFreeFile``) and drops the
partial record, as it drops a torn record anywhere else.

It is told apart from a free file (zero-filled, or reused: ``JournalFilesRepository.reinitializeFile`` rewrites
the header only, so an earlier use's records carry an older fileID as their tag) by its first record's head:
a record type and this file's own tag (as far as the file still holds it: a cut may end inside the head), at
offset 16, in a file loaded after every data file.
"""
from __future__ import annotations

from amqtool.errors import AmqtoolError

_RECORD_TYPES = range(10, 20)  # EVENT .. ROLLBACK (JournalImpl's record types)
_HEADER = 16


def current_file(result) -> int:
    """Index of the current file of the journal loaded as ``result``: the newest data file, or a later file
    whose first record is this use's and unreadable (the record the broker was writing when it stopped);
    -1 when the journal holds neither."""
    data = [s.index for s in result.scans if s.has_data]
    newest = data[-1] if data else -1
    for index in range(len(result.files) - 1, newest, -1):
        if _torn_first_record(result, index):
            return index
    return newest


def _torn_first_record(result, index: int) -> bool:
    jf = result.files[index]
    try:
        head = result.opened.pread(index, _HEADER, 5)
    except (AmqtoolError, OSError):
        return False
    if len(head) < 2 or head[0] not in _RECORD_TYPES:
        return False
    tag = (jf.tag & 0xFFFFFFFF).to_bytes(4, "big")
    return head[1:5] == tag[:len(head) - 1]
