"""``amqtool recover`` for Artemis stores: :mod:`.damage` (what the broker's scan skips, decoded),
:mod:`.run` (the engine: salvage, transactions, pages and large messages, DEST written aside)."""
from __future__ import annotations

from amqtool.engines.artemis.recover.damage import LostRecord, decode_region
from amqtool.engines.artemis.recover.run import RecoverReport, RecoverRequest, recover_store

__all__ = ["LostRecord", "RecoverReport", "RecoverRequest", "decode_region", "recover_store"]
