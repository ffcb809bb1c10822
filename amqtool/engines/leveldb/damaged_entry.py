"""A replayed entry record whose CRC-32 fails by one flipped bit of its data: what the replay's applying it as
read changes of what the broker delivers.

``LevelDBClient.replay_from`` checks no CRC (``verifyChecksums`` is off by default): a damaged entry record is
applied as read. CRC-32 is linear, so when flipping exactly one bit of the data gives the stored CRC back, that
bit is the damage and the record with it flipped back is the one the store wrote. The replay is then run from
the same snapshot both ways, and the two recovered indexes compared by what the broker delivers from them:

- a queue by its entries in key order, each with what it points at (``queueCursor`` hands a queue's entries
  out in key order; the sequence numbers themselves reach no consumer, and the next one the queue takes is
  above the highest either way), and by the messages its cursor never hands out (:mod:`.queue_cursor`);
- everything else exactly (topic entries against the subscriptions' ack positions, collection records,
  counters of other collections).

The same delivery either way is a WARNING; otherwise the mismatch stays CRITICAL.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.leveldb import records as R
from amqtool.formats.leveldb import recordlog as L
from amqtool.formats.leveldb.codecs import crc32

ENTRY_KINDS = (L.ADD_ENTRY, L.REMOVE_ENTRY, L.UPDATE_ENTRY)
_MAX_DATA = 256  # entry records are tens of bytes: a longer one is no entry record the store wrote


def flipped_bit(data, stored: int) -> int | None:
    """The one bit (``byte * 8 + bit``) of ``data`` whose flip makes its CRC-32 ``stored``; None when no single
    bit does."""
    data = bytearray(data)
    for i in range(len(data)):
        for b in range(8):
            data[i] ^= 1 << b
            if crc32(data) & 0xFFFFFFFF == stored:
                return i * 8 + b
            data[i] ^= 1 << b
    return None


def _is_queue(value) -> bool:
    try:
        return R.decode_collection(value).type == R.QUEUE
    except FormatError:
        return False


def _delivered(index: dict, meta: dict) -> dict:
    from amqtool.engines.leveldb.load import index_groups

    entries, collections = index_groups(index)
    queues = {R._Q.unpack_from(k, 1)[0] for k in collections if _is_queue(index[k])}
    view: dict = {k: v for k, v in index.items()
                  if not (k[:1] == R.ENTRY_PREFIX and len(k) >= 9 and R._Q.unpack_from(k, 1)[0] in queues)}
    for c in queues:
        items = entries.get(c, [])
        size = meta[c].size if c in meta else 0
        view[("queue", c)] = ([bytes(v) for _k, v in items], max(0, len(items) - size))
    for c, m in meta.items():
        if c not in queues:
            view[("size", c)] = m.size
    return view


def applying_changes(st, pos: int) -> bool | None:
    """Whether the replay's applying the entry record at log position ``pos`` as read, not as written, changes
    what the broker delivers; None when the written record cannot be told (not an entry record, no single bit
    restores its CRC-32)."""
    from amqtool.engines.leveldb.skipped_kind import Patched, replayed

    head = st.reader.read(pos, L.HEADER_SIZE)
    try:
        kind, stored, length = L.parse_header(head, 0)
    except (FormatError, TypeError):
        return None
    data = st.reader.read(pos + L.HEADER_SIZE, length) if kind in ENTRY_KINDS and length <= _MAX_DATA else None
    bit = flipped_bit(data, stored & 0xFFFFFFFF) if data is not None else None
    if bit is None:
        return None
    at = pos + L.HEADER_SIZE + bit // 8
    written = Patched(st.reader, at, data[bit // 8] ^ (1 << (bit % 8)))
    return _delivered(*replayed(st, st.reader)) != _delivered(*replayed(st, written))
