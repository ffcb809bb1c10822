"""The paged messages' export rows."""
from __future__ import annotations

import struct
from array import array
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.artemis.paging import (
    END_BAD_END,
    END_BAD_LENGTH,
    END_BAD_START,
    END_CLEAN,
    END_SHORT_TAIL,
    PagedMessage,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.formats.artemis.userrecords import JournalRecordIds as R
from amqtool.engines.artemis.paging.entries import iter_paged_entries, store_pages, suspect_ending
from amqtool.engines.artemis.paging.stores import PageStore
from amqtool.engines.artemis.paging.walk import _WALK_EXPORT
from amqtool.engines.artemis.paging.view import (
    PAGE_TX_COMMITTED,
    PAGE_TX_NOT_FOUND,
    PAGE_TX_PREPARED,
    Q_PENDING,
    PagingJournalView,
    load_view,
)

_I64 = struct.Struct(">q")


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
    entries = (_native_entries(store, view, errors, pages) if native.page_walk is not None
               else _reference_entries(store, view, errors, pages))
    for page, number, tx_id, tx_state, pending, utype, body, mid in entries:
        if tx_state == PAGE_TX_NOT_FOUND:
            continue
        state = "prepared" if tx_state == PAGE_TX_PREPARED else "committed"
        prepared_tx = view.page_tx_prepared.get(tx_id) if state == "prepared" else None
        queues = [q for q in pending if wants is None or wants(bindings.queue_name(q))]
        if not queues:
            continue
        rows = [row(bindings.queue_name(q), q, bindings.routing_type(q), transaction_state=state,
                    transaction_id=prepared_tx, paged=True, page=page, page_position=number) for q in queues]
        yield utype, body, mid, rows, f"paged message (page {page}, message {number}): "
    if problem is not None:
        for ps, pid, number, off, err in errors:
            where = f"{ps.folder}/{ps.pages.get(pid, pid)}"
            if isinstance(err, OSError):  # the page file could not be read at all: verify's unreadable finding
                problem(None, f"{where}: cannot read it ({err.strerror}); its messages are not exported")
            else:
                problem(None, f"{where}: record {number} at offset {off}: {err}")


# (page, number, page tx id, its state, pending queue ids, user record type, body, message id) per paged
# message: the Python reference walks PagedEntry objects, the native walk reads the same from page_walk's
# export mode (native/page_scan.c, mode 3) and hands the rare kinds (large messages) back to the reference.

def _reference_entries(store, view, errors, pages) -> Iterator[tuple]:
    for entry in iter_paged_entries(store, view, errors, pages, endings=True):
        pm = entry.message
        utype, body = _record_for_export(pm)
        yield (entry.page, entry.number, pm.transaction_id, entry.tx_state, entry.pending_queues, utype, body,
               pm.message_id)


_HANDBACK = 5
_WALK_ENDS = (END_CLEAN, END_SHORT_TAIL, END_BAD_START, END_BAD_LENGTH, END_BAD_END)  # page_walk's statuses 0-4
_SUSPECT = (2, 3, 4)
_TX_STATES = (None, PAGE_TX_COMMITTED, PAGE_TX_PREPARED, PAGE_TX_NOT_FOUND)
_HEAD = struct.Struct("=iqqqBi")


def _native_entries(store, view, errors, pages) -> Iterator[tuple]:
    from amqtool.engines.artemis.paging.walk import WalkTables

    tables = WalkTables(view)
    acc = array("q", [0])
    for ps, pid in store_pages(store) if pages is None else pages:
        try:
            with ps.open_page(pid) as pf:
                yield from _native_page(ps, pid, pf, tables.page(pid), view, acc, errors)
        except OSError as err:
            errors.append((ps, pid, None, None, err))


def _native_page(ps, pid, pf, tables, view, acc, errors) -> Iterator[tuple]:
    buf = pf.buf
    pos, number = 0, 0
    while True:
        status, end, stop_number, length, packed = native.page_walk(buf, pos, number, _WALK_EXPORT, tables, acc)
        at = 0
        while at < len(packed):
            num, ms, me, tx_id, ts, n = _HEAD.unpack_from(packed, at)
            at += _HEAD.size
            pending = list(struct.unpack_from(f"={n}q", packed, at)) if n else []
            at += 8 * n
            body = bytes(buf[ms:me])
            # the message id is the persisted message's first field after the persister byte
            yield pid, num, tx_id, _TX_STATES[ts], pending, R.ADD_MESSAGE_PROTOCOL, body, _I64.unpack_from(body, 1)[0]
        if status != _HANDBACK:
            # the framing ended; damage ends it as the reference's PageScanner ends (its records are lost)
            if status in _SUSPECT:
                errors.append((ps, pid, stop_number, end, suspect_ending(_WALK_ENDS[status])))
            return
        # a record C leaves to the reference: decoded as _entries_of_page decodes it
        off = end
        try:
            pm = PagedMessage.read(Reader(buf, off + 5, off + 5 + length))
        except FormatError as err:
            errors.append((ps, pid, stop_number, off, err))
            return
        utype, body = _record_for_export(pm)
        pending = [q for q in pm.queue_ids if view.queue_state(q, pid, stop_number) == Q_PENDING]
        yield pid, stop_number, pm.transaction_id, view.tx_state(pm.transaction_id), pending, utype, body, \
            pm.message_id
        pos, number = off + 6 + length, stop_number + 1
