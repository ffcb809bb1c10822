"""The open transaction a COMMIT with no records committed (``verify``'s ``commit-damaged``).

``JournalImpl`` writes a transaction's records (ADD_TX, UPDATE_TX, DELETE_TX) and then its COMMIT, whose
``numberOfRecords`` counts the records of the transaction in the COMMIT's own file (``JournalTransaction``'s
counter); every one of them carries the transaction id. A record carries no checksum, so damage to a
transaction id splits the two: the COMMIT names a transaction with no records (``commit-unknown-tx``: the load
ignores it) and the records form a transaction that never ends, which the broker rolls back at start. Records in
the COMMIT's own file are never reclaimed apart from it, so a COMMIT counting records there while none of its
transaction is left was split from them. Which open transaction it committed, the store shows:

* one open transaction one flipped bit from the COMMIT's id (the COMMIT's id damaged);
* else the one open transaction one damaged byte from it whose records all lie in the COMMIT's file, before
  it, exactly as many as the COMMIT counts;
* else the one open transaction, so placed and counted, holding a PAGE_TRANSACTION add whose body names the
  COMMIT's transaction: the broker writes a page transaction in the journal transaction of the send, with that
  transaction's id as the first field of its body (``storePageTransaction(tx.getID(), ...)``), so the record's
  header id was damaged.

Prepared transactions are not candidates (a PREPARE completes them). What the rolled-back records held is then
weighed as a discarded transaction (``Evidence.effect_of_discarded``).
"""
from __future__ import annotations

from amqtool.formats.artemis.records import COMMIT, fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.formats.damage import one_byte_apart


def commit_count(opened, file_index: int, offset: int, version: int) -> int | None:
    """The ``numberOfRecords`` of the COMMIT at ``offset`` of file ``file_index`` (None when unreadable)."""
    size = fixed_size(COMMIT, version)
    try:
        raw = opened.pread(file_index, offset, size)
    except OSError:
        return None
    if len(raw) < size or raw[0] != COMMIT:
        return None
    return int.from_bytes(raw[size - 8:size - 4], "big", signed=True)


def committed_open_tx(result, opened, anomaly, failed: dict):
    """The open transaction (a :class:`~amqtool.engines.artemis.load.TxInfo` of ``failed``: id -> open,
    unprepared transaction) that the ``commit-unknown-tx`` ``anomaly`` of the load ``result`` committed, or
    None (see the module docstring)."""
    t = anomaly.ids["txId"]
    bits = [failed[t ^ (1 << k)] for k in range(64) if t ^ (1 << k) in failed]
    if bits:
        return bits[0]
    fi, off = anomaly.file_index, anomaly.offset
    n = commit_count(opened, fi, off, result.files[fi].version)
    if not n or n < 1:
        return None

    def placed(tx) -> bool:
        recs = list(tx.records) + list(tx.records_to_delete)
        return len(recs) == n and all(r.file_index == fi and r.body_offset < off for r in recs)

    near = [tx for tid, tx in failed.items() if one_byte_apart(tid, t) and placed(tx)]
    if len(near) == 1:
        return near[0]
    if near:
        return None
    named = [tx for tx in failed.values() if placed(tx) and any(
        r.user_record_type == R.PAGE_TRANSACTION and not r.is_update and r.body_len >= 8
        and int.from_bytes(result.body(r)[:8], "big", signed=True) == t for r in tx.records)]
    return named[0] if len(named) == 1 else None
