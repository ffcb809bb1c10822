"""What a compacted KahaDB journal holds: the records whose replay rebuilds the store's live state.

The compacted store has no index (``db.data``, ``db.redo`` and ``db.free`` are not carried over), so the
broker rebuilds it at start by replaying the journal from its first record (``MessageDatabase.recover``:
without a stored producer audit or ack-file map the recovery position is ``journal.getNextLocation(null)``,
and ``initMessageStore`` creates each destination at its first ADD). The records below are chosen so that
this replay ends in the state the old store was in, destination by destination:

1. every durable subscription's KAHA_SUBSCRIPTION record, verbatim, before any message of its topic: a
   non-retroactive subscription then starts with ``lastAck = nextMessageId - 1 = -1`` and is owed every
   topic message written after it (``addAckLocationForNewMessage``);
2. every live message as a plain KAHA_ADD_MESSAGE, in the order the destination's index held them (the
   replay's add order: commit order for transacted sends), so the new sequence ids keep their order. A
   committed transacted send loses its ``transaction_info`` (else the replay would wait for a COMMIT that is
   not written); a message last rewritten by KAHA_UPDATE_MESSAGE is written as the ADD inside it;
3. right after a topic message, one KAHA_REMOVE_MESSAGE (ack) per subscription of the topic that does not
   owe it (it acknowledged it, or started after it). The broker's recoverNextMessages then delivers to each
   subscription exactly the messages it is owed: either all messages after its lastAck, or, when earlier
   ones are still owed, those in its ack positions;
4. a destination left with neither a durable subscription nor a live message (a drained queue, a topic
   nobody subscribes to durably) gets one KAHA_REMOVE_MESSAGE of a message id no record carries: replaying
   it, ``updateIndex(KahaRemoveMessageCommand)`` calls ``getStoredDestination``, which creates the
   destination, and then finds nothing to remove. Without it the broker, rebuilding its index from this
   journal, would no longer have the destination at all. The same goes for a destination only the old
   index (db.data) knows (a topic without durable subscriptions has no journal record at all: the broker
   creates its store in the index only), unless the journal removed it after (KAHA_REMOVE_DESTINATION);
5. last, every prepared XA transaction's records (its sends, acks and KAHA_PREPARE) verbatim, in journal
   order: the broker recovers them in doubt, as before. Open local transactions are left out: the broker
   rolls them back at start.

Producer audit and ack-file map records are not copied: the replay rebuilds both (the old ack-file map
names files that no longer exist).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from amqtool.errors import FormatError, UnknownStoreError
from amqtool.formats.kahadb.commands import EntryType
from amqtool.formats.kahadb.protobuf import LEN, encode_field, encode_raw_field, encode_varint, iter_fields, read_varint


@dataclass
class DestinationFigures:
    """What one destination contributes to the compacted journal."""

    name: str
    messages: int = 0
    bytes: int = 0  # journal bytes of its records (5-byte record headers included)
    subscriptions: int = 0

    def to_json(self) -> dict:
        return {"destination": self.name, "messages": self.messages, "bytes": self.bytes,
                "subscriptions": self.subscriptions}


@dataclass
class ScriptFigures:
    records: int = 0
    messages: int = 0
    acks: int = 0
    subscriptions: int = 0
    prepared_transactions: int = 0
    destinations: dict = field(default_factory=dict)  # key -> DestinationFigures


class _Reader:
    """pread access to one directory's journal files (one descriptor cached)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._fid = None
        self._fd = None

    def payload(self, file_id: int, offset: int, length: int) -> bytes:
        """The command payload of the user record at (file_id, offset) of ``length`` bytes (header included)."""
        if self._fid != file_id:
            self.close()
            path = self.directory / f"db-{file_id}.log"
            try:
                self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as err:
                raise UnknownStoreError(f"cannot read journal file: {err.strerror}", path=str(path)) from None
            self._fid = file_id
        data = os.pread(self._fd, length, offset)
        if len(data) != length or length < 6:
            raise FormatError(f"record at db-{file_id}.log:{offset} is cut short", offset=offset)
        return data[5:]

    def record_length(self, file_id: int, offset: int) -> int:
        self.payload(file_id, offset, 6)  # opens the file; checks 6 bytes are there
        return int.from_bytes(os.pread(self._fd, 4, offset), "big")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._fid = None


def _frame(entry_type: int, body: bytes) -> bytes:
    """A journal command payload: type byte, varint length, protobuf body (MessageDatabase.toByteSequence)."""
    return bytes([entry_type]) + encode_varint(len(body)) + body


def _body(payload: bytes) -> tuple[int, memoryview]:
    mv = memoryview(payload)
    length, pos = read_varint(mv, 1, len(mv))
    if pos + length != len(mv):
        raise FormatError(f"journal command body length {length} does not match its record")
    return mv[0], mv[pos:]


def plain_add(payload: bytes) -> tuple[bytes, bytes, str]:
    """The KAHA_ADD_MESSAGE payload for a live message's current record (an ADD, or the ADD inside an
    UPDATE_MESSAGE), without ``transaction_info``; also its destination's raw KahaDestination bytes and its
    message id."""
    etype, body = _body(payload)
    if etype == EntryType.UPDATE_MESSAGE:
        inner = next((v for f, wt, v in iter_fields(body) if f == 1 and wt == LEN), None)
        if inner is None:
            raise FormatError("KahaUpdateMessageCommand without message")
        body = inner
    elif etype != EntryType.ADD_MESSAGE:
        raise FormatError(f"a live message's record is a {EntryType(etype).name}, not an ADD")
    out = bytearray()
    destination = message_id = None
    for f, wt, v in iter_fields(body):
        if f == 1:  # transaction_info: the transaction committed; replay must apply the send at once
            continue
        if f == 2 and wt == LEN:
            destination = bytes(v)
        elif f == 3 and wt == LEN:
            message_id = bytes(v).decode("utf-8")
        out += encode_raw_field(f, wt, v)
    if destination is None or message_id is None:
        raise FormatError("KahaAddMessageCommand without destination or messageId")
    return _frame(EntryType.ADD_MESSAGE, bytes(out)), destination, message_id


def ack(destination: bytes, message_id: str, subscription_key: str) -> bytes:
    """KAHA_REMOVE_MESSAGE acknowledging ``message_id`` for one durable subscription (no ack blob: the
    broker's own topic acks carry one, but the index only needs the subscription and the message)."""
    body = encode_field(2, destination) + encode_field(3, message_id) + encode_field(5, subscription_key)
    return _frame(EntryType.REMOVE_MESSAGE, body)


# The message id of a destination's keep record (4. above): never an OpenWire id ("ID:host-...:1:1:1:1").
KEEP_MESSAGE_ID = "amqtool:keep-destination"


def keep_destination(destination) -> bytes:
    """The KAHA_REMOVE_MESSAGE whose replay only creates ``destination`` (a Destination) in the index."""
    raw = encode_field(1, destination.type) + encode_field(2, destination.name)
    return _frame(EntryType.REMOVE_MESSAGE, encode_field(2, raw) + encode_field(3, KEEP_MESSAGE_ID))


def index_only_destinations(d) -> list:
    """The destinations of ``d``'s index (db.data) that its journal neither holds nor removed."""
    from amqtool.formats.kahadb.commands import Destination

    index = getattr(d, "index", None)
    view = index.view if index is not None else None
    if view is None:
        return []
    out = []
    for key in sorted(view.destinations):
        kind, _, name = key.partition(":")
        if not kind.isdigit() or key in d.replay.destinations or key in d.replay.removed_destinations:
            continue
        out.append(Destination(int(kind), name))
    return out


def compacted_records(d, figures: ScriptFigures) -> Iterator[bytes]:
    """The payloads of the compacted journal of one directory's load (``DirResult``), in writing order
    (see the module docstring), counting them into ``figures``."""
    replay = d.replay
    reader = _Reader(d.directory)
    try:
        for dest in index_only_destinations(d):
            fig = figures.destinations.setdefault(dest.key, DestinationFigures(_qualified(dest)))
            keep = keep_destination(dest)
            fig.bytes += len(keep) + 5
            yield keep
        for key, st in replay.destinations.items():
            fig = figures.destinations.setdefault(key, DestinationFigures(_qualified(st.destination)))
            subs = list(st.subscriptions.values())
            if not subs and not st.messages:
                keep = keep_destination(st.destination)
                fig.bytes += len(keep) + 5
                yield keep
                continue
            for sub in subs:
                length = reader.record_length(sub.file_id, sub.offset)
                payload = reader.payload(sub.file_id, sub.offset, length)
                figures.subscriptions += 1
                fig.subscriptions += 1
                fig.bytes += len(payload) + 5
                yield payload
            for m in st.messages.values():
                payload, dest_raw, mid = plain_add(reader.payload(m.file_id, m.offset, m.length))
                figures.messages += 1
                fig.messages += 1
                fig.bytes += len(payload) + 5
                yield payload
                if m.waiting is not None:
                    for sub in subs:
                        if sub.key not in m.waiting:
                            a = ack(dest_raw, mid, sub.key)
                            figures.acks += 1
                            fig.bytes += len(a) + 5
                            yield a
        for tx in d.open_transactions:
            if tx.state != "prepared":
                continue
            figures.prepared_transactions += 1
            for fid, off, length in tx.records:
                yield reader.payload(fid, off, length)
    finally:
        reader.close()


def _qualified(destination) -> str:
    return f"{destination.kind}://{destination.name}"
