"""Page files: the record framing and the paged message (artemis-journal-format.md §7.1).

A page file (``<pagingDir>/<folder>/<9-digit id>.page``) has no header and no filler: records follow one
another, each ``'{'`` + ``i32 L`` + L bytes of PagedMessage + ``'}'`` (``PageReadWriter.writeMessage``).
Reading mirrors ``PageReadWriter.readFromSequentialFile``: it stops at the first record whose start byte is
not ``{``, whose length runs past the end of the file, or whose end byte is not ``}``; fewer than 6 bytes
left over are ignored. The 0-based index of a record is its message number (what cursor acks point at).

A PagedMessage (``PagedMessageImpl.encode``) is::

    i64 transactionID  (-1: not transactional)
    i8  largeMessageType  (0 normal, 1 core large, -1 core large written before 2.12, 2 AMQP large)
    type 1 / -1: i32 headerSize + headerSize bytes of core large-message header (no persister byte)
    otherwise:   persister byte + the message, exactly as a type-45 journal record holds it
    i32 n, n x i64 queue ids

``PagedMessageImpl.decode`` picks the branch by the type byte only (1 and -1 are core large, anything else
goes through the persister byte), and so does this codec. Bytes after the queue ids inside L are kept in
``trailing`` so that ``encode(decode(b)) == b`` for every record.

An AMQP large message (persister 4) has no length of its own: Artemis' persister reads the saved AMQP
header encoding (ints and four AMQP-encoded sections), then the expiration and the re-encoded flag. To find
where the queue ids start, :func:`amqp_large_extent` walks the same fields, skipping AMQP 1.0 values by
their constructor codes.

Pure codec: bytes in, dataclasses out, FormatError for bad bytes; no file access.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import (
    AMQP_LARGE_PERSISTER,
    AMQP_PERSISTER,
    AMQP_PERSISTER_V2,
    AMQP_PERSISTER_V3,
    CORE_PERSISTER,
    AmqpLargeMessage,
    AmqpMessage,
    CoreMessage,
    LargeMessage,
    read_persisted_message,
)
from amqtool.formats.artemis.primitives import Reader, Writer

START_BYTE = 0x7B  # '{'
END_BYTE = 0x7D  # '}'
RECORD_OVERHEAD = 6  # start byte + i32 length + end byte (PageReadWriter.SIZE_RECORD)

# PagedMessageImpl.LargeMessageType
LARGE_NONE = 0
LARGE_CORE = 1
LARGE_CORE_OLD = -1  # a boolean flag before 2.12 (ARTEMIS-3040): 0xFF
LARGE_NOT_CORE = 2
CORE_LARGE_TYPES = (LARGE_CORE, LARGE_CORE_OLD)

PAGE_SUFFIX = ".page"
ADDRESS_FILE = "address.txt"

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">bi")  # start byte, length
_TX_TYPE = struct.Struct(">qb")


def page_file_name(page_id: int) -> str:
    """``PagingStoreImpl.createFileName``: the id zero-padded to 9 digits, then ``.page``."""
    return f"{page_id:09d}{PAGE_SUFFIX}"


def page_id_from_name(name: str) -> int | None:
    """``PagingStoreImpl.getPageIdFromFileName``: the number before the first ``.`` (None if it is not
    one; Artemis would fail to start the store on such a name)."""
    stem = name.split(".", 1)[0]
    if not stem or not stem.isdigit() or not stem.isascii():
        return None
    return int(stem)


# --- AMQP 1.0 value skipping (for the saved encoding of AMQP large messages) ---------------------------------

_FIXED_WIDTH = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}


def _skip_amqp_value(buf, pos: int, end: int, depth: int = 0) -> int:
    """Position after the AMQP 1.0 encoded value at ``pos`` (AMQP 1.0 part 1, §1.2 and §1.6)."""
    if depth > 64:
        raise FormatError("AMQP value nested too deeply")
    if pos >= end:
        raise FormatError(f"truncated AMQP value at position {pos}")
    code = buf[pos]
    pos += 1
    if code == 0x00:  # described type: descriptor, then the value
        pos = _skip_amqp_value(buf, pos, end, depth + 1)
        return _skip_amqp_value(buf, pos, end, depth + 1)
    sub = code >> 4
    if sub in _FIXED_WIDTH:
        size = _FIXED_WIDTH[sub]
    elif sub in (0xA, 0xC, 0xE):  # variable/compound/array, 1-byte size
        if pos + 1 > end:
            raise FormatError(f"truncated AMQP size at position {pos}")
        size = buf[pos] + 1
    elif sub in (0xB, 0xD, 0xF):  # 4-byte size
        if pos + 4 > end:
            raise FormatError(f"truncated AMQP size at position {pos}")
        size = int.from_bytes(buf[pos:pos + 4], "big") + 4
    else:
        raise FormatError(f"invalid AMQP constructor 0x{code:02x} at position {pos - 1}")
    if pos + size > end:
        raise FormatError(f"AMQP value of {size} bytes at position {pos} runs past the record")
    return pos + size


def amqp_large_extent(buf, pos: int, end: int) -> int:
    """End of an AMQP large message (persister 4) that starts at ``pos`` (just after the persister byte):
    the fields ``AMQPLargeMessagePersister.decode`` reads, including the saved encoding
    (``AMQPLargeMessage.readSavedEncoding``), the i64 expiration and the boolean re-encoded flag."""
    r = Reader(buf, pos, end)
    r.i64("messageID")
    r.bool("durable")
    r.i64("messageFormat")
    r.nullable_simple_string("address")
    if r.i32("extra properties size") != 0:
        r.typed_properties("extra properties")
    p = r.pos
    # headerPosition, encodedHeaderSize, header, deliveryAnnotationsPosition, encodedDeliveryAnnotationsSize,
    # messageAnnotationsPosition, messageAnnotations, propertiesPosition, properties,
    # applicationPropertiesPosition, remainingBodyPosition, applicationProperties
    for ints, values in ((2, 1), (3, 1), (1, 1), (2, 1)):
        p += 4 * ints
        if p > end:
            raise FormatError("truncated AMQP large-message saved encoding")
        p = _skip_amqp_value(buf, p, end) if values else p
    p += 8 + 1  # expiration, reencoded
    if p > end:
        raise FormatError("truncated AMQP large-message expiration/reencoded fields")
    return p


# --- the paged message -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PagedMessage:
    """One decoded page record body (``PagedMessageImpl``).

    ``message`` is a :class:`LargeMessage` (header only; the body is in ``<messageID>.msg``) for
    ``large_message_type`` 1 and -1, otherwise the persisted message (core, AMQP or AMQP large).
    ``header_size`` is the stored header length of a core large message (what ``data print --safe`` shows),
    None otherwise.
    """

    transaction_id: int
    large_message_type: int
    message: CoreMessage | AmqpMessage | AmqpLargeMessage | LargeMessage
    queue_ids: tuple[int, ...]
    header_size: int | None = None
    trailing: bytes = b""

    @property
    def is_core_large(self) -> bool:
        return self.large_message_type in CORE_LARGE_TYPES

    @property
    def is_large(self) -> bool:
        """A large message: its body is in the large-messages directory."""
        return self.is_core_large or getattr(self.message, "is_large", False)

    @property
    def message_id(self) -> int:
        return self.message.message_id

    @property
    def address(self) -> str | None:
        return self.message.address

    @classmethod
    def read(cls, r: Reader) -> "PagedMessage":
        """Read a PagedMessage that fills ``r`` (the L bytes of one record)."""
        tx_id = r.i64("transactionID")
        ltype = r.i8("largeMessageType")
        header_size = None
        if ltype in CORE_LARGE_TYPES:
            header_size = r.i32("large message header size")
            if header_size < 0 or header_size > r.remaining:
                raise FormatError(f"large message header of {header_size} bytes does not fit in {r.remaining}")
            message = LargeMessage.read(Reader(r.buf, r.pos, r.pos + header_size))
            r.pos += header_size
        elif r.remaining > 0 and r.buf[r.pos] == AMQP_LARGE_PERSISTER:
            end = amqp_large_extent(r.buf, r.pos + 1, r.end)
            inner = Reader(r.buf, r.pos + 1, end)
            message = AmqpLargeMessage.read(inner)
            r.pos = end
        else:
            message = read_persisted_message(r)
        n = r.i32("queue id count")
        if n < 0 or n * 8 > r.remaining:
            raise FormatError(f"{n} queue ids do not fit in {r.remaining} bytes")
        queue_ids = struct.unpack_from(f">{n}q", r.buf, r.pos)
        r.pos += 8 * n
        trailing = r.bytes(r.remaining, "trailing bytes")
        return cls(tx_id, ltype, message, tuple(queue_ids), header_size, trailing)

    @classmethod
    def decode(cls, data: bytes) -> "PagedMessage":
        return cls.read(Reader(data))

    def write(self, w: Writer) -> Writer:
        w.i64(self.transaction_id).u8(self.large_message_type & 0xFF)
        if self.is_core_large:
            header = self.message.encode()
            w.i32(len(header)).raw(header)
        else:
            self.message.write(w)
        w.i32(len(self.queue_ids))
        for q in self.queue_ids:
            w.i64(q)
        return w.raw(self.trailing)

    def encode(self) -> bytes:
        return self.write(Writer()).getvalue()

    @classmethod
    def build(cls, message, queue_ids, transaction_id: int = -1) -> "PagedMessage":
        """A paged message as a current broker writes it (type 1 for core large, 2 for AMQP large)."""
        if isinstance(message, LargeMessage):
            ltype = LARGE_CORE
            header_size = len(message.encode())
        else:
            ltype = LARGE_NOT_CORE if getattr(message, "is_large", False) else LARGE_NONE
            header_size = None
        return cls(transaction_id, ltype, message, tuple(queue_ids), header_size)


def encode_page_record(message: PagedMessage | bytes) -> bytes:
    """One framed page record: ``{`` + i32 L + the PagedMessage + ``}``."""
    body = message if isinstance(message, (bytes, bytearray)) else message.encode()
    return b"{" + _I32.pack(len(body)) + bytes(body) + b"}"


# --- framing -----------------------------------------------------------------------------------------------

END_CLEAN = "end"  # the last record ends exactly at the end of the file
END_SHORT_TAIL = "short-tail"  # fewer than 6 bytes left after the last record (ignored by Artemis)
END_BAD_START = "bad-start-marker"
END_BAD_LENGTH = "bad-length"  # the length runs past the end of the file (or is negative)
END_BAD_END = "bad-end-marker"


@dataclass(frozen=True)
class PageScanEnd:
    """Where and why reading a page stopped. ``offset`` is the first byte not read as a record (the file
    size when clean); ``records`` the number of records read; ``length`` the stored L of the record that
    failed (bad-length, bad-end-marker)."""

    reason: str
    offset: int
    records: int
    size: int
    length: int | None = None

    @property
    def clean(self) -> bool:
        return self.reason == END_CLEAN

    @property
    def suspect(self) -> bool:
        """Artemis logs the page as suspect (``pageSuspectFile``) for these endings."""
        return self.reason in (END_BAD_START, END_BAD_LENGTH, END_BAD_END)


class PageScanner:
    """Iterate the records of one page's bytes: yields ``(message_number, offset, length)`` where the body is
    ``buf[offset + 5 : offset + 5 + length]``; afterwards :attr:`end` says where and why reading stopped."""

    def __init__(self, buf, size: int | None = None):
        self.buf = buf
        self.size = len(buf) if size is None else size
        self.end: PageScanEnd | None = None

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        buf, size = self.buf, self.size
        unpack = _HEAD.unpack_from
        pos = 0
        n = 0
        while size - pos >= RECORD_OVERHEAD:
            start, length = unpack(buf, pos)
            if start != START_BYTE:
                self.end = PageScanEnd(END_BAD_START, pos, n, size)
                return
            nxt = pos + RECORD_OVERHEAD + length
            if length < 0 or nxt > size:
                self.end = PageScanEnd(END_BAD_LENGTH, pos, n, size, length)
                return
            if buf[nxt - 1] != END_BYTE:
                self.end = PageScanEnd(END_BAD_END, pos, n, size, length)
                return
            yield n, pos, length
            n += 1
            pos = nxt
        self.end = PageScanEnd(END_CLEAN if pos == size else END_SHORT_TAIL, pos, n, size)


def scan_page(buf) -> tuple[list[tuple[int, int, int]], PageScanEnd]:
    """All record positions of a page and how reading ended (see :class:`PageScanner`)."""
    s = PageScanner(buf)
    records = list(s)
    return records, s.end


def decode_page(buf) -> tuple[list[PagedMessage], PageScanEnd]:
    """Every PagedMessage of a page (FormatError if a well-framed record does not decode, as Artemis'
    ``Page.read`` throws then) and how reading ended."""
    s = PageScanner(buf)
    out = [PagedMessage.read(Reader(buf, off + 5, off + 5 + ln)) for _, off, ln in s]
    return out, s.end


@dataclass(frozen=True)
class PagedRecordSummary:
    """What verify and counting need from a record, read without decoding the message (fast path):
    transaction id, large-message type, message id, queue ids; ``header`` is the (start, end) of a core
    large message's header inside the buffer."""

    transaction_id: int
    large_message_type: int
    message_id: int
    queue_ids: tuple[int, ...]
    header: tuple[int, int] | None = None


def _skip_nullable_simple_string(buf, p: int, end: int) -> int:
    if p >= end:
        raise FormatError("truncated address")
    if buf[p] == 0:
        return p + 1
    if p + 5 > end:
        raise FormatError("truncated address length")
    n = _I32.unpack_from(buf, p + 1)[0]
    if n < 0 or p + 5 + n > end:
        raise FormatError(f"address of {n} bytes runs past the record")
    return p + 5 + n


def summarize_record(buf, start: int, end: int) -> PagedRecordSummary:
    """The :class:`PagedRecordSummary` of the PagedMessage in ``buf[start:end]``. Core (persister 1) and
    AMQP (2, 3, 5) messages are skipped by their length fields; others are decoded."""
    if end - start < 9:
        raise FormatError(f"paged message of {end - start} bytes is shorter than its 9-byte head")
    tx_id, ltype = _TX_TYPE.unpack_from(buf, start)
    p = start + 9
    header = None
    if ltype in CORE_LARGE_TYPES:
        if p + 4 > end:
            raise FormatError("truncated large message header size")
        hs = _I32.unpack_from(buf, p)[0]
        p += 4
        if hs < 8 or p + hs > end:
            raise FormatError(f"large message header of {hs} bytes does not fit in {end - p}")
        mid = _I64.unpack_from(buf, p)[0]
        header = (p, p + hs)
        p += hs
    else:
        if p + 9 > end:
            raise FormatError("truncated persisted message")
        persister = buf[p]
        mid = _I64.unpack_from(buf, p + 1)[0]
        if persister == CORE_PERSISTER:
            q = _skip_nullable_simple_string(buf, p + 9, end)
            if q + 4 > end:
                raise FormatError("truncated core message buffer length")
            bl = _I32.unpack_from(buf, q)[0]
            if bl < 4 or q + 4 + bl > end:
                raise FormatError(f"core message buffer of {bl} bytes does not fit")
            p = q + 4 + bl
        elif persister in (AMQP_PERSISTER, AMQP_PERSISTER_V2, AMQP_PERSISTER_V3):
            r = Reader(buf, p + 1, end)
            AmqpMessage.read(r, persister)
            p = r.pos
        elif persister == AMQP_LARGE_PERSISTER:
            p = amqp_large_extent(buf, p + 1, end)
        else:
            raise FormatError(f"unknown message persister id {persister} (expected 1..5)")
    if p + 4 > end:
        raise FormatError("truncated queue id count")
    n = _I32.unpack_from(buf, p)[0]
    if n < 0 or p + 4 + 8 * n > end:
        raise FormatError(f"{n} queue ids do not fit in {end - p - 4} bytes")
    queue_ids = struct.unpack_from(f">{n}q", buf, p + 4)
    return PagedRecordSummary(tx_id, ltype, mid, queue_ids, header)


_TX_TYPE_PERSISTER_ID = struct.Struct(">qbBq")  # transactionID, largeMessageType, persister, messageID
_QUEUE_IDS: dict[int, struct.Struct] = {}


def _queue_ids_struct(n: int) -> struct.Struct:
    st = _QUEUE_IDS.get(n)
    if st is None:
        st = _QUEUE_IDS[n] = struct.Struct(f">{n}q")
    return st


class PageSummaries:
    """:class:`PageScanner` and :func:`summarize_record` fused for speed (verify reads every record of every
    page): yields ``(message_number, offset, length, transaction_id, large_message_type, message_id,
    queue_ids, header)``. Core messages (persister 1, the broker's common case) are located inline; other
    records go through :func:`summarize_record`. A record that does not decode stops the iteration and is
    kept in :attr:`error` as ``(message_number, offset, FormatError)``; otherwise :attr:`end` says how
    reading stopped (as :class:`PageScanner`)."""

    def __init__(self, buf, size: int | None = None):
        self.buf = buf
        self.size = len(buf) if size is None else size
        self.end: PageScanEnd | None = None
        self.error: tuple[int, int, FormatError] | None = None

    def __iter__(self):
        buf = self.buf
        fast = _TX_TYPE_PERSISTER_ID.unpack_from
        i32 = _I32.unpack_from
        qs = _queue_ids_struct
        # The framing is PageScanner's; this only adds the per-record summary.
        scanner = PageScanner(buf, self.size)
        for n, pos, length in scanner:
            p = pos + 5
            end = pos + RECORD_OVERHEAD + length - 1
            rec = None
            if length >= 27:
                tx_id, ltype, persister, mid = fast(buf, p)
                if ltype == LARGE_NONE and persister == CORE_PERSISTER:
                    q = p + 18
                    if buf[q] == 0:
                        q += 1
                    else:
                        q += 5 + i32(buf, q + 1)[0]
                    if p + 18 <= q <= end - 4:
                        bl = i32(buf, q)[0]
                        q += 4 + bl
                        if bl >= 4 and q <= end - 4:
                            k = i32(buf, q)[0]
                            if 0 <= k and q + 4 + 8 * k <= end:
                                rec = (n, pos, length, tx_id, ltype, mid, qs(k).unpack_from(buf, q + 4), None)
            if rec is None:
                try:
                    s = summarize_record(buf, p, end)
                except FormatError as err:
                    self.error = (n, pos, err)
                    return
                rec = (n, pos, length, s.transaction_id, s.large_message_type, s.message_id, s.queue_ids,
                       s.header)
            yield rec
        self.end = scanner.end


__all__ = [
    "START_BYTE", "END_BYTE", "RECORD_OVERHEAD", "LARGE_NONE", "LARGE_CORE", "LARGE_CORE_OLD", "LARGE_NOT_CORE",
    "PAGE_SUFFIX", "ADDRESS_FILE", "page_file_name", "page_id_from_name", "amqp_large_extent", "PagedMessage",
    "encode_page_record", "PageScanEnd", "PageScanner", "scan_page", "decode_page", "PagedRecordSummary",
    "summarize_record", "PageSummaries", "END_CLEAN", "END_SHORT_TAIL", "END_BAD_START", "END_BAD_LENGTH", "END_BAD_END",
]
