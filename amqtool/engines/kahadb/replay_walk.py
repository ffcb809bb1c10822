"""Does the broker's replay of the whole journal get through it? (ActiveMQ 5.17 ``MessageDatabase.recover``)

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


def full_replay_failure(ids: list[int], read: Callable[[int], object]) -> str:
    """Where (``file id:offset: why``) the broker's replay of the whole journal stops (it does not start), or
    ''.

    ``ids``: the journal's file ids in order; ``read(id)``: that file's bytes (a buffer)."""
    if not ids:
        return ""
    tail = ids[-1]
    lengths = {fid: len(read(fid)) for fid in ids}
    corrupted: list = []
    for ev in jr.scan_file(read(tail)):
        if isinstance(ev, jr.CorruptRange):
            corrupted.append((ev.first, ev.last))
        elif isinstance(ev, jr.End):
            lengths[tail] = ev.offset
    i, off = 0, 0
    for _ in range(_MAX_STEPS):
        fid = ids[i]
        if off >= lengths[fid]:
            i += 1
            if i == len(ids):
                return ""
            fid, off = ids[i], 0
        data = read(fid)
        if off < 0 or off + 5 > len(data):
            return f"{fid}:{off}: no record header there (past the file's end)"
        size, rtype = struct.unpack_from(">ib", data, off)
        block = next(((a, b) for a, b in corrupted if fid == tail and a <= off <= b), None)
        if block is not None:
            off = block[1] + 1
            continue
        if (size == _EOF_INT and rtype == jr.EOF_RECORD[4]) or (rtype == 0 and size == 0):
            off = lengths[fid]
            continue
        if rtype == jr.USER_RECORD_TYPE:
            why = _load_failure(data, off, size)
            if why:
                return f"{fid}:{off}: the record does not load ({why})"
        if size <= 0:
            return f"{fid}:{off}: a header of size {size} (the walk does not move on)"
        off += size
    return "the walk does not end"


def _load_failure(data, off: int, size: int) -> str:
    """Why ``MessageDatabase.load`` of the user record at ``off`` (header size ``size``) throws, or ''."""
    if size < 5 or off + size > len(data):
        return f"record size {size}"
    payload = memoryview(data)[off + 5:off + size]
    if len(payload) < 2:
        return f"a command of {len(payload)} bytes"
    try:
        EntryType(payload[0])
    except ValueError:
        return f"unknown KahaEntryType {payload[0]}"
    try:
        length, pos = read_varint(payload, 1, len(payload))
        if pos + length > len(payload):
            return f"framed length {length} past the record's {len(payload) - pos} bytes"
        decode_command(payload[:pos + length])
    except FormatError as err:
        return err.message
    return ""
