"""KahaDB journal commands (journal-data.proto): the payload of every user record.

Payload framing (MessageDatabase.toByteSequence, kahadb-format.md §2.7): one ``KahaEntryType`` byte, a varint
length L, then L bytes of protobuf. Every message is decoded by hand (see :mod:`protobuf` for why). Unknown
fields are skipped but collected in ``unknown`` so a verifier can flag them (the Java parser would not skip
them correctly).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import LEN, VARINT, iter_fields, read_varint, to_int32, to_int64, utf8


class EntryType(enum.IntEnum):
    TRACE = 0
    ADD_MESSAGE = 1
    REMOVE_MESSAGE = 2
    PREPARE = 3
    COMMIT = 4
    ROLLBACK = 5
    REMOVE_DESTINATION = 6
    SUBSCRIPTION = 7
    PRODUCER_AUDIT = 8
    ACK_MESSAGE_FILE_MAP = 9
    UPDATE_MESSAGE = 10
    ADD_SCHEDULED_JOB = 11
    RESCHEDULE_JOB = 12
    REMOVE_SCHEDULED_JOB = 13
    REMOVE_SCHEDULED_JOBS = 14
    DESTROY_SCHEDULER = 15
    REWRITTEN_DATA_FILE = 16


DESTINATION_TYPES = {0: "queue", 1: "topic", 2: "temp-queue", 3: "temp-topic"}


@dataclass(frozen=True)
class Destination:
    """KahaDestination: type number (0 queue, 1 topic, 2 temp queue, 3 temp topic) and physical name."""

    type: int
    name: str

    @property
    def key(self) -> str:
        """The index key ``"<type>:<name>"`` (MessageDatabase.key)."""
        return f"{self.type}:{self.name}"

    @property
    def kind(self) -> str:
        return DESTINATION_TYPES.get(self.type, f"type-{self.type}")


@dataclass(frozen=True)
class Location:
    log_id: int
    offset: int

    def __str__(self) -> str:
        return f"{self.log_id}:{self.offset}"


@dataclass(frozen=True)
class TransactionId:
    """A transaction id: local ``(connection_id, transaction_id)`` or XA ``(format_id, global, branch)``.

    ``key`` is hashable and identifies the transaction across records (kahadb-format.md §6.4 rule 3).
    """

    local: bool
    connection_id: str | None = None
    transaction_id: int | None = None
    format_id: int | None = None
    global_id: bytes | None = None
    branch: bytes | None = None

    @property
    def key(self) -> tuple:
        if self.local:
            return ("local", self.connection_id, self.transaction_id)
        return ("xa", self.format_id, self.global_id, self.branch)

    def __str__(self) -> str:
        if self.local:
            return f"TX:{self.connection_id}:{self.transaction_id}"
        g = _printable(self.global_id)
        b = _printable(self.branch)
        return f"XID:[{self.format_id},{g},{b}]"


def _printable(b: bytes | None) -> str:
    if b is None:
        return ""
    try:
        s = b.decode("ascii")
        if s.isprintable():
            return s
    except UnicodeDecodeError:
        pass
    return b.hex()


@dataclass
class Command:
    """Base of every decoded journal command."""

    type: EntryType
    unknown: list = field(default_factory=list, repr=False)  # (field, wire type) pairs not in the schema

    @property
    def name(self) -> str:
        return f"KAHA_{self.type.name}_COMMAND"


@dataclass
class TraceCommand(Command):
    message: str = ""


@dataclass
class AddMessageCommand(Command):
    transaction: TransactionId | None = None
    destination: Destination | None = None
    message_id: str = ""
    message: memoryview | bytes = b""
    priority: int = 4
    priority_supported: bool = False


@dataclass
class UpdateMessageCommand(Command):
    add: AddMessageCommand | None = None


@dataclass
class RemoveMessageCommand(Command):
    transaction: TransactionId | None = None
    destination: Destination | None = None
    message_id: str = ""
    ack: memoryview | bytes | None = None
    subscription_key: str | None = None


@dataclass
class TransactionCommand(Command):
    """KAHA_PREPARE / KAHA_COMMIT / KAHA_ROLLBACK."""

    transaction: TransactionId | None = None


@dataclass
class RemoveDestinationCommand(Command):
    destination: Destination | None = None


@dataclass
class SubscriptionCommand(Command):
    destination: Destination | None = None
    subscription_key: str = ""
    retroactive: bool = False
    subscription_info: memoryview | bytes | None = None  # absent = the subscription is removed


@dataclass
class BlobCommand(Command):
    """KAHA_PRODUCER_AUDIT (field ``audit``) and KAHA_ACK_MESSAGE_FILE_MAP (``ackMessageFileMap``):
    one Java-serialized blob."""

    blob: memoryview | bytes = b""


@dataclass
class RewrittenDataFileCommand(Command):
    source_data_file_id: int = 0
    rewrite_type: int = 0
    skip_if_source_exists: bool = True


@dataclass
class SchedulerCommand(Command):
    """Scheduler-store commands (types 11-15): fields by name."""

    fields: dict = field(default_factory=dict)


_DEST_CACHE: dict[bytes, Destination] = {}


def decode_destination(buf) -> Destination:
    """KahaDestination (cached by its bytes: a journal names few destinations many times)."""
    raw = bytes(buf)
    d = _DEST_CACHE.get(raw)
    if d is None:
        d = _decode_destination(raw)
        if len(_DEST_CACHE) < 4096:
            _DEST_CACHE[raw] = d
    return d


def _all_of(buf, fields: dict, missing: str) -> dict:
    """A small message whose fields are all required, as {attribute: value}: ``fields`` maps (field number, wire
    type) to (attribute, value decoder); the last occurrence of a field wins, fields not in the table are
    skipped, and one that never came is FormatError(``missing``)."""
    got = {}
    for f, wt, v in iter_fields(buf):
        spec = fields.get((f, wt))
        if spec is not None:
            got[spec[0]] = spec[1](v)
    if len(got) != len(fields):
        raise FormatError(missing)
    return got


_DESTINATION = {(1, VARINT): ("type", to_int32), (2, LEN): ("name", utf8)}
_LOCATION = {(1, VARINT): ("log_id", to_int32), (2, VARINT): ("offset", to_int32)}
# KahaLocalTransactionId has field 1 twice: tag 0x0A (string) is connection_id, tag 0x08 (varint) transaction_id.
_LOCAL_TX = {(1, LEN): ("connection_id", utf8), (1, VARINT): ("transaction_id", to_int64)}
_XA_TX = {(1, VARINT): ("format_id", to_int32), (2, LEN): ("branch", bytes), (3, LEN): ("global_id", bytes)}


def _decode_destination(buf) -> Destination:
    return Destination(**_all_of(buf, _DESTINATION, "KahaDestination without type or name"))


def decode_location(buf) -> Location:
    return Location(**_all_of(buf, _LOCATION, "KahaLocation without log_id or offset"))


def decode_transaction_info(buf) -> TransactionId:
    """KahaTransactionInfo: 1 local id, 2 XA id, 3 previous_entry (ignored)."""
    for f, wt, v in iter_fields(buf):
        if f == 1 and wt == LEN:
            return TransactionId(True, **_all_of(
                v, _LOCAL_TX, "KahaLocalTransactionId without connection_id or transaction_id"))
        if f == 2 and wt == LEN:
            return TransactionId(False, **_all_of(
                v, _XA_TX, "KahaXATransactionId without format_id, global id or branch qualifier"))
    raise FormatError("KahaTransactionInfo without a transaction id")


# Each message of journal-data.proto as a table: field number -> (attribute, wire type, value decoder). A field
# that is not in the table, or comes with another wire type, lands in ``unknown``.
def _raw(v):
    return v  # length-delimited bytes kept as the memoryview slice (no copy)


_TRANSACTION = {1: ("transaction", LEN, decode_transaction_info)}
_ADD = {**_TRANSACTION, 2: ("destination", LEN, decode_destination), 3: ("message_id", LEN, utf8),
        4: ("message", LEN, _raw), 5: ("priority", VARINT, to_int32), 6: ("priority_supported", VARINT, bool)}
_REMOVE = {**_TRANSACTION, 2: ("destination", LEN, decode_destination), 3: ("message_id", LEN, utf8),
           4: ("ack", LEN, _raw), 5: ("subscription_key", LEN, utf8)}
_SUBSCRIPTION = {1: ("destination", LEN, decode_destination), 2: ("subscription_key", LEN, utf8),
                 3: ("retroactive", VARINT, bool), 4: ("subscription_info", LEN, _raw)}
_REWRITTEN = {1: ("source_data_file_id", VARINT, to_int32), 2: ("rewrite_type", VARINT, to_int32),
              3: ("skip_if_source_exists", VARINT, bool)}


def _nested_add(v) -> "AddMessageCommand":
    """KahaUpdateMessageCommand.message: a whole KahaAddMessageCommand."""
    return _decode_body(EntryType.ADD_MESSAGE, v)


# EntryType -> (command class, fields, required field numbers, error when one is missing)
_COMMANDS = {
    EntryType.ADD_MESSAGE: (AddMessageCommand, _ADD, {2, 3, 4},
                            "KahaAddMessageCommand without destination, messageId or message"),
    EntryType.REMOVE_MESSAGE: (RemoveMessageCommand, _REMOVE, {2, 3},
                               "KahaRemoveMessageCommand without destination or messageId"),
    EntryType.PREPARE: (TransactionCommand, _TRANSACTION, {1}, "PREPARE command without transaction_info"),
    EntryType.COMMIT: (TransactionCommand, _TRANSACTION, {1}, "COMMIT command without transaction_info"),
    EntryType.ROLLBACK: (TransactionCommand, _TRANSACTION, {1}, "ROLLBACK command without transaction_info"),
    EntryType.TRACE: (TraceCommand, {1: ("message", LEN, utf8)}, set(), ""),
    EntryType.REMOVE_DESTINATION: (RemoveDestinationCommand, {1: ("destination", LEN, decode_destination)}, {1},
                                   "KahaRemoveDestinationCommand without destination"),
    EntryType.SUBSCRIPTION: (SubscriptionCommand, _SUBSCRIPTION, {1, 2},
                             "KahaSubscriptionCommand without destination or subscriptionKey"),
    EntryType.PRODUCER_AUDIT: (BlobCommand, {1: ("blob", LEN, _raw)}, set(), ""),
    EntryType.ACK_MESSAGE_FILE_MAP: (BlobCommand, {1: ("blob", LEN, _raw)}, set(), ""),
    EntryType.UPDATE_MESSAGE: (UpdateMessageCommand, {1: ("add", LEN, _nested_add)}, {1},
                               "KahaUpdateMessageCommand without message"),
    EntryType.REWRITTEN_DATA_FILE: (RewrittenDataFileCommand, _REWRITTEN, set(), ""),
}

# Scheduler commands keep their fields in ``SchedulerCommand.fields`` under these names.
_SCHEDULER = {1: ("scheduler", LEN, utf8)}
_SCHED = {
    EntryType.ADD_SCHEDULED_JOB: {**_SCHEDULER, 2: ("job_id", LEN, utf8), 3: ("start_time", VARINT, to_int64),
                                  4: ("cron_entry", LEN, utf8), 5: ("delay", VARINT, to_int64),
                                  6: ("period", VARINT, to_int64), 7: ("repeat", VARINT, to_int32),
                                  8: ("payload", LEN, bytes), 9: ("next_execution_time", VARINT, to_int64)},
    EntryType.RESCHEDULE_JOB: {**_SCHEDULER, 2: ("job_id", LEN, utf8), 3: ("execution_time", VARINT, to_int64),
                               4: ("next_execution_time", VARINT, to_int64),
                               5: ("rescheduled_count", VARINT, to_int32)},
    EntryType.REMOVE_SCHEDULED_JOB: {**_SCHEDULER, 2: ("job_id", LEN, utf8),
                                     3: ("next_execution_time", VARINT, to_int64)},
    EntryType.REMOVE_SCHEDULED_JOBS: {**_SCHEDULER, 2: ("start_time", VARINT, to_int64),
                                      3: ("end_time", VARINT, to_int64)},
    EntryType.DESTROY_SCHEDULER: _SCHEDULER,
}


def _decode_fields(cmd, body, fields: dict, required=frozenset(), missing: str = "", put=None):
    """Set ``cmd``'s attributes (or ``put(name, value)``) from ``body``; FormatError(``missing``) when a
    ``required`` field number never came."""
    put = put or cmd.__setattr__
    seen = set()
    for f, wt, v in iter_fields(body):
        spec = fields.get(f)
        if spec is None or spec[1] != wt:
            cmd.unknown.append((f, wt))
            continue
        put(spec[0], spec[2](v))
        seen.add(f)
    if not required <= seen:
        raise FormatError(missing)
    return cmd


def decode_command(payload) -> Command:
    """Decode one user-record payload (type byte, varint length, protobuf body). The body must be consumed
    exactly. Raises FormatError for anything else."""
    mv = payload if isinstance(payload, memoryview) else memoryview(payload)
    if len(mv) < 2:
        raise FormatError(f"journal command of {len(mv)} bytes is too short")
    t = mv[0]
    try:
        etype = EntryType(t)
    except ValueError:
        raise FormatError(f"unknown KahaEntryType {t}") from None
    length, pos = read_varint(mv, 1, len(mv))
    if pos + length != len(mv):
        raise FormatError(f"{etype.name} body length {length} does not match its record "
                          f"({len(mv) - pos} bytes follow the length)")
    return _decode_body(etype, mv[pos:])


def _decode_body(etype: EntryType, body) -> Command:
    if etype in _SCHED:
        cmd = SchedulerCommand(etype)
        return _decode_fields(cmd, body, _SCHED[etype], put=cmd.fields.__setitem__)
    cls, fields, required, missing = _COMMANDS[etype]
    return _decode_fields(cls(etype), body, fields, required, missing)


def entry_type_of(payload) -> int:
    """The KahaEntryType byte of a payload without decoding it (-1 when empty)."""
    return payload[0] if len(payload) else -1


def transaction_head(payload) -> tuple[EntryType, TransactionId] | None:
    """The entry type and transaction of a send or an ack read from the head of its payload alone, or None.

    ``MessageDatabase.toByteSequence`` writes the type byte, the body's length, then the protobuf body in field
    order, and a KahaAddMessageCommand's or KahaRemoveMessageCommand's first field is ``transaction_info`` (1):
    its bytes come before the destination, id and message. So a record whose rest no longer decodes (zeroed,
    say) still tells whose operation it was when that head is whole."""
    mv = payload if isinstance(payload, memoryview) else memoryview(payload)
    try:
        etype = EntryType(mv[0]) if len(mv) else None
        if etype not in (EntryType.ADD_MESSAGE, EntryType.REMOVE_MESSAGE):
            return None
        _length, pos = read_varint(mv, 1, len(mv))
        if pos >= len(mv) or mv[pos] != (1 << 3 | LEN):
            return None
        size, start = read_varint(mv, pos + 1, len(mv))
        if start + size > len(mv):
            return None
        return etype, decode_transaction_info(mv[start:start + size])
    except FormatError:
        return None
