"""One damaged bit or byte of a record id, as the broker reads the id: a signed 64-bit long.

``JournalImpl`` writes a record id as a big-endian ``long`` (``JournalAddRecord.encode``: ``putLong(id)``), and
the scanner hands it back signed. A flip of the top bit, or any damage to the top byte, of a small id gives a
negative id; Python's integers carry an unbounded sign, so ``rid ^ (1 << 63)`` of a negative ``rid`` stays
negative and never comes back to the small id the record had. These helpers flip within 64 bits and read the
result back signed, as the broker would read the damaged bytes.
"""
from __future__ import annotations

from typing import Iterator

_MASK = (1 << 64) - 1


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
