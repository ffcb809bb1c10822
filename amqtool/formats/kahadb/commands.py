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


def _decode_destination(buf) -> Destination:
    dtype, name = None, None
    for f, wt, v in iter_fields(buf):
        if f == 1 and wt == VARINT:
            dtype = to_int32(v)
        elif f == 2 and wt == LEN:
            name = utf8(v)
    if dtype is None or name is None:
        raise FormatError("KahaDestination without type or name")
    return Destination(dtype, name)


def decode_location(buf) -> Location:
    log_id = offset = None
    for f, wt, v in iter_fields(buf):
        if f == 1 and wt == VARINT:
            log_id = to_int32(v)
        elif f == 2 and wt == VARINT:
            offset = to_int32(v)
    if log_id is None or offset is None:
        raise FormatError("KahaLocation without log_id or offset")
    return Location(log_id, offset)


def decode_transaction_info(buf) -> TransactionId:
    """KahaTransactionInfo: 1 local id, 2 XA id, 3 previous_entry (ignored)."""
    for f, wt, v in iter_fields(buf):
        if f == 1 and wt == LEN:
            conn = txid = None
            for g, gwt, gv in iter_fields(v):
                # Field 1 twice: tag 0x0A (string) is connection_id, tag 0x08 (varint) is transaction_id.
                if g == 1 and gwt == LEN:
                    conn = utf8(gv)
                elif g == 1 and gwt == VARINT:
                    txid = to_int64(gv)
            if conn is None or txid is None:
                raise FormatError("KahaLocalTransactionId without connection_id or transaction_id")
            return TransactionId(True, connection_id=conn, transaction_id=txid)
        if f == 2 and wt == LEN:
            fmt = gid = br = None
            for g, gwt, gv in iter_fields(v):
                if g == 1 and gwt == VARINT:
                    fmt = to_int32(gv)
                elif g == 2 and gwt == LEN:
                    br = bytes(gv)
                elif g == 3 and gwt == LEN:
                    gid = bytes(gv)
            if fmt is None or gid is None or br is None:
                raise FormatError("KahaXATransactionId without format_id, global id or branch qualifier")
            return TransactionId(False, format_id=fmt, global_id=gid, branch=br)
    raise FormatError("KahaTransactionInfo without a transaction id")


def _decode_add(body, etype=EntryType.ADD_MESSAGE) -> AddMessageCommand:
    cmd = AddMessageCommand(etype)
    have = 0
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.transaction = decode_transaction_info(v)
        elif f == 2 and wt == LEN:
            cmd.destination = decode_destination(v)
            have |= 1
        elif f == 3 and wt == LEN:
            cmd.message_id = utf8(v)
            have |= 2
        elif f == 4 and wt == LEN:
            cmd.message = v
            have |= 4
        elif f == 5 and wt == VARINT:
            cmd.priority = to_int32(v)
        elif f == 6 and wt == VARINT:
            cmd.priority_supported = bool(v)
        else:
            cmd.unknown.append((f, wt))
    if have != 7:
        raise FormatError("KahaAddMessageCommand without destination, messageId or message")
    return cmd


def _decode_remove(body) -> RemoveMessageCommand:
    cmd = RemoveMessageCommand(EntryType.REMOVE_MESSAGE)
    have = 0
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.transaction = decode_transaction_info(v)
        elif f == 2 and wt == LEN:
            cmd.destination = decode_destination(v)
            have |= 1
        elif f == 3 and wt == LEN:
            cmd.message_id = utf8(v)
            have |= 2
        elif f == 4 and wt == LEN:
            cmd.ack = v
        elif f == 5 and wt == LEN:
            cmd.subscription_key = utf8(v)
        else:
            cmd.unknown.append((f, wt))
    if have != 3:
        raise FormatError("KahaRemoveMessageCommand without destination or messageId")
    return cmd


def _decode_tx(body, etype) -> TransactionCommand:
    cmd = TransactionCommand(etype)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.transaction = decode_transaction_info(v)
        else:
            cmd.unknown.append((f, wt))
    if cmd.transaction is None:
        raise FormatError(f"{etype.name} command without transaction_info")
    return cmd


def _decode_trace(body) -> TraceCommand:
    cmd = TraceCommand(EntryType.TRACE)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.message = utf8(v)
        else:
            cmd.unknown.append((f, wt))
    return cmd


def _decode_remove_destination(body) -> RemoveDestinationCommand:
    cmd = RemoveDestinationCommand(EntryType.REMOVE_DESTINATION)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.destination = decode_destination(v)
        else:
            cmd.unknown.append((f, wt))
    if cmd.destination is None:
        raise FormatError("KahaRemoveDestinationCommand without destination")
    return cmd


def _decode_subscription(body) -> SubscriptionCommand:
    cmd = SubscriptionCommand(EntryType.SUBSCRIPTION)
    have = 0
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.destination = decode_destination(v)
            have |= 1
        elif f == 2 and wt == LEN:
            cmd.subscription_key = utf8(v)
            have |= 2
        elif f == 3 and wt == VARINT:
            cmd.retroactive = bool(v)
        elif f == 4 and wt == LEN:
            cmd.subscription_info = v
        else:
            cmd.unknown.append((f, wt))
    if have != 3:
        raise FormatError("KahaSubscriptionCommand without destination or subscriptionKey")
    return cmd


def _decode_blob(body, etype) -> BlobCommand:
    cmd = BlobCommand(etype)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.blob = v
        else:
            cmd.unknown.append((f, wt))
    return cmd


def _decode_update(body) -> UpdateMessageCommand:
    cmd = UpdateMessageCommand(EntryType.UPDATE_MESSAGE)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == LEN:
            cmd.add = _decode_add(v)
        else:
            cmd.unknown.append((f, wt))
    if cmd.add is None:
        raise FormatError("KahaUpdateMessageCommand without message")
    return cmd


def _decode_rewritten(body) -> RewrittenDataFileCommand:
    cmd = RewrittenDataFileCommand(EntryType.REWRITTEN_DATA_FILE)
    for f, wt, v in iter_fields(body):
        if f == 1 and wt == VARINT:
            cmd.source_data_file_id = to_int32(v)
        elif f == 2 and wt == VARINT:
            cmd.rewrite_type = to_int32(v)
        elif f == 3 and wt == VARINT:
            cmd.skip_if_source_exists = bool(v)
        else:
            cmd.unknown.append((f, wt))
    return cmd


# Scheduler commands: (name, kind) per field number; kinds: s string, i int32, l int64, b bytes.
_SCHED = {
    EntryType.ADD_SCHEDULED_JOB: {1: ("scheduler", "s"), 2: ("job_id", "s"), 3: ("start_time", "l"),
                                  4: ("cron_entry", "s"), 5: ("delay", "l"), 6: ("period", "l"),
                                  7: ("repeat", "i"), 8: ("payload", "b"), 9: ("next_execution_time", "l")},
    EntryType.RESCHEDULE_JOB: {1: ("scheduler", "s"), 2: ("job_id", "s"), 3: ("execution_time", "l"),
                               4: ("next_execution_time", "l"), 5: ("rescheduled_count", "i")},
    EntryType.REMOVE_SCHEDULED_JOB: {1: ("scheduler", "s"), 2: ("job_id", "s"), 3: ("next_execution_time", "l")},
    EntryType.REMOVE_SCHEDULED_JOBS: {1: ("scheduler", "s"), 2: ("start_time", "l"), 3: ("end_time", "l")},
    EntryType.DESTROY_SCHEDULER: {1: ("scheduler", "s")},
}


def _decode_sched(body, etype) -> SchedulerCommand:
    cmd = SchedulerCommand(etype)
    spec = _SCHED[etype]
    for f, wt, v in iter_fields(body):
        name_kind = spec.get(f)
        if name_kind is None or (wt == LEN) != (name_kind[1] in "sb"):
            cmd.unknown.append((f, wt))
            continue
        name, kind = name_kind
        cmd.fields[name] = utf8(v) if kind == "s" else bytes(v) if kind == "b" else to_int32(v) if kind == "i" else to_int64(v)
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
    body = mv[pos:]
    if etype is EntryType.ADD_MESSAGE:
        return _decode_add(body)
    if etype is EntryType.REMOVE_MESSAGE:
        return _decode_remove(body)
    if etype in (EntryType.PREPARE, EntryType.COMMIT, EntryType.ROLLBACK):
        return _decode_tx(body, etype)
    if etype is EntryType.TRACE:
        return _decode_trace(body)
    if etype is EntryType.SUBSCRIPTION:
        return _decode_subscription(body)
    if etype in (EntryType.PRODUCER_AUDIT, EntryType.ACK_MESSAGE_FILE_MAP):
        return _decode_blob(body, etype)
    if etype is EntryType.REMOVE_DESTINATION:
        return _decode_remove_destination(body)
    if etype is EntryType.UPDATE_MESSAGE:
        return _decode_update(body)
    if etype is EntryType.REWRITTEN_DATA_FILE:
        return _decode_rewritten(body)
    return _decode_sched(body, etype)


def entry_type_of(payload) -> int:
    """The KahaEntryType byte of a payload without decoding it (-1 when empty)."""
    return payload[0] if len(payload) else -1
