"""A transaction whose COMMIT is gone although its messages were delivered since (``verify``'s
``tx-commit-lost``, CRITICAL when discarding it loses live records: a proven loss. One that holds nothing live
any more is not reported: what else went with its COMMIT cannot be told, and a COMMIT whose transaction id was
damaged, or that a damaged end took, is other findings' to weigh).

``JournalImpl.load`` discards a transaction with no COMMIT, PREPARE or ROLLBACK record (``uncomittedTxFound``),
and every record it holds with it. A crash leaves such a transaction at the end of the journal: the broker was
still writing it. But the broker routes a transaction's messages to their queues only once it commits
(``TransactionImpl.commit`` runs the operations that add the references), so only then can a consumer receive
them: a later record outside the transaction that acknowledges, redelivers or deletes one of its messages
(ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT, DELETE) proves that it committed, and that its COMMIT was written
before that record. With the COMMIT gone -- its file deleted, emptied, or the record damaged -- the broker
discards the transaction and the messages still live in it: a loss no crash leaves, since the record that
proves it was written after the COMMIT. (``tails.py`` reads the same proof for a transaction a damaged end left
open; this reads it wherever the COMMIT went.) Not a message whose id another ADD carries too: the broker stores
a message once, so one of the two ids was damaged, and the delivery may be the other record's (an open
transaction's ADD_TX whose id was flipped onto a message delivered since is no COMMIT lost).
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL


def lost_commit_findings(result, evidence) -> list[Finding]:
    """One CRITICAL ``tx-commit-lost`` per open transaction of the message journal's load ``result`` that sent
    a message a later record outside it delivered, when discarding it loses live records (see the module)."""
    from amqtool.engines.artemis.evidence import LOSS, transaction_records
    from amqtool.engines.artemis.tails import added_elsewhere, first_deliveries

    if result is None or evidence is None:
        return []
    sent = {r.id: tx.tx_id for tx in result.failed if not tx.prepared for r in tx.records
            if r.user_record_type in _MESSAGES and not r.is_update}  # message id -> the open transaction
    opened = result.opened
    proof: dict[int, tuple[int, str, int]] = {}  # tx id -> (message, file, offset) of the first delivery
    delivered = first_deliveries(opened, sent)
    # a message id another ADD carries too: one of the two ids was damaged, and the delivery may be the other's
    doubled = added_elsewhere(opened, {mid: sent[mid] for mid in delivered})
    for mid, (_t, fi, off) in sorted(delivered.items(), key=lambda kv: kv[1][1:]):
        if mid not in doubled:
            proof.setdefault(sent[mid], (mid, str(opened.files[fi].path), off))
    out = []
    for tx_id, (mid, path, off) in sorted(proof.items()):
        if evidence.effect_of_discarded(transaction_records(opened, tx_id)) != LOSS:
            continue  # it holds nothing live any more: what else went with its COMMIT, other findings weigh
        out.append(Finding(
            Severity.CRITICAL, "tx-commit-lost",
            f"transaction {tx_id} has no commit, prepare or rollback record, but a later record outside it "
            f"acknowledges, redelivers or deletes message {mid} it sent: the broker delivers a transaction's "
            f"messages only once it commits, so its COMMIT was written and is gone (a file deleted, or records "
            f"damaged), and the broker discards the transaction with the live records it held",
            path, off, {"txId": tx_id, "messageId": mid}))
    return out
