"""Page-record codec: framing (PageReadWriter), PagedMessage layouts, byte-exact round trips, bad bytes."""
from __future__ import annotations

import struct

import pytest

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import AmqpLargeMessage, AmqpMessage, CoreMessage, LargeMessage
from amqtool.formats.artemis.paging import (
    END_BAD_END,
    END_BAD_LENGTH,
    END_BAD_START,
    END_CLEAN,
    END_SHORT_TAIL,
    LARGE_CORE,
    LARGE_CORE_OLD,
    LARGE_NONE,
    LARGE_NOT_CORE,
    PagedMessage,
    amqp_large_extent,
    decode_page,
    encode_page_record,
    page_file_name,
    page_id_from_name,
    scan_page,
    summarize_record,
)
from amqtool.formats.artemis.primitives import TypedProperties, Writer
from tests.paging_stores import core_message, large_message


def _amqp(persister: int) -> AmqpMessage:
    extra = TypedProperties.of({"_AMQ_x": (6, 5)}) if persister != 2 else None
    enc = extra.encode() if extra else b""
    return AmqpMessage(persister, 77, 0, "amqp.addr", b"\x00\x53\x70\xc0\x01\x00", len(enc), extra,
                       1234 if persister == 5 else 0)


def _saved_amqp_encoding() -> bytes:
    """AMQPLargeMessage.saveEncoding: ints and four AMQP values (header described list, null annotations,
    a described properties list with a str8, null application properties)."""
    header = b"\x00\x53\x70\xc0\x04\x02\x41\x50\x04"  # described(0x70) list8 [true, ubyte 4]
    props = b"\x00\x53\x73\xc0\x08\x01\xa1\x05hello"  # described(0x73) list8 [str8 "hello"]
    w = Writer().i32(0).i32(len(header)).raw(header)
    w.i32(-1).i32(0).i32(-1).raw(b"\x40")
    w.i32(20).raw(props)
    w.i32(-1).i32(40).raw(b"\x40")
    return w.getvalue()


def _amqp_large() -> AmqpLargeMessage:
    rest = _saved_amqp_encoding() + struct.pack(">q", 99) + b"\x01"
    return AmqpLargeMessage(88, True, 0, "big.amqp", 0, None, rest)


SAMPLES = [
    PagedMessage.build(core_message(1, "a", "hello"), [1, 2, 3]),
    PagedMessage.build(core_message(2, "a", "x" * 300, user_id=bytes(range(16))), [9], transaction_id=42),
    PagedMessage.build(large_message(3, "a", 5000), [7]),
    PagedMessage(5, LARGE_CORE_OLD, large_message(4, "b", 10), (1,), len(large_message(4, "b", 10).encode())),
    PagedMessage.build(_amqp(2), [4]),
    PagedMessage.build(_amqp(3), [4, 5]),
    PagedMessage.build(_amqp(5), []),
    PagedMessage.build(_amqp_large(), [11, 12]),
]


@pytest.mark.parametrize("pm", SAMPLES, ids=lambda p: f"type{p.large_message_type}-{type(p.message).__name__}")
def test_paged_message_round_trip_and_summary(pm):
    data = pm.encode()
    back = PagedMessage.decode(data)
    assert back == pm
    assert back.encode() == data
    s = summarize_record(data, 0, len(data))
    assert (s.transaction_id, s.large_message_type, s.message_id, s.queue_ids) == (
        pm.transaction_id, pm.large_message_type, pm.message_id, pm.queue_ids)
    assert (s.header is not None) == pm.is_core_large


def test_layout_of_a_core_paged_message():
    pm = SAMPLES[1]
    data = pm.encode()
    assert struct.unpack_from(">qb", data) == (42, LARGE_NONE)
    assert data[9] == 1  # persister byte of CoreMessagePersister
    assert data[-12:] == struct.pack(">iq", 1, 9)
    assert data[10:10 + len(pm.message.encode()) - 1] == pm.message.encode()[1:]


def test_layout_of_a_core_large_paged_message():
    lm = large_message(3, "a", 5000)
    pm = PagedMessage.build(lm, [7])
    data = pm.encode()
    assert data[8] == LARGE_CORE
    header = lm.encode()
    assert struct.unpack_from(">i", data, 9)[0] == len(header) == pm.header_size
    assert data[13:13 + len(header)] == header  # no persister byte
    assert PagedMessage.decode(data).message.large_size == 5000
    old = bytearray(data)
    old[8] = 0xFF  # pre-2.12 boolean flag
    back = PagedMessage.decode(bytes(old))
    assert back.large_message_type == LARGE_CORE_OLD and back.is_core_large
    assert back.encode() == bytes(old)


def test_amqp_large_extent_stops_before_the_queue_ids():
    pm = PagedMessage.build(_amqp_large(), [11, 12])
    data = pm.encode()
    end = amqp_large_extent(data, 10, len(data))
    assert data[end:] == struct.pack(">iqq", 2, 11, 12)
    assert pm.large_message_type == LARGE_NOT_CORE


def test_trailing_bytes_after_queue_ids_are_kept():
    data = SAMPLES[0].encode() + b"\x00\x07"
    back = PagedMessage.decode(data)
    assert back.trailing == b"\x00\x07" and back.encode() == data


def _page(*messages) -> bytes:
    return b"".join(encode_page_record(m) for m in messages)


def test_framing_and_clean_end():
    page = _page(*SAMPLES)
    recs, end = scan_page(page)
    assert [r[0] for r in recs] == list(range(len(SAMPLES)))
    assert end.reason == END_CLEAN and end.offset == len(page) and end.records == len(SAMPLES)
    # '{' + i32 L + L bytes + '}'
    first = SAMPLES[0].encode()
    assert page[:5] == b"{" + struct.pack(">i", len(first)) and page[5 + len(first)] == ord("}")
    msgs, _ = decode_page(page)
    assert msgs == SAMPLES
    for (_, off, ln), m in zip(recs, SAMPLES):
        assert encode_page_record(page[off + 5:off + 5 + ln]) == page[off:off + 6 + ln] == encode_page_record(m)


def test_reading_stops_like_page_read_writer():
    a, b = encode_page_record(SAMPLES[0]), encode_page_record(SAMPLES[1])
    # fewer than 6 bytes left: ignored
    _, end = scan_page(a + b"{\x00\x00")
    assert (end.reason, end.offset, end.records) == (END_SHORT_TAIL, len(a), 1)
    # cut mid-record: the length runs past the end
    _, end = scan_page(a + b[:20])
    assert (end.reason, end.offset, end.records, end.length) == (END_BAD_LENGTH, len(a), 1, len(b) - 6)
    # corrupted end marker: the record and everything after it are not read
    bad = bytearray(a + b + a)
    bad[len(a) + len(b) - 1] = 0
    recs, end = scan_page(bytes(bad))
    assert len(recs) == 1 and (end.reason, end.offset) == (END_BAD_END, len(a))
    # a start byte that is not '{'
    recs, end = scan_page(a + b"\x00" * 40)
    assert len(recs) == 1 and end.reason == END_BAD_START and end.suspect
    # negative length
    _, end = scan_page(b"{" + struct.pack(">i", -3) + b"}" * 10)
    assert end.reason == END_BAD_LENGTH and end.records == 0
    # empty page
    recs, end = scan_page(b"")
    assert recs == [] and end.reason == END_CLEAN


@pytest.mark.parametrize("data", [
    b"",
    struct.pack(">qb", -1, 0),  # no message
    struct.pack(">qb", -1, 0) + b"\x09" + bytes(20),  # unknown persister
    struct.pack(">qbi", -1, 1, -5),  # negative header size
    struct.pack(">qbi", -1, 1, 500) + bytes(10),  # header longer than the record
    SAMPLES[0].encode()[:-3],  # queue ids cut
    SAMPLES[0].encode()[:-16] + struct.pack(">i", 1 << 30),  # queue count too large
])
def test_bad_bytes_raise_format_error(data):
    with pytest.raises(FormatError):
        PagedMessage.decode(data)
    with pytest.raises(FormatError):
        summarize_record(data, 0, len(data))


def test_page_file_names():
    assert page_file_name(1) == "000000001.page"
    assert page_file_name(1234567890) == "1234567890.page"
    assert page_id_from_name("000000017.page") == 17
    assert page_id_from_name("12.page.invalidPage") == 12
    assert page_id_from_name("abc.page") is None
    assert page_id_from_name(".page") is None


def test_build_picks_the_large_message_type():
    assert PagedMessage.build(core_message(1, "a", "x"), [1]).large_message_type == LARGE_NONE
    assert PagedMessage.build(large_message(1, "a", 1), [1]).large_message_type == LARGE_CORE
    assert PagedMessage.build(_amqp_large(), [1]).large_message_type == LARGE_NOT_CORE
    assert isinstance(PagedMessage.decode(SAMPLES[2].encode()).message, LargeMessage)
    assert isinstance(PagedMessage.decode(SAMPLES[0].encode()).message, CoreMessage)
