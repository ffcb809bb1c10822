"""Hypothesis: page records round-trip byte for byte; any bytes give records or a clean stop, and decoding
gives a PagedMessage or FormatError, nothing else."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import CoreMessage, LargeMessage, MessageHeaders
from amqtool.formats.artemis.paging import (
    PagedMessage,
    PageScanner,
    encode_page_record,
    scan_page,
    summarize_record,
)
from amqtool.formats.artemis.primitives import Property, TypedProperties

I64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
PROPS = st.lists(st.tuples(TEXT, st.integers(-(2 ** 31), 2 ** 31 - 1)), max_size=4).map(
    lambda kv: TypedProperties.of([Property(k, 6, v) for k, v in kv]))


@st.composite
def headers(draw, mid):
    return MessageHeaders(mid, draw(st.none() | TEXT), draw(st.none() | st.binary(min_size=16, max_size=16)),
                          draw(st.sampled_from([0, 3, 4])), draw(st.booleans()), draw(I64), draw(I64),
                          draw(st.integers(0, 9)), draw(PROPS))


@st.composite
def paged_messages(draw):
    mid = draw(I64)
    h = draw(headers(mid))
    if draw(st.booleans()):
        msg = CoreMessage(mid, h.address, draw(st.binary(max_size=64)), h)
    else:
        msg = LargeMessage(h)
    pm = PagedMessage.build(msg, draw(st.lists(I64, max_size=5)), draw(I64))
    if pm.is_core_large and draw(st.booleans()):
        pm = PagedMessage(pm.transaction_id, -1, pm.message, pm.queue_ids, pm.header_size)
    return pm


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(paged_messages(), max_size=4))
def test_every_page_record_round_trips(messages):
    page = b"".join(encode_page_record(m) for m in messages)
    records, end = scan_page(page)
    assert end.reason == "end" and len(records) == len(messages)
    for (n, off, ln), m in zip(records, messages):
        body = page[off + 5:off + 5 + ln]
        back = PagedMessage.decode(body)
        assert back == m
        assert back.encode() == body
        assert encode_page_record(back) == page[off:off + 6 + ln]
        s = summarize_record(page, off + 5, off + 5 + ln)
        assert (s.transaction_id, s.message_id, s.queue_ids) == (m.transaction_id, m.message_id, m.queue_ids)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_scan_and_decode_or_format_error(data):
    s = PageScanner(data)
    pos = 0
    for n, off, ln in s:
        assert off == pos and data[off] == 0x7B and data[off + 5 + ln] == 0x7D
        pos = off + ln + 6
        for fn in (lambda: PagedMessage.decode(data[off + 5:off + 5 + ln]),
                   lambda: summarize_record(data, off + 5, off + 5 + ln)):
            try:
                fn()
            except FormatError:
                pass
    assert s.end.offset == pos and 0 <= len(data) - pos


@settings(max_examples=200)
@given(paged_messages(), st.integers(0, 400), st.integers(0, 255))
def test_flipped_bytes_never_escape_as_other_errors(pm, where, value):
    data = bytearray(pm.encode())
    data[where % len(data)] = value
    try:
        back = PagedMessage.decode(bytes(data))
    except FormatError:
        return
    assert isinstance(back, PagedMessage)
