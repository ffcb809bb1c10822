"""ByteNeighbours (amqtool/formats/damage.py) finds exactly what enumerating byte_variants finds."""
from __future__ import annotations

from hypothesis import given, strategies as st

from amqtool.formats.damage import ByteNeighbours, byte_variants, signed64

ids = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@given(st.lists(ids, min_size=1, max_size=8, unique=True), ids, st.integers(0, 7), st.integers(0, 255))
def test_byte_neighbours_are_the_byte_variants(orphans, rid, byte, value):
    # a rid built one byte from one of the set, or drawn freely
    near = signed64((orphans[0] & ~(0xFF << (8 * byte))) | (value << (8 * byte)))
    for r in (rid, near):
        want = [x for x in orphans if r in set(byte_variants(x))]
        assert ByteNeighbours(orphans).of(r) == want
