"""The paging part of ``verify``: every page read as the broker reads it, page transactions, counters and
missing pages judged."""
from __future__ import annotations

import errno
import os
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from amqtool import native
from amqtool.errors import FormatError, Finding, Severity
from amqtool.formats.damage import one_byte_apart
from amqtool.formats.artemis.paging import (
    END_BAD_END,
    END_BAD_LENGTH,
    END_BAD_START,
    END_CLEAN,
    END_SHORT_TAIL,
    PagedMessage,
    PageScanEnd,
    PageScanner,
    PageSummaries,
    summarize_record,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.engines.artemis.paging import after_damage, crash_tail, cut_page, page_tx, synced_refs
from amqtool.engines.artemis.paging.print_json import _declared_size
from amqtool.engines.artemis.paging.stores import ADDRESS_FILE, PageFile, PageStore, find_page_stores
from amqtool.engines.artemis.paging.view import (
    MAX_LISTED, PAGE_TX_COMMITTED, PAGE_TX_NOT_FOUND, PAGE_TX_PREPARED, Q_PENDING, PagingJournalView)
from amqtool.engines.artemis.paging.dropped_queues import dropped_queue_findings
from amqtool.engines.artemis.paging.gaps import gap_finding
from amqtool.engines.artemis.paging.lost_page import lost_page_finding
from amqtool.engines.artemis.paging.moved_acks import moved_ack_findings
from amqtool.engines.artemis.paging.page_order import out_of_order_finding, page_span
from amqtool.engines.artemis.paging.retyped_adds import retyped_add_findings
from amqtool.engines.artemis.paging.walk import WalkTables, _WALK_EXPORT, _WALK_HANDBACK, _WALK_VERIFY, _end_of_walk


# --- verify --------------------------------------------------------------------------------------------------


@dataclass
class PagedLarge:
    """A core large message found in a page."""

    message_id: int
    declared_size: int | None
    path: str
    page: int
    number: int
    pending: bool  # some queue still has to consume it


@dataclass
class PagingSummary:
    stores: int = 0
    pages: int = 0
    bytes: int = 0
    messages: int = 0
    pending_messages: int = 0

    def to_json(self) -> dict:
        return {"stores": self.stores, "pages": self.pages, "bytes": self.bytes, "messages": self.messages,
                "pendingMessages": self.pending_messages}


def _records_after(buf, start: int, size: int) -> bool:
    """Whether a whole page record (``{``, length, body, ``}``) starts anywhere after ``start``: then the
    bytes at ``start`` are not a crash's last write but damage with messages after it."""
    pos = buf.find(b"{", start + 1, size)
    while 0 <= pos and pos + 6 <= size:
        n = int.from_bytes(buf[pos + 1:pos + 5], "big", signed=True)
        if 0 < n and pos + 6 + n <= size and buf[pos + 5 + n] == 0x7D:
            return True
        pos = buf.find(b"{", pos + 1, size)
    return False


def _torn_like(buf, end: PageScanEnd) -> bool:
    """An ending a crash mid-append leaves: a short tail, a length that runs past the end of the file, or a
    start byte followed by nothing but zeros (a tail the filesystem zero-filled) -- and no whole record after
    it (a crash cuts the last write only)."""
    if end.reason != END_SHORT_TAIL and _records_after(buf, end.offset, end.size):
        return False
    if end.reason == END_SHORT_TAIL:
        return True
    if end.reason == END_BAD_LENGTH:
        return end.length is not None and end.length >= 0
    if end.reason == END_BAD_START:
        rest = buf[end.offset:end.size]
        return rest.count(0) == len(rest)
    return False


class _PageAccount:
    """Verify's accounting of one page's records: pending queues, expected page counters, page transactions
    not found or prepared, paged large messages. The Python reference, used for every record without the
    extension and for the records native/page_scan.c (mode 1) hands back; the C walk mirrors it."""

    __slots__ = ("view", "summary", "pid", "path", "buf", "expected", "not_found", "prepared", "paged_large",
                 "acks_by_page", "page_queue")

    def __init__(self, verifier: "PagingVerifier", pid: int, path: str, buf, expected, not_found, prepared,
                 paged_large):
        self.view = verifier.view
        self.summary = verifier.summary
        self.acks_by_page = verifier._acks_by_page()
        self.pid, self.path, self.buf = pid, path, buf
        self.expected, self.not_found, self.prepared, self.paged_large = expected, not_found, prepared, paged_large
        # per queue on this page: the acked message numbers, or None when the queue takes nothing here
        # (page complete, or no such queue)
        self.page_queue: dict[int, set | None] = {}

    def record(self, number: int, tx_id: int, mid: int, qids, header) -> None:
        view, pid, page_queue = self.view, self.pid, self.page_queue
        self.summary.messages += 1
        tx_state = view.tx_state(tx_id)
        counted = tx_id <= 0 or tx_state == PAGE_TX_COMMITTED  # PageCounterRebuildManager
        pending = False
        for q in qids:
            acked = page_queue.get(q, 0)
            if acked == 0:
                c = view.complete.get(q)
                acked = page_queue[q] = (None if q not in view.queues or (c is not None and pid in c)
                                         else self.acks_by_page.get((q, pid), ()))
            if acked is None or number in acked:
                continue
            pending = True
            if counted:
                self.expected[q] = self.expected.get(q, 0) + 1
        if pending and tx_state in (None, PAGE_TX_COMMITTED):
            self.summary.pending_messages += 1
        if tx_state == PAGE_TX_NOT_FOUND:
            self.not_found[tx_id] = self.not_found.get(tx_id, 0) + 1
        elif tx_state == PAGE_TX_PREPARED:
            self.prepared[tx_id] = self.prepared.get(tx_id, 0) + 1
        if header is not None:
            self.paged_large[mid] = PagedLarge(mid, _declared_size(self.buf, header), self.path, pid, number,
                                               pending and tx_state != PAGE_TX_NOT_FOUND)


def _first_undecodable(buf, size: int, trailing: list | None = None) -> tuple[int, int, FormatError] | None:
    """The first well-framed record of a page whose message does not decode as ``Page.read`` decodes it
    (``PagedMessageImpl.decode``: the message with its headers and properties, the queue ids), or None. The
    records before it that decode with bytes left after their queue ids are appended to ``trailing`` as
    (message number, offset, PagedMessage): the broker ignores those bytes, which a record it wrote never has
    (paging/dropped_queues.py).

    The framing and the fast summary (:func:`summarize_record`) skip a core message's properties and body by
    their lengths, so a flipped bit inside them passed both while the broker, and ``export``, stop reading
    the page at that record and lose every message after it. About 25 µs a paged message.
    """
    if native.page_walk is not None:
        return _first_undecodable_walk(buf, trailing)
    for number, off, ln in PageScanner(buf, size):
        try:
            msg = PagedMessage.read(Reader(buf, off + 5, off + 5 + ln))
        except FormatError as err:
            return number, off, err
        if msg.trailing and trailing is not None:
            trailing.append((number, off, msg))
    return None


_NO_TABLES = (array("q"), array("q"), array("q"), array("i"))


def _first_undecodable_walk(buf, trailing: list | None = None) -> tuple[int, int, FormatError] | None:
    """:func:`_first_undecodable` through the C page walk's export mode, which validates each record as
    ``PagedMessage.read`` does (the page-scan twin tests hold the two equal) and hands back the kinds it does
    not cover, every record it refuses and every record with bytes after its queue ids: those are decoded here,
    so the error text stays the reference's."""
    acc = array("q", [0])
    pos = number = 0
    while True:
        status, pos, number, length, _ = native.page_walk(buf, pos, number, _WALK_EXPORT, _NO_TABLES, acc)
        if status != _WALK_HANDBACK:
            return None
        try:
            msg = PagedMessage.read(Reader(buf, pos + 5, pos + 5 + length))
        except FormatError as err:
            return number, pos, err
        if msg.trailing and trailing is not None:
            trailing.append((number, pos, msg))
        pos += 6 + length
        number += 1


def _page_files_with_data(path: str) -> list[str]:
    """The non-empty ``*.page`` files of the page folder ``path`` names (the folder, or its address.txt)."""
    folder = Path(path)
    if folder.name == ADDRESS_FILE:
        folder = folder.parent
    try:
        return sorted(str(folder / n) for n in os.listdir(folder)
                      if n.endswith(".page") and os.stat(folder / n).st_size > 0)
    except OSError:
        return []


class PagingVerifier:
    """The paging part of ``verify``: fed the journals' load results, then :meth:`verify` reads every page."""

    def __init__(self, store, progress: Callable[[int], None] | None = None, figures_only: bool = False):
        self.store = store
        # figures_only (stat): the accounting without the search for undecodable records (a Python decode of
        # every record the C walk skips by its lengths), which only findings need
        self.figures_only = figures_only
        self.view = PagingJournalView()
        self.progress = progress
        self.summary = PagingSummary()
        self._tables: WalkTables | None = None
        self._gaps: list[tuple[PageStore, list[int], int, list[int], bool]] = []
        # address -> where its pages show damage that could have cost messages (torn tail of a page that is not
        # the current one, an empty page): proven loss once the page counters say messages are missing
        self._damaged: dict[str, list[str]] = {}
        self.expected: dict[int, int] = {}  # after verify(): queue id -> paged messages it still has to consume
        # after verify(): page folder -> [pages holding messages some queue still has to consume, those messages]
        self.pending_by_folder: dict[str, list[int]] = {}
        # after verify(): current page path -> the number of its last record, when a crash could have torn it
        # (paging/crash_tail.py): damage confined to that record is a torn tail
        self.crash_tails: dict[str, int] = {}
        self._pending_by_tx: Counter | None = None
        self._not_found_pages: list[tuple[PageStore, int]] = []  # pages holding messages of unrecorded page txs
        self._prepared_pages: list[tuple[PageStore, int]] = []  # pages holding messages of prepared page txs
        # page folder -> (page id, oldest id, newest id) of its pages, in order (page_order.py)
        self._spans: dict[str, list[tuple[int, int, int]]] = {}
        # (address, CRITICAL page-damaged finding) of pages the broker stops reading before their end, where what
        # the bytes after held is unknown: a WARNING when the page counters account for every message
        self._unread: list[tuple[str, Finding]] = []
        # (path, page, message number, offset, PagedMessage) of records with bytes after their queue ids
        # (paging/dropped_queues.py)
        self._trailing: list = []

    def pending_of_page_tx(self, tx_id: int) -> int:
        """How many paged messages of page transaction ``tx_id`` some queue still has to consume, when the
        journals do not commit it (0 when they do): what the loss of its PAGE_TRANSACTION record costs
        (paging/page_tx.py). Read once, on the first call (only damage is judged so)."""
        if self._pending_by_tx is None:
            self._pending_by_tx = page_tx.pending_by_page_tx(getattr(self, "_stores", ()), self.view)
        return self._pending_by_tx.get(tx_id, 0)

    def named_after_messages(self, tx_ids) -> dict[int, int]:
        """:func:`~.page_tx.named_after_messages` over the pages that hold messages of transactions with no
        page-transaction record (a Python read: only damage asks)."""
        return page_tx.named_after_messages(self._not_found_pages, tx_ids)

    def whole_page_txs(self, tx_ids) -> set[int]:
        """:func:`~.page_tx.whole_page_txs` over every page (a Python read: only damage asks)."""
        return page_tx.whole_page_txs(getattr(self, "_stores", ()), self.view, tx_ids)

    def unacked_on_page(self, queue_id: int, page: int) -> int:
        """How many messages of page ``page`` of queue ``queue_id``'s address name that queue, outside an
        uncommitted page transaction, without a cursor acknowledgement of it: what the queue delivers again when
        the page's completion record (PAGE_CURSOR_COMPLETE) is gone (a Python read of that one page, on damage
        only). 0 when the page is not there (nothing in it to deliver: a missing page is judged by itself)."""
        address = self.view.queue_address.get(queue_id)
        ps = next((s for s in getattr(self, "_stores", ()) if s.address == address), None)
        if ps is None or page not in ps.pages:
            return 0
        acked = self.view.acks.get(queue_id, set())
        return sum(1 for _, (number, _, _, tx_id, _, _, qids, _) in page_tx.records_of([(ps, page)])
                   if queue_id in qids and (page, number) not in acked
                   and self.view.tx_state(tx_id) in (None, PAGE_TX_COMMITTED))

    def is_crash_tail(self, path: str, number: int) -> bool:
        """Whether message ``number`` of the page at ``path`` is its address's current page's last record,
        the one write a crash can tear (paging/crash_tail.py)."""
        return self.crash_tails.get(path) == number

    def add_bindings(self, result) -> None:
        self.view.add_bindings(result)

    def add_messages(self, result) -> None:
        self.view.add_messages(result)

    def verify(self, findings: list[Finding]) -> dict[int, PagedLarge]:
        """Append paging findings; return the core large messages found in pages (by message id)."""
        view = self.view
        paged_large: dict[int, PagedLarge] = {}
        stores, notes = find_page_stores(self.store.paging_dir)
        for n in notes:
            sev = Severity.UNKNOWN if n.code == "unreadable" else (
                Severity.WARNING if n.code == "page-folder-duplicate-address" else Severity.INFO)
            message = n.message
            if n.code == "page-folder-no-address":
                pages = _page_files_with_data(n.path)
                if pages:
                    # the broker skips the folder: every message in its pages is lost to it
                    sev = Severity.CRITICAL
                    message += f", with {len(pages)} page file(s) holding messages: they are lost to the broker"
            findings.append(Finding(sev, n.code, message, n.path))
        expected: dict[int, int] = {}
        not_found: dict[int, int] = {}  # page tx -> messages
        prepared: dict[int, int] = {}
        for ps in stores:
            self.summary.stores += 1
            self._verify_store(ps, findings, expected, not_found, prepared, paged_large)
        self.expected = expected
        self.not_found = not_found  # page tx -> its paged messages, for transactions with no page-transaction record
        self._stores = stores
        self.prepared_found = prepared  # prepared page tx -> its paged messages the pages hold
        synced_refs.reweigh(findings, view, stores)  # a torn current page that cut synced records
        for ps in stores:  # page files swapped or renamed
            swapped = out_of_order_finding(ps, self._spans.get(str(ps.folder), []))
            if swapped is not None:
                findings.append(swapped)
        self._tx_findings(findings, not_found, prepared)
        findings.extend(dropped_queue_findings(view, self._trailing, self.is_crash_tail))
        self._gap_findings(findings, expected)
        if stores or view.counter_value or view.counter_inc:
            self._counter_findings(findings, expected)
            self._counters_clear(findings, expected)
            findings.extend(lost_page_finding(self, findings, expected, paged_large))
        if stores:
            findings.extend(moved_ack_findings(self.store, view, stores, expected, str(self.store.paging_dir)))
        findings.extend(retyped_add_findings(self.store, view, self.pending_of_page_tx, str(self.store.paging_dir)))
        return paged_large

    def _gap_findings(self, findings, expected: dict[int, int]) -> None:
        """Pages missing between an address's first and current page, once nothing pointed into them.

        ``PageCursorProviderImpl`` deletes a page only when every subscription has consumed it, so a gap is
        harmless when the queues' page counters (``PageSubscriptionCounterImpl``: incremented per paged
        message, decremented per ack) agree with what the present pages still hold for them. When the counters
        of the address's queues say more messages are unconsumed than the present pages hold, those messages
        were in the missing pages: CRITICAL ``page-missing`` with their count. With nothing to prove a loss,
        WARNING ``page-gap``.
        """
        view = self.view
        stored = view.counters()
        for ps, missing, present, acked_missing, edge in self._gaps:
            queues = sorted(q for q, a in view.queue_address.items() if a == ps.address and q in view.queues)
            lost = {q: stored[q] - expected.get(q, 0) for q in queues
                    if q in stored and stored[q] > expected.get(q, 0)}
            if edge and (not lost or any(f.code == "unreadable" for f in findings)):
                # (an unreadable file may hold the records that explain the acks and counters)
                # PageCursorProviderImpl deletes a consumed page before the cursors' records of it: a crash
                # between the two leaves acknowledgements of a page that is gone, with nothing lost
                continue
            findings.append(gap_finding(ps, missing, present, acked_missing, lost))

    def _verify_store(self, ps: PageStore, findings, expected, not_found, prepared, paged_large) -> None:
        view = self.view
        folder = str(ps.folder)
        for n in ps.bad_names:
            findings.append(Finding(Severity.CRITICAL, "page-bad-name",
                                    f"page file name {n!r} has no page number: the broker fails to start this "
                                    f"address's paging store", str(ps.folder / n)))
        missing = ps.missing_pages()
        if missing:
            # judged once the counters are known (_gap_findings)
            acked_missing = sorted({p for acks in view.acks.values() for p, _ in acks if p in set(missing)})
            self._gaps.append((ps, missing, len(ps.pages), acked_missing, False))
        # Pages before the first or after the current one leave no gap; cursor acknowledgements of the address's
        # queues that point into such a page show it existed (judged with the counters: _gap_findings)
        queues = [q for q, a in view.queue_address.items() if a == ps.address]
        edge = sorted({p for q in queues for p, _ in view.acks.get(q, ()) if p not in ps.pages} - set(missing))
        if edge:
            self._gaps.append((ps, edge, len(ps.pages), edge, True))
        current = ps.current_page
        undecodable = 0
        use_native = native.page_walk is not None  # else the Python reference loop
        if use_native and self._tables is None:
            self._tables = WalkTables(view)
        for pid in sorted(ps.pages):
            path = ps.page_path(pid)
            try:
                pf = PageFile(path)
            except OSError as err:
                if err.errno == errno.EINVAL:  # a FIFO, socket, device or directory named like a page
                    findings.append(Finding(Severity.CRITICAL, "not-a-regular-file", err.strerror, str(path)))
                else:
                    findings.append(Finding(Severity.UNKNOWN, "unreadable", f"cannot read: {err.strerror}",
                                            str(path)))
                continue
            with pf:
                if pf.size == 0:
                    # the broker drops an empty page at start (nothing to read); it held messages if the
                    # counters say so (judged in _counter_findings)
                    self._damaged.setdefault(ps.address, []).append(str(path))
                self.summary.pages += 1
                self.summary.bytes += pf.size
                buf = pf.buf
                if pid == current:
                    last = crash_tail.last_record(buf, pf.size)
                    start = crash_tail.record_start(buf, pf.size, last) if last is not None else None
                    if last is not None and crash_tail.synced_tx(buf, start, pf.size, view) is None:
                        self.crash_tails[str(path)] = last
                account = _PageAccount(self, pid, str(path), buf, expected, not_found, prepared, paged_large)
                pending_before = self.summary.pending_messages
                not_found_before = sum(not_found.values())
                prepared_before = sum(prepared.values())
                if use_native:
                    end, error = self._walk_page(buf, pf.size, pid, account)
                else:
                    s = PageSummaries(buf, pf.size)
                    record = account.record
                    for number, _, _, tx_id, _, mid, qids, header in s:
                        record(number, tx_id, mid, qids, header)
                    end, error = s.end, s.error
                if sum(not_found.values()) != not_found_before:
                    self._not_found_pages.append((ps, pid))  # read again only if a transaction id is judged
                if sum(prepared.values()) != prepared_before:
                    self._prepared_pages.append((ps, pid))  # read again to count their queue references
                span = page_span(buf, pf.size)
                if span is not None:
                    self._spans.setdefault(str(ps.folder), []).append((pid, *span))
                if error is None and not self.figures_only:
                    trailing: list = []
                    error = _first_undecodable(buf, pf.size, trailing)
                    self._trailing.extend((str(path), pid, number, off, msg) for number, off, msg in trailing)
                if error is not None:
                    number, off, err = error
                    if self.is_crash_tail(str(path), number):
                        findings.append(Finding(
                            Severity.WARNING, "page-record-undecodable",
                            f"page {pid} message {number}: {err.message}; it is the last record of the current "
                            f"page, what a crash mid-write leaves: the broker does not deliver this one message",
                            str(path), off, {"page": pid, "message": number, "messagesLost": 1, "tornTail": True}))
                    elif (undecodable := undecodable + 1) <= MAX_LISTED:
                        after = sum(1 for _ in PageScanner(buf, pf.size)) - number
                        findings.append(Finding(
                            Severity.CRITICAL, "page-record-undecodable",
                            f"page {pid} message {number}: {err.message}; the broker stops reading this page "
                            f"there: this message and the {after - 1} after it are not delivered"
                            + (crash_tail.NOT_A_CRASH if pid == current and after == 1 else ""), str(path), off,
                            {"page": pid, "message": number, "messagesLost": after}))
                if self.summary.pending_messages > pending_before:
                    figures = self.pending_by_folder.setdefault(folder, [0, 0])
                    figures[0] += 1
                    figures[1] += self.summary.pending_messages - pending_before
                if self.progress is not None:
                    self.progress(pf.size)
                if end is not None and end.reason == END_CLEAN and pid != current:
                    past = cut_page.acked_past_end(account.acks_by_page, queues, pid, end.records)
                    if past:  # cut at a record boundary after the broker left it (paging/cut_page.py)
                        self._damaged.setdefault(ps.address, []).append(str(path))
                        findings.append(cut_page.page_cut_finding(str(path), pid, end.records, past))
                if end is None or end.reason == END_CLEAN:
                    continue  # clean, or cut short by an undecodable record (reported above)
                left = end.size - end.offset
                is_current = pid == current
                # the current page by the crash model (paging/crash_tail.py); another page's ending as a crash
                # would have left it, judged with the counters (_damaged)
                synced = crash_tail.synced_tx(buf, end.offset, end.size, view) if is_current else None
                if synced is None and (crash_tail.last_framing(buf, end) if is_current else _torn_like(buf, end)):
                    where = "the current page" if is_current else f"page {pid} (not the current page)"
                    if not is_current:
                        self._damaged.setdefault(ps.address, []).append(str(path))
                    findings.append(Finding(
                        Severity.WARNING, "page-torn-tail",
                        f"{left} byte(s) of a partly written record after message {end.records - 1} of {where}: "
                        f"the broker stopped mid-write; it ignores these bytes"
                        + (" and starts a new page" if is_current else ""), str(path), end.offset,
                        {"page": pid, "messages": end.records, "reason": end.reason, "current": is_current}))
                else:
                    what = {END_BAD_START: "no '{' start marker", END_BAD_END: "no '}' end marker after "
                            f"{end.length} bytes", END_BAD_LENGTH: f"a record length of {end.length}"}[end.reason]
                    gone = after_damage.undelivered_after(buf, pf.size, end, pid, view)
                    last = is_current and synced is None and not crash_tail.whole_record_after(buf, end.offset,
                                                                                               end.size)
                    if gone is not None:
                        findings.append(Finding(
                            Severity.WARNING, "page-damaged",
                            f"page {pid}: {what} at message {end.records}; the broker stops reading the page there, "
                            f"but the {gone} message(s) from there on still read, and it would deliver none of them "
                            f"anyway (acknowledged, page complete, or of a page transaction it skips)"
                            + (crash_tail.NOT_A_CRASH if last else ""), str(path),
                            end.offset, {"page": pid, "messages": end.records, "reason": end.reason,
                                         "messagesAfter": gone}))
                        continue
                    if last:
                        # the current page's last record, damaged as no crash leaves it: what it held is unknown
                        # (acknowledged, rolled back?): lost when the page counters say a message is missing
                        # (_counter_findings: page-messages-lost), as for a damaged page that is not the current one
                        self._damaged.setdefault(ps.address, []).append(str(path))
                        findings.append(Finding(
                            Severity.WARNING, "page-damaged",
                            f"page {pid}: {what} at message {end.records}; the broker stops reading the page there "
                            f"and drops the {left} byte(s) of its last record" + crash_tail.NOT_A_CRASH
                            + "; it is lost if the page counters count it (page-messages-lost)", str(path),
                            end.offset, {"page": pid, "messages": end.records, "reason": end.reason, "crash": False}))
                        continue
                    findings.append(Finding(
                        Severity.CRITICAL, "page-damaged",
                        f"page {pid}: {what} at message {end.records}; the broker stops reading the page there, "
                        f"so the {left} byte(s) after it (any messages in them) are lost"
                        + (f"; the record is of transaction {synced}, which the message journal holds committed or "
                           f"prepared: the broker synced the page before writing that, so no crash tore it"
                           if synced is not None else ""), str(path), end.offset,
                        {"page": pid, "messages": end.records, "reason": end.reason}))
                    # what the bytes from there on held is unknown: the page counters may clear them (_counters_clear)
                    self._unread.append((ps.address, findings[-1]))
        if undecodable > MAX_LISTED:
            findings.append(Finding(Severity.CRITICAL, "page-record-undecodable",
                                    f"{undecodable - MAX_LISTED} more undecodable page record(s)", folder))

    def _walk_page(self, buf, size: int, pid: int, account: "_PageAccount"):
        """The page's records through ``native.page_walk`` (mode 1): C does the accounting of the records
        it covers, :class:`_PageAccount` (the Python reference) the ones it hands back. Returns (end, error)
        as :class:`PageSummaries` leaves them."""
        tables = self._tables.page(pid)
        acc = array("q", bytes(8 * (2 + len(tables[2]) // 4)))
        lists: tuple[list, list] = ([], [])
        walk = native.page_walk
        pos = number = 0
        end = error = None
        while True:
            status, pos, number, length, _ = walk(buf, pos, number, _WALK_VERIFY, tables, acc, lists)
            if status != _WALK_HANDBACK:
                end = _end_of_walk(status, pos, number, length, size)
                break
            try:
                sr = summarize_record(buf, pos + 5, pos + 5 + length)
            except FormatError as err:
                error = (number, pos, err)
                break
            account.record(number, sr.transaction_id, sr.message_id, sr.queue_ids, sr.header)
            pos += 6 + length
            number += 1
        self.summary.messages += acc[0]
        self.summary.pending_messages += acc[1]
        expected = account.expected
        for q, n in zip(tables[2][0::4], acc[2:]):
            if n:
                expected[q] = expected.get(q, 0) + n
        for target, txs in ((account.not_found, lists[0]), (account.prepared, lists[1])):
            for tx, n in Counter(txs).items():
                target[tx] = target.get(tx, 0) + n
        return end, error

    def _acks_by_page(self) -> dict[tuple[int, int], set[int]]:
        """(queue, page) -> acked message numbers (built once)."""
        if getattr(self, "_acks_cache", None) is None:
            out: dict[tuple[int, int], set[int]] = {}
            for q, positions in self.view.acks.items():
                for page, number in positions:
                    out.setdefault((q, page), set()).add(number)
            self._acks_cache = out
        return self._acks_cache

    def _tx_findings(self, findings, not_found: dict[int, int], prepared: dict[int, int]) -> None:
        view = self.view
        for tx, n in sorted(prepared.items()):
            findings.append(Finding(
                Severity.INFO, "page-tx-prepared",
                f"page transaction {tx} ({n} paged message(s)) is in prepared XA transaction "
                f"{view.page_tx_prepared[tx]}: the broker holds these messages until it is resolved", None, None,
                {"pageTransaction": tx, "messages": n, "txId": view.page_tx_prepared[tx]}))
        failed = {tx: n for tx, n in not_found.items() if tx in view.page_tx_failed}
        for tx, n in sorted(failed.items()):
            findings.append(Finding(
                Severity.WARNING, "page-tx-incomplete",
                f"page transaction {tx} ({n} paged message(s)) was written in journal transaction "
                f"{view.page_tx_failed[tx]}, which never completed: the broker rolls it back and skips "
                f"these messages", None, None, {"pageTransaction": tx, "messages": n}))
        rest = {tx: n for tx, n in not_found.items() if tx not in failed}
        if rest:
            total = sum(rest.values())
            findings.append(Finding(
                Severity.INFO, "page-tx-not-found",
                f"{total} paged message(s) of {len(rest)} page transaction(s) have no page-transaction record "
                f"(rolled back, or fully consumed and not yet cleaned up): the broker skips them", None, None,
                {"pageTransactions": sorted(rest)[:100], "messages": total}))

    def _counter_findings(self, findings, expected: dict[int, int]) -> None:
        stored = self.view.counters()
        present = {ps.address for ps in find_page_stores(self.store.paging_dir)[0]}
        by_address: dict[str, list[int]] = {}
        for q, a in self.view.queue_address.items():
            if q in self.view.queues:
                by_address.setdefault(a, []).append(q)
        # Judged only beside other page folders: a store copied without its paging directory (or journals
        # written without page files, as the broker-written fixture's generator does) proves nothing by counters
        # alone, while one folder missing among others was removed.
        for address, queues in sorted(by_address.items()):
            if address in present or not present:
                continue
            lost = {q: stored[q] for q in queues if stored.get(q, 0) > 0}
            if lost:
                n = sum(lost.values())
                findings.append(Finding(
                    Severity.CRITICAL, "page-store-missing",
                    f"address {address!r} has no page folder, but the page counters of its queues say {n} paged "
                    f"message reference(s) are still to consume: they are lost",
                    str(self.store.paging_dir), None,
                    {"address": address, "messagesLost": n, "lostByQueue": {str(q): v for q, v in lost.items()}}))
        # a prepared transaction's paged messages are in no counter until it commits, and no cursor consumed
        # them: its PAGE_TRANSACTION record's count is what the pages held of it
        found = getattr(self, "prepared_found", {})
        short_prepared = {tx: n - found.get(tx, 0) for tx, n in self.view.page_tx_prepared_count.items()
                          if n > found.get(tx, 0)}
        for address, paths in sorted(self._damaged.items()):
            queues = sorted(q for q, a in self.view.queue_address.items() if a == address and q in self.view.queues)
            lost = {q: stored[q] - expected.get(q, 0) for q in queues if stored.get(q, 0) > expected.get(q, 0)}
            if lost:
                n = sum(lost.values())
                findings.append(Finding(
                    Severity.CRITICAL, "page-messages-lost",
                    f"address {address!r}: damaged or empty page(s) ({', '.join(paths[:5])}) and the page counters "
                    f"of its queues say {n} unconsumed message reference(s) are not in the pages: they are lost",
                    paths[0], None, {"address": address, "messagesLost": n,
                                     "lostByQueue": {str(q): v for q, v in lost.items()}}))
            elif short_prepared:
                n = sum(short_prepared.values())
                shown = ", ".join(f"{tx} ({m} missing)" for tx, m in sorted(short_prepared.items())[:MAX_LISTED])
                findings.append(Finding(
                    Severity.CRITICAL, "page-messages-lost",
                    f"address {address!r}: damaged or empty page(s) ({', '.join(paths[:5])}) and prepared page "
                    f"transaction(s) {shown} paged more messages than the pages hold: they are lost",
                    paths[0], None, {"address": address, "messagesLost": n,
                                     "preparedPageTransactions": sorted(short_prepared)}))
        self._misrouted_findings(findings, stored, expected)
        for q in sorted(set(stored) | {q for q in expected if q in self.view.queues and expected[q]}):
            if q not in self.view.queues:
                continue
            s, e = stored.get(q, 0), expected.get(q, 0)
            if s != e:
                findings.append(Finding(
                    Severity.INFO, "page-counter-mismatch",
                    f"queue {q}: the page counter records say {s} paged message(s), the pages hold {e} still to "
                    f"consume; brokers since 2.27 rebuild the counters from the pages at start, older ones report "
                    f"the stored value", None, None, {"queueId": q, "stored": s, "counted": e}))

    def _counters_clear(self, findings, expected: dict[int, int]) -> None:
        """Turn each CRITICAL ``page-damaged`` of :attr:`_unread` into a WARNING when the page counters of every
        queue of its address equal what the pages still hold for it to consume.

        ``Page.read`` stops at the damaged record, so every message from there to the end of the page is lost to
        the broker, but only those some queue still had to consume cost anything. A queue's page counter
        (``PageSubscriptionCounterImpl``) is raised in the transaction that pages a message for it and lowered in
        the one that acknowledges it: a counter equal to the committed messages the pages still hold for the
        queue says the unread bytes held none it still had to consume (they were acknowledged, of a rolled-back
        page transaction, or routed elsewhere). A counter above them, a counter below them (it no longer tracks
        the pages), a queue without counter records, or a prepared page transaction whose record counts more
        messages than the pages hold leaves the finding CRITICAL."""
        if not self._unread:
            return
        view = self.view
        stored = view.counters()
        short_prepared = any(n > self.prepared_found.get(tx, 0) for tx, n in view.page_tx_prepared_count.items())
        at = {id(f): i for i, f in enumerate(findings)}
        for address, f in self._unread:
            queues = [q for q, a in view.queue_address.items() if a == address and q in view.queues]
            if short_prepared or not all(q in stored and stored[q] == expected.get(q, 0) for q in queues):
                continue
            i = at.get(id(f))
            if i is None:
                continue
            shown = ", ".join(f"queue {q}: {stored[q]}" for q in sorted(queues)) or "no queue"
            findings[i] = Finding(
                Severity.WARNING, f.code,
                f.message.replace("(any messages in them) are lost", "are never read")
                + f"; but the page counters of the address's queues ({shown}) equal the messages its pages still "
                f"hold for them to consume: those bytes held none (acknowledged, rolled back, or routed elsewhere)",
                f.path, f.offset, dict(f.details or {}, countersAgree=True))

    def _misrouted_findings(self, findings, stored: dict[int, int], expected: dict[int, int]) -> None:
        """Paged messages whose routed queue id was damaged: CRITICAL ``page-queue-id-damaged``.

        A paged message carries the ids of the queues it was routed to (``PagedMessageImpl.queueIDs``); each
        queue's cursor delivers only the messages naming it (``PageSubscriptionImpl``), and there is no
        checksum. A queue id that no binding holds, one damaged byte away from the one queue of the address
        whose page counter says more messages are unconsumed than the pages hold (queues the message still names
        left out: ``PostOfficeImpl.route`` routes a message to a queue once), is that queue's id damaged:
        the queue never delivers the message (and the counter counted it when it was paged). Searched only
        for queues whose counter exceeds what the pages hold (a Python read of that address's pages). A message of
        a prepared page transaction is in no counter yet: its queue id is judged so when the transaction's record
        counts more queue references than the pages hold (:meth:`_short_prepared`)."""
        view = self.view
        short = {q for q in view.queues if stored.get(q, 0) > expected.get(q, 0)}
        short_tx = self._short_prepared()
        if not short and not short_tx:
            return
        by_address: dict[str, list[int]] = {}
        for q, a in view.queue_address.items():
            if q in view.queues:
                by_address.setdefault(a, []).append(q)
        for ps in getattr(self, "_stores", ()):
            queues = by_address.get(ps.address, [])
            if not short.intersection(queues) and not (short_tx and any(p is ps for p, _ in self._prepared_pages)):
                continue
            # queue -> (path, page, n, offset, mid, the prepared page transaction or None)
            hits: dict[int, list[tuple[str, int, int, int, int, int | None]]] = {}
            for pid in sorted(ps.pages):
                path = ps.page_path(pid)
                try:
                    pf = PageFile(path)
                except OSError:
                    continue  # reported by _verify_store
                with pf:
                    for number, off, _, tx_id, _, mid, qids, _ in PageSummaries(pf.buf, pf.size):
                        state = view.tx_state(tx_id)
                        prepared = state == PAGE_TX_PREPARED and tx_id in short_tx
                        if state not in (None, PAGE_TX_COMMITTED) and not prepared:
                            continue
                        for qid in qids:
                            if qid in view.queues and view.queue_address.get(qid) == ps.address:
                                continue
                            # (a queue of another address is no queue of this page store: no cursor of it reads
                            # these pages.) A queue the message still names was not the damaged one (routed
                            # there once)
                            owners = [q for q in queues if one_byte_apart(qid, q) and q not in qids]
                            if (len(owners) == 1 and (owners[0] in short or prepared)
                                    and view.queue_state(owners[0], pid, number) == Q_PENDING):
                                hits.setdefault(owners[0], []).append((str(path), pid, number, off, mid,
                                                                       tx_id if prepared else None))
            for q, where in sorted(hits.items()):
                path, pid, number, off, mid, _ = where[0]
                shown = ", ".join(f"message {m} (page {p}, message {n})" for _, p, n, _, m, _ in where[:MAX_LISTED])
                prepared = sorted({w[5] for w in where if w[5] is not None})
                why = " and ".join(
                    ([f"whose page counter says {stored[q] - expected.get(q, 0)} more message(s) are unconsumed "
                      f"than its pages hold"] if q in short else [])
                    + ([f"of prepared page transaction(s) {', '.join(map(str, prepared))}, whose records count more "
                        f"queue references than their pages hold"] if prepared else []))
                # the current page's last record alone: what a crash mid-write leaves (paging/crash_tail.py)
                torn = len(where) == 1 and self.is_crash_tail(path, number)
                findings.append(Finding(
                    Severity.WARNING if torn else Severity.CRITICAL, "page-queue-id-damaged",
                    f"{len(where)} paged message(s) of address {ps.address!r} name a queue id no binding of it holds, "
                    f"one damaged byte away from queue {q}, {why}: queue {q} never delivers them: {shown}"
                    + ("; it is the last record of the current page, what a crash mid-write leaves" if torn else ""),
                    path, off, {"queueId": q, "messages": len(where), "messageIds": [w[4] for w in where[:100]],
                                "page": pid, "message": number}))

    def _short_prepared(self) -> set[int]:
        """The prepared page transactions whose PAGE_TRANSACTION record counts more queue references than the
        pages hold of messages naming them, each reference a queue a binding holds. A prepared transaction's
        paged messages are in no page counter until it commits (PageSubscriptionCounterImpl counts at commit),
        so its record's count (PagingStoreImpl.page: one per durable queue the message was routed to) is what
        shows a queue id damaged away (a Python read of the pages holding prepared messages)."""
        want = self.view.page_tx_prepared_count
        if not want or not self._prepared_pages:
            return set()
        refs: Counter = Counter()
        for _pid, (_, _, _, tx_id, _, _, qids, _) in page_tx.records_of(self._prepared_pages):
            if tx_id in want:
                refs[tx_id] += sum(1 for q in qids if q in self.view.queues)
        return {tx for tx, n in want.items() if n > refs[tx]}

    def summary_json(self) -> dict:
        return self.summary.to_json()
