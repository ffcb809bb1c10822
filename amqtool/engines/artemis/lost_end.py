"""A transaction's PREPARE or COMMIT lost at a damaged end, named by the damaged record's own header (issue 25).

When the damaged bytes at the end of a file begin with a PREPARE or COMMIT header (record type, this file's
tag, the transaction id) and the load holds that transaction open (it found no PREPARE, COMMIT or ROLLBACK of
it: ``JournalImpl.load`` then fails it, ``TransactionFailureCallback``, and applies none of its records), the
broker wrote that transaction's end, and the damage took it. A COMMIT was the broker's word to the client that
the transaction's messages and acknowledgements were stored; a PREPARE, an XA transaction manager's vote. Both
are lost with the transaction's records: a proven loss when they held live records
(``Evidence.effect_of_discarded``).

``tails.py`` can only say "a commit lost there rolls them back, a rollback lost there changes nothing": which
end record was lost no window of ids shows. The header does, when it survives (the damage lies further on: the
PREPARE's extra-data size, the COMMIT's record count, the checksum). It is a record this use of the file wrote
whole, as :mod:`~amqtool.engines.artemis.lost_ack` reasons: the tag is the file's, a file the broker moved on
from holds no torn record (a restart goes on writing at the end of the last valid record, over any torn one), and
it starts where the last valid record ends (records are written back to back).

The message journal's only: a binding transaction's end lost is weighed by the bindings it held
(:mod:`~amqtool.engines.artemis.lost_binding`, the window's live ids in ``tails.py``).
"""
from __future__ import annotations

_PREPARE, _COMMIT = 17, 18


def lost_end(opened, result, index: int, first: int, last_end: int | None, evidence) -> tuple[int, int] | None:
    """``(record type, transaction id)`` when the damaged bytes at ``first`` of file ``index`` begin with the
    PREPARE or COMMIT header of a transaction the load ``result`` failed whose records hold live ones (their
    discard a loss), right after the last valid record (``last_end``); else None."""
    from amqtool.engines.artemis.evidence import LOSS, transaction_records

    if evidence is None or last_end is None or first != last_end:
        return None
    jf = opened.files[index]
    p = 5 + (jf.version >= 2)
    head = opened.pread(index, first, p + 8)
    if len(head) < p + 8 or head[0] not in (_PREPARE, _COMMIT):
        return None
    if int.from_bytes(head[1:5], "big", signed=True) != jf.tag:
        return None
    tx_id = int.from_bytes(head[p:p + 8], "big", signed=True)
    if not any(tx.tx_id == tx_id and not tx.prepared for tx in result.failed):
        return None
    if evidence.effect_of_discarded(transaction_records(opened, tx_id)) != LOSS:
        return None
    return head[0], tx_id
