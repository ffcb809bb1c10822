"""A page transaction record whose id was damaged onto a deleted record's (``verify``'s ``page-tx-dropped``).

The broker never issues a record id twice (``BatchingIDGenerator`` counts up and stores its checkpoint in the
bindings journal before it hands out a batch), and ``JournalImpl.load`` drops every record of an id that any
DELETE names, wherever that DELETE lies (its ``recordsToDelete`` is applied to the whole list of records once
the files are read). So a PAGE_TRANSACTION add (``storePageTransaction``) whose id bytes were damaged into the
id of a record deleted earlier is read, counted by its COMMIT, and then dropped: the load never registers the
page transaction, and every cursor skips its paged messages ("Could not locate page transaction"), as for a
rolled-back one. The messages some queue still had to consume are lost.

The evidence: the record is there, written after a DELETE of its own id -- or before one, when another ADD
carries that id too (a message's, which that DELETE deleted: the id was issued twice; a page transaction's own
DELETE after it is the broker's when it completes) -- and its body names the transaction of paged messages that
have no page-transaction record while queues still have them to consume. A rolled-back page transaction has no
such record (its ADD_TX is discarded with its transaction, and no DELETE names it).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from amqtool.errors import AmqtoolError, Finding, Severity
from amqtool.formats.artemis.records import ADD, ADD_TX, DELETE, DELETE_TX, fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R


@dataclass(frozen=True)
class DroppedPageTx:
    record_id: int
    file_index: int
    offset: int
    named: int  # the page transaction its body names
    pending: int  # its paged messages some queue still has to consume


def dropped_page_txs(result, not_found, pending_of) -> list[DroppedPageTx]:
    """The PAGE_TRANSACTION adds of the messages journal loaded as ``result`` that follow a DELETE of their own
    id (or precede one, with another ADD of that id) and name a page transaction of ``not_found`` (page
    transactions whose paged messages found no record) with messages still to consume (``pending_of(tx)`` above 0). Rescans the journal's files: called only when
    paged messages find no page-transaction record."""
    if result is None or not not_found:
        return []
    opened = result.opened
    deleted: set[int] = set()
    adds: Counter = Counter()  # id -> its ADD records
    found = []  # (record id, file index, offset, transaction named, deleted before it)
    for index in range(len(opened.files)):
        version = opened.files[index].version
        try:
            for base, data, records, _ in opened.scan_windows(index):
                for t, off, size, cc, tx, rid, utype, body_len, *_ in records:
                    if t in (DELETE, DELETE_TX):
                        deleted.add(rid)
                    elif t in (ADD, ADD_TX):
                        adds[rid] += 1
                        if utype == R.PAGE_TRANSACTION and body_len >= 12:
                            at = off + fixed_size(t, version) - 4
                            named = int.from_bytes(data[at:at + 8], "big", signed=True)
                            if named in not_found:
                                found.append((rid, index, base + off, named, rid in deleted))
        except (AmqtoolError, OSError):  # an unreadable file is reported as such
            continue
    out = []
    for rid, index, offset, named, before in found:
        # a DELETE before it, or one after it when another ADD carries its id too (a message's, which that DELETE
        # deletes): an id issued twice
        if before or rid in deleted and adds[rid] > 1:
            pending = pending_of(named)
            if pending > 0:
                out.append(DroppedPageTx(rid, index, offset, named, pending))
    return out


def page_tx_dropped_findings(result, pager) -> list[Finding]:
    """CRITICAL ``page-tx-dropped`` for each :func:`dropped_page_txs`, judged with the paging verifier ``pager``
    once it has read the pages (none without page stores or a loaded journal)."""
    not_found = getattr(pager, "not_found", None)
    if result is None or pager is None or not not_found or not pager.view.messages_loaded:
        return []
    return [Finding(
        Severity.CRITICAL, "page-tx-dropped",
        f"the page transaction record of transaction {d.named} (record {d.record_id}) has an id a DELETE names, "
        f"before it or after it with another record of that id: the broker never issues an id twice, so its id "
        f"was damaged, and the load drops every record of a "
        f"deleted id; the {d.pending} paged message(s) of transaction {d.named} still to consume find no page "
        f"transaction and are skipped: they are lost", str(result.files[d.file_index].path), d.offset,
        {"recordId": d.record_id, "pageTransaction": d.named, "messagesLost": d.pending})
        for d in dropped_page_txs(result, not_found, pager.pending_of_page_tx)]
