"""A transaction a damaged end cut off: its records run up to the damage, and its end record is nowhere.

At the damaged end of a message journal file the broker moved on from, the last record before the damage may
be one of a transaction that has no COMMIT, PREPARE or ROLLBACK anywhere in the journal: the load reports it
failed, and the broker discards it (``JournalImpl.load``: ``uncomittedTxFound``). ``tails.reweigh`` left such
an end a warning ("a commit lost there rolls them back, a rollback lost there changes nothing"). The odds are
not even:

* a transaction's end is missing from a healthy journal only while the broker that began it still runs and
  its client holds it open: every start appends a ROLLBACK for each transaction it loads without an end
  (``JournalImpl.load`` with ``changeData``, "I append a rollback record here"), so none is carried across a
  restart;
* the broker went on writing after that record, in this file (records were lost there:
  ``tails._records_lost``, the room left or a damaged record of this use) and in the files after it, while
  the transaction's own records stop at the damage: its next records and its end were written in the lost
  bytes;
* a client ends a transaction by committing it far more often than by rolling it back; a committed one whose
  COMMIT is lost is discarded at load, with the live records it held (messages it sent, acknowledgements of
  messages, which come back).

So when discarding that transaction loses live records (``Evidence.effect_of_discarded``), its COMMIT was
most likely among the lost records: CRITICAL by the odds, not a proof (a ROLLBACK lost there, or a transaction
still open in its client, would leave the same trace). A transaction whose discard changes nothing (its
messages deleted since) is left as it was (8 of 15 such ends lost nothing).

One trace tells a rolled-back sender apart: a queue delivers its messages in the order it received them
(``QueueImpl``'s references are a linked list per priority), and a transaction's messages reach their queues
only as it commits (``TransactionImpl.commit``). So when a transaction only sent, none of its messages was
delivered since (that would prove the commit: ``tails.IdLedger.delivered``), but a message sent after them was
acknowledged on one of their queues (on any, when the damage took its references too), its messages never
were on those queues: it rolled back, and losing its ROLLBACK changes nothing (left as it was).

Zeroed ranges in message journal files before the current one over the 48 JournalImpl stores (sweep seed 9301,
2,120 faults, half of them to the file's end): the broker lost messages at each of the 48 ends this turns from
a warning to CRITICAL (without the rolled-back sender's trace: 58 against 1, that one a sender rolled back).
"""
from __future__ import annotations

from amqtool.engines.artemis.evidence import LOSS, MESSAGE_TYPES, transaction_records
from amqtool.formats.artemis.records import DELETE, DELETE_TX, UPDATE, UPDATE_TX, ADD_TX, fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_TX_RECORDS = (ADD_TX, UPDATE_TX, DELETE_TX)


def cut_off_tx(result, index: int, first: int, evidence) -> int | None:
    """The id of the transaction whose record is the last one before ``first`` in file ``index`` of the load
    ``result``, when the load left it failed (no COMMIT, PREPARE or ROLLBACK of it survives; not prepared) and
    discarding it loses live records; else None. The caller establishes that records were lost at ``first``."""
    if evidence is None:
        return None
    tx_id = last_open_tx(result, index, first)
    if tx_id is None:
        return None
    records = transaction_records(result.opened, tx_id)
    if evidence.effect_of_discarded(records) != LOSS or _rolled_back_sender(result.opened, tx_id, records):
        return None
    return tx_id


def last_open_tx(result, index: int, first: int) -> int | None:
    """The transaction whose record is the last one before ``first`` in file ``index`` of the load ``result``,
    when the load left it failed (no COMMIT, PREPARE or ROLLBACK of it survives; not prepared); else None."""
    failed = {tx.tx_id for tx in result.failed if not tx.prepared}
    if not failed:
        return None
    last = None
    for base, _data, records, _marked in result.opened.scan_windows(index):
        for t, off, _size, _cc, tx, *_rest in records:
            if base + off >= first:
                break
            last = (t, tx)
    if last is None or last[0] not in _TX_RECORDS or last[1] not in failed:
        return None
    return last[1]


def _queue(body: bytes) -> int | None:
    return int.from_bytes(body[:8], "big", signed=True) if len(body) >= 8 else None


def _rolled_back_sender(opened, tx_id: int, records) -> bool:
    """Whether transaction ``tx_id`` (its ``records``) only sent messages, none of which a record outside it
    acknowledged or deleted, while an ACKNOWLEDGE_REF outside it acknowledged a message sent after them on one
    of their queues (a rescan of the journal, done only for a transaction a damaged end cut off)."""
    if any(r.type == DELETE_TX or r.type == UPDATE_TX and r.user_type == R.ACKNOWLEDGE_REF for r in records):
        return False
    sent = {r.id for r in records if r.type == ADD_TX and r.user_type in MESSAGE_TYPES}
    queues = {_queue(r.body) for r in records if r.type == UPDATE_TX and r.user_type == R.ADD_REF} - {None}
    if not sent:
        return False
    newest, younger = max(sent), False
    for fi, jf in enumerate(opened.files):
        for base, data, recs, _marked in opened.scan_windows(fi):
            for t, off, _size, _cc, tx, rid, utype, body_len, *_rest in recs:
                if tx == tx_id and t in (UPDATE_TX, DELETE_TX) or t not in (UPDATE, UPDATE_TX, DELETE, DELETE_TX):
                    continue
                if rid in sent:
                    return False  # delivered: committed (tails.IdLedger.delivered proves it)
                if rid > newest and utype == R.ACKNOWLEDGE_REF and t in (UPDATE, UPDATE_TX):
                    start = off + fixed_size(t, jf.version) - 4
                    # (its references lost with the damage, any queue: consumers took messages sent after them)
                    younger = younger or not queues or _queue(bytes(data[start:start + body_len])) in queues
    return younger
