"""An older file's last batch whose control record was zeroed, after the index checkpoint: what the replay skips.

ActiveMQ 5.17 (``checkForCorruptJournalFiles`` off) replays the records after the checkpoint as
``Journal.getNextLocation`` reads them, header by header, in every file but the newest without checking
batches. A record header of type 0 is the end of a file's data there ("eof - jump to next datafile"): a
zeroed range over a batch's control record (scan.remnant_after_zero_batch, ``how == "zeros"``) ends the file
for the replay, which goes on with the next file. The records of that batch, and of any after it in the file,
are never replayed.

:func:`skips_nothing` judges that loss: the records must still read as the broker wrote them (the zeros ended
inside the control record: from its end they tile up to the end marker or the zero fill, each a user record
whose command decodes; a run into a record's length leaves a length that does not tile), and each one must be
a record whose loss changes nothing delivered: a send acknowledged after the checkpoint (by every durable
subscription, for a topic), an acknowledgement its subscription's selector never needed, a send or ack of a
transaction the replay leaves open and unprepared (rolled back at start), or a record whose ``process`` only
moves ``lastUpdate``. Anything else (a COMMIT or PREPARE, an ack the replay needed) keeps the damage CRITICAL.
"""
from __future__ import annotations

import struct

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command


def skips_nothing(buf, first: int, acked: dict, subscribed, unmatched=None, open_txs=frozenset()) -> bool:
    """The zeros at ``first`` of ``buf`` (a journal file that is not the newest, after the checkpoint) end its
    data for the replay, and what the replay thereby skips changes nothing it delivers: see the module
    docstring. ``acked``: after_acks.acked_after; ``subscribed(destination key)``: the durable subscription
    keys of a topic; ``unmatched(cmd)``: unhanded.unmatched_ack; ``open_txs``: the keys of the
    transactions the replay leaves with no outcome (not prepared), which the broker rolls back at start."""
    n = len(buf)
    if bytes(buf[first:first + 5]) != jr.ZERO_HEADER:
        return False
    commands = _records_after(buf, first + jr.BATCH_CONTROL_RECORD_SIZE, n)
    if not commands:
        return False
    return all(harmless(cmd, acked, subscribed, unmatched, open_txs) for cmd in commands)


def harmless(cmd, acked: dict, subscribed, unmatched=None, open_txs=frozenset()) -> bool:
    """Whether the replay's losing the record ``cmd`` (written after the checkpoint) changes nothing the broker
    delivers: a send acknowledged later in the replay (by every durable subscription, for a topic), a send or
    ack of a transaction left open and unprepared, an ack ``unmatched`` accepts, or a record whose ``process``
    only moves ``lastUpdate``."""
    from amqtool.engines.kahadb.length_skips import acked_send
    from amqtool.engines.kahadb.superseded import LOCATION_ONLY

    if cmd.type in LOCATION_ONLY and not cmd.unknown:
        return True
    if cmd.type is EntryType.REMOVE_MESSAGE and cmd.transaction is None and unmatched is not None \
            and unmatched(cmd):
        return True
    if cmd.type in (EntryType.ADD_MESSAGE, EntryType.REMOVE_MESSAGE) and cmd.transaction is not None \
            and cmd.transaction.key in open_txs:
        return True  # rolled back at start either way
    return bool(acked_send(cmd, acked, subscribed))


def _records_after(buf, pos: int, n: int) -> list | None:
    """The commands of the user records from ``pos`` to the end of the file's data (the end marker, or zeros
    to the end of the file but its last five bytes' marker), each one whole; None when they do not tile so.
    Batch control records of later batches in the file are stepped over by their own length."""
    out = []
    try:
        while pos + 5 <= n:
            head = bytes(buf[pos:pos + 5])
            if head == jr.EOF_RECORD:
                break
            if head == jr.ZERO_HEADER:
                rest = bytes(buf[pos:]).replace(jr.EOF_RECORD, bytes(len(jr.EOF_RECORD)))
                if rest.strip(b"\0"):
                    return None  # more record bytes after zeros: not the end of the data
                break
            length, rtype = struct.unpack_from(">iB", buf, pos)
            if bytes(buf[pos:pos + 16]) == jr.BATCH_CONTROL_RECORD_HEADER:
                pos += jr.BATCH_CONTROL_RECORD_SIZE
                continue
            if rtype != jr.USER_RECORD_TYPE or length < 6 or pos + length > n:
                return None
            out.append(decode_command(bytes(buf[pos + 5:pos + length])))
            pos += length
    except (FormatError, struct.error):
        return None
    return out
