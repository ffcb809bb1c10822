"""A page transaction record whose body names another transaction than the one that wrote it (``verify``'s
``page-tx-damaged``).

A transactional send to a paging address pages its messages with the transaction's id and stores one
PAGE_TRANSACTION (35) record in that same journal transaction: ``PagingStoreImpl.installPageTransaction``
creates ``PageTransactionInfoImpl(tx.getID())``, and ``FinishPageMessageOperation.storePageTX`` stores it with
``storePageTransaction(tx.getID(), ...)``, an ADD_TX (13) whose body starts with that ``transactionID``. So
the body of a PAGE_TRANSACTION add written as ADD_TX always names the journal transaction of its header.
(The compactor rewrites committed records as plain adds, which carry no transaction id: those are not judged.)

When the two differ, the body's id was damaged: there is no checksum, and the broker registers the page
transaction under the id its body names (``loadMessageJournal``: ``PageTransactionInfoImpl.decode``,
``pagingManager.addTransaction``). The paged messages of the real transaction then find none, and every
cursor skips them ("Could not locate page transaction", as for a rolled-back one): the messages some queue
still had to consume are lost. The evidence is the header's transaction id, the body's, and the paged
messages that carry the header's with no page-transaction record of their own.
"""
from __future__ import annotations

from dataclasses import dataclass

from amqtool.errors import AmqtoolError, Finding, Severity
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

ADD_TX = 13


@dataclass(frozen=True)
class MisnamedPageTx:
    record_id: int
    file_index: int
    offset: int  # of the record in its file
    tx_id: int  # the journal transaction that wrote it (its header)
    named: int  # the transaction id its body names
    pending: int  # paged messages of ``tx_id`` some queue still has to consume, which the broker skips


def misnamed_page_txs(result, view, not_found, pending_of) -> list[MisnamedPageTx]:
    """The live PAGE_TRANSACTION adds of the messages journal loaded as ``result`` written as ADD_TX in a
    transaction whose paged messages have no page-transaction record (``not_found``: those page transaction ids)
    while their body names another one; with how many of those messages some queue still has to consume
    (``pending_of(tx_id)``; only records where that is above 0). Rescans the journal's files for the records'
    headers: called only when paged messages of some transaction find no page-transaction record."""
    if result is None or not not_found:
        return []
    by_record = {rid: named for named, (rid, _) in view.page_tx_adds.items()}
    if not by_record:
        return []
    opened = result.opened
    out = []
    for index in range(len(opened.files)):
        try:
            out += _misnamed_in(opened, index, by_record, not_found, pending_of)
        except (AmqtoolError, OSError):  # an unreadable file is reported as such
            continue
    return out


def _misnamed_in(opened, index: int, by_record: dict, not_found, pending_of) -> list[MisnamedPageTx]:
    out = []
    for base, data, records, _ in opened.scan_windows(index):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if t != ADD_TX or utype != R.PAGE_TRANSACTION or rid not in by_record or tx not in not_found:
                continue
            at = off + fixed_size(t, opened.files[index].version) - 4  # the body, after the user type
            named = int.from_bytes(data[at:at + 8], "big", signed=True)
            if named == tx or by_record[rid] != named:  # agreeing, or not the live record of that id
                continue
            pending = pending_of(tx)
            if pending > 0:
                out.append(MisnamedPageTx(rid, index, base + off, tx, named, pending))
    return out


def page_tx_damaged_findings(result, pager) -> list[Finding]:
    """CRITICAL ``page-tx-damaged`` for each :func:`misnamed_page_txs` of the load ``result``, judged with the
    paging verifier ``pager`` once it has read the pages (none without page stores or a loaded journal)."""
    not_found = getattr(pager, "not_found", None)
    if result is None or pager is None or not not_found or not pager.view.messages_loaded:
        return []
    out = []
    for m in misnamed_page_txs(result, pager.view, not_found, pager.pending_of_page_tx):
        out.append(Finding(
            Severity.CRITICAL, "page-tx-damaged",
            f"the page transaction record {m.record_id} of journal transaction {m.tx_id} names transaction "
            f"{m.named} in its body: the broker writes a page transaction in its own transaction, so that id was "
            f"damaged; the broker registers it under {m.named}, and the {m.pending} paged message(s) of "
            f"transaction {m.tx_id} still to consume find no page transaction and are skipped: they are lost",
            str(result.files[m.file_index].path), m.offset,
            {"recordId": m.record_id, "txId": m.tx_id, "bodyTxId": m.named, "messagesLost": m.pending}))
    return out
