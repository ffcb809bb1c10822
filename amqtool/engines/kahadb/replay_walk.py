"""The broker's replay walk of the journal (ActiveMQ 5.17 ``MessageDatabase.recover``), and whether the replay
of the whole journal gets through it.

When the producer-audit or ack-file-map record page 0 names does not load (damage.checkpoint_failures), the
broker replays the whole journal on top of its index: ``recover`` walks ``Journal.getNextLocation`` from
``getNextLocation(null)`` and ``load``s every user record it returns. An IOException there is rethrown
("Failed to recover data at position", ``ignoreMissingJournalfiles`` being off by default): the broker does
not start.

The walk (``Journal.getNextLocation``) reads each record's 5-byte header (``readLocationDetails``: size,
type) where the previous one ended, whatever the batches say: a batch control record (type 2) or any type
but 1 is stepped over by its size, the end-of-file marker ``-qMa4`` or an all-zero header moves on to the
next file, a user record (type 1) is returned and loaded: ``DataFileAccessor.readRecord`` reads size - 5
bytes after the header, ``load`` takes ``KahaEntryType.valueOf`` of the first and ``mergeFramed`` the rest
(the framed length, then that many bytes; what follows is ignored). A header that cannot be read (past the
file's end) throws out of the walk too. Only the newest file was scanned at start (``Journal.recoveryCheck``
of the tail): its length is its logical end, and its corrupted blocks are stepped over whole.

The same walk replays the records after the index checkpoint at every start (:func:`walk` from
``lastUpdate``): ``getRecoveryPosition`` returns ``getNextInitializedLocation(lastUpdate)``, the user record
after the first one the walk finds at ``lastUpdate`` (page 0 stores no size: ``getNextLocation`` of it
returns the record there, and the next call steps past it). So a batch of an older file after the
checkpoint is replayed record by record whatever its checksum says: a damaged message id there becomes a live
message of that id, not a skipped batch.
"""
from __future__ import annotations

import struct
from typing import Callable

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command
from amqtool.formats.kahadb.protobuf import read_varint

_EOF_INT = struct.unpack(">i", jr.EOF_RECORD[:4])[0]
_MAX_STEPS = 10_000_000  # a walk that loops (a header of a type but 1 and size 0 does) never ends


class WalkStop(Exception):
    """The walk throws (``file id:offset: why``): the broker does not start."""


def walk(ids: list[int], read: Callable[[int], object], start: tuple[int, int] | None = None):
    """Yield ``(file id, offset, header size)`` of each user record ``Journal.getNextLocation`` returns, in
    order: from the journal's start, or after the first one at or past ``start`` (the checkpoint's
    ``lastUpdate``, as ``getNextInitializedLocation``). Raises WalkStop where the walk itself throws.

    An ack compaction marker the walk returns (a ``KahaRewrittenDataFileCommand`` with ``skipIfSourceExists``
    whose source file is there) moves it to ``journalMaxFileLength`` plus the marker's size: ``process`` of
    it sets the location's offset there ("Move offset so that next location read jumps to next file"). That is
    the next file when the marker's file is no longer than that; a compaction file a restarted broker wrote on
    past it is read on from there (:func:`_max_length`: the length every other file is preallocated to).

    ``ids``: the journal's file ids in order; ``read(id)``: that file's bytes (a buffer)."""
    if not ids:
        return
    tail = ids[-1]
    lengths = {fid: len(read(fid)) for fid in ids}
    max_length = _max_length(ids, read, lengths)
    corrupted: list = []
    for ev in jr.scan_file(read(tail)):
        if isinstance(ev, jr.CorruptRange):
            corrupted.append((ev.first, ev.last))
        elif isinstance(ev, jr.End):
            lengths[tail] = ev.offset
    i, off = (0, 0) if start is None else (ids.index(start[0]), start[1])
    skip = start is not None
    for _ in range(_MAX_STEPS):
        fid = ids[i]
        if off >= lengths[fid]:
            i += 1
            if i == len(ids):
                return
            fid, off = ids[i], 0
        data = read(fid)
        if off < 0 or off + 5 > len(data):
            raise WalkStop(f"{fid}:{off}: no record header there (past the file's end)")
        size, rtype = struct.unpack_from(">ib", data, off)
        block = next(((a, b) for a, b in corrupted if fid == tail and a <= off <= b), None)
        if block is not None:
            off = block[1] + 1
            continue
        if (size == _EOF_INT and rtype == jr.EOF_RECORD[4]) or (rtype == 0 and size == 0):
            off = lengths[fid]
            continue
        if rtype == jr.USER_RECORD_TYPE:
            if skip:
                skip = False
            else:
                yield fid, off, size
                if size > 0 and _jumps(data, off, size, ids):
                    # process(KahaRewrittenDataFileCommand): location.setOffset(journalMaxFileLength), and the
                    # next getNextLocation reads from there plus the record's size
                    off = (max_length if max_length is not None else lengths[fid]) + size
                    continue
        if size <= 0:
            raise WalkStop(f"{fid}:{off}: a header of size {size} (the walk does not move on)")
        off += size
    raise WalkStop("the walk does not end")


def _jumps(data, off: int, size: int, ids: list[int]) -> bool:
    """The user record at ``off`` is an ack compaction marker whose ``process`` moves the walk: it skips the
    rest of its file while its source file is still there (MessageDatabase.process(KahaRewrittenDataFileCommand))."""
    if size <= 5 or off + 6 > len(data) or data[off + 5] != EntryType.REWRITTEN_DATA_FILE:
        return False
    try:
        cmd = load(data, off, size)
    except FormatError:
        return False
    return bool(cmd.skip_if_source_exists) and cmd.source_data_file_id in ids


def _max_length(ids: list[int], read: Callable[[int], object], lengths: dict) -> int | None:
    """``journalMaxFileLength`` as the files show it: the length most of the files that are no ack compaction
    file share (the journal preallocates each to it; compaction files are not preallocated, and a last batch
    may run a file a few bytes past it), when two or more do and no other length as many; else None (the
    marker's jump then goes to the next file, as it does whenever its file is no longer than that)."""
    from collections import Counter

    common = Counter(lengths[fid] for fid in ids if lengths[fid] and not _compaction_file(read(fid))).most_common(2)
    if not common or common[0][1] < 2 or len(common) > 1 and common[1][1] == common[0][1]:
        return None
    return common[0][0]


def _compaction_file(data) -> bool:
    """The file opens with an ack compaction marker (its first record, after the batch's control record)."""
    at = jr.BATCH_CONTROL_RECORD_SIZE + jr.RECORD_HEAD_SPACE
    return len(data) > at and data[at] == EntryType.REWRITTEN_DATA_FILE


def full_replay_failure(ids: list[int], read: Callable[[int], object]) -> str:
    """Where (``file id:offset: why``) the broker's replay of the whole journal stops (it does not start), or
    ''.

    ``ids``: the journal's file ids in order; ``read(id)``: that file's bytes (a buffer)."""
    return recovery_failure(ids, read, None)


def recovery_failure(ids: list[int], read: Callable[[int], object], last_update: tuple[int, int] | None) -> str:
    """Where (``file id:offset: why``) the broker's replay at start stops (it does not start), or '':
    ``MessageDatabase.recover`` from the record after ``lastUpdate`` (``getRecoveryPosition``), or from the
    journal's start when the index has no checkpoint yet. A ``lastUpdate`` in a file the journal does not
    hold is another finding's (a missing file): ''. (Not modelled, as in the fault harness: a start at an
    earlier ``firstInProgressTransactionLocation``.)"""
    return replay(ids, read, last_update)[1]


def replay(ids: list[int], read: Callable[[int], object], last_update: tuple[int, int] | None) -> tuple[list, str]:
    """``([(file id, offset, command) ...], why it stops or '')``: the commands the broker's replay at start
    loads, in order, up to where it stops (see :func:`recovery_failure`)."""
    out: list = []
    if last_update is not None and last_update[0] not in ids:
        return out, ""
    try:
        for fid, off, size in walk(ids, read, last_update):
            try:
                out.append((fid, off, load(read(fid), off, size)))
            except FormatError as err:
                return out, f"{fid}:{off}: the record does not load ({err.message})"
    except WalkStop as stop:
        return out, str(stop)
    return out, ""


def load(data, off: int, size: int):
    """The command ``MessageDatabase.load`` makes of the user record at ``off`` (header size ``size``), or
    FormatError saying why it throws: ``KahaEntryType.valueOf`` of the first byte, ``mergeFramed`` of the rest
    (the framed length, then that many bytes; what follows is ignored)."""
    if size < 5 or off + size > len(data):
        raise FormatError(f"record size {size}")
    payload = memoryview(data)[off + 5:off + size]
    if len(payload) < 2:
        raise FormatError(f"a command of {len(payload)} bytes")
    try:
        EntryType(payload[0])
    except ValueError:
        raise FormatError(f"unknown KahaEntryType {payload[0]}") from None
    length, pos = read_varint(payload, 1, len(payload))
    if pos + length > len(payload):
        raise FormatError(f"framed length {length} past the record's {len(payload) - pos} bytes")
    return decode_command(bytes(payload[:pos + length]))


def end_marker_only(data, first: int, last: int) -> bool:
    """``[first, last]`` of a journal file that is not the newest (``data``: its bytes) held nothing but the
    file's end: the walk (``getNextLocation``) leaves the file at its header, and the rest is zeros and
    end-of-file markers, so nothing the broker replays was there.

    Only the newest file is ``recoveryCheck``ed at start, so the length the walk compares with is an older
    file's physical one; a header of another type than a user record's is stepped over by its size. One whose
    size reaches past the file's end (a damaged ``-qMa4``, as written after every batch) moves the walk on to
    the next file, as the marker itself does. The written bytes there were a batch only if its control record
    ("WRITE BATCH", records after it) is still partly there: the rest being zeros and markers rules that out,
    but for an all-zero header (a zeroed batch reads the same as the preallocated fill), which is not taken."""
    if first < 0 or first + 5 > len(data) or last < first:
        return False
    head = bytes(data[first:first + 5])
    if head == b"\0" * 5:
        return False
    size, rtype = struct.unpack(">ib", head)
    if head != jr.EOF_RECORD and (rtype == jr.USER_RECORD_TYPE or size <= 0 or first + size < len(data)):
        return False
    rest = bytes(data[first + 5:last + 1]).replace(jr.EOF_RECORD, b"")
    return not rest.strip(b"\0")
