"""The codecs LevelDB files need beyond the standard library: :func:`crc32` (the store's log records:
``java.util.zip.CRC32``, zlib's polynomial; ISA-L's implementation when installed, for speed), and raw snappy (SST blocks written with
``CompressionType.SNAPPY``, as leveldbjni does by default; the store's DATA records with
``logCompression=snappy``, compressed by snappy-java's ``Snappy.compress``, the raw format too) and CRC-32C
with LevelDB's mask (``crc32c::Mask``: rotate right by 15 bits, add 0xa282ead8)."""
from __future__ import annotations

import zlib

from amqtool.errors import FormatError

_MASK_DELTA = 0xA282EAD8

try:  # ISA-L's CRC-32 (carry-less multiply): 2-4x zlib's on the machines measured (bench/bench_leveldb.py)
    from isal.isal_zlib import crc32 as crc32  # noqa: PLC0414 - the same function as zlib.crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives the same values
    crc32 = zlib.crc32


def crc32c(data) -> int:
    import google_crc32c

    return google_crc32c.value(bytes(data) if isinstance(data, memoryview) else data)


def crc32c_extend(crc: int, data) -> int:
    import google_crc32c

    return google_crc32c.extend(crc, bytes(data) if isinstance(data, memoryview) else data)


def mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def snappy_uncompress(data) -> bytes:
    """Raw (unframed) snappy; a FormatError when the bytes are not a snappy block."""
    import cramjam

    try:
        return bytes(cramjam.snappy.decompress_raw(bytes(data)))
    except Exception as err:  # noqa: BLE001 - cramjam raises its own DecompressionError
        raise FormatError(f"not a snappy block ({err})") from None


def snappy_compress(data) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.compress_raw(bytes(data)))
