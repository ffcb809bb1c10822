"""The crash model (amqtool/formats/artemis/torn_write.py): within what a broker wrote since its last sync, a
crash leaves the file cut, or whole 4 KiB blocks unwritten (zero), never a zeroed run that ends inside a block
before written bytes, nor a changed bit. Each case is a write of non-zero bytes damaged one way, asked both as
the harness asks (the changed offsets known) and as verify asks (only the damaged bytes)."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.records import ADD, COMMIT, fixed_size
from amqtool.formats.artemis.torn_write import (
    BLOCK, crash_leaves, holds_unwritten_block, journal_tail_by_crash, unwritten,
)

# a write of 3 blocks' worth starting 100 bytes before a block boundary: [BLOCK - 100, 3 * BLOCK + 50)
START, END = BLOCK - 100, 3 * BLOCK + 50


def _written() -> bytearray:
    buf = bytearray(b"\x01" * START)  # what was synced before the write
    buf += bytes((i % 251) + 1 for i in range(END - START))  # never zero
    return buf


def _zero(buf: bytearray, a: int, b: int) -> bytearray:
    buf[a:b] = bytes(b - a)
    return buf


@pytest.mark.parametrize("a,b,crash", [
    (START, BLOCK, True),              # the write's start to a block boundary
    (BLOCK, 2 * BLOCK, True),          # one whole block
    (2 * BLOCK, 3 * BLOCK + 50, True),  # a block boundary to the write's end
    (START, END, True),                # all of it
    (START, START + 6, False),         # the write's start, ending inside the block before written bytes
    (BLOCK + 10, 2 * BLOCK, False),    # starting inside a block after written bytes
    (BLOCK, 2 * BLOCK - 1, False),     # one byte short of the boundary
    (START - 1, BLOCK, False),         # a byte before the write (synced)
])
def test_zeroed_runs(a, b, crash):
    buf = _zero(_written(), a, b)
    assert crash_leaves(buf, START, END, range(a, b)) is crash
    # verify's reading: the first zeroed byte is one a crash left unwritten only when its block's part is zero
    assert unwritten(buf, START, END, a) is crash


def test_a_flipped_bit_is_never_a_crash():
    buf = _written()
    buf[2 * BLOCK + 7] ^= 0x20
    assert not crash_leaves(buf, START, END, [2 * BLOCK + 7])
    assert not holds_unwritten_block(buf, START, END)


def test_a_cut_anywhere_is_a_crash():
    buf = _written()[:BLOCK + 1234]
    assert crash_leaves(buf, START, END, range(BLOCK + 1234, END))


def test_a_record_torn_in_its_middle_holds_an_unwritten_block():
    assert holds_unwritten_block(_zero(_written(), BLOCK, 2 * BLOCK), START, END)
    assert not holds_unwritten_block(_zero(_written(), BLOCK + 1, 2 * BLOCK), START, END)


def _journal(records: list[bytes], at: int = 16, size: int = 4 * BLOCK) -> bytearray:
    buf = bytearray(size)
    pos = at
    for r in records:
        buf[pos:pos + len(r)] = r
        pos += len(r)
    return buf


def _add(tag: int, rid: int, body: bytes) -> bytes:
    total = fixed_size(ADD, 2) + len(body)
    return (bytes([ADD]) + tag.to_bytes(4, "big") + b"\x00" + rid.to_bytes(8, "big") + len(body).to_bytes(4, "big")
            + b"\x2d" + body + total.to_bytes(4, "big"))


def _commit(tag: int, tx: int, n: int) -> bytes:
    return (bytes([COMMIT]) + tag.to_bytes(4, "big") + b"\x00" + tx.to_bytes(8, "big") + n.to_bytes(4, "big")
            + fixed_size(COMMIT, 2).to_bytes(4, "big"))


def _ask(buf, start: int) -> bool:
    first = next(i for i in range(start, len(buf)) if buf[i])
    return journal_tail_by_crash(lambda off, n: bytes(buf[off:off + n]), start, first, len(buf), 7, 2)


def test_journal_tail_by_crash():
    body = bytes((i % 200) + 1 for i in range(2 * BLOCK + 200))
    last = _add(7, 42, body)  # from BLOCK - 40 across two block boundaries, to 3 * BLOCK + 183
    start = BLOCK - 40
    whole = _journal([last], at=start)
    # a zeroed check word in a block that holds written bytes: not a crash
    assert not _ask(_zero(bytearray(whole), start + len(last) - 4, start + len(last)), start)
    # the record's last block unwritten (from the boundary to its end): a crash
    assert _ask(_zero(bytearray(whole), 3 * BLOCK, start + len(last)), start)
    # its first bytes zero up to the boundary, the rest written: a crash; up to inside the block: not
    assert _ask(_zero(bytearray(whole), start, BLOCK), start)
    assert not _ask(_zero(bytearray(whole), start, start + 6), start)
    # a flipped tag byte or a flipped check word: not a crash
    flipped = bytearray(whole)
    flipped[start + 4] ^= 0x01
    assert not _ask(flipped, start)
    flipped = bytearray(whole)
    flipped[start + len(last) - 1] ^= 0x01
    assert not _ask(flipped, start)
    # a commit cut by the end of the file: a crash
    c = _commit(7, 99, 3)
    cut = _journal([c], at=BLOCK - 10)[:BLOCK + 5]
    assert _ask(cut, BLOCK - 10)
