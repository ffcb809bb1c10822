"""dblog.single_bit_fix: the one bit a record's stored CRC-32C names."""
from __future__ import annotations

import random

from amqtool.formats.leveldb import dblog
from amqtool.formats.leveldb.codecs import crc32c


def test_single_bit_fix_finds_every_flipped_bit_and_nothing_else():
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(3000))
    head = b"\x01"
    stored = crc32c(head + data)
    for pos in (0, 1, 1499, 2999):
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            assert dblog.single_bit_fix(head, bytes(bad), stored) == data
    assert dblog.single_bit_fix(head, data, stored) is None  # nothing to fix
    assert dblog.single_bit_fix(head, data[:-1], stored) is None  # no single bit explains a lost byte
