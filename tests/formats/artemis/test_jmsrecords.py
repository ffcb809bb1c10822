"""The 1.x JMS journal's record codec (``JMSJournalStorageManagerImpl``): round trips and refusals."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from amqtool.errors import FormatError
from amqtool.formats.artemis.jmsrecords import (
    _CF_FIELDS,
    _CF_LATER_FIELDS,
    BINDING_RECORD,
    CF_RECORD,
    DESTINATION_RECORD,
    PersistedBindings,
    PersistedConnectionFactory,
    PersistedDestination,
    decode_jms_record,
)

names = st.text(max_size=30)
_VALUE = {"bool": st.booleans(), "int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**63, 2**63 - 1),
          "double": st.floats(allow_nan=False), "str": names, "nstr": st.none() | names}


@given(st.sampled_from(["Topic", "Queue"]), names, st.none() | names, st.booleans())
def test_destination_round_trip(t, name, selector, durable):
    d = PersistedDestination(t, name, selector, durable)
    assert decode_jms_record(DESTINATION_RECORD, d.encode()) == d


@given(st.sampled_from(["ConnectionFactory", "Topic", "Queue"]), names, st.lists(names, max_size=5))
def test_bindings_round_trip(t, name, jndi):
    b = PersistedBindings(t, name, jndi)
    assert decode_jms_record(BINDING_RECORD, b.encode()) == b


@given(names, st.none() | names, st.lists(names, max_size=3), st.data(), st.integers(0, len(_CF_LATER_FIELDS)))
def test_connection_factory_round_trip_of_every_release(name, group, connectors, data, later):
    # the records of earlier 1.x releases end before the fields added later
    fields = _CF_FIELDS + _CF_LATER_FIELDS[:later]
    settings = {f: data.draw(_VALUE[kind]) for f, kind in fields}
    cf = PersistedConnectionFactory(name, group, connectors, settings)
    assert decode_jms_record(CF_RECORD, cf.encode()) == cf


def test_the_encoding_is_the_brokers():
    # PersistedDestination.encode: type byte, SimpleString name, nullable SimpleString selector, boolean
    d = PersistedDestination("Queue", "q", None, True).encode()
    # (a SimpleString is its byte length, then UTF-16LE data)
    assert d == bytes([2]) + (2).to_bytes(4, "big") + "q".encode("utf-16-le") + bytes([0]) + bytes([0xFF])


@pytest.mark.parametrize("rtype, body", [(4, b""), (DESTINATION_RECORD, bytes([9]) + bytes(6)),
                                         (BINDING_RECORD, bytes([2, 0, 0, 0, 0]) + (99).to_bytes(4, "big")),
                                         (DESTINATION_RECORD, PersistedDestination("Queue", "q").encode() + b"x")])
def test_refusals(rtype, body):
    with pytest.raises(FormatError):
        decode_jms_record(rtype, body)


@given(st.sampled_from([CF_RECORD, DESTINATION_RECORD, BINDING_RECORD]), st.binary(max_size=200))
def test_any_bytes_decode_or_raise_format_error(rtype, body):
    try:
        decode_jms_record(rtype, body)
    except FormatError:
        pass
