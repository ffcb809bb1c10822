"""What one damaged byte does to a stored integer: the test every reading of a damaged id, page number or
queue id rests on (no journal or log these brokers write carries a checksum per field).

The integers are read as the brokers read them: ``JournalImpl`` writes a record id as a big-endian ``long``
(``putLong(id)``) and the scanner hands it back signed. A flip of the top bit, or any damage to the top byte, of a
small id gives a negative id; Python's integers carry an unbounded sign, so ``rid ^ (1 << 63)`` of a negative
``rid`` stays negative and never comes back to the small id the record had: :func:`bit_flips` and
:func:`byte_variants` flip within 64 bits and read the result back signed."""
from __future__ import annotations

from typing import Iterator

_MASK = 0xFFFF_FFFF_FFFF_FFFF


def one_byte_apart(a: int, b: int) -> bool:
    """Whether ``a`` and ``b``, as 64-bit two's-complement words, differ in exactly one byte."""
    x = (a ^ b) & _MASK
    return sum(1 for k in range(8) if x >> (8 * k) & 0xFF) == 1


def signed64(u: int) -> int:
    """``u`` (any int) read as the broker reads 8 bytes: a signed 64-bit long."""
    u &= _MASK
    return u - (1 << 64) if u >> 63 else u


def bit_flips(rid: int) -> list[int]:
    """The 64 ids one flipped bit away from ``rid``."""
    u = rid & _MASK
    return [signed64(u ^ (1 << k)) for k in range(64)]


def byte_variants(rid: int) -> Iterator[int]:
    """Every other id that differs from ``rid`` in one byte (8 x 255 of them)."""
    u = rid & _MASK
    for b in range(8):
        shift = 8 * b
        base = u & ~(0xFF << shift)
        own = (u >> shift) & 0xFF
        for v in range(256):
            if v != own:
                yield signed64(base | (v << shift))


class ByteNeighbours:
    """The ids of a set one damaged byte from a given id, found by eight lookups instead of enumerating the
    8 x 255 :func:`byte_variants` of every id of the set (judges ask it of every record of a journal)."""

    def __init__(self, ids):
        self._order: dict[int, int] = {}
        self._by_rest: dict[tuple[int, int], list[int]] = {}
        for i, x in enumerate(ids):
            self._order[x] = i
            u = x & _MASK
            for b in range(8):
                self._by_rest.setdefault((b, u & ~(0xFF << (8 * b))), []).append(x)

    def of(self, rid: int) -> list[int]:
        """The ids of the set that differ from ``rid`` in exactly one byte, in the set's order."""
        u = rid & _MASK
        out = [x for b in range(8) for x in self._by_rest.get((b, u & ~(0xFF << (8 * b))), ()) if x != rid]
        return sorted(out, key=self._order.__getitem__)
