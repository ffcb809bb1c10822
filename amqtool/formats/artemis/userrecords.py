"""The broker's user records: the bodies of journal records by ``userRecordType`` (JournalRecordIds 20..53,
artemis-journal-format.md §5).

One frozen dataclass per body. Each has ``decode(body, *, record_id=0)`` (a classmethod; FormatError for
malformed bytes), ``encode()`` (byte-identical: ``encode(decode(b)) == b``, trailing bytes Artemis ignores
are kept in ``trailing``) and ``describe()``, the text ``artemis data print`` shows for the record: the
``toString`` of the object ``DescribeJournal.newObjectEncoding`` builds. Records whose text carries the
journal record id (queue binding, grouping, queue status, security setting, user, role, address setting,
page transaction) take it as ``record_id``.

``DescribeJournal`` is the contract for ``describe()``: types it does not decode (23, 49, 50, 51 and any id
outside 20..53) print ``** null **``, 31 prints a fixed sentence, divert (27) prints ``storeId=0`` because
the tool never sets it. ``describe(safe=True)`` gives the ``--safe`` form (only bindings and messages
change).
"""
from __future__ import annotations

import functools

import unicodedata
from dataclasses import dataclass, field, fields
from typing import ClassVar

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import (
    HASH_PLACEHOLDER,
    AmqpLargeMessage,
    AmqpMessage,
    CoreMessage,
    LargeMessage,
    PersistedMessage,
    read_persisted_message,
)
from amqtool.formats.artemis.primitives import (
    Reader,
    Writer,
    Xid,
    bytes_to_hex,
    hashmap_growing_order,
    java_string_hash,
    uuid_text,
)


class JournalRecordIds:
    """``JournalRecordIds``: user record types of the bindings (B) and messages (M) journals."""

    GROUP_RECORD = 20  # B
    QUEUE_BINDING_RECORD = 21  # B
    QUEUE_STATUS_RECORD = 22  # B
    ID_COUNTER_RECORD = 24  # B
    ADDRESS_SETTING_RECORD = 25  # B (legacy binary)
    SECURITY_SETTING_RECORD = 26  # B
    DIVERT_RECORD = 27  # B
    BRIDGE_RECORD = 28  # B
    ADD_LARGE_MESSAGE_PENDING = 29  # M (legacy)
    ADD_LARGE_MESSAGE = 30  # M
    ADD_MESSAGE = 31  # M (legacy 1.x)
    ADD_REF = 32  # M
    ACKNOWLEDGE_REF = 33  # M
    UPDATE_DELIVERY_COUNT = 34  # M
    PAGE_TRANSACTION = 35  # M
    SET_SCHEDULED_DELIVERY_TIME = 36  # M
    DUPLICATE_ID = 37  # M
    HEURISTIC_COMPLETION = 38  # M
    ACKNOWLEDGE_CURSOR = 39  # M
    PAGE_CURSOR_COUNTER_VALUE = 40  # M
    PAGE_CURSOR_COUNTER_INC = 41  # M
    PAGE_CURSOR_COMPLETE = 42  # M
    PAGE_CURSOR_PENDING_COUNTER = 43  # M
    ADDRESS_BINDING_RECORD = 44  # B
    ADD_MESSAGE_PROTOCOL = 45  # M
    ADDRESS_STATUS_RECORD = 46  # B
    USER_RECORD = 47  # B
    ROLE_RECORD = 48  # B
    ADD_MESSAGE_BODY = 49  # M (history mode EVENT)
    KEY_VALUE_PAIR_RECORD = 50  # B
    CONNECTOR_RECORD = 51  # B
    ADDRESS_SETTING_RECORD_JSON = 52  # B
    ACK_RETRY = 53  # M


RECORD_TYPE_NAMES: dict[int, str] = {
    v: k for k, v in vars(JournalRecordIds).items() if not k.startswith("_") and isinstance(v, int)
}

NULL_TEXT = "** null **"

# RoutingType / ComponentConfigurationRoutingType / AddressQueueStatus codes
ROUTING_TYPES = {0: "MULTICAST", 1: "ANYCAST"}
COMPONENT_ROUTING_TYPES = {0: "MULTICAST", 1: "ANYCAST", 2: "STRIP", 3: "PASS"}
STATUS_NAMES = {0: "PAUSED", 1: "RUNNING"}


def _b(v: bool | None) -> str:
    return "null" if v is None else ("true" if v else "false")


def _s(v) -> str:
    return "null" if v is None else str(v)


@functools.cache
def _has_record_id(cls) -> bool:
    """Whether a record class takes the journal record id (decode runs per record: look it up once)."""
    return any(f.name == "record_id" for f in fields(cls))


@dataclass(frozen=True)
class UserRecordBody:
    """Common behaviour. Subclasses set ``TYPE`` and implement ``_read``/``_write``/``describe``."""

    TYPE: ClassVar[int] = -1
    trailing: bytes = field(default=b"", kw_only=True, repr=False)

    @classmethod
    def decode(cls, body: bytes, *, record_id: int = 0):
        if cls in _KEPT:
            return _decode_kept(cls, bytes(body), record_id)
        return cls._decode(body, record_id)

    @classmethod
    def _decode(cls, body: bytes, record_id: int):
        r = Reader(body)
        kwargs = cls._read(r)
        if _has_record_id(cls):
            kwargs.setdefault("record_id", record_id)
        return cls(**kwargs, trailing=r.bytes(r.remaining, "trailing bytes"))

    def encode(self) -> bytes:
        w = Writer()
        self._write(w)
        return w.raw(self.trailing).getvalue()

    @classmethod
    def _read(cls, r: Reader) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write(self, w: Writer) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
        raise NotImplementedError  # pragma: no cover


# --- bindings journal --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupingRecord(UserRecordBody):
    """20 GROUP_RECORD: ``SimpleString groupId, SimpleString clusterName``."""

    TYPE: ClassVar[int] = JournalRecordIds.GROUP_RECORD
    group_id: str
    cluster_name: str
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(group_id=r.simple_string("groupId"), cluster_name=r.simple_string("clusterName"))

    def _write(self, w):
        w.simple_string(self.group_id).simple_string(self.cluster_name)

    def describe(self, **_):
        return f"GroupingEncoding [id={self.record_id}, groupId={self.group_id}, clusterName={self.cluster_name}]"


# The optional trailing fields of a queue binding, in order, with their codec (§5.2 items 7..23).
_QB_OPTIONAL = (
    ("exclusive", "bool"),
    ("last_value", "bool"),
    ("configuration_managed", "bool"),
    ("consumers_before_dispatch", "i32"),
    ("delay_before_dispatch", "i64"),
    ("last_value_key", "nss"),
    ("non_destructive", "bool"),
    ("group_rebalance", "bool"),
    ("group_buckets", "i32"),
    ("auto_delete", "bool"),
    ("auto_delete_delay", "i64"),
    ("auto_delete_message_count", "i64"),
    ("group_first_key", "nss"),
    ("ring_size", "i64"),
    ("enabled", "bool"),
    ("group_rebalance_pause_dispatch", "bool"),
    ("internal", "bool"),
)

_ABSENT = object()


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split`` with a literal one-char separator: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class QueueBindingRecord(UserRecordBody):
    """21 QUEUE_BINDING_RECORD (PersistentQueueBindingEncoding); the queue id is the record id.

    Optional trailing fields are None when the record does not carry them (older brokers); ``max_consumers``,
    ``purge_on_no_consumers`` and ``routing_type`` are one group. ``metadata`` is the raw ``key=value;``
    string (``user=<name>;`` or empty).
    """

    TYPE: ClassVar[int] = JournalRecordIds.QUEUE_BINDING_RECORD
    name: str
    address: str
    filter: str | None = None
    metadata: str | None = ""
    auto_created: bool = False
    max_consumers: int | None = -1
    purge_on_no_consumers: bool | None = False
    routing_type: int | None = 1
    exclusive: bool | None = False
    last_value: bool | None = False
    configuration_managed: bool | None = False
    consumers_before_dispatch: int | None = 0
    delay_before_dispatch: int | None = -1
    last_value_key: str | None = None
    non_destructive: bool | None = False
    group_rebalance: bool | None = False
    group_buckets: int | None = -1
    auto_delete: bool | None = False
    auto_delete_delay: int | None = 0
    auto_delete_message_count: int | None = 0
    group_first_key: str | None = None
    ring_size: int | None = -1
    enabled: bool | None = True
    group_rebalance_pause_dispatch: bool | None = False
    internal: bool | None = False
    record_id: int = 0
    # how many optional fields the record carries (0 = none, 1 = the maxConsumers group, 2.. = + the next)
    present: int = len(_QB_OPTIONAL) + 1

    @classmethod
    def _read(cls, r):
        d = dict(
            name=r.simple_string("queue name"),
            address=r.simple_string("queue address"),
            filter=r.nullable_simple_string("filter"),
            metadata=r.nullable_simple_string("metadata"),
            auto_created=r.bool("autoCreated"),
        )
        present = 0
        if r.remaining > 0:
            d["max_consumers"] = r.i32("maxConsumers")
            d["purge_on_no_consumers"] = r.bool("purgeOnNoConsumers")
            d["routing_type"] = r.u8("routingType")
            present = 1
        else:
            d.update(max_consumers=None, purge_on_no_consumers=None, routing_type=None)
        for name, kind in _QB_OPTIONAL:
            if r.remaining > 0:
                d[name] = (r.bool(name) if kind == "bool" else r.i32(name) if kind == "i32"
                           else r.i64(name) if kind == "i64" else r.nullable_simple_string(name))
                present += 1
            else:
                d[name] = None
        d["present"] = present
        return d

    def _write(self, w):
        w.simple_string(self.name).simple_string(self.address).nullable_simple_string(self.filter)
        w.nullable_simple_string(self.metadata).bool_a(self.auto_created)
        if self.present < 1:
            return
        w.i32(self.max_consumers).bool_a(self.purge_on_no_consumers).u8(self.routing_type)
        for name, kind in _QB_OPTIONAL[: self.present - 1]:
            v = getattr(self, name)
            if kind == "bool":
                w.bool_a(v)
            elif kind == "i32":
                w.i32(v)
            elif kind == "i64":
                w.i64(v)
            else:
                w.nullable_simple_string(v)

    @classmethod
    def build(cls, *, record_id: int, name: str, address: str, routing_type: int = 1, filter: str | None = None,
              user: str | None = None, auto_created: bool = False, **kw) -> "QueueBindingRecord":
        """A binding as a current broker writes it (every field present)."""
        metadata = f"user={user};" if user is not None else ""
        return cls(name=name, address=address, filter=filter, metadata=metadata, auto_created=auto_created,
                   routing_type=routing_type, record_id=record_id, **kw)

    @property
    def queue_id(self) -> int:
        return self.record_id

    @property
    def user(self) -> str | None:
        """The ``user=`` value of the metadata, as the decoder extracts it (last pair wins)."""
        user = None
        for element in _java_split(self.metadata or "", ";"):
            kv = _java_split(element, "=")
            if len(kv) == 2 and kv[0] == "user":
                user = kv[1]
        return user

    @property
    def routing_type_name(self) -> str | None:
        return ROUTING_TYPES.get(self.routing_type) if self.routing_type is not None else None

    @property
    def filter_string(self) -> str | None:
        """``setFilterString``: an empty or blank filter is no filter (Java ``Character.isWhitespace``)."""
        f = self.filter
        if f is None or all(_java_whitespace(c) for c in f):
            return None
        return f

    def effective(self) -> dict:
        """The configuration after ``QueueConfigurationUtils.applyStaticDefaults``, which the decoder runs:
        fields the record does not carry take the broker defaults (ActiveMQDefaultConfiguration)."""
        def d(v, default):
            return default if v is None else v
        rt = self.routing_type_name
        return dict(
            max_consumers=d(self.max_consumers, -1),
            routing_type=rt if rt is not None else "MULTICAST",
            exclusive=d(self.exclusive, False),
            non_destructive=d(self.non_destructive, False),
            purge_on_no_consumers=d(self.purge_on_no_consumers, False),
            enabled=d(self.enabled, True),
            consumers_before_dispatch=d(self.consumers_before_dispatch, 0),
            delay_before_dispatch=d(self.delay_before_dispatch, -1),
            group_rebalance=d(self.group_rebalance, False),
            group_rebalance_pause_dispatch=d(self.group_rebalance_pause_dispatch, False),
            group_buckets=d(self.group_buckets, -1),
            group_first_key=self.group_first_key,
            auto_delete=d(self.auto_delete, self.auto_created),
            auto_delete_delay=d(self.auto_delete_delay, 0),
            auto_delete_message_count=d(self.auto_delete_message_count, 0),
            ring_size=d(self.ring_size, -1),
            last_value=d(self.last_value, False),
            last_value_key=self.last_value_key,
            internal=d(self.internal, False),
            configuration_managed=self.configuration_managed,
        )

    def describe(self, *, safe: bool = False, **_):
        if safe:
            return "PersistentQueueBindingEncoding(safe data)"
        e = self.effective()
        return (
            "PersistentQueueBindingEncoding [queueConfiguration=QueueConfiguration ["
            f"id={self.record_id}, name={self.name}, address={self.address}, routingType={e['routing_type']}, "
            f"filterString={_s(self.filter_string)}, durable=null, user={_s(self.user)}, "
            f"maxConsumers={e['max_consumers']}, exclusive={_b(e['exclusive'])}, "
            f"groupRebalance={_b(e['group_rebalance'])}, "
            f"groupRebalancePauseDispatch={_b(e['group_rebalance_pause_dispatch'])}, "
            f"groupBuckets={e['group_buckets']}, groupFirstKey={_s(e['group_first_key'])}, "
            f"lastValue={_b(e['last_value'])}, lastValueKey={_s(e['last_value_key'])}, "
            f"nonDestructive={_b(e['non_destructive'])}, purgeOnNoConsumers={_b(e['purge_on_no_consumers'])}, "
            f"enabled={_b(e['enabled'])}, consumersBeforeDispatch={e['consumers_before_dispatch']}, "
            f"delayBeforeDispatch={e['delay_before_dispatch']}, consumerPriority=null, "
            f"autoDelete={_b(e['auto_delete'])}, autoDeleteDelay={e['auto_delete_delay']}, "
            f"autoDeleteMessageCount={e['auto_delete_message_count']}, ringSize={e['ring_size']}, "
            f"configurationManaged={_b(e['configuration_managed'])}, temporary=null, autoCreateAddress=null, "
            f"internal={_b(e['internal'])}, transient=null, autoCreated={_b(self.auto_created)}, fqqn=null]]"
        )


def _java_whitespace(c: str) -> bool:
    """``Character.isWhitespace`` for one UTF-16 unit: space, line and paragraph separators other than the
    no-break spaces, plus TAB, LF, VT, FF, CR and the four information separators U+001C..U+001F."""
    o = ord(c)
    if 0x09 <= o <= 0x0D or 0x1C <= o <= 0x1F:
        return True
    if o in (0xA0, 0x2007, 0x202F):
        return False
    return unicodedata.category(c) in ("Zs", "Zl", "Zp")


@dataclass(frozen=True)
class QueueStatusRecord(UserRecordBody):
    """22 QUEUE_STATUS_RECORD: ``i64 queueID, i16 status``."""

    TYPE: ClassVar[int] = JournalRecordIds.QUEUE_STATUS_RECORD
    queue_id: int
    status: int
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"), status=r.i16("status"))

    def _write(self, w):
        w.i64(self.queue_id).i16(self.status)

    def describe(self, **_):
        return (f"QueueStatusEncoding [id={self.record_id}, queueID={self.queue_id}, "
                f"status={_s(STATUS_NAMES.get(self.status))}]")


@dataclass(frozen=True)
class IdCounterRecord(UserRecordBody):
    """24 ID_COUNTER_RECORD: ``i64`` the ID generator's high-water mark."""

    TYPE: ClassVar[int] = JournalRecordIds.ID_COUNTER_RECORD
    id: int

    @classmethod
    def _read(cls, r):
        return dict(id=r.i64("id counter"))

    def _write(self, w):
        w.i64(self.id)

    def describe(self, **_):
        return f"IDCounterEncoding [id={self.id}]"


@dataclass(frozen=True)
class AddressSettingRecord(UserRecordBody):
    """25 ADDRESS_SETTING_RECORD (legacy binary AddressSettings): the address match, then opaque bytes.

    The binary AddressSettings encoding is not analysed (§5.2), so ``describe()`` cannot print the
    settings Artemis prints; it shows their size instead."""

    TYPE: ClassVar[int] = JournalRecordIds.ADDRESS_SETTING_RECORD
    address_match: str
    setting: bytes
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(address_match=r.simple_string("addressMatch"), setting=r.bytes(r.remaining, "setting"))

    def _write(self, w):
        w.simple_string(self.address_match).raw(self.setting)

    def describe(self, **_):
        return (f"PersistedAddressSetting [storeId={self.record_id}, addressMatch={self.address_match}, "
                f"setting=<{len(self.setting)} bytes not decoded>]")


_ROLE_FIELDS = ("send", "consume", "create_durable_queue", "delete_durable_queue", "create_non_durable_queue",
                "delete_non_durable_queue", "manage", "browse", "create_address", "delete_address")
_ROLE_LABELS = ("sendRoles", "consumeRoles", "createDurableQueueRoles", "deleteDurableQueueRoles",
                "createNonDurableQueueRoles", "deleteNonDurableQueueRoles", "manageRoles", "browseRoles",
                "createAddressRoles", "deleteAddressRoles", "viewRoles", "editRoles")


@dataclass(frozen=True)
class SecuritySettingRecord(UserRecordBody):
    """26 SECURITY_SETTING_RECORD: address match, ten nullable role lists, optional view and edit
    (``view_present``/``edit_present`` say whether the record carries them)."""

    TYPE: ClassVar[int] = JournalRecordIds.SECURITY_SETTING_RECORD
    address_match: str
    send: str | None = None
    consume: str | None = None
    create_durable_queue: str | None = None
    delete_durable_queue: str | None = None
    create_non_durable_queue: str | None = None
    delete_non_durable_queue: str | None = None
    manage: str | None = None
    browse: str | None = None
    create_address: str | None = None
    delete_address: str | None = None
    view: str | None = None
    edit: str | None = None
    view_present: bool = True
    edit_present: bool = True
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        d = {"address_match": r.simple_string("addressMatch")}
        for f in _ROLE_FIELDS:
            d[f] = r.nullable_simple_string(f)
        d["view_present"] = r.remaining > 0
        d["view"] = r.nullable_simple_string("view") if d["view_present"] else None
        d["edit_present"] = r.remaining > 0
        d["edit"] = r.nullable_simple_string("edit") if d["edit_present"] else None
        return d

    def _write(self, w):
        w.simple_string(self.address_match)
        for f in _ROLE_FIELDS:
            w.nullable_simple_string(getattr(self, f))
        if self.view_present:
            w.nullable_simple_string(self.view)
            if self.edit_present:
                w.nullable_simple_string(self.edit)

    def describe(self, **_):
        values = [getattr(self, f) for f in _ROLE_FIELDS] + [self.view, self.edit]
        body = ", ".join(f"{label}={_s(v)}" for label, v in zip(_ROLE_LABELS, values))
        return f"PersistedSecuritySetting [storeId={self.record_id}, addressMatch={self.address_match}, {body}]"


@dataclass(frozen=True)
class DivertRecord(UserRecordBody):
    """27 DIVERT_RECORD (DivertConfiguration.encode): nullable Strings name, address, forwardingAddress,
    routingName; ``boolA exclusive``; nullable String filter; ``u8`` routing type; nullable String transformer
    class name and, when present, ``i32 n`` and n (nullable String key, nullable String value)."""

    TYPE: ClassVar[int] = JournalRecordIds.DIVERT_RECORD
    name: str | None
    address: str | None
    forwarding_address: str | None
    routing_name: str | None
    exclusive: bool
    filter: str | None
    routing_type: int
    transformer_class: str | None = None
    transformer_properties: tuple[tuple[str | None, str | None], ...] = ()

    @classmethod
    def _read(cls, r):
        d = dict(
            name=r.nullable_string("divert name"),
            address=r.nullable_string("divert address"),
            forwarding_address=r.nullable_string("forwardingAddress"),
            routing_name=r.nullable_string("routingName"),
            exclusive=r.bool("exclusive"),
            filter=r.nullable_string("filter"),
            routing_type=r.i8("routing type"),
            transformer_class=r.nullable_string("transformer class"),
        )
        props = []
        if d["transformer_class"] is not None:
            n = r.i32("transformer property count")
            if n < 0 or n > r.remaining:
                raise FormatError(f"divert transformer property count {n}")
            for _ in range(n):
                props.append((r.nullable_string("transformer property key"),
                              r.nullable_string("transformer property value")))
        d["transformer_properties"] = tuple(props)
        return d

    def _write(self, w):
        for v in (self.name, self.address, self.forwarding_address, self.routing_name):
            w.nullable_string(v)
        w.bool_a(self.exclusive).nullable_string(self.filter).u8(self.routing_type)
        w.nullable_string(self.transformer_class)
        if self.transformer_class is not None:
            w.i32(len(self.transformer_properties))
            for k, v in self.transformer_properties:
                w.nullable_string(k).nullable_string(v)

    def describe(self, **_):
        if self.transformer_class is None:
            transformer = "null"
        else:
            merged: dict = {}
            for k, v in self.transformer_properties:
                merged[k] = v
            keys = list(merged)
            order = hashmap_growing_order([0 if k is None else java_string_hash(k) for k in keys])
            props = "{" + ", ".join(f"{_s(keys[i])}={_s(merged[keys[i]])}" for i in order) + "}"
            transformer = f"TransformerConfiguration [className={self.transformer_class}, properties={props}]"
        rt = COMPONENT_ROUTING_TYPES.get(self.routing_type)
        # DescribeJournal decodes diverts without setStoreId, so storeId is always 0.
        return ("PersistedDivertConfiguration{storeId=0, divertConfiguration=DivertConfiguration ["
                f"name={_s(self.name)}, routingName={_s(self.routing_name)}, address={_s(self.address)}, "
                f"forwardingAddress={_s(self.forwarding_address)}, exclusive={_b(self.exclusive)}, "
                f"filterString={_s(self.filter)}, routing-type={_s(rt)}, "
                f"transformerConfiguration={transformer}]}}")


@dataclass(frozen=True)
class OpaqueRecord(UserRecordBody):
    """A body amqtool keeps as raw bytes (bridge 28, connector 51, message body chunk 49, legacy 31)."""

    TYPE: ClassVar[int] = -1
    data: bytes = b""

    @classmethod
    def _read(cls, r):
        return dict(data=r.bytes(r.remaining, "record body"))

    def _write(self, w):
        w.raw(self.data)

    def describe(self, **_):
        return NULL_TEXT


@dataclass(frozen=True)
class BridgeRecord(OpaqueRecord):
    """28 BRIDGE_RECORD (PersistedBridgeConfiguration): not analysed (§9), kept opaque."""

    TYPE: ClassVar[int] = JournalRecordIds.BRIDGE_RECORD

    def describe(self, **_):
        return f"PersistedBridgeConfiguration(<{len(self.data)} bytes not decoded>)"


@dataclass(frozen=True)
class ConnectorRecord(OpaqueRecord):
    """51 CONNECTOR_RECORD: opaque; DescribeJournal does not decode it (``** null **``)."""

    TYPE: ClassVar[int] = JournalRecordIds.CONNECTOR_RECORD


@dataclass(frozen=True)
class MessageBodyRecord(OpaqueRecord):
    """49 ADD_MESSAGE_BODY: a raw large-message body chunk (history mode); printed as ``** null **``."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_MESSAGE_BODY


@dataclass(frozen=True)
class LegacyMessageRecord(OpaqueRecord):
    """31 ADD_MESSAGE (Artemis 1.x core message): not decodable by current tools."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_MESSAGE

    def describe(self, **_):
        return "ADD-MESSAGE is not supported any longer, use export/import"


@dataclass(frozen=True)
class PendingLargeMessageRecord(UserRecordBody):
    """29 ADD_LARGE_MESSAGE_PENDING (legacy): ``i64 messageID``."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_LARGE_MESSAGE_PENDING
    message_id: int

    @classmethod
    def _read(cls, r):
        return dict(message_id=r.i64("messageID"))

    def _write(self, w):
        w.i64(self.message_id)

    def describe(self, **_):
        return f"PendingLargeMessageEncoding::MessageID={self.message_id}"


@dataclass(frozen=True)
class AddressBindingRecord(UserRecordBody):
    """44 ADDRESS_BINDING_RECORD: name, ``i32 n`` routing-type bytes, ``boolA autoCreated``, optional
    ``boolA internal`` (None when absent). The address id is the record id."""

    TYPE: ClassVar[int] = JournalRecordIds.ADDRESS_BINDING_RECORD
    name: str
    routing_types: tuple[int, ...] = (0,)
    auto_created: bool = False
    internal: bool | None = False
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        name = r.simple_string("address name")
        n = r.i32("routing type count")
        if n < 0 or n > r.remaining:
            raise FormatError(f"address binding lists {n} routing types")
        types = tuple(r.u8("routing type") for _ in range(n))
        auto = r.bool("autoCreated")
        internal = r.bool("internal") if r.remaining > 0 else None
        return dict(name=name, routing_types=types, auto_created=auto, internal=internal)

    def _write(self, w):
        w.simple_string(self.name).i32(len(self.routing_types))
        for t in self.routing_types:
            w.u8(t)
        w.bool_a(self.auto_created)
        if self.internal is not None:
            w.bool_a(self.internal)

    @property
    def address_id(self) -> int:
        return self.record_id

    @property
    def routing_type_names(self) -> list[str]:
        """The EnumSet: MULTICAST before ANYCAST, each once (unknown codes left out)."""
        return [ROUTING_TYPES[t] for t in (0, 1) if t in self.routing_types]

    def describe(self, *, safe: bool = False, **_):
        if safe:
            return "PersistentAddressBindingEncoding(safe data)"
        return (f"PersistentAddressBindingEncoding [id={self.record_id}, name={self.name}, "
                f"routingTypes={{{','.join(self.routing_type_names)}}}, autoCreated={_b(self.auto_created)}, "
                f"internal={_b(bool(self.internal))}]")


@dataclass(frozen=True)
class AddressStatusRecord(UserRecordBody):
    """46 ADDRESS_STATUS_RECORD: ``i64 addressID, i16 status``."""

    TYPE: ClassVar[int] = JournalRecordIds.ADDRESS_STATUS_RECORD
    address_id: int
    status: int

    @classmethod
    def _read(cls, r):
        return dict(address_id=r.i64("addressID"), status=r.i16("status"))

    def _write(self, w):
        w.i64(self.address_id).i16(self.status)

    def describe(self, **_):
        return f"AddressStatusEncoding{{status={_s(STATUS_NAMES.get(self.status))}, id={self.address_id}}}"


@dataclass(frozen=True)
class UserRecord(UserRecordBody):
    """47 USER_RECORD: ``String username, String password`` (the password never printed)."""

    TYPE: ClassVar[int] = JournalRecordIds.USER_RECORD
    username: str
    password: str
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(username=r.string("username"), password=r.string("password"))

    def _write(self, w):
        w.string(self.username).string(self.password)

    def describe(self, **_):
        return f"PersistedUser [storeId={self.record_id}, username={self.username}, password=****]"


@dataclass(frozen=True)
class RoleRecord(UserRecordBody):
    """48 ROLE_RECORD: ``String username, i32 n, n × String role``."""

    TYPE: ClassVar[int] = JournalRecordIds.ROLE_RECORD
    username: str
    roles: tuple[str, ...] = ()
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        user = r.string("username")
        n = r.i32("role count")
        if n < 0 or n * 4 > r.remaining:
            raise FormatError(f"role record lists {n} roles")
        return dict(username=user, roles=tuple(r.string("role") for _ in range(n)))

    def _write(self, w):
        w.string(self.username).i32(len(self.roles))
        for role in self.roles:
            w.string(role)

    def describe(self, **_):
        return f"PersistedRole [storeId={self.record_id}, username={self.username}, roles [{', '.join(self.roles)}]]"


@dataclass(frozen=True)
class KeyValuePairRecord(UserRecordBody):
    """50 KEY_VALUE_PAIR_RECORD: ``String mapId, String key, String value``. DescribeJournal does not
    decode this type, so ``describe()`` is ``** null **``; :meth:`text` is PersistedKeyValuePair's own
    toString."""

    TYPE: ClassVar[int] = JournalRecordIds.KEY_VALUE_PAIR_RECORD
    map_id: str
    key: str
    value: str
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(map_id=r.string("mapId"), key=r.string("key"), value=r.string("value"))

    def _write(self, w):
        w.string(self.map_id).string(self.key).string(self.value)

    def describe(self, **_):
        return NULL_TEXT

    def text(self) -> str:
        return (f"PersistedKeyValuePair [storeId={self.record_id}, mapId={self.map_id}, key={self.key}, "
                f"value={self.value}]")


@dataclass(frozen=True)
class AddressSettingJsonRecord(UserRecordBody):
    """52 ADDRESS_SETTING_RECORD_JSON: ``SimpleString addressMatch, SimpleString json``.

    Artemis prints ``setting=`` + the AddressSettings parsed from the JSON, whose toString lists every
    setting; amqtool prints the JSON text there instead (not byte-identical)."""

    TYPE: ClassVar[int] = JournalRecordIds.ADDRESS_SETTING_RECORD_JSON
    address_match: str
    json: str
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(address_match=r.simple_string("addressMatch"), json=r.simple_string("JSON setting"))

    def _write(self, w):
        w.simple_string(self.address_match).simple_string(self.json)

    def describe(self, **_):
        return (f"PersistedAddressSettingJSON{{jsonSetting={self.json}, storeId={self.record_id}, "
                f"addressMatch={self.address_match}, setting={self.json}}}")


# --- messages journal ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _QueueRef(UserRecordBody):
    queue_id: int

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"))

    def _write(self, w):
        w.i64(self.queue_id)


@dataclass(frozen=True)
class AddRefRecord(_QueueRef):
    """32 ADD_REF (an UPDATE on the message id): ``i64 queueID``."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_REF

    def describe(self, **_):
        return f"AddRef;QueueEncoding [queueID={self.queue_id}]"


@dataclass(frozen=True)
class AckRefRecord(_QueueRef):
    """33 ACKNOWLEDGE_REF (an UPDATE on the message id): ``i64 queueID``."""

    TYPE: ClassVar[int] = JournalRecordIds.ACKNOWLEDGE_REF

    def describe(self, **_):
        return f"ACK;QueueEncoding [queueID={self.queue_id}]"


@dataclass(frozen=True)
class DeliveryCountRecord(UserRecordBody):
    """34 UPDATE_DELIVERY_COUNT: ``i64 queueID, i32 count``."""

    TYPE: ClassVar[int] = JournalRecordIds.UPDATE_DELIVERY_COUNT
    queue_id: int
    count: int

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"), count=r.i32("count"))

    def _write(self, w):
        w.i64(self.queue_id).i32(self.count)

    def describe(self, **_):
        return f"DeliveryCountUpdateEncoding [queueID={self.queue_id}, count={self.count}]"


@dataclass(frozen=True)
class PageTransactionRecord(UserRecordBody):
    """35 PAGE_TRANSACTION as an add: ``i64 transactionID, i32 numberOfMessages``."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_TRANSACTION
    transaction_id: int
    number_of_messages: int
    record_id: int = 0

    @classmethod
    def _read(cls, r):
        return dict(transaction_id=r.i64("transactionID"), number_of_messages=r.i32("numberOfMessages"))

    def _write(self, w):
        w.i64(self.transaction_id).i32(self.number_of_messages)

    def describe(self, **_):
        return (f"PageTransactionInfoImpl(transactionID={self.transaction_id},id={self.record_id},"
                f"numberOfMessages={self.number_of_messages})")


@dataclass(frozen=True)
class PageUpdateTxRecord(UserRecordBody):
    """35 PAGE_TRANSACTION as an update: ``i64 pageTX, i32 records``."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_TRANSACTION
    page_tx: int
    records: int

    @classmethod
    def _read(cls, r):
        return dict(page_tx=r.i64("pageTX"), records=r.i32("records"))

    def _write(self, w):
        w.i64(self.page_tx).i32(self.records)

    def describe(self, **_):
        return f"PageUpdateTXEncoding [pageTX={self.page_tx}, records={self.records}]"


@dataclass(frozen=True)
class ScheduledDeliveryRecord(UserRecordBody):
    """36 SET_SCHEDULED_DELIVERY_TIME: ``i64 queueID, i64 scheduledDeliveryTime`` (epoch ms)."""

    TYPE: ClassVar[int] = JournalRecordIds.SET_SCHEDULED_DELIVERY_TIME
    queue_id: int
    scheduled_time: int

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"), scheduled_time=r.i64("scheduledDeliveryTime"))

    def _write(self, w):
        w.i64(self.queue_id).i64(self.scheduled_time)

    def describe(self, **_):
        return f"ScheduledDeliveryEncoding [scheduledDeliveryTime={self.scheduled_time}, queueID={self.queue_id}]"


@dataclass(frozen=True)
class DuplicateIdRecord(UserRecordBody):
    """37 DUPLICATE_ID: ``SimpleString address, i32 n, n bytes``."""

    TYPE: ClassVar[int] = JournalRecordIds.DUPLICATE_ID
    address: str
    duplicate_id: bytes

    @classmethod
    def _read(cls, r):
        address = r.simple_string("address")
        n = r.i32("duplicate id length")
        if n < 0:
            raise FormatError(f"duplicate id length {n}")
        return dict(address=address, duplicate_id=r.bytes(n, "duplicate id"))

    def _write(self, w):
        w.simple_string(self.address).i32(len(self.duplicate_id)).raw(self.duplicate_id)

    def describe(self, **_):
        hexed = bytes_to_hex(self.duplicate_id, 2)
        if self.address.startswith("BRIDGE") and len(self.duplicate_id) == 24:
            node = uuid_text(self.duplicate_id[:16])
            mid = int.from_bytes(self.duplicate_id[16:], "big", signed=True)
            return f"DuplicateIDEncoding [address={self.address}, duplID={hexed} / nodeUUID={node} messageID={mid}]"
        return f"DuplicateIDEncoding [address={self.address}, duplID={hexed}]"


@dataclass(frozen=True)
class HeuristicCompletionRecord(UserRecordBody):
    """38 HEURISTIC_COMPLETION: Xid, ``boolA isCommit``."""

    TYPE: ClassVar[int] = JournalRecordIds.HEURISTIC_COMPLETION
    xid: Xid
    is_commit: bool

    @classmethod
    def _read(cls, r):
        return dict(xid=Xid.read(r), is_commit=r.bool("isCommit"))

    def _write(self, w):
        self.xid.write(w)
        w.bool_a(self.is_commit)

    def describe(self, *, hash_text: str = HASH_PLACEHOLDER, **_):
        return f"HeuristicCompletionEncoding [xid={self.xid.describe(hash_text)}, isCommit={_b(self.is_commit)}]"


@dataclass(frozen=True)
class _CursorPosition(UserRecordBody):
    queue_id: int
    page_nr: int
    message_nr: int

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"), page_nr=r.i64("pageNr"), message_nr=r.i32("messageNr"))

    def _write(self, w):
        w.i64(self.queue_id).i64(self.page_nr).i32(self.message_nr)

    def _position(self) -> str:
        # the position's recordID is not stored: PagePositionImpl prints -1
        return f"PagePositionImpl [pageNr={self.page_nr}, messageNr={self.message_nr}, recordID=-1]"


@dataclass(frozen=True)
class CursorAckRecord(_CursorPosition):
    """39 ACKNOWLEDGE_CURSOR: ``i64 queueID, i64 pageNr, i32 messageNr``."""

    TYPE: ClassVar[int] = JournalRecordIds.ACKNOWLEDGE_CURSOR

    def describe(self, **_):
        return f"CursorAckRecordEncoding [queueID={self.queue_id}, position={self._position()}]"


@dataclass(frozen=True)
class PageCompleteRecord(_CursorPosition):
    """42 PAGE_CURSOR_COMPLETE: same layout as the cursor ack."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_CURSOR_COMPLETE

    def describe(self, **_):
        return f"PGComplete [queueID={self.queue_id}, position={self._position()}]"


@dataclass(frozen=True)
class PageCounterValueRecord(UserRecordBody):
    """40 PAGE_CURSOR_COUNTER_VALUE: ``i64 queueID, i64 value, [i64 persistentSize]`` (None if absent)."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_CURSOR_COUNTER_VALUE
    queue_id: int
    value: int
    persistent_size: int | None = 0

    @classmethod
    def _read(cls, r):
        q, v = r.i64("queueID"), r.i64("value")
        return dict(queue_id=q, value=v, persistent_size=r.i64("persistentSize") if r.remaining > 0 else None)

    def _write(self, w):
        w.i64(self.queue_id).i64(self.value)
        if self.persistent_size is not None:
            w.i64(self.persistent_size)

    def describe(self, **_):
        return (f"PageCountRecord [queueID={self.queue_id}, value={self.value}, "
                f"persistentSize={self.persistent_size or 0}]")


@dataclass(frozen=True)
class PageCounterIncRecord(UserRecordBody):
    """41 PAGE_CURSOR_COUNTER_INC: ``i64 queueID, i32 value, [i64 persistentSize]``."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_CURSOR_COUNTER_INC
    queue_id: int
    value: int
    persistent_size: int | None = 0

    @classmethod
    def _read(cls, r):
        q, v = r.i64("queueID"), r.i32("value")
        return dict(queue_id=q, value=v, persistent_size=r.i64("persistentSize") if r.remaining > 0 else None)

    def _write(self, w):
        w.i64(self.queue_id).i32(self.value)
        if self.persistent_size is not None:
            w.i64(self.persistent_size)

    def describe(self, **_):
        return (f"PageCountRecordInc [queueID={self.queue_id}, value={self.value}, "
                f"persistentSize={self.persistent_size or 0}]")


@dataclass(frozen=True)
class PageCounterPendingRecord(UserRecordBody):
    """43 PAGE_CURSOR_PENDING_COUNTER: ``i64 queueID, i64 pageID``."""

    TYPE: ClassVar[int] = JournalRecordIds.PAGE_CURSOR_PENDING_COUNTER
    queue_id: int
    page_id: int

    @classmethod
    def _read(cls, r):
        return dict(queue_id=r.i64("queueID"), page_id=r.i64("pageID"))

    def _write(self, w):
        w.i64(self.queue_id).i64(self.page_id)

    def describe(self, **_):
        return f"PageCountPendingImpl [queueID={self.queue_id}, pageID={self.page_id}]"


@dataclass(frozen=True)
class AddMessageRecord(UserRecordBody):
    """45 ADD_MESSAGE_PROTOCOL: a persister byte and the message (see :mod:`message`)."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_MESSAGE_PROTOCOL
    message: PersistedMessage

    @classmethod
    def _read(cls, r):
        return dict(message=read_persisted_message(r))

    def _write(self, w):
        self.message.write(w)

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None):
        return self.message.describe(safe=safe, hash_text=hash_text, tz=tz)


@dataclass(frozen=True)
class AddLargeMessageRecord(UserRecordBody):
    """30 ADD_LARGE_MESSAGE: the core large message header (no persister byte)."""

    TYPE: ClassVar[int] = JournalRecordIds.ADD_LARGE_MESSAGE
    message: LargeMessage

    @classmethod
    def decode(cls, body: bytes, *, record_id: int = 0):
        # LargeMessage keeps its own tail, so nothing is left for ``trailing``.
        return cls(message=LargeMessage.decode(body))

    def _write(self, w):
        self.message.write(w)

    def describe(self, *, safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None):
        return self.message.describe(safe=safe, hash_text=hash_text, tz=tz)


_ACK_REASONS = {0: "NORMAL", 1: "KILLED", 2: "EXPIRED", 3: "REPLACED"}


@dataclass(frozen=True)
class AckRetryRecord(UserRecordBody):
    """53 ACK_RETRY (mirroring; a JournalHashMap record): ``i64 id, u8 version, i64 collectionID``, then the
    AckRetry key: ``i32 n`` + n ASCII bytes nodeID (0 = null), ``i64 messageID``, ``u8 reason``."""

    TYPE: ClassVar[int] = JournalRecordIds.ACK_RETRY
    id: int
    version: int
    collection_id: int
    node_id: str | None
    message_id: int
    reason: int

    @classmethod
    def _read(cls, r):
        d = dict(id=r.i64("id"), version=r.u8("version"), collection_id=r.i64("collectionID"))
        n = r.i32("nodeID length")
        if n < 0:
            raise FormatError(f"nodeID length {n}")
        d["node_id"] = r.bytes(n, "nodeID").decode("latin-1") if n else None
        d["message_id"] = r.i64("messageID")
        d["reason"] = r.i8("reason")
        return d

    def _write(self, w):
        w.i64(self.id).u8(self.version).i64(self.collection_id)
        node = (self.node_id or "").encode("latin-1")
        w.i32(len(node)).raw(node).i64(self.message_id).u8(self.reason)

    def describe(self, **_):
        # AckReason.fromValue maps unknown codes to NORMAL; US-ASCII decoding turns bytes > 127 into U+FFFD
        node = None if self.node_id is None else "".join(c if ord(c) < 128 else "\ufffd" for c in self.node_id)
        ack = (f"AckRetry{{nodeID='{_s(node)}', messageID={self.message_id}, "
               f"reason={_ACK_REASONS.get(self.reason, 'NORMAL')}, pageAttempts=0, queueAttempts=0, viewCount=0}}")
        return f"MapRecord{{collectionID={self.collection_id}, id={self.id}, key={ack}, value={ack}}}"


@dataclass(frozen=True)
class UnknownRecord:
    """A body of a type DescribeJournal does not decode (23, ids outside 20..53), kept as bytes."""

    user_record_type: int
    body: bytes

    def encode(self) -> bytes:
        return self.body

    def describe(self, **_) -> str:
        return NULL_TEXT


RECORD_CLASSES: dict[int, type] = {
    cls.TYPE: cls
    for cls in (
        GroupingRecord, QueueBindingRecord, QueueStatusRecord, IdCounterRecord, AddressSettingRecord,
        SecuritySettingRecord, DivertRecord, BridgeRecord, PendingLargeMessageRecord, AddLargeMessageRecord,
        LegacyMessageRecord, AddRefRecord, AckRefRecord, DeliveryCountRecord, ScheduledDeliveryRecord,
        DuplicateIdRecord, HeuristicCompletionRecord, CursorAckRecord, PageCounterValueRecord,
        PageCounterIncRecord, PageCompleteRecord, PageCounterPendingRecord, AddressBindingRecord,
        AddMessageRecord, AddressStatusRecord, UserRecord, RoleRecord, MessageBodyRecord, KeyValuePairRecord,
        ConnectorRecord, AddressSettingJsonRecord, AckRetryRecord,
    )
}


# Queue and address bindings are read by several readers of one load (verify's evidence and its paging view,
# the export's bindings, print): each distinct (body, id) is decoded once. A decoded record is frozen and
# holds only immutable values, so the readers can share it; a body that does not decode raises each time.
_KEPT = frozenset({QueueBindingRecord, AddressBindingRecord})


@functools.lru_cache(maxsize=4096)
def _decode_kept(cls, body: bytes, record_id: int):
    return cls._decode(body, record_id)


def decode_user_record(user_record_type: int, body: bytes, *, is_update: bool = False,
                       journal: str = "messages", record_id: int = 0):
    """Decode a record body by its user record type as ``DescribeJournal.newObjectEncoding`` does (the same
    table serves both journals). A PAGE_TRANSACTION (35) is a :class:`PageUpdateTxRecord` when ``is_update``
    and a :class:`PageTransactionRecord` otherwise. Unknown types give an :class:`UnknownRecord`; malformed
    bodies of known types raise FormatError.

    ``journal="bindings"``: as the broker's load of its bindings journal decodes (bindings_load.py): a type
    that load does not decode (a message journal type among them) is an :class:`UnknownRecord`, and a body
    its Java decode cannot read raises FormatError even where the codec keeps it opaque."""
    if journal not in ("messages", "bindings"):
        raise ValueError(f"journal must be 'messages' or 'bindings', not {journal!r}")
    if journal == "bindings":
        from amqtool.formats.artemis.bindings_load import LOAD_TYPES, check_load

        if user_record_type not in LOAD_TYPES:
            return UnknownRecord(user_record_type, bytes(body))
        rec = RECORD_CLASSES[user_record_type].decode(bytes(body), record_id=record_id)
        check_load(user_record_type, rec)
        return rec
    if user_record_type == JournalRecordIds.PAGE_TRANSACTION:
        cls = PageUpdateTxRecord if is_update else PageTransactionRecord
    else:
        cls = RECORD_CLASSES.get(user_record_type)
    if cls is None:
        return UnknownRecord(user_record_type, bytes(body))
    return cls.decode(bytes(body), record_id=record_id)


def describe_user_record(user_record_type: int, body: bytes, *, record_id: int = 0, is_update: bool = False,
                         safe: bool = False, hash_text: str = HASH_PLACEHOLDER, tz=None) -> str:
    """The ``<obj>`` part of a ``data print`` line for one record body."""
    rec = decode_user_record(user_record_type, body, is_update=is_update, record_id=record_id)
    return rec.describe(safe=safe, hash_text=hash_text, tz=tz)


__all__ = [
    "JournalRecordIds", "RECORD_TYPE_NAMES", "RECORD_CLASSES", "NULL_TEXT", "UserRecordBody", "UnknownRecord",
    "decode_user_record", "describe_user_record",
    "GroupingRecord", "QueueBindingRecord", "QueueStatusRecord", "IdCounterRecord", "AddressSettingRecord",
    "SecuritySettingRecord", "DivertRecord", "BridgeRecord", "ConnectorRecord", "MessageBodyRecord",
    "LegacyMessageRecord", "OpaqueRecord", "PendingLargeMessageRecord", "AddressBindingRecord",
    "AddressStatusRecord", "UserRecord", "RoleRecord", "KeyValuePairRecord", "AddressSettingJsonRecord",
    "AddRefRecord", "AckRefRecord", "DeliveryCountRecord", "PageTransactionRecord", "PageUpdateTxRecord",
    "ScheduledDeliveryRecord", "DuplicateIdRecord", "HeuristicCompletionRecord", "CursorAckRecord",
    "PageCompleteRecord", "PageCounterValueRecord", "PageCounterIncRecord", "PageCounterPendingRecord",
    "AddMessageRecord", "AddLargeMessageRecord", "AckRetryRecord",
    "CoreMessage", "AmqpMessage", "AmqpLargeMessage", "LargeMessage",
]
