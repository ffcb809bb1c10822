"""The export's row schemas, defined once: the column lists below, and the Arrow schema both engines' table
writers take from them (:func:`arrow_schema`), so the two engines cannot drift apart.

``MESSAGE_COLUMNS``: one row per live message per queue (a message routed to three queues gives three rows).
``BINDING_COLUMNS``: one row per address binding and per queue binding.
``SUBSCRIPTION_COLUMNS``: one row per durable subscription of an ActiveMQ Classic store.

Types are written as small strings (``long``, ``int``, ``bool``, ``string``, ``binary``, ``props``) and
mapped by :func:`arrow_schema`. ``strmap`` is a map from string to nullable string. ``props`` is the message properties: a list of
``{name, type, value}`` structs in the order the broker's reader iterates them, ``value`` being the text
``artemis data exp`` writes (``toString``; bytes as URL-safe base64; null as ``_AMQ_NULL``), ``type`` its
property type name (``boolean``, ``byte``, ``short``, ``integer``, ``long``, ``float``, ``double``,
``simple-string``, ``bytes``; null for a char, which data exp writes without a type).
"""
from __future__ import annotations

import functools

SCHEMA_VERSION = 2  # 2: properties renamed typed_properties; properties (map), annotations, text added

# (name, type, nullable)
MESSAGE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("message_id", "long", False),
    ("queue", "string", False),
    ("queue_id", "long", True),
    ("address", "string", True),
    ("routing_type", "string", True),
    ("protocol", "string", False),  # core | amqp | openwire
    ("durable", "bool", True),
    ("priority", "int", True),
    ("timestamp", "long", True),
    ("expiration", "long", True),
    ("user_id", "string", True),
    ("type", "string", True),
    ("typed_properties", "props", True),
    ("body", "binary", True),  # null with --safe, and for a large message whose body file is missing
    ("body_size", "long", True),
    ("body_sha256", "string", True),
    ("large", "bool", False),
    ("paged", "bool", False),
    ("page", "long", True),  # paged messages: page number and 0-based position in the page
    ("page_position", "int", True),
    ("delivery_count", "int", False),
    ("scheduled_time", "long", True),
    ("transaction_state", "string", False),  # committed | prepared
    ("transaction_id", "long", True),
    ("store_message_id", "string", True),  # KahaDB: the OpenWire message id ("ID:..."); null for Artemis
    # schema 2: what an analyst queries (Spark SQL ``properties['region'] = 'EU'``)
    ("properties", "strmap", True),  # name -> value text (typed_properties' values; a null value null)
    ("annotations", "strmap", True),  # AMQP message annotations, same form; null for other protocols
    ("text", "string", True),  # the text of a text message (core TextMessage, AMQP AmqpValue string)
)

BINDING_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("kind", "string", False),  # address | queue; jms-queue | jms-topic | jms-connection-factory (1.x JMS journal)
    ("id", "long", True),
    ("name", "string", False),
    ("address", "string", True),
    ("routing_type", "string", True),  # queue: ANYCAST|MULTICAST; address: the routing types, comma-joined
    ("filter_string", "string", True),
    ("auto_created", "bool", True),
    ("user", "string", True),
)

# ActiveMQ Classic stores' durable subscriptions (KahaDB, mKahaDB, the JDBC adapter): one row each (the
# ``queue`` the messages rows name it by). Every table export writes this table, empty for an Artemis store.
SUBSCRIPTION_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("address", "string", False),  # the topic
    ("queue", "string", False),  # clientId:subscriptionName, as the messages and bindings rows name it
    ("client_id", "string", True),
    ("subscription_name", "string", True),
    ("selector", "string", True),
    ("no_local", "bool", True),  # SubscriptionInfo.noLocal (KahaDB; null for JDBC, which does not keep it)
    ("retroactive", "bool", True),  # KahaSubscriptionCommand.retroactive (KahaDB; null for JDBC)
    ("directory", "string", True),  # KahaDB: the store directory holding it, relative to the store ("." or
    #                                 an mKahaDB child); the locations below are that directory's
    ("subscribed_at", "long", True),  # KahaDB: file id << 32 | offset of the record that started it
    ("subscription_record", "long", True),  # KahaDB: the same of its current record (subLocations)
    ("last_ack_message_id", "long", True),  # the message_id of the last message it acknowledged (LastAck)
    ("last_ack_store_message_id", "string", True),  # that message's OpenWire id (KahaDB)
    ("pending", "long", False),  # the messages rows exported for it
)

# A fleet export (several stores, :mod:`.fleet`): the same tables with the store's name first (Parquet:
# partitioned by store, then queue for messages), and one row per input store.
STORE_COLUMN = ("store", "string", False)
FLEET_MESSAGE_COLUMNS = (STORE_COLUMN,) + MESSAGE_COLUMNS
FLEET_BINDING_COLUMNS = (STORE_COLUMN,) + BINDING_COLUMNS
FLEET_SUBSCRIPTION_COLUMNS = (STORE_COLUMN,) + SUBSCRIPTION_COLUMNS
STORES_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    STORE_COLUMN,
    ("kind", "string", True),  # artemis | kahadb | leveldb; null when nothing recognisable is there
    ("path", "string", False),  # absolute
    ("node_id", "string", True),  # Artemis: the node id in server.lock
    ("files", "long", False),  # journal files read (KahaDB: db-*.log)
    ("bytes", "long", False),  # their bytes
    ("verdict", "string", False),  # OK | WARNING (problems) | UNKNOWN (could not be exported)
    ("problem_count", "long", False),
    ("rows", "long", False),
    ("messages", "long", False),
    ("bindings", "long", False),
    ("problem", "string", True),  # UNKNOWN: why; WARNING: the first problem
)

MESSAGE_COLUMN_NAMES = tuple(c[0] for c in MESSAGE_COLUMNS)
BINDING_COLUMN_NAMES = tuple(c[0] for c in BINDING_COLUMNS)


def arrow_schema(columns=MESSAGE_COLUMNS):
    """The pyarrow schema of ``columns``, built once per set of columns (a schema is immutable, and building
    one costs about half a millisecond, which every ``MessageBatch`` paid: twice per fault of a campaign)."""
    try:
        return _arrow_schema(tuple(columns))
    except TypeError:  # (column specs that are not hashable: built each time)
        return _build_arrow_schema(columns)


@functools.lru_cache(maxsize=16)
def _arrow_schema(columns: tuple):
    return _build_arrow_schema(columns)


def _build_arrow_schema(columns):
    import pyarrow as pa

    prop = pa.struct([pa.field("name", pa.string(), False), pa.field("type", pa.string(), True),
                      pa.field("value", pa.string(), True)])
    types = {"long": pa.int64(), "int": pa.int32(), "bool": pa.bool_(), "string": pa.string(),
             "binary": pa.binary(), "props": pa.list_(pa.field("element", prop, False)),
             "strmap": pa.map_(pa.string(), pa.string())}
    return pa.schema([pa.field(n, types[t], nullable) for n, t, nullable in columns])
