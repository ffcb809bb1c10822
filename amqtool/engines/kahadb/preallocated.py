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
One that does not, while every other file does, and is shorter than the newest of them whose last five
bytes are still the preallocation's marker (not the appender's, after a batch that ran over the preallocated
end and made its file longer), was cut. A child store of an mKahaDB
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
    if others and all(_marked(f) for f in others):
        # (a file whose last batch ran over the preallocated end is longer than it: the length is that of the
        # newest file whose marker is still the preallocation's)
        full = [f for f in others if not _overran(d, f)]
        length = full[-1].size if full else min(f.size for f in others)
        return length if newest.size < length else None
    sizes = {f.size for f in others}
    if len(sizes) != 1:
        return None
    (length,) = sizes
    return length if newest.size < length else None


def _marked(f) -> bool:
    """The file ends with the end marker sparse preallocation writes into its last five bytes."""
    with mapped(f.path) as buf:
        return len(buf) >= len(jr.EOF_RECORD) and bytes(buf[-len(jr.EOF_RECORD):]) == jr.EOF_RECORD


def marker_gone(d, siblings: tuple = ()) -> bool:
    """The newest non-empty file of ``d`` no longer ends with the end marker while the journal's other files
    (or, for a directory of one file, the other child stores' of an mKahaDB) all do; with no file beside it at
    all, by the defaults (sparse preallocation of the entire journal). Every file a 5.17 broker writes ends with
    one: the preallocation's, or the appender's after a batch that ran over it (:func:`_overran`); a crash
    tears a batch inside the file and leaves those last bytes alone, so the file's end was cut or zeroed
    after the fact. (An ack compaction file is not preallocated: left out on both sides.)"""
    files = [f for f in d.files if f.size]
    if not files or _compaction(files[-1]) or _marked(files[-1]):
        return False
    others = [f for f in files[:-1] if not _compaction(f)]
    if not others:
        others = [f for s in siblings for f in s.files if f.size and not _compaction(f)]
    return all(_marked(f) for f in others)


def _overran(d, f) -> bool:
    """The last batch of ``f`` ran up to its last five bytes: the end marker there is the one the appender
    writes after every batch, over the preallocation's, and the file may be longer than the preallocated length
    (a real 5.17.2 broker with 32 KiB files left db-5.log 32,782 bytes long beside 32,768-byte ones:
    tests/data/kahadb/f12-subs-kill)."""
    scan = d.scans.get(f.id)
    end = scan.end if scan is not None else None
    return end is not None and end.how == "eof-marker" and end.offset + len(jr.EOF_RECORD) >= f.size


def _compaction(f) -> bool:
    """The file opens with the ack compaction's marker (KahaRewrittenDataFileCommand as its first record)."""
    with mapped(f.path) as buf:
        start = jr.BATCH_CONTROL_RECORD_SIZE + jr.RECORD_HEAD_SPACE
        return len(buf) > start and is_marker(buf[start:start + 1])
