"""Paging and large messages: page stores, paged messages and their state, ``data print``'s paging section,
and the paging part of ``verify`` (artemis-journal-format.md §5, §6.1 item 5, §7).

**Page stores.** One per sub-folder of the paging directory that holds an ``address.txt`` (its first line is
the address; ``PagingStoreFactoryNIO.reloadStores`` skips folders without one, or with an empty one). The
pages are the ``*.page`` files; the page id is the number before the first dot. ``PagingStoreImpl.start``
counts the files (``Number of pages``), takes the lowest id as the first page and the highest as the
current writing page. When the current page does not end exactly after its last whole record, the broker
(and ``data print``, which starts the stores) opens a new page after it (``reloadLivePage``): the printed
counts then include that page, which amqtool does not create.

**State of a paged message** (what the broker's cursors would do with it), from the surviving records of
the message journal and the queue bindings of the bindings journal:

* page transaction: ``None`` for a non-transactional send (``transactionID`` < 0); ``committed`` when a
  surviving PAGE_TRANSACTION (35) record carries the id (add: transactionID, update: pageTX); ``prepared``
  when its record is in a prepared (XA) transaction (the broker holds delivery until it is resolved);
  otherwise ``not-found`` (rolled back, never committed, or every message of it was consumed): the broker
  skips the message (``PageSubscriptionImpl``: "Could not locate page transaction ..., ignoring message").
* per routed queue: ``acked`` (a surviving ACKNOWLEDGE_CURSOR (39) at this page and message number),
  ``page-complete`` (a surviving PAGE_CURSOR_COMPLETE (42) for the queue and page), ``no-queue`` (no
  surviving queue binding (21) with that id), else ``pending``: the queue still has to consume it (once
  the page transaction, if any, is committed).

These are exactly the flags ``data print`` shows (``(ACK)``, ``(PG-COMPLETE)``, ``(N/A)``, ``(OK)``,
``**PG_TX_NOT_FOUND**``). Page files are read one at a time (mmap), so memory stays with the journal's
cursor records, not with the size of the paging directory.

The package: :mod:`.view` (the journals' facts), :mod:`.walk` (those facts for the C page walk),
:mod:`.stores` (page stores and files on disk), :mod:`.entries` (paged messages and their state),
:mod:`.describe` (``data print``'s section), :mod:`.print_json`, :mod:`.verify` and :mod:`.export`.
"""
from __future__ import annotations

from amqtool.engines.artemis.paging.view import (
    HASH_LINE,
    JournalLarge,
    MAX_LISTED,
    PAGE_TX_COMMITTED,
    PAGE_TX_NOT_FOUND,
    PAGE_TX_PREPARED,
    PagingJournalView,
    Q_ACKED,
    Q_COMPLETE,
    Q_NO_QUEUE,
    Q_PENDING,
    load_view,
)
from amqtool.engines.artemis.paging.walk import (
    WalkTables,
    page_framing,
)
from amqtool.engines.artemis.paging.stores import (
    PageFile,
    PageStore,
    PagingDirNote,
    find_page_stores,
    live_page_rollover,
)
from amqtool.engines.artemis.paging.entries import (
    PagedEntry,
    iter_paged_entries,
    iter_paged_rows,
    large_message_file,
    store_pages,
)
from amqtool.engines.artemis.paging.describe import (
    describe_paging,
    message_line,
)
from amqtool.engines.artemis.paging.print_json import (
    iter_paging_json,
    large_messages_json,
    paging_document,
)
from amqtool.engines.artemis.paging.verify import (
    PagedLarge,
    PagingSummary,
    PagingVerifier,
)
from amqtool.engines.artemis.paging.export import (
    paged_export_messages,
)

__all__ = [
    "HASH_LINE",
    "JournalLarge",
    "MAX_LISTED",
    "PAGE_TX_COMMITTED",
    "PAGE_TX_NOT_FOUND",
    "PAGE_TX_PREPARED",
    "PageFile",
    "PageStore",
    "PagedEntry",
    "PagedLarge",
    "PagingDirNote",
    "PagingJournalView",
    "PagingSummary",
    "PagingVerifier",
    "Q_ACKED",
    "Q_COMPLETE",
    "Q_NO_QUEUE",
    "Q_PENDING",
    "WalkTables",
    "describe_paging",
    "find_page_stores",
    "iter_paged_entries",
    "iter_paged_rows",
    "iter_paging_json",
    "large_message_file",
    "large_messages_json",
    "live_page_rollover",
    "load_view",
    "message_line",
    "page_framing",
    "paged_export_messages",
    "paging_document",
    "store_pages",
]
