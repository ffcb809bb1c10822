"""A prepared transaction whose PREPARE no longer counts its records (``prepare-count-mismatch``), weighed by what
the broker discards with it.

``JournalImpl.load`` checks a PREPARE's ``numberOfRecords`` against the transaction's records in the PREPARE's own
file (``onReadPrepareRecord`` -> ``checkTransactionHealth``, ``JournalTransaction.getCounter``); on a mismatch the
transaction is marked invalid, and the load hands it to ``loadManager.failedTransaction`` instead of the prepared
list (the broker rolls it back at start): the
in-doubt transaction is gone, and with it every message it added and every acknowledgement it held, whatever the
transaction manager decides. No crash leaves that: the broker writes a PREPARE after its records (through the
same ordered ``TimedBuffer``), and a torn tail takes the PREPARE with what follows it. So when the transaction's
records (those left, and those of an open transaction one damaged byte from its id: a record whose transaction id
was damaged, ``evidence.strayed_records``) change what the broker delivers, the loss is proven: CRITICAL. When
none does, or what they held cannot be told, the warning stays as it was.

A PREPARE whose own transaction id was damaged names a transaction with no records at all (found 0), and leaves
the transaction it prepared open: the broker rolls that one back at start. It is the open transaction the store
shows it ended (unknown_commits.ended_open_tx: one flipped bit away, or one damaged byte away with as many
records in the PREPARE's file before it as it counts), weighed as discarded.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity


def reweigh(findings: list[Finding], result, evidence) -> None:
    """Raise each ``prepare-count-mismatch`` warning of the messages journal loaded as ``result`` to CRITICAL when
    discarding its transaction loses what the broker delivers (:meth:`Evidence.effect_of_discarded`)."""
    from amqtool.engines.artemis.evidence import LOSS, strayed_records, transaction_records
    from amqtool.engines.artemis.unknown_commits import ended_open_tx

    opened = result.opened
    paths = {str(f.path): i for i, f in enumerate(result.files)}
    open_txs = {t.tx_id: t for t in result.failed if not t.prepared}
    for i, f in enumerate(findings):
        if f.code != "prepare-count-mismatch" or f.severity is not Severity.WARNING or f.path not in paths:
            continue
        d = f.details or {}
        tx = d.get("txId")
        if tx is None:
            continue
        unexplained = d.get("expected", 0) - d.get("found", 0)
        own = transaction_records(opened, tx)
        ended = None if own or d.get("found") else ended_open_tx(result, tx, paths[f.path], f.offset,
                                                                  d.get("expected"), open_txs)
        if ended is not None:
            records = transaction_records(opened, ended.tx_id)
            if evidence.effect_of_discarded(records) == LOSS:
                findings[i] = Finding(
                    Severity.CRITICAL, f.code,
                    f.message + f": it names no transaction's records, and open transaction {ended.tx_id} "
                    f"(one damaged byte from {tx}) is the one it prepared: its transaction id was damaged, so the "
                    f"broker rolls {ended.tx_id} back and loses the {len(records)} record(s) it held",
                    f.path, f.offset, dict(d, preparedTx=ended.tx_id))
            continue
        records = own + strayed_records(result, opened, tx, unexplained, paths[f.path])
        if evidence.effect_of_discarded(records) == LOSS:
            findings[i] = Finding(
                Severity.CRITICAL, f.code,
                f.message + f": no crash leaves that (a PREPARE follows its records), and the broker discards the "
                f"in-doubt transaction with the {len(records)} record(s) it held, losing what they add or "
                f"acknowledge", f.path, f.offset, dict(d))
