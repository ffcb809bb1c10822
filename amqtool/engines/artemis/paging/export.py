"""The paged messages' export rows."""
from __future__ import annotations

from typing import Callable, Iterator

from amqtool.formats.artemis.paging import (
    PagedMessage,
)
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.engines.artemis.paging.entries import iter_paged_entries
from amqtool.engines.artemis.paging.stores import PageStore
from amqtool.engines.artemis.paging.view import PAGE_TX_NOT_FOUND, PAGE_TX_PREPARED, PagingJournalView, load_view


# --- export ------------------------------------------------------------------------------------------------


def _record_for_export(pm: PagedMessage) -> tuple[int, bytes]:
    """(user record type, body) the export's ``decode_message`` takes: a core large message's header as a
    type-30 body, anything else as a type-45 body (persister byte + message)."""
    if pm.is_core_large:
        return R.ADD_LARGE_MESSAGE, pm.message.encode()
    return R.ADD_MESSAGE_PROTOCOL, pm.message.encode()


def paged_export_messages(store, *, bindings, wants: Callable[[str], bool] | None = None,
                          view: PagingJournalView | None = None, problem: Callable[[int, str], None] | None = None,
                          pages: list[tuple[PageStore, int]] | None = None) -> Iterator[tuple]:
    """The paged messages to export, each as ``(user record type, body, message id, rows, where)``: the
    record ``export.parse.decode_message`` takes, the rows it gives (``export.columns.row`` tuples, one per
    queue that still has to consume it, flagged ``paged`` with the page number and 0-based position), and the
    prefix of its problem text should it not decode. What the export's rows and record batches
    (``export.local.message_rows``, ``export.columns.MessageBatch``) are both built from.

    Messages of a committed or non-transactional page send are ``committed``; those of a page transaction
    in a prepared XA transaction are ``prepared`` (with that transaction's id); messages whose page
    transaction is gone are skipped, as the broker skips them. Order: page stores in exploring order, pages
    by id, messages by position; queues in routed order. ``wants(queue name)`` filters queues; ``problem``
    receives page records that do not frame. ``pages`` (a run of :func:`store_pages`) limits the walk to
    those pages: the Spark engine splits the pages over its tasks, each with the ``view`` facts of its
    pages. Page files are read one at a time, so memory does not grow with the paging directory."""
    from amqtool.engines.export.columns import row

    view = load_view(store, view)
    errors: list = []
    for entry in iter_paged_entries(store, view, errors, pages):
        if entry.tx_state == PAGE_TX_NOT_FOUND:
            continue
        state = "prepared" if entry.tx_state == PAGE_TX_PREPARED else "committed"
        tx_id = view.page_tx_prepared.get(entry.message.transaction_id) if state == "prepared" else None
        queues = [q for q in entry.pending_queues if wants is None or wants(bindings.queue_name(q))]
        if not queues:
            continue
        pm = entry.message
        utype, body = _record_for_export(pm)
        rows = [row(bindings.queue_name(q), q, bindings.routing_type(q), transaction_state=state,
                    transaction_id=tx_id, paged=True, page=entry.page, page_position=entry.number) for q in queues]
        yield utype, body, pm.message_id, rows, f"paged message (page {entry.page}, message {entry.number}): "
    if problem is not None:
        for ps, pid, number, off, err in errors:
            problem(-1, f"{ps.folder}/{ps.pages.get(pid, pid)}: record {number} at offset {off}: {err}")
