"""The two codecs LevelDB files need beyond the standard library: raw snappy (SST blocks written with
``CompressionType.SNAPPY``, as leveldbjni does by default; the store's DATA records with
``logCompression=snappy``, compressed by snappy-java's ``Snappy.compress``, the raw format too) and CRC-32C
with LevelDB's mask (``crc32c::Mask``: rotate right by 15 bits, add 0xa282ead8)."""
from __future__ import annotations

from amqtool.errors import FormatError

_MASK_DELTA = 0xA282EAD8


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
