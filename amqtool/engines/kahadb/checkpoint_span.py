"""A damaged region over the index checkpoint's own record: the records after it the replay no longer reaches.

ActiveMQ 5.17 replays the records after ``lastUpdate`` at start (``MessageDatabase.recover`` from
``getRecoveryPosition``: the user record after the one ``Journal.getNextLocation`` finds at ``lastUpdate``;
replay_walk.walk). A damaged region that begins before the checkpoint's record and runs past it is no region
"before the checkpoint" whose damage only a rebuild reads: the walk starts inside it. When its zeros take the
record header at ``lastUpdate`` (an all-zero header moves the walk on to the next file) or leave a header the
walk steps over wrongly, records written after the checkpoint in the same region are never loaded.

:func:`unreached` finds them: user records in the region after ``lastUpdate`` that still read whole as the
broker writes them (header type 1, the framed command ending exactly at the record's end: ``store`` journals
the entry type byte and ``writeFramed``), which the walk over the damaged journal does not return. Each one whose
loss changes something the broker delivers is named; a send acknowledged later in the replay, a record of a
transaction left open (rolled back at start), an unmatched ack or a record whose ``process`` only moves
``lastUpdate`` changes nothing (zeroed_head.harmless).
"""
from __future__ import annotations

import re
import struct

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.protobuf import read_varint

from amqtool.engines.kahadb.replay_walk import WalkStop, load, walk

_NONZERO = re.compile(rb"[^\x00]")


def unreached(buf, first: int, last: int, last_update: tuple, fid: int, walked: set, harmless) -> list:
    """``[(offset, command)]`` of the records written after ``last_update`` (file id, offset) in file ``fid``
    (``buf``), when ``[first, last]`` (a damaged region) holds it, that still read whole, the replay walk does
    not load (``walked``: its (file id, offset) set) and ``harmless(command)`` does not excuse."""
    if last_update[0] != fid or not first <= last_update[1] <= last:
        return []
    out = []
    pos = last_update[1] + 1
    end = len(buf)  # (a walk that leaves the file at zeros skips the intact batches after the region too)
    while pos + 6 <= end:
        if not any(bytes(buf[pos:pos + 4])):
            # (zeros: a preallocated file's fill runs for megabytes; a record's length has up to three leading
            # zero bytes, so the search resumes three bytes before the next non-zero one)
            nz = _NONZERO.search(buf, pos)
            if nz is None:
                break
            pos = max(pos + 1, nz.start() - 3)
            continue
        cmd = _whole_record(buf, pos, end)
        if cmd is None:
            pos += 1
            continue
        size = struct.unpack_from(">i", buf, pos)[0]
        if (fid, pos) not in walked and not harmless(cmd):
            out.append((pos, cmd))
        pos += size
    return out


def walked_records(ids: list, read, last_update: tuple | None) -> set:
    """The (file id, offset) of every user record the broker's replay from ``last_update`` (None: the journal's
    start) loads (as far as the walk gets)."""
    out: set = set()
    if last_update is not None and last_update[0] not in ids:
        return out
    try:
        for fid, off, _size in walk(ids, read, last_update):
            out.add((fid, off))
    except WalkStop:
        pass
    return out


def _whole_record(buf, pos: int, end: int):
    """The command of a user record at ``pos`` that reads as the broker writes one (ending by ``end``), or
    None."""
    size, rtype = struct.unpack_from(">ib", buf, pos)
    if rtype != jr.USER_RECORD_TYPE or size < 7 or pos + size > end:
        return None
    try:
        length, at = read_varint(buf, pos + 6, pos + size)
        if at + length != pos + size:
            return None
        return load(buf, pos, size)
    except FormatError:
        return None
