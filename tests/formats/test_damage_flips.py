"""formats.damage bit_flips, byte_variants: one damaged bit or byte of a record id, read back as the signed long the broker reads."""
from __future__ import annotations

import struct

from amqtool.formats.damage import bit_flips, byte_variants, signed64


def _as_read(rid: int, offset: int, mask: int) -> int:
    raw = bytearray(struct.pack(">q", rid))
    raw[offset] ^= mask
    return struct.unpack(">q", bytes(raw))[0]


def test_the_sign_bit_of_a_small_id_gives_a_negative_id_and_back():
    damaged = _as_read(1068, 0, 0x80)
    assert damaged == -9223372036854774740
    assert damaged in bit_flips(1068)
    assert 1068 in bit_flips(damaged)
    assert damaged ^ (1 << 63) != 1068  # what Python's unbounded integers gave


def test_every_one_byte_damage_is_a_byte_variant():
    for offset, mask in ((0, 0xCB), (0, 0xC4), (7, 0x01), (3, 0xFF)):
        damaged = _as_read(242, offset, mask)
        assert damaged in set(byte_variants(242))
        assert 242 in set(byte_variants(damaged))
    variants = list(byte_variants(242))
    assert len(variants) == len(set(variants)) == 8 * 255 and 242 not in variants


def test_signed64_wraps_as_a_long():
    assert signed64((1 << 64) - 1) == -1 and signed64(1 << 63) == -(1 << 63) and signed64(5) == 5
