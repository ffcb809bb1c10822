"""Ids of a damaged region's window that a rolled-back transaction was sending (``verify``'s ``damaged-tail`` and
``damaged-record``).

The window of a damaged region (:mod:`~amqtool.engines.artemis.tails`, :mod:`~amqtool.engines.artemis.wiped_run`)
holds the new ids the lost records may have carried; an id no surviving record carries may have been a live
message lost there. But a transaction whose ROLLBACK survives after the damage held nothing live:
``JournalImpl.load`` discards every record of a rolled-back transaction, wherever it lies. ``TransactionImpl``
takes its id from the ``BatchingIDGenerator`` as it is created, and each message sent in it takes the next ones
(``ServerSessionImpl.send``), so the ids that follow such a transaction's own id, with nothing between but ids of
its surviving records, ids no surviving record carries and one another, were its sends: rolled back with it.
(The same run :func:`~amqtool.engines.artemis.tails._owned` reads for a transaction the damage left open; an id
another record carries in between was issued to something else, and ends the run.) Not applied while a
transaction the damage may have left open (no end anywhere) has records before it: two transactions sending at
once interleave their ids, and whose run an id was cannot be told.
"""
from __future__ import annotations

_TX_RECORDS = (13, 14, 15)  # ADD_TX, UPDATE_TX, DELETE_TX
_ROLLBACK = 19
_ENDS = (17, 18, 19)  # PREPARE, COMMIT, ROLLBACK


def rolled_back_transactions(opened, after: tuple[int, int]) -> dict[int, set[int]]:
    """Transaction id -> the ids of its records, for the transactions of the journal ``opened`` whose ROLLBACK
    lies at or after ``after`` (file index, offset): past the damage (a rescan, on damage only)."""
    records: dict[int, set[int]] = {}
    rolled: set[int] = set()
    for fi in range(len(opened.files)):
        for base, _data, recs, _marked in opened.scan_windows(fi):
            for t, off, size, cc, tx, rid, *_rest in recs:
                if t in _TX_RECORDS:
                    records.setdefault(tx, set()).add(rid)
                elif t == _ROLLBACK and (fi, base + off) >= after:
                    rolled.add(tx)
    return {tx: records.get(tx, set()) for tx in rolled}


def only_rolled_back(opened, after: tuple[int, int], ids: set[int]) -> set[int]:
    """The ids of ``ids`` whose every record in the journal ``opened`` belongs to a transaction whose ROLLBACK
    lies at or after ``after`` (file index, offset), or that has records there and no end record anywhere:
    the load discards them all (a rescan, on damage only)."""
    if not ids:
        return set()
    rolled = set(rolled_back_transactions(opened, after))
    ended: set[int] = set()
    later: set[int] = set()
    carriers: dict[int, set[int]] = {}  # id -> the transactions of its records (-1: a record of none)
    for fi in range(len(opened.files)):
        for base, _data, recs, _marked in opened.scan_windows(fi):
            for t, off, _size, _cc, tx, rid, *_rest in recs:
                if t in _ENDS:
                    ended.add(tx)
                elif t in _TX_RECORDS and (fi, base + off) >= after:
                    later.add(tx)
                if rid in ids:
                    carriers.setdefault(rid, set()).add(tx if t in _TX_RECORDS else -1)
    # a transaction with records past the damage and no end anywhere did not lose its end there: the load
    # rolls it back (JournalImpl.load ends every transaction it finds without one)
    dead = rolled | (later - ended)
    return {x for x, txs in carriers.items() if txs <= dead}


def rolled_back_ids(ledger, opened, after: tuple[int, int], unaccounted: set[int], before: int) -> set[int]:
    """The ids of ``unaccounted`` (ids of a window below ``before`` that no surviving record carries) that a
    transaction rolled back after the damage at ``after`` (file index, offset) of the journal ``opened`` was
    sending (module docstring)."""
    if not unaccounted:
        return set()
    top = max(unaccounted)
    txs = {tx: own for tx, own in rolled_back_transactions(opened, after).items() if 0 <= tx < top}
    if not txs:
        return set()
    roles = ledger.roles(min(txs), before)
    owned: set[int] = set()
    for tx, own in txs.items():
        x = tx + 1
        while x < before and (x in own or x in unaccounted or not roles.get(x)):
            if x in unaccounted:
                owned.add(x)
            x += 1
    return owned


def rolled_clause(ids: list[int], listed: int = 20) -> str:
    """The clause of a finding's message naming the window's ids a transaction rolled back since was sending
    ('' for none)."""
    if not ids:
        return ""
    more = " ..." if len(ids) > listed else ""
    return (f"{len(ids)} sent by a transaction rolled back since ({', '.join(map(str, ids[:listed]))}{more}): "
            f"a ROLLBACK survives; ")
