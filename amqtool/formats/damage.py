"""What one damaged byte does to a stored integer: the test every reading of a damaged id, page number or
queue id rests on (no journal or log these brokers write carries a checksum per field)."""
from __future__ import annotations

_MASK = 0xFFFF_FFFF_FFFF_FFFF


def one_byte_apart(a: int, b: int) -> bool:
    """Whether ``a`` and ``b``, as 64-bit two's-complement words, differ in exactly one byte."""
    x = (a ^ b) & _MASK
    return sum(1 for k in range(8) if x >> (8 * k) & 0xFF) == 1
