"""A record of a committed transaction whose transaction id was damaged (``verify``'s ``tx-id-damaged``).

The broker stores a message and its references in one transaction (``storeMessageTransactional``, then
``storeReferenceTransactional`` per queue, then the COMMIT): the ADD_TX of the message and the UPDATE_TX of each
reference carry one transaction id. A record carries no checksum, so one damaged byte of a reference's
transaction id moves it into a transaction that never ends: the broker rolls that back at load
(``JournalImpl.load``), and the reference is gone. When the COMMIT sits in another file, no record count shows
the shortfall (``JournalTransaction.getCounter`` counts the commit's own file).

The store tells it when every record of an open transaction is of a record that one other transaction, one
damaged byte away and not left open, added or updated in the same file: a broker writes a message and its
references in one transaction, so those records strayed from it (a message whose ADD strayed keeps its
references, a reference whose UPDATE strayed its message). What losing them costs is what losing the records
costs (``Evidence.effect_of_loss``): CRITICAL when the broker delivers something else without them.

Not in the current file (``current_file.py``): there an open transaction is what a crash or a cut of the tail
leaves (its COMMIT would have followed the last record the file still holds), and a transactional acknowledgement
(``storeAcknowledgeTransactional``: an UPDATE_TX of the message id) names the very records the transaction that
added them holds, at transaction ids that, written one after the other, differ in their low byte only. A record
that did stray there is seen otherwise: its owner's records lie in the current file, so its COMMIT does too, and
that COMMIT counts one record fewer than it says (``commit-count-mismatch``; ``JournalImpl.load`` drops such a
transaction).
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

_ADD, _UPDATE, _ADD_TX, _UPDATE_TX = 11, 12, 13, 14


def strayed_updates(result, evidence) -> list:
    """``[(open tx id, owner tx id, Rebuilt record, effect, path)]`` (see the module docstring)."""
    from amqtool.engines.artemis.current_file import current_file
    from amqtool.engines.artemis.evidence import Rebuilt
    from amqtool.formats.damage import one_byte_apart

    open_ids = {tx.tx_id for tx in result.failed} | {tx.tx_id for tx in result.prepared}
    out = []
    scans: dict[int, dict] = {}
    current = current_file(result)
    for tx in result.failed:
        if tx.prepared or tx.records_to_delete or not tx.records:
            continue
        files = {r.file_index for r in tx.records}
        if len(files) != 1:
            continue
        fi = files.pop()
        if current >= 0 and fi >= current:
            continue  # left open by the crash or cut that ended the current file (see the module docstring)
        jf = result.files[fi]
        if fi not in scans:
            # record id -> the transactions whose ADD_TX / UPDATE_TX of it are in this file (one windowed scan
            # of the file, the load's own scanner: on damage only, a transaction left open)
            ids: dict[int, set] = {}
            try:
                for _base, _data, records, _marked in result.opened.scan_windows(fi):
                    for t, _off, _size, _cc, tx_id, rid, *_rest in records:
                        if t in (_ADD_TX, _UPDATE_TX):
                            ids.setdefault(rid, set()).add(tx_id)
            except OSError:
                continue
            scans[fi] = ids
        owners = set().union(*(scans[fi].get(r.id, set()) - {tx.tx_id} for r in tx.records))
        if len(owners) != 1:
            continue
        owner = owners.pop()
        if owner in open_ids or not one_byte_apart(tx.tx_id, owner):
            continue
        for r in tx.records:
            rec = Rebuilt(_UPDATE if r.is_update else _ADD, 0, 0, -1, r.id, r.user_record_type, result.body(r), "")
            out.append((tx.tx_id, owner, rec, evidence.effect_of_loss("messages", rec), str(jf.path)))
    return out


def strayed_findings(result, evidence) -> list[Finding]:
    """One finding per open transaction of :func:`strayed_updates`."""
    from amqtool.engines.artemis.evidence import LOSS

    if result is None or not result.failed:
        return []
    by_tx: dict[int, list] = {}
    for item in strayed_updates(result, evidence):
        by_tx.setdefault(item[0], []).append(item)
    out = []
    for tx_id, items in by_tx.items():
        owner, path = items[0][1], items[0][4]
        lost = [rec.id for _, _, rec, effect, _ in items if effect == LOSS]
        out.append(Finding(
            Severity.CRITICAL if lost else Severity.WARNING, "tx-id-damaged",
            f"open transaction {tx_id} holds only record(s) of {', '.join(str(i[2].id) for i in items)}, which "
            f"transaction {owner}, one damaged byte away and not left open, holds in this file too (a broker writes "
            f"a message and its references in one transaction): their transaction id was damaged, and the "
            f"broker rolls them back at load: " + (f"message(s) {', '.join(map(str, lost))} lose what they held"
                                                   if lost else "their loss changes nothing the broker delivers"),
            path, None, {"txId": tx_id, "committedTx": owner, "messageIds": [i[2].id for i in items][:100]}))
    return out
