"""The open transaction a COMMIT with no records committed (``verify``'s ``commit-damaged``).

``JournalImpl`` writes a transaction's records (ADD_TX, UPDATE_TX, DELETE_TX) and then its COMMIT, whose
``numberOfRecords`` counts the records of the transaction in the COMMIT's own file (``JournalTransaction``'s
counter); every one of them carries the transaction id. A record carries no checksum, so damage to a
transaction id splits the two: the COMMIT names a transaction with no records (``commit-unknown-tx``: the load
ignores it) and the records form a transaction that never ends, which the broker rolls back at start. Records in
the COMMIT's own file are never reclaimed apart from it, so a COMMIT counting records there while none of its
transaction is left was split from them. Which open transaction it committed, the store shows:

* one open transaction one flipped bit from the COMMIT's id (the COMMIT's id damaged); of several, the one
  placed and counted as below;
* else the one open transaction one damaged byte from it with exactly as many records in the COMMIT's file,
  before it, as the COMMIT counts, and none after it (a transaction's records all precede its end record; those
  of earlier files the count leaves out);
* else the one open transaction, so placed and counted, holding a PAGE_TRANSACTION add whose body names the
  COMMIT's transaction: the broker writes a page transaction in the journal transaction of the send, with that
  transaction's id as the first field of its body (``storePageTransaction(tx.getID(), ...)``), so the record's
  header id was damaged.

Prepared transactions are not candidates (a PREPARE completes them). What the rolled-back records held is then
weighed as a discarded transaction (``Evidence.effect_of_discarded``).

A PREPARE is split from its records the same way (its ``numberOfRecords`` counts them in its file too): it then
names a transaction with no records, which the load fails for its count (``prepare-count-mismatch``, found 0),
and the in-doubt transaction is left open and rolled back (:func:`ended_open_tx`, prepare_mismatch.py).
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
    fi, off = anomaly.file_index, anomaly.offset
    n = commit_count(opened, fi, off, result.files[fi].version)
    return ended_open_tx(result, anomaly.ids["txId"], fi, off, n, failed)


def ended_open_tx(result, t: int, fi: int, off: int, n: int | None, failed: dict):
    """The open transaction of ``failed`` (id -> open, unprepared transaction) that the end record (COMMIT or
    PREPARE) at ``off`` of file ``fi``, naming transaction ``t`` with no records and counting ``n`` records in
    its file, ended before its transaction id was damaged; or None (see the module docstring)."""
    def placed(tx) -> bool:
        recs = list(tx.records) + list(tx.records_to_delete)
        here = [r for r in recs if r.file_index == fi]
        return (len(here) == n and all(r.body_offset < off for r in here)
                and all(r.file_index <= fi for r in recs))

    bits = [failed[t ^ (1 << k)] for k in range(64) if t ^ (1 << k) in failed]
    if len(bits) > 1:
        # ids are dense: a left-open transaction may lie one bit away too; the one the count places is it
        bits = [tx for tx in bits if n and placed(tx)]
        return bits[0] if len(bits) == 1 else None
    if bits:
        return bits[0]
    if not n or n < 1:
        return None

    near = [tx for tid, tx in failed.items() if one_byte_apart(tid, t) and placed(tx)]
    if len(near) == 1:
        return near[0]
    if near:
        return None
    named = [tx for tx in failed.values() if placed(tx) and any(
        r.user_record_type == R.PAGE_TRANSACTION and not r.is_update and r.body_len >= 8
        and int.from_bytes(result.body(r)[:8], "big", signed=True) == t for r in tx.records)]
    return named[0] if len(named) == 1 else None
