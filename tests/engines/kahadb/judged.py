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
