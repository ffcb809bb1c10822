"""Which transaction a transactional record read with a damaged transaction id belonged to: the one around it.

``reconstruct`` reads damaged bytes as one record with one wrong field. Zeros over a transactional record's tag
and transaction id read back as a record of transaction 0 with a damaged tag, and a transaction that has no
other record anywhere is then judged as one whose COMMIT counts it elsewhere: losing a reference of it "loses"
the message (demo-s1, header-zero sweep seed 9883: an ADD_REF of transaction 430, which a ROLLBACK right after
it ended, read as transaction 0's and judged CRITICAL). A session writes its transaction's records back to back
up to its end record (``TransactionImpl``'s operations, then ``commit``/``rollback``), so the record written
right before or right after the damaged bytes that is transactional names the transaction those bytes belonged
to -- when both do, they must agree.
"""
from __future__ import annotations

_TX_TYPES = (13, 14, 15, 17, 18, 19)  # ADD_TX, UPDATE_TX, DELETE_TX, PREPARE, COMMIT, ROLLBACK


def neighbour_tx(opened, index: int, first: int, end: int) -> int | None:
    """The transaction of the transactional records right before ``first`` and at ``end`` (the next valid
    record) in file ``index`` of ``opened``: the one they name, when one of them is transactional and the other
    is not or names the same; else None (a rescan of that file, done on damage only)."""
    before = after = None
    for base, _data, records, _marked in opened.scan_windows(index):
        for t, off, _size, _cc, tx, *_rest in records:
            if base + off < first:
                before = tx if t in _TX_TYPES else None
            elif base + off >= end:
                after = tx if t in _TX_TYPES else None
                break
        else:
            continue
        break
    named = {t for t in (before, after) if t is not None}
    return named.pop() if len(named) == 1 else None
