"""A newest journal file shorter than the length the journal preallocates: cut, not torn by a crash.

ActiveMQ 5.17's ``Journal`` preallocates every data file it writes to (``preallocationScope`` ENTIRE_JOURNAL,
``preallocationStrategy`` SPARSE_FILE by default): ``rotateWriteFile`` calls
``preallocateEntireJournalDataFile`` on the new file before its first batch, which sets its length to
``journalMaxFileLength``, and ``DataFileAppender`` then writes inside it. A crash can leave the newest file
absent or of length 0 (killed between creating and sizing it), or full-length with a torn batch in it, but
never non-empty and shorter than the others. The ack compaction's files (``forwardAllAcks``, through
``reserveDataFile`` and a ``TargetedDataFileAppender``) are not preallocated: they are left out on both sides.

So when every other (non-compaction) file of a directory has one and the same length, that length is the
journal's preallocated one, and a newest file shorter than it was cut: what followed the cut is lost, and
nothing about the store says it was only a torn write.

The default ``SPARSE_FILE`` strategy leaves a mark of its own: ``doPreallocationSparseFile`` writes the end
marker ``-qMa4`` at offset 0 and again into the file's last five bytes (``maxFileLength - 5``), and the
appender's writes stop short of them (it rotates when a write would reach ``maxFileLength``). A newest file
that still ends with that marker was not cut, whatever its length: ``journalMaxFileLength`` may have been
lowered between runs, which leaves older files longer than the newest (tests/data/kahadb: make_fresh.py f11).
One that does not, while every other file does, was cut, whatever their lengths. A child store of an mKahaDB
with one file has no other file of its own: the other child stores' files, preallocated alike, show the
length and the marker instead.
"""
from __future__ import annotations

from amqtool.formats.kahadb import journal as jr

from amqtool.engines.kahadb.forwarded import is_marker
from amqtool.engines.kahadb.scan import mapped


def preallocated_length(d, siblings: tuple = ()) -> int | None:
    """The length the journal of store directory ``d`` preallocates its files to, when its newest non-empty
    file is shorter than it (cut), else None. Needs at least one other non-compaction file, all of one
    length; or, for a directory of one file, ``siblings``: the other child stores of an mKahaDB (one
    ``mKahaDB`` element's adapters, whose journals preallocate alike), every non-compaction file of which ends
    with the sparse preallocation's end marker while this one does not and is shorter than all of them."""
    files = [f for f in d.files if f.size]
    if len(files) == 1 and siblings:
        newest = files[0]
        others = [f for s in siblings for f in s.files if f.size and not _compaction(f)]
        if others and not _compaction(newest) and not _marked(newest) and all(_marked(f) for f in others) \
                and newest.size < min(f.size for f in others):
            return min(f.size for f in others)
        return None
    if len(files) < 2:
        return None
    newest = files[-1]
    if _compaction(newest) or _marked(newest):
        return None
    others = [f for f in files[:-1] if not _compaction(f)]
    if others and all(_marked(f) for f in others) and newest.size < max(f.size for f in others):
        return max(f.size for f in others)
    sizes = {f.size for f in others}
    if len(sizes) != 1:
        return None
    (length,) = sizes
    return length if newest.size < length else None


def _marked(f) -> bool:
    """The file ends with the end marker sparse preallocation writes into its last five bytes."""
    with mapped(f.path) as buf:
        return len(buf) >= len(jr.EOF_RECORD) and bytes(buf[-len(jr.EOF_RECORD):]) == jr.EOF_RECORD


def _compaction(f) -> bool:
    """The file opens with the ack compaction's marker (KahaRewrittenDataFileCommand as its first record)."""
    with mapped(f.path) as buf:
        start = jr.BATCH_CONTROL_RECORD_SIZE + jr.RECORD_HEAD_SPACE
        return len(buf) > start and is_marker(buf[start:start + 1])
