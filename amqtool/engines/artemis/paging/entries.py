"""Paged messages and their state per queue (what the broker's cursors would do with them)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.artemis.message import CoreMessage, LargeMessage
from amqtool.formats.artemis.paging import (
    PagedMessage,
    PageScanner,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.engines.artemis.paging.stores import PageStore, find_page_stores
from amqtool.engines.artemis.paging.view import PAGE_TX_COMMITTED, PagingJournalView, Q_PENDING, load_view


# --- paged messages ----------------------------------------------------------------------------------------


@dataclass
class PagedEntry:
    """One paged message with its state."""

    address: str
    page: int
    number: int  # 0-based message number in the page
    offset: int  # of the record in the page file
    message: PagedMessage
    tx_state: str | None
    queue_states: list[tuple[int, str]]

    @property
    def pending_queues(self) -> list[int]:
        return [q for q, s in self.queue_states if s == Q_PENDING]

    @property
    def deliverable(self) -> bool:
        """The broker would deliver it now (no page transaction, or a committed one)."""
        return self.tx_state in (None, PAGE_TX_COMMITTED)

    def body_digest(self, large_dir=None) -> tuple[int | None, str | None]:
        """(size, sha256) of the message body: the body in the page, or for a large message its ``.msg``
        file (None, None when that file is missing)."""
        msg = self.message.message
        if self.message.is_large:
            if large_dir is None:
                return None, None
            h = hashlib.sha256()
            n = 0
            try:
                with open(Path(large_dir) / f"{self.message.message_id}.msg", "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                        n += len(chunk)
            except OSError:
                return None, None
            return n, h.hexdigest()
        body = msg.body
        return len(body), hashlib.sha256(body).hexdigest()

    def to_json(self, safe: bool = False, large_dir=None) -> dict:
        m = self.message
        doc = {
            "page": self.page,
            "messageNumber": self.number,
            "offset": self.offset,
            "transactionId": m.transaction_id,
            "pageTransaction": self.tx_state,
            "messageId": m.message_id,
            "address": m.address,
            "largeMessageType": m.large_message_type,
            "large": m.is_large,
            "queues": list(m.queue_ids),
            "queueStates": {str(q): s for q, s in self.queue_states},
            "pendingQueues": self.pending_queues,
            "deliverable": self.deliverable,
        }
        doc["bodySize"], doc["bodySha256"] = self.body_digest(large_dir)
        msg = m.message
        if isinstance(msg, LargeMessage):
            doc["headerSize"] = m.header_size
            doc["largeSize"] = msg.large_size
        elif isinstance(msg, CoreMessage):
            doc["size"] = msg.encode_size()
        if not safe:
            doc["userId"] = getattr(msg, "user_id", None)
        return doc


def suspect_ending(reason: str) -> str:
    """The problem text of a page whose records end in damage (``PageScanEnd.suspect``): the records after it
    are lost to the broker too (``Page.read`` stops there and logs the page as suspect)."""
    return f"the page's records end in damage ({reason}): Artemis reads nothing after this offset"


def _entries_of_page(store: PageStore, page_id: int, view: PagingJournalView,
                     errors: list | None = None, endings: bool = False) -> Iterator[PagedEntry]:
    with store.open_page(page_id) as pf:
        s = PageScanner(pf.buf, pf.size)
        for number, off, ln in s:
            try:
                pm = PagedMessage.read(Reader(pf.buf, off + 5, off + 5 + ln))
            except FormatError as err:
                if errors is not None:
                    errors.append((store, page_id, number, off, err))
                return
            states = [(q, view.queue_state(q, page_id, number)) for q in pm.queue_ids]
            yield PagedEntry(store.address, page_id, number, off, pm, view.tx_state(pm.transaction_id), states)
        if endings and errors is not None and s.end.suspect:
            errors.append((store, page_id, s.end.records, s.end.offset, suspect_ending(s.end.reason)))


def store_pages(store) -> list[tuple[PageStore, int]]:
    """(page store, page id) of every page of the store, in exploring order, page by page."""
    stores, _ = find_page_stores(store.paging_dir)
    return [(ps, pid) for ps in stores for pid in sorted(ps.pages)]


def iter_paged_entries(store, view: PagingJournalView | None = None, errors: list | None = None,
                       pages: list[tuple[PageStore, int]] | None = None, endings: bool = False
                       ) -> Iterator[PagedEntry]:
    """Every paged message of every page store, in exploring order, page by page (only ``pages``, a run of
    :func:`store_pages`, when given). A record that does not decode ends its page (as ``Page.read`` fails
    there); it is appended to ``errors`` when given, and with ``endings`` also a page whose framing ends
    in damage (:func:`suspect_ending`)."""
    view = load_view(store, view)
    for ps, pid in store_pages(store) if pages is None else pages:
        try:
            yield from _entries_of_page(ps, pid, view, errors, endings)
        except OSError as err:
            if errors is not None:
                errors.append((ps, pid, None, None, err))


def iter_paged_rows(store, view: PagingJournalView | None = None, *, include_undeliverable: bool = False
                    ) -> Iterator[tuple[PagedEntry, int]]:
    """(paged message, queue id) for every queue that still has to consume a paged message, for export:
    the pending queues of deliverable messages (committed or non-transactional; with
    ``include_undeliverable`` also prepared and not-found ones)."""
    for entry in iter_paged_entries(store, view):
        if not (entry.deliverable or include_undeliverable):
            continue
        for q in entry.pending_queues:
            yield entry, q


def large_message_file(store, message_id: int) -> Path | None:
    """``<largeMessagesDir>/<messageID>.msg`` when it exists."""
    if store.large_messages_dir is None:
        return None
    p = Path(store.large_messages_dir) / f"{message_id}.msg"
    return p if p.is_file() else None
