"""damage.locate_one_byte above 65521 bytes, where Adler-32 leaves one candidate every 65521 bytes, and the
broker's record framing that tells them apart (campaign seed 9863, f2-big-bodies 98635000017 and
98635000309: the framed length of a 67,894-byte send flipped, latent judged CRITICAL: the one candidate
looked at lay inside the message)."""
from __future__ import annotations

import struct
import zlib

from amqtool.engines.kahadb.damage import _restore, _written_whole, locate_one_byte
from amqtool.engines.kahadb.indexed import IndexedMessage


def _record(n: int) -> bytes:
    """A user record of ``n`` bytes as MessageDatabase.store journals it: header, entry type, framed command."""
    body = bytes((7 * i) % 251 for i in range(n - 5 - 1 - 3))
    return struct.pack(">iB", n, 1) + bytes([1]) + bytes([0x80 | (len(body) & 0x7F), 0x80 | (len(body) >> 7 & 0x7F),
                                                           len(body) >> 14]) + body


def test_a_changed_byte_of_a_long_body_has_two_candidates_and_the_framing_picks_one():
    data = _record(67_894)
    stored = zlib.adler32(data)
    damaged = bytearray(data)
    damaged[6] ^= 0x04  # the framed length's first byte
    ats = locate_one_byte(bytes(damaged), stored)
    assert ats == [6 + 65_521, 6]  # (both restore the stored checksum)
    live = [("0:q", IndexedMessage(0, "m", 1, 0, len(data)))]
    assert [at for at in ats if _written_whole(_restore(bytes(damaged), at, stored), 0, live)] == [6]


def test_a_changed_message_byte_far_from_the_framing_keeps_its_candidate():
    data = _record(67_894)
    stored = zlib.adler32(data)
    damaged = bytearray(data)
    damaged[40_000] ^= 0x10  # inside the message: only 40,000 restores it (40,000 - 65,521 < 0)
    ats = locate_one_byte(bytes(damaged), stored)
    assert ats == [40_000]
    live = [("0:q", IndexedMessage(0, "m", 1, 0, len(data)))]
    assert _written_whole(_restore(bytes(damaged), 40_000, stored), 0, live)
