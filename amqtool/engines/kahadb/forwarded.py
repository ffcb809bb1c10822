"""Records after the index checkpoint that are only the ack compaction's forwarded acks: no unclean stop.

ActiveMQ 5.17's ack compaction (``MessageDatabase.AckCompactionRunner`` -> ``forwardAllAcks``) reserves a
new journal file (``Journal.reserveDataFile``: the next file id, linked before the file being written),
writes into it a ``KahaRewrittenDataFileCommand`` (``sourceDataFileId``: the file whose acks it moves,
``rewriteType`` COMPACTED_JOURNAL_FILE, ``skipIfSourceExists`` left at its default, true) and then a copy of
every ``KahaRemoveMessageCommand`` and ``KahaCommitCommand`` of the source file, through a
``TargetedDataFileAppender`` that bypasses ``process``: ``metadata.lastUpdate`` is not moved, and the
``checkpointUpdate(false)`` that follows stores the old one. So a broker stopped cleanly right after a
compaction leaves records after the index checkpoint, in a file with a higher id than the checkpoint's.

At the next start ``recover()`` replays from the record after ``lastUpdate`` ("Recovering from the journal
@N:M"). ``process(KahaRewrittenDataFileCommand)`` only marks the file's type, and while the source file is
still in the journal's file map it moves the location to ``journalMaxFileLength``: the walk jumps to the
next file and the forwarded records are not processed at all. When the source is gone (GC'd), they are:
``updateIndex(KahaRemoveMessageCommand)`` looks the message id up in the destination's ``messageIdIndex``
and does nothing when the index does not hold it -- and a forwarded ack acknowledged its message before it
was forwarded, so the index does not; a forwarded ``KahaCommitCommand`` applies only the operations the
replay buffered for its transaction (``process(KahaCommitCommand)``: none pending, ``processLocation``),
and with no transaction in progress at the checkpoint (``firstInProgressTransactionLocation`` unset) those
are the forwarded acks judged here.

:func:`replayed_records` tells such inert records from the rest. A record after the checkpoint that is not
one -- a send, an ack whose message the index still holds, anything in a file that does not start with the
compaction marker -- is what an unclean stop (or a broker still running) leaves.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType, decode_command

from amqtool.engines.kahadb.scan import mapped

_REWRITTEN, _REMOVE, _COMMIT = (int(EntryType.REWRITTEN_DATA_FILE), int(EntryType.REMOVE_MESSAGE),
                                int(EntryType.COMMIT))


def replayed_records(d, last_update: tuple, indexed: dict | None, tx_in_progress: bool) -> tuple[int, int, list]:
    """``(inert, other, sources)`` for the records after ``last_update`` ((file id, offset)) in store
    directory ``d``: how many are the ack compaction's marker or forwarded acks whose replay leaves the index
    as it is, whether any is anything else (1: the walk stops at the first such record, 0: none), and the
    source file ids of the compaction files holding the inert ones. ``indexed``: db.data's destinations
    (indexed.read_indexed), None when it does not read (no ack is then known inert); ``tx_in_progress``: the index names a first in-progress transaction."""
    inert = other = 0
    sources: list = []
    forwarded_inert = inert_ack(indexed, tx_in_progress)
    for f in d.files:
        if f.id < last_update[0] or not f.size:
            continue
        with mapped(f.path) as buf:
            source = None  # the marker's source file id when the file opens with the compaction marker
            first = True
            for ev in jr.scan_file(buf):
                if not isinstance(ev, jr.Batch):
                    continue
                try:
                    for rec in jr.iter_batch_records(buf, ev):
                        payload = rec.payload
                        marker = first and is_marker(payload)
                        if marker:
                            source = _source(payload)
                        first = False
                        if (f.id, rec.offset) <= last_update:
                            continue
                        if source is not None and (marker or forwarded_inert(payload)):
                            inert += 1
                            if source not in sources:
                                sources.append(source)
                        else:
                            return inert, 1, sources  # one is enough: the records are not all inert
                except FormatError:
                    continue
    return inert, other, sources


def inert_ack(indexed: dict | None, tx_in_progress: bool):
    """``payload -> bool``: the record (a command's bytes) is a forwarded ack whose replay leaves the index as
    it is -- a REMOVE of a message the index (``indexed``, indexed.read_indexed) does not hold in its
    destination, or a COMMIT while no transaction was in progress at the checkpoint."""
    held: dict = {}  # destination key -> message ids its order index holds (built when first asked)

    def holds(key: str, message_id: str) -> bool:
        if key not in held:
            dest = indexed.get(key)
            held[key] = {m.message_id for m in dest.messages} if dest is not None else set()
        return message_id in held[key]

    def inert(payload) -> bool:
        if not len(payload):
            return False
        t = payload[0]
        if t == _COMMIT:
            return not tx_in_progress
        if t != _REMOVE or indexed is None:
            return False
        try:
            cmd = decode_command(bytes(payload))
        except FormatError:
            return False
        return not holds(cmd.destination.key, cmd.message_id)

    return inert


def is_marker(payload) -> bool:
    """The record is a KahaRewrittenDataFileCommand (the ack compaction's marker)."""
    return len(payload) > 0 and payload[0] == _REWRITTEN


def _source(payload) -> int | None:
    """The source file id of a KahaRewrittenDataFileCommand, None when it does not decode."""
    try:
        return int(decode_command(bytes(payload)).source_data_file_id)
    except FormatError:
        return None
