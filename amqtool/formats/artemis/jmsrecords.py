"""The Artemis 1.x JMS journal's records (``activemq-jms-N.jms``), as ``JMSJournalStorageManagerImpl`` wrote them.

Brokers of the 1.x line kept JMS administration objects in a third journal, beside the bindings journal
(``config.getBindingsLocation()``), named ``activemq-jms`` / ``jms``, 1 MiB files, two minimum files, userVersion
0. A broker upgraded to 2.x leaves it there. Its live records (loaded by the ordinary journal load) have three
user record types:

* ``CF_RECORD`` (1): ``PersistedConnectionFactory`` = ``ConnectionFactoryConfigurationImpl.encode``: the
  name, discovery group, connector names, and the client settings in a fixed order; the last four fields
  (protocol manager factory, deserialization black and white lists, enable1xPrefixes) were added over the
  1.x releases, so they are read only while bytes remain (as its ``decode`` does for the last one);
* ``DESTINATION_RECORD`` (2): ``PersistedDestination``: type byte (``PersistedType``: 0 connection factory,
  1 topic, 2 queue), name, nullable selector, durable;
* ``BINDING_RECORD`` (3): ``PersistedBindings`` (the JNDI names): type byte, name, count, names.

Any other user record type makes the 1.x ``load`` throw ``IllegalStateException("Invalid record type")``.
Booleans are ActiveMQBuffer booleans; strings SimpleStrings, as everywhere in the journal.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from amqtool.errors import FormatError
from amqtool.formats.artemis.primitives import Reader, Writer

CF_RECORD = 1
DESTINATION_RECORD = 2
BINDING_RECORD = 3
RECORD_TYPE_NAMES = {CF_RECORD: "CF_RECORD", DESTINATION_RECORD: "DESTINATION_RECORD", BINDING_RECORD: "BINDING_RECORD"}

PERSISTED_TYPES = {0: "ConnectionFactory", 1: "Topic", 2: "Queue"}
_TYPE_CODES = {v: k for k, v in PERSISTED_TYPES.items()}

# ConnectionFactoryConfigurationImpl.encode, after name, discovery group and connector names: (field, kind)
_CF_FIELDS: tuple[tuple[str, str], ...] = (
    ("ha", "bool"), ("clientID", "nstr"), ("clientFailureCheckPeriod", "long"), ("connectionTTL", "long"),
    ("callTimeout", "long"), ("cacheLargeMessagesClient", "bool"), ("minLargeMessageSize", "int"),
    ("consumerWindowSize", "int"), ("consumerMaxRate", "int"), ("confirmationWindowSize", "int"),
    ("producerWindowSize", "int"), ("producerMaxRate", "int"), ("blockOnAcknowledge", "bool"),
    ("blockOnDurableSend", "bool"), ("blockOnNonDurableSend", "bool"), ("autoGroup", "bool"),
    ("preAcknowledge", "bool"), ("loadBalancingPolicyClassName", "str"), ("transactionBatchSize", "int"),
    ("dupsOKBatchSize", "int"), ("initialWaitTimeout", "long"), ("useGlobalPools", "bool"),
    ("scheduledThreadPoolMaxSize", "int"), ("threadPoolMaxSize", "int"), ("retryInterval", "long"),
    ("retryIntervalMultiplier", "double"), ("maxRetryInterval", "long"), ("reconnectAttempts", "int"),
    ("failoverOnInitialConnection", "bool"), ("compressLargeMessage", "bool"), ("groupID", "nstr"),
    ("factoryType", "int"),
)
# added over the 1.x releases: present only in records written by the later ones
_CF_LATER_FIELDS: tuple[tuple[str, str], ...] = (
    ("protocolManagerFactoryStr", "nstr"), ("deserializationBlackList", "nstr"),
    ("deserializationWhiteList", "nstr"), ("enable1xPrefixes", "bool"),
)
_F64 = struct.Struct(">d")


@dataclass
class PersistedDestination:
    type: str  # Topic | Queue (PersistedType)
    name: str
    selector: str | None = None
    durable: bool = True

    def encode(self) -> bytes:
        return (Writer().u8(_TYPE_CODES[self.type]).simple_string(self.name)
                .nullable_simple_string(self.selector).bool_a(self.durable).getvalue())

    def to_json(self) -> dict:
        return {"type": self.type, "name": self.name, "selector": self.selector, "durable": self.durable}


@dataclass
class PersistedBindings:
    type: str
    name: str
    bindings: list[str] = field(default_factory=list)  # JNDI names

    def encode(self) -> bytes:
        w = Writer().u8(_TYPE_CODES[self.type]).simple_string(self.name).i32(len(self.bindings))
        for b in self.bindings:
            w.simple_string(b)
        return w.getvalue()

    def to_json(self) -> dict:
        return {"type": self.type, "name": self.name, "bindings": list(self.bindings)}


@dataclass
class PersistedConnectionFactory:
    name: str
    discovery_group: str | None = None
    connectors: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the rest, by ConnectionFactoryConfiguration name

    def encode(self) -> bytes:
        w = Writer().simple_string(self.name).nullable_simple_string(self.discovery_group).i32(len(self.connectors))
        for c in self.connectors:
            w.simple_string(c)
        for name, kind in _CF_FIELDS + _CF_LATER_FIELDS:
            if name not in self.settings:
                if (name, kind) in _CF_LATER_FIELDS:
                    break  # an older release's record ends here
                raise ValueError(f"connection factory setting {name} missing")
            _write(w, kind, self.settings[name])
        return w.getvalue()

    def to_json(self) -> dict:
        return {"name": self.name, "discoveryGroupName": self.discovery_group, "connectorNames": list(self.connectors),
                **self.settings}


def _read(r: Reader, kind: str, what: str):
    if kind == "bool":
        return r.bool(what)
    if kind == "int":
        return r.i32(what)
    if kind == "long":
        return r.i64(what)
    if kind == "double":
        return _F64.unpack(r.bytes(8, what))[0]
    if kind == "str":
        return r.simple_string(what)
    return r.nullable_simple_string(what)


def _write(w: Writer, kind: str, value) -> None:
    if kind == "bool":
        w.bool_a(bool(value))
    elif kind == "int":
        w.i32(value)
    elif kind == "long":
        w.i64(value)
    elif kind == "double":
        w.raw(_F64.pack(value))
    elif kind == "str":
        w.simple_string(value)
    else:
        w.nullable_simple_string(value)


def _persisted_type(r: Reader) -> str:
    code = r.i8("persisted type")
    if code not in PERSISTED_TYPES:
        raise FormatError(f"unknown PersistedType {code} (expected 0 connection factory, 1 topic, 2 queue)")
    return PERSISTED_TYPES[code]


def decode_jms_record(user_record_type: int, body: bytes):
    """The object a JMS journal record holds. FormatError for bytes that do not decode, and for a record type
    the 1.x load refuses ("Invalid record type")."""
    r = Reader(body)
    if user_record_type == DESTINATION_RECORD:
        out = PersistedDestination(_persisted_type(r), r.simple_string("destination name"),
                                   r.nullable_simple_string("selector"), r.bool("durable"))
    elif user_record_type == BINDING_RECORD:
        t, name = _persisted_type(r), r.simple_string("bindings name")
        n = r.i32("binding count")
        if n < 0 or n > r.remaining:
            raise FormatError(f"binding count {n} does not fit in {r.remaining} bytes")
        out = PersistedBindings(t, name, [r.simple_string("binding") for _ in range(n)])
    elif user_record_type == CF_RECORD:
        name = r.simple_string("connection factory name")
        group = r.nullable_simple_string("discovery group name")
        n = r.i32("connector count")
        if n < 0 or n > r.remaining:
            raise FormatError(f"connector count {n} does not fit in {r.remaining} bytes")
        connectors = [r.simple_string("connector name") for _ in range(n)]
        settings = {name_: _read(r, kind, name_) for name_, kind in _CF_FIELDS}
        for name_, kind in _CF_LATER_FIELDS:
            if r.remaining <= 0:
                break
            settings[name_] = _read(r, kind, name_)
        out = PersistedConnectionFactory(name, group, connectors, settings)
    else:
        raise FormatError(f"invalid JMS journal record type {user_record_type}: the 1.x broker refuses to load it")
    if r.remaining != 0:
        raise FormatError(f"{r.remaining} byte(s) after the {RECORD_TYPE_NAMES[user_record_type]}")
    return out
