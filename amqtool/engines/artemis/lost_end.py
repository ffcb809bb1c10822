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

A zeroed run starting inside the header can take the low bytes of its transaction id (a bindings COMMIT read as
"a commit of transaction 0": the known miss of the last stop). The id's surviving high bytes then name the transaction only together with the
record before it: when the last valid record belongs to an open transaction whose id those bytes do not
contradict, the COMMIT is that transaction's (the bindings journal's, ``commitBindings``, follows its binding's
record at once).

The same header at the start of a damaged run inside a file (valid records after it: ``verify``'s
``damaged-record``) names the end the run took, before the ids around the run are weighed (``wiped_run.py``
cannot tell a lost end from a transaction a client rolled back).

In the bindings journal it is read last, when the window of ids (``tails.py``) leaves an open transaction
untold: a binding lost at a damaged end is first weighed by its own head and by the window's live ids
(:mod:`~amqtool.engines.artemis.lost_binding`), whose findings say which binding.
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
    raw = head[p:p + 8]
    open_txs = {tx.tx_id: tx for tx in result.failed if not tx.prepared}
    tx_id = int.from_bytes(raw, "big", signed=True)
    if tx_id not in open_txs:
        tx_id = _zeroed_low_bytes(raw, open_txs, index, first)
        if tx_id is None:
            return None
    if evidence.effect_of_discarded(transaction_records(opened, tx_id)) != LOSS:
        return None
    return head[0], tx_id


def _zeroed_low_bytes(raw: bytes, open_txs: dict, index: int, first: int) -> int | None:
    """The open transaction whose record ends right before ``first`` (the last valid record of file ``index``)
    when the id bytes ``raw`` are its id with a zeroed run from some byte to the end; else None."""
    cut = len(raw.rstrip(b"\0"))
    if cut == len(raw):
        return None  # no zeroed low bytes: another id
    for tx in open_txs.values():
        records = tx.records + tx.records_to_delete
        if not records or tx.tx_id.to_bytes(8, "big", signed=True)[:cut] != raw[:cut]:
            continue
        last = max(records, key=lambda r: (r.file_index, r.body_offset))
        if last.file_index == index and last.body_offset + last.body_len + 4 == first:
            return tx.tx_id
    return None
