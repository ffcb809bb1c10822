"""What the KahaDB tests ask of verify on a store copy, and the one damage most of them make."""
from __future__ import annotations

from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.store.layout import detect


def verdict(root: Path) -> tuple[str, set]:
    """(verify's overall verdict of the KahaDB store at ``root``, the codes of its findings above INFO)."""
    findings, _ = verify_store(detect(root))
    return overall_verdict(findings).name, {f.code for f in findings if f.severity.value != "info"}


def flip(root: Path, name: str, offset: int, mask: int) -> None:
    """``data[offset] ^= mask`` in file ``name`` of ``root``."""
    p = root / name
    data = bytearray(p.read_bytes())
    data[offset] ^= mask
    p.write_bytes(bytes(data))


def flipped(src: Path, tmp_path: Path, name: str, offset: int, mask: int) -> tuple[str, set]:
    """:func:`verdict` of a copy (under ``tmp_path``) of the store directory ``src`` with ``data[offset] ^= mask``
    in its file ``name``."""
    import shutil

    root = tmp_path / "kahadb"
    shutil.copytree(src, root)
    (root / "lock").unlink(missing_ok=True)
    flip(root, name, offset, mask)
    return verdict(root)


def zero(root: Path, name: str, offset: int, length: int) -> None:
    """``length`` zero bytes at ``offset`` of file ``name`` of ``root``."""
    p = root / name
    data = bytearray(p.read_bytes())
    data[offset:offset + length] = bytes(length)
    p.write_bytes(bytes(data))


# db.data page 0: state, destinations page, lastUpdate's flag, then its log id and offset
LAST_UPDATE_AT = 4096 + 21 + 4 + 8 + 1


def checkpoint_moved(src: Path, root: Path, was: tuple, to: tuple) -> bytearray:
    """A copy at ``root`` of the store directory ``src`` whose page 0 lastUpdate, ``was`` ((log id, offset)), is
    moved back to ``to``: its index then holds what was written after its checkpoint, as a killed broker that
    flushed index pages between checkpoints leaves it. Returns db.data's bytes (written back already)."""
    import shutil
    import struct

    shutil.copytree(src, root)
    (root / "lock").unlink(missing_ok=True)
    data = bytearray((root / "db.data").read_bytes())
    assert struct.unpack_from(">ii", data, LAST_UPDATE_AT) == was
    struct.pack_into(">ii", data, LAST_UPDATE_AT, *to)
    (root / "db.data").write_bytes(bytes(data))
    return data
