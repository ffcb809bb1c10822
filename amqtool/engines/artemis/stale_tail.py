"""Whether the bytes after the last record of a reused journal file are what is left of a record of its earlier
use: Artemis ignores them, and nothing of this use was lost there.

Artemis reinitialises a freed file by rewriting its header only (``JournalFilesRepository.reinitializeFile``),
and a compaction writes its outputs into pooled files the same way (``AbstractJournalUpdateTask.openFile``),
so the bytes of an earlier use stay behind the new records, which can end in the middle of an old record. The
load reads a record only where a record type is followed by the file's own tag
(``JournalImpl.readJournalFile``), so it skips such a remainder. What is left of the old record ends with its
trailing size word (the check size), which counts back to an offset before ``first`` (the first non-filler
byte after this use's last record): inside this use's records, where the old record began.

Two shapes of such a remainder that the real JournalImpl leaves, and that were taken for a damaged tail
(a WARNING on the pristine store, and a store no broker writes for the fault campaign's oracle, which then
counted every loss on it as proven):

* its first byte happens to read as a record type (an old record's body byte, say ``0x0b``), while the four
  bytes after it are not this file's tag (a SIGKILLed real store, a compactor's output of 64 KiB files);
* it is shorter than a record: 1 to 3 bytes, the low bytes of the old record's size word, the rest under this
  use's last record (a compactor's ``.cmp`` output of a compaction that committed, 128 KiB files).

What this use writes cannot read so. A torn write of this use starts at ``first`` with a record type and the
file's tag; a damaged record of this use whose size word survives counts back to ``first`` at the earliest;
and no record of this use (13 bytes at least, a DELETE) fits between the end of the last valid record and
``end`` when they are less than 13 bytes apart.

A compaction leaves a third kind (:func:`compactor_leftover`): it writes each output file from one buffer that it
reuses for the next output without zeroing it (``AbstractJournalUpdateTask.openFile`` clears only the buffer's
indexes, and ``flush`` writes it whole, to the file's size), so the bytes after an output's last record are the
previous output's at the same offsets, layers of older outputs and record fragments included. Such a remainder
need not end with a size word that counts back (a fragment of a record of the output before the previous one
ends it: a store of 12 KiB files, written and compacted by the real JournalImpl, read WARNING).
"""
from __future__ import annotations

from amqtool.formats.damage import one_byte_apart

MIN_RECORD = 13  # a DELETE: type, tag, id, check size
# a remainder shorter than this may equal the previous output's bytes by chance
MIN_LEFTOVER = 8
_CHUNK = 1 << 20


def _is_type(b: int) -> bool:
    return 10 <= b <= 19


def own_record_start(head: bytes, tag: int, top_tag: int | None = None) -> bool:
    """Whether the bytes after a file's last valid record (``head``) start a record of this use of the file:
    this use's tag after the first byte, whatever that byte holds. An earlier use's bytes there carry that
    use's own, older fileID (fileIDs only grow), so the tag was written in this use: a record torn by a crash,
    or one whose type byte was damaged (``JournalImpl.readJournalFile`` skips a byte that is no record type,
    and with it the whole record). Given ``top_tag`` (the highest fileID of the journal's files), so is a tag one
    damaged byte from this use's, not its lowest, and above it: no use of any file ever had that id (the
    record's tag damaged, which is what made the broker stop reading there)."""
    if len(head) < 5:
        return False
    read = int.from_bytes(head[1:5], "big", signed=True)
    # (a damaged low byte is left out: a journal cut short of its newest files, whose earlier ids a compaction
    # reissued lower, may hold an earlier use's tag just above its highest fileID)
    return read == tag or (top_tag is not None and read > top_tag and one_byte_apart(read, tag)
                           and (read ^ tag) >> 8 != 0)


def stale_fragment(head: bytes, first: int, end: int, *, tag: int | None = None,
                   last_end: int | None = None) -> bool:
    """Whether the tail bytes ``[first, end)`` (``head`` holds them from ``first``) are the end of a record of
    an earlier use of the file (see the module docstring). ``tag``: the file's own tag, when known (a first
    byte that reads as a record type is then an old body byte unless the file's tag follows it); ``last_end``:
    where the file's last valid record ends, when known (a remainder too short to hold a record of this use
    is then an old one's, whatever its size word)."""
    length = end - first
    if length <= 0 or length > len(head):
        return False
    own_start = (tag is not None and own_record_start(head, tag)) or (_is_type(head[0]) and (tag is None or length < 5))
    if own_start:
        return False  # may be a record of this use, torn or damaged
    if last_end is not None and 16 <= last_end <= first and end - last_end < MIN_RECORD:
        return True
    if length < 4:
        # the old record's size word lies partly under this use's last record: nothing to count back with
        return last_end is None and not _is_type(head[0])
    # the old record began before first (under this use's records), after the file header. Its own end may leave
    # the last one to three bytes of a still earlier use's size word after it (that use's record ended there a
    # little further on: real JournalImpl files show "00 1f" and "00 00 1f", the low bytes of a 31-byte
    # reference's size): its size word is looked for before them too
    for k in range(min(3, length - 4) + 1):
        stop = end - k
        size = int.from_bytes(head[length - k - 4:length - k], "big")
        older = int.from_bytes(head[length - k:length], "big") if k else MIN_RECORD
        if MIN_RECORD <= size <= 1 << 27 and first > stop - size >= 16 and MIN_RECORD <= older:
            return True
    return False


def compactor_leftover(opened, index: int, first: int, end: int, by_tag: dict[int, list[int]]) -> int | None:
    """The fileID of the previous output of the compaction that wrote file ``index`` when the file's tail bytes
    ``[first, end)`` are that output's at the same offsets (see the module docstring), else None. Compaction
    outputs take consecutive fileIDs (``AbstractJournalUpdateTask.openFile``: ``nextOrderingID++``), so the
    previous output carries this file's tag less one. ``by_tag``: tag -> indexes of the files carrying it."""
    if end - first < MIN_LEFTOVER:
        return None
    tag = opened.files[index].tag
    for other in by_tag.get(tag - 1, ()):
        if opened.files[other].size < end:
            continue
        pos = first
        while pos < end:
            n = min(_CHUNK, end - pos)
            if opened.pread(index, pos, n) != opened.pread(other, pos, n):
                break
            pos += n
        else:
            return tag - 1
    return None
