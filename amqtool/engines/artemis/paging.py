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
"""
from __future__ import annotations

import errno
import hashlib
import json
import mmap
import os
import stat
import struct
from array import array
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import FormatError, Finding, Severity
from amqtool.formats.artemis.message import AmqpLargeMessage, AmqpMessage, CoreMessage, LargeMessage
from amqtool.formats.artemis.paging import (
    ADDRESS_FILE,
    END_BAD_END,
    END_BAD_LENGTH,
    END_BAD_START,
    END_CLEAN,
    END_SHORT_TAIL,
    PAGE_SUFFIX,
    PagedMessage,
    PageScanEnd,
    PageScanner,
    PageSummaries,
    page_id_from_name,
    summarize_record,
)
from amqtool.formats.artemis.primitives import Reader, simple_string_hash
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_LIVE = struct.Struct(native.LIVE_FORMAT)  # a packed live entry of the C load (LiveRecord's field order)
_CURSOR = struct.Struct(">qqi")  # ACKNOWLEDGE_CURSOR / PAGE_CURSOR_COMPLETE: queue, page, message number

PAGE_TX_COMMITTED = "committed"
PAGE_TX_PREPARED = "prepared"
PAGE_TX_NOT_FOUND = "not-found"

Q_ACKED = "acked"
Q_COMPLETE = "page-complete"
Q_NO_QUEUE = "no-queue"
Q_PENDING = "pending"

HASH_LINE = "#" * 100
MAX_LISTED = 20  # per-message findings listed before one summary finding

_PAGING_TYPES = frozenset({R.PAGE_TRANSACTION, R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE,
                           R.PAGE_CURSOR_COUNTER_VALUE, R.PAGE_CURSOR_COUNTER_INC, R.ADD_LARGE_MESSAGE})


# --- what the journals say about paging ----------------------------------------------------------------------


def _i64(body: bytes, at: int = 0) -> int:
    return int.from_bytes(body[at:at + 8], "big", signed=True)


def _i32(body: bytes, at: int) -> int:
    return int.from_bytes(body[at:at + 4], "big", signed=True)


@dataclass
class JournalLarge:
    """A large-message record (type 30) of the message journal."""

    message_id: int
    declared_size: int | None  # _AMQ_LARGE_SIZE
    state: str  # "live" | "prepared"
    decodable: bool = True


@dataclass
class PagingJournalView:
    """The facts of the two journals that paging needs (surviving records unless said otherwise)."""

    bindings_loaded: bool = False
    messages_loaded: bool = False
    queues: set[int] = field(default_factory=set)
    queue_address: dict[int, str] = field(default_factory=dict)  # queue id -> its address (binding record)
    page_tx: set[int] = field(default_factory=set)  # add.transactionID and update.pageTX of surviving 35s
    page_tx_adds: dict[int, tuple[int, int]] = field(default_factory=dict)  # txID -> (record id, numberOfMessages)
    page_tx_prepared: dict[int, int] = field(default_factory=dict)  # page txID -> journal tx id (prepared)
    page_tx_failed: dict[int, int] = field(default_factory=dict)  # page txID -> journal tx id (failed)
    acks: dict[int, set[tuple[int, int]]] = field(default_factory=dict)  # queue -> {(page, message nr)}
    complete: dict[int, set[int]] = field(default_factory=dict)  # queue -> {page}
    counter_value: dict[int, int] = field(default_factory=dict)  # queue -> last PAGE_CURSOR_COUNTER_VALUE
    counter_inc: dict[int, int] = field(default_factory=dict)  # queue -> sum of PAGE_CURSOR_COUNTER_INC
    large: dict[int, JournalLarge] = field(default_factory=dict)
    undecodable: int = 0

    def add_bindings(self, result) -> None:
        """Queue ids: the record ids of surviving QUEUE_BINDING_RECORDs (``data print``'s existing queues)."""
        from amqtool.formats.artemis.userrecords import decode_user_record

        self.bindings_loaded = True
        records = [rec for rec in result.live if rec.user_record_type == R.QUEUE_BINDING_RECORD]
        for rec in records:
            self.queues.add(rec.id)
        if getattr(result, "opened", None) is None:
            return
        for rec, body in zip(records, _bodies(result, records)):
            try:
                self.queue_address[rec.id] = decode_user_record(rec.user_record_type, body).address
            except (FormatError, AttributeError):
                pass  # an undecodable binding: verify's journal part reports it

    def add_messages(self, result) -> None:
        """Page transactions, cursor acks, page-complete and counter records, and large-message headers.
        Call while the journal is open (bodies are read from its files, each file once: a store holds
        many cursor acks and can hold many prepared transactions)."""
        from amqtool.engines.artemis.load import LiveList

        self.messages_loaded = True
        live = result.live
        if isinstance(live, LiveList):  # C load: no LiveRecord for the entries paging does not want
            buf, unpack, size = live.buffer, _LIVE.unpack_from, _LIVE.size
            wanted = [unpack(buf, i * size) for i in live.indexes_of_types(_PAGING_TYPES)]
        else:
            wanted = [rec for rec in live if rec.user_record_type in _PAGING_TYPES]
        tx_types = (R.PAGE_TRANSACTION, R.ADD_LARGE_MESSAGE)
        in_txs = [[(tx, target, rec) for rec in tx.records if rec.user_record_type in tx_types]
                  for txs, target in ((result.prepared, self.page_tx_prepared), (result.failed, self.page_tx_failed))
                  for tx in txs]
        bodies = _bodies(result, wanted + [rec for group in in_txs for _, _, rec in group])
        # in file order, as each record's body is read (the last counter value of a queue wins)
        order = sorted(range(len(wanted)), key=lambda i: wanted[i][4])
        ack, ack_fields, acks = R.ACKNOWLEDGE_CURSOR, _CURSOR.unpack_from, self.acks
        for i in order:
            rec, body = wanted[i], bodies[i]
            if rec[1] == ack and len(body) >= 20:  # most paging records: inline
                q, page, msg = ack_fields(body)
                positions = acks.get(q)
                if positions is None:
                    positions = acks[q] = set()
                positions.add((page, msg))
            else:
                self._live(rec, body)
        k = len(wanted)
        for group in in_txs:
            for j in sorted(range(len(group)), key=lambda j: group[j][2][4]):
                tx, target, rec = group[j]
                body = bodies[k + j]
                if rec.user_record_type == R.PAGE_TRANSACTION and len(body) >= 8:
                    target.setdefault(_i64(body), tx.tx_id)
                elif rec.user_record_type == R.ADD_LARGE_MESSAGE and tx.prepared and not tx.invalid:
                    self._large(rec.id, body, "prepared")
            k += len(group)

    def add_journal(self, journal, result) -> None:
        """:meth:`add_bindings` or :meth:`add_messages` by ``journal.kind`` (a command's load hook)."""
        if journal.kind == "bindings":
            self.add_bindings(result)
        else:
            self.add_messages(result)

    def _large(self, rid: int, body: bytes, state: str) -> None:
        try:
            lm = LargeMessage.decode(body)
            self.large[lm.message_id] = JournalLarge(lm.message_id, lm.large_size, state)
        except FormatError:
            self.large.setdefault(rid, JournalLarge(rid, None, state, decodable=False))

    def _live(self, rec, body: bytes) -> None:
        """One surviving record: ``rec`` in LiveRecord's field order (a LiveRecord or a packed entry)."""
        rid, t, is_update = rec[0], rec[1], rec[2]
        n = len(body)
        if t == R.ADD_LARGE_MESSAGE:
            self._large(rid, body, "live")
            return
        if n < 8:
            self.undecodable += 1
            return
        if t == R.PAGE_TRANSACTION:
            tx = _i64(body)
            self.page_tx.add(tx)
            if not is_update and n >= 12:
                self.page_tx_adds[tx] = (rid, _i32(body, 8))
        elif t in (R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE):
            if n < 20:
                self.undecodable += 1
                return
            q, page, msg = _i64(body), _i64(body, 8), _i32(body, 16)
            if t == R.ACKNOWLEDGE_CURSOR:
                self.acks.setdefault(q, set()).add((page, msg))
            else:
                self.complete.setdefault(q, set()).add(page)
        elif t == R.PAGE_CURSOR_COUNTER_VALUE and n >= 16:
            self.counter_value[_i64(body)] = _i64(body, 8)
        elif t == R.PAGE_CURSOR_COUNTER_INC and n >= 12:
            q = _i64(body)
            self.counter_inc[q] = self.counter_inc.get(q, 0) + _i32(body, 8)

    # -- judging one paged message --

    def tx_state(self, tx_id: int) -> str | None:
        if tx_id < 0:
            return None
        if tx_id in self.page_tx:
            return PAGE_TX_COMMITTED
        if tx_id in self.page_tx_prepared:
            return PAGE_TX_PREPARED
        return PAGE_TX_NOT_FOUND

    def queue_flags(self, queue_id: int, page: int, number: int) -> tuple[bool, bool, bool]:
        """(acked, page complete, queue missing) as ``data print`` tests them."""
        acks = self.acks.get(queue_id)
        acked = acks is not None and (page, number) in acks
        comp = self.complete.get(queue_id)
        complete = comp is not None and page in comp
        return acked, complete, queue_id not in self.queues

    def queue_state(self, queue_id: int, page: int, number: int) -> str:
        acked, complete, missing = self.queue_flags(queue_id, page, number)
        if acked:
            return Q_ACKED
        if complete:
            return Q_COMPLETE
        if missing:
            return Q_NO_QUEUE
        return Q_PENDING

    def counters(self) -> dict[int, int]:
        """Queue -> stored page counter (last value record plus increments, as brokers before the counter
        rebuild read it)."""
        out = dict(self.counter_value)
        for q, inc in self.counter_inc.items():
            out[q] = out.get(q, 0) + inc
        return out


_PREAD_BELOW = 8192  # file bytes per wanted record below which the whole file is read instead


def _bodies(result, records) -> list[bytes]:
    """The bodies of ``records`` (LiveRecord field order: file index 4, body offset 5, length 6): one pread
    each where they are sparse in their file (paging records spread over a large journal), else the file
    read once."""
    by_file: dict[int, list[int]] = {}
    for i, rec in enumerate(records):
        by_file.setdefault(rec[4], []).append(i)
    out: list[bytes] = [b""] * len(records)
    opened = result.opened
    for fi in sorted(by_file):
        wanted = by_file[fi]
        if len(wanted) * _PREAD_BELOW < result.files[fi].size:
            pread = opened.pread
            for i in wanted:
                off, ln = records[i][5], records[i][6]
                out[i] = pread(fi, off, ln) if ln else b""
            continue
        data = opened.read_file(fi)
        for i in wanted:
            off, ln = records[i][5], records[i][6]
            out[i] = bytes(data[off:off + ln])
        del data
    return out


def load_view(store, view: PagingJournalView | None = None) -> PagingJournalView:
    """Load the store's journals (read-only) and collect :class:`PagingJournalView`. Given a ``view`` that a
    command already fed with the results of its own load (``add_bindings``/``add_messages`` while each journal
    was open), only the journals it has not seen are loaded: each journal is read once per command."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal

    if view is None:
        view = PagingJournalView()
    if view.bindings_loaded and view.messages_loaded:
        return view
    for journal in store.journals():
        if view.bindings_loaded if journal.kind == "bindings" else view.messages_loaded:
            continue
        with open_journal(journal) as opened:
            if not opened.files:
                continue
            result = load_journal(opened)
            if journal.kind == "bindings":
                view.add_bindings(result)
            else:
                view.add_messages(result)
    return view


# --- the journals' facts as the C page walk takes them (native/page_scan.c) --------------------------------

_WALK_FRAME, _WALK_VERIFY, _WALK_JSON = 0, 1, 2
_WALK_HANDBACK, _WALK_PAUSE = 5, 6
_WALK_ENDS = (END_CLEAN, END_SHORT_TAIL, END_BAD_START, END_BAD_LENGTH, END_BAD_END)
_Q_KNOWN, _Q_COMPLETE = 1, 2


class WalkTables:
    """:class:`PagingJournalView` packed for ``native.page_walk``: sorted committed and prepared page
    transaction ids, and per page a table of the queues (exists, page complete, the message numbers acked
    on that page). Built once per command; a page's table is a few bytes per queue."""

    def __init__(self, view: PagingJournalView):
        self.view = view
        self.committed = array("q", sorted(view.page_tx))
        self.prepared = array("q", sorted(view.page_tx_prepared))
        acks: dict[int, dict[int, list[int]]] = {}  # page -> queue -> acked message numbers
        for q, positions in view.acks.items():
            for page, number in positions:
                acks.setdefault(page, {}).setdefault(q, []).append(number)
        complete: dict[int, set[int]] = {}  # page -> queues
        for q, pages in view.complete.items():
            for page in pages:
                complete.setdefault(page, set()).add(q)
        self._acks, self._complete = acks, complete
        self._base = None

    def page(self, page_id: int) -> tuple[array, array, array, array]:
        """``(committed, prepared, qtab, acks)`` for one page (see native/page_scan.c)."""
        acks = self._acks.get(page_id)
        complete = self._complete.get(page_id)
        if acks is None and complete is None:
            if self._base is None:
                self._base = self._table(None, None)
            return self._base
        return self._table(acks, complete)

    def _table(self, acks, complete):
        queues = set(self.view.queues) | set(acks or ()) | set(complete or ())
        qtab, numbers = array("q"), array("i")
        for q in sorted(queues):
            acked = sorted(set(acks.get(q, ()))) if acks else []
            flags = (_Q_KNOWN if q in self.view.queues else 0) | (_Q_COMPLETE if complete and q in complete else 0)
            qtab.extend((q, flags, len(numbers), len(acked)))
            numbers.extend(acked)
        return self.committed, self.prepared, qtab, numbers

    def queue_ids(self, tables) -> array:
        return array("q", tables[2][0::4])


def _end_of_walk(status: int, pos: int, number: int, length: int, size: int) -> PageScanEnd:
    reason = _WALK_ENDS[status]
    return PageScanEnd(reason, pos, number, size, length if reason in (END_BAD_LENGTH, END_BAD_END) else None)


def page_framing(buf, size: int) -> PageScanEnd:
    """How reading the page's records ends (:class:`PageScanner`), in C when the extension is built."""
    if native.page_walk is not None:
        status, pos, number, length, _ = native.page_walk(buf, 0, 0, _WALK_FRAME)
        return _end_of_walk(status, pos, number, length, size)
    s = PageScanner(buf, size)
    for _ in s:
        pass
    return s.end


# --- page stores on disk -----------------------------------------------------------------------------------


@dataclass
class PageStore:
    """One address's paging folder."""

    folder: Path
    address: str
    pages: dict[int, str] = field(default_factory=dict)  # page id -> file name
    page_files: int = 0  # every *.page file, as PagingStoreImpl counts them
    bad_names: list[str] = field(default_factory=list)

    @property
    def first_page(self) -> int | None:
        return min(self.pages) if self.pages else None

    @property
    def current_page(self) -> int:
        """The current writing page: the highest page id (0 when there are none)."""
        return max(self.pages) if self.pages else 0

    def page_path(self, page_id: int) -> Path:
        return self.folder / self.pages[page_id]

    def missing_pages(self) -> list[int]:
        if not self.pages:
            return []
        return [p for p in range(self.first_page, self.current_page) if p not in self.pages]


@dataclass
class PagingDirNote:
    """A paging sub-folder Artemis skips, or cannot use."""

    code: str
    path: str
    message: str


def _chm_order(keys: list[str]) -> list[int]:
    """Indices of ``keys`` (SimpleString addresses, in put order) in the iteration order of the
    ``ConcurrentHashMap`` PagingManagerImpl keeps its stores in: table of 16 doubling once the count reaches
    3/4 of it; bins in index order, ties in put order."""
    cap = 16
    while len(keys) >= cap * 3 // 4:
        cap *= 2
    mask = cap - 1

    def index(i: int) -> int:
        h = simple_string_hash(keys[i])
        return (h ^ (h >> 16)) & 0x7FFFFFFF & mask

    return sorted(range(len(keys)), key=lambda i: (index(i), i))


def _read_address(path: Path) -> str | None:
    """``BufferedReader.readLine`` of address.txt (None for an empty file)."""
    with open(path, "rb") as fh:
        data = fh.read(1 << 20)
    if not data:
        return None
    text = data.decode("utf-8", "replace")
    for i, c in enumerate(text):
        if c in "\r\n":
            return text[:i]
    return text


def find_page_stores(paging_dir: Path | None) -> tuple[list[PageStore], list[PagingDirNote]]:
    """The page stores of ``paging_dir`` in the order ``data print`` explores them, and notes on folders
    Artemis would skip."""
    if paging_dir is None:
        return [], []
    notes: list[PagingDirNote] = []
    try:
        names = os.listdir(paging_dir)
    except OSError as err:
        return [], [PagingDirNote("unreadable", str(paging_dir), f"cannot list: {err.strerror}")]
    by_address: dict[str, PageStore] = {}
    for name in names:  # File.listFiles order, as reloadStores iterates
        folder = Path(paging_dir) / name
        if not folder.is_dir():
            continue
        addr_file = folder / ADDRESS_FILE
        if not addr_file.is_file():
            notes.append(PagingDirNote("page-folder-no-address", str(folder),
                                       f"no {ADDRESS_FILE}: Artemis skips this folder"))
            continue
        try:
            address = _read_address(addr_file)
        except OSError as err:
            notes.append(PagingDirNote("unreadable", str(addr_file), f"cannot read: {err.strerror}"))
            continue
        if address is None:
            notes.append(PagingDirNote("page-folder-no-address", str(addr_file),
                                       f"empty {ADDRESS_FILE}: Artemis skips this folder"))
            continue
        ps = PageStore(folder, address)
        try:
            entries = os.listdir(folder)
        except OSError as err:
            notes.append(PagingDirNote("unreadable", str(folder), f"cannot list: {err.strerror}"))
            continue
        for n in entries:
            if not n.endswith(PAGE_SUFFIX):
                continue
            ps.page_files += 1
            pid = page_id_from_name(n)
            if pid is None:
                ps.bad_names.append(n)
            else:
                ps.pages[pid] = n
        if address in by_address:
            # ConcurrentHashMap.put: the later folder replaces the earlier one's store under the same key
            notes.append(PagingDirNote("page-folder-duplicate-address", str(folder),
                                       f"address {address!r} is also paged in {by_address[address].folder.name}: "
                                       f"the broker uses only one of the folders"))
        by_address[address] = ps
    keys = list(by_address)
    return [by_address[keys[i]] for i in _chm_order(keys)], notes


class PageFile:
    """A page file mapped read-only (an empty file reads as no bytes). Use as a context manager."""

    def __init__(self, path: Path):
        self.path = path
        # O_NONBLOCK: a FIFO named like a page must not block the reader (it would block the broker too)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file: the broker cannot read it as a page", str(path))
        self._fh = os.fdopen(fd, "rb")
        size = st.st_size
        self._map = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None
        self.buf = self._map if self._map is not None else b""
        self.size = size

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._fh.close()

    def __enter__(self) -> "PageFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def live_page_rollover(store: PageStore) -> bool:
    """Whether starting the store would open a new page after the current one (``reloadLivePage``: the
    current page does not end exactly after its last whole record). Page id 0 is never reloaded."""
    cur = store.current_page
    if cur == 0 or cur not in store.pages:
        return False
    try:
        with PageFile(store.page_path(cur)) as pf:
            return page_framing(pf.buf, pf.size).offset != pf.size
    except OSError:
        return False


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


def _entries_of_page(store: PageStore, page_id: int, view: PagingJournalView,
                     errors: list | None = None) -> Iterator[PagedEntry]:
    with PageFile(store.page_path(page_id)) as pf:
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


def store_pages(store) -> list[tuple[PageStore, int]]:
    """(page store, page id) of every page of the store, in exploring order, page by page."""
    stores, _ = find_page_stores(store.paging_dir)
    return [(ps, pid) for ps in stores for pid in sorted(ps.pages)]


def iter_paged_entries(store, view: PagingJournalView | None = None, errors: list | None = None,
                       pages: list[tuple[PageStore, int]] | None = None) -> Iterator[PagedEntry]:
    """Every paged message of every page store, in exploring order, page by page (only ``pages``, a run of
    :func:`store_pages`, when given). A record that does not decode ends its page (as ``Page.read`` fails
    there); it is appended to ``errors`` when given."""
    view = load_view(store, view)
    for ps, pid in store_pages(store) if pages is None else pages:
        try:
            yield from _entries_of_page(ps, pid, view, errors)
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


# --- data print's paging section ---------------------------------------------------------------------------


def _message_text(pm: PagedMessage, tz=None) -> str:
    msg = pm.message
    if isinstance(msg, LargeMessage):
        return msg.paged_text()
    if isinstance(msg, CoreMessage):
        return msg.to_string(tz=tz)
    text = msg.describe(tz=tz)  # AMQP: abbreviated, the AMQP sections are not decoded
    return text.split(";msg=", 1)[1] if ";msg=" in text else text


def _safe_text(pm: PagedMessage) -> str:
    msg = pm.message
    if isinstance(msg, LargeMessage):
        return f"NullStorageLargeServerMessage(safe data, size={pm.header_size})"
    if isinstance(msg, CoreMessage):
        return f"CoreMessage(safe data, size={msg.encode_size()})"
    if isinstance(msg, AmqpLargeMessage):
        return "AMQPLargeMessage(safe data)"
    if isinstance(msg, AmqpMessage):
        return f"AMQPStandardMessage(safe data, size={len(msg.data)})"
    return f"{type(msg).__name__}(safe data)"  # pragma: no cover


def message_line(pm: PagedMessage, page: int, number: int, view: PagingJournalView, safe: bool,
                 tz=None) -> list[str]:
    """The ``pg=..`` line of one paged message and, when not every routed queue is acked, the ``^^^`` line
    and an empty line (PrintData.printPages)."""
    if safe:
        text = ", msg=" + _safe_text(pm)
    else:
        uid = getattr(pm.message, "user_id", None) or ""
        text = f",userMessageID={uid}, msg=" + _message_text(pm, tz)
    return _queues_line(text, pm.transaction_id, pm.queue_ids, page, number, view)


def _queues_line(text: str, transaction_id: int, queue_ids: tuple[int, ...], page: int, number: int,
                 view: PagingJournalView) -> list[str]:
    """message_line from the message's text (what follows ``pgTX=..``), for the Python and the C path."""
    text = f"pg={page}, msg={number},pgTX={transaction_id}" + text
    parts = []
    acked_count = 0
    for q in queue_ids:
        acked, complete, missing = view.queue_flags(q, page, number)
        s = str(q)
        if acked:
            s += " (ACK)"
        if complete:
            s += " (PG-COMPLETE)"
        if missing:
            s += " (N/A) "
        if acked or complete or missing:
            acked_count += 1
        else:
            s += " (OK) "
        parts.append(s)
    text += ",Queues = " + ",".join(parts)
    if transaction_id >= 0 and transaction_id not in view.page_tx:
        text += ", **PG_TX_NOT_FOUND**"
    out = [text]
    if acked_count != len(queue_ids):
        out += [f"^^^ Previous record has {acked_count} acked queues and {len(queue_ids)} queues routed", ""]
    return out


def _page_lines(ps: PageStore, page_id: int, view: PagingJournalView, safe: bool, tz=None) -> list[str]:
    """The lines of one page's messages (FormatError as :func:`_page_messages`). Core messages are written
    by native.describe_paged from the page bytes; a page holding anything else (or bytes in doubt) goes
    through the Python decoders whole, so a record that does not decode stops the output where it did."""
    if native.describe_paged is not None and tz is None and page_id in ps.pages:
        with PageFile(ps.page_path(page_id)) as pf:
            parts = []
            for _, off, ln in PageScanner(pf.buf):
                got = native.describe_paged(pf.buf, off + 5, off + 5 + ln, safe)
                if got is None:
                    break
                parts.append(got)
            else:
                lines = []
                for number, (tx, queue_ids, text) in enumerate(parts):
                    lines += _queues_line(text, tx, queue_ids, page_id, number, view)
                return lines
    lines = []
    for number, pm in enumerate(_page_messages(ps, page_id)):
        lines += message_line(pm, page_id, number, view, safe, tz)
    return lines


def _page_messages(ps: PageStore, page_id: int) -> list[PagedMessage]:
    """``Page.read``: the messages of a page (FormatError when a framed record does not decode)."""
    if page_id not in ps.pages:
        return []
    with PageFile(ps.page_path(page_id)) as pf:
        return [PagedMessage.read(Reader(pf.buf, off + 5, off + 5 + ln)) for _, off, ln in PageScanner(pf.buf)]


def describe_paging(store, *, safe: bool = False, max_pages: int = -1, view: PagingJournalView | None = None,
                    tz=None) -> Iterator[str]:
    """The lines ``artemis data print`` writes after its ``P A G I N G`` banner (§6.1 item 5).

    Where the Java tool throws (a page record that is framed but does not decode), its output stops and a
    stack trace goes to stderr; here the lines stop at the same place. Differences on purpose: nothing is
    written (the Java tool's store start creates the new page it counts after a torn current page), and
    AMQP messages print an abbreviated text (their AMQP sections are not decoded).
    """
    if max_pages == 0:
        yield ".... skipping"
        yield ""
        return
    if store.paging_dir is None:
        return
    view = load_view(store, view)
    stores, _ = find_page_stores(store.paging_dir)
    # PagingManagerImpl.start reloads every store before anything is printed: a current page that fails to
    # decode makes the whole start fail.
    counts = []
    for ps in stores:
        rollover = live_page_rollover(ps)
        if ps.bad_names:
            return  # getPageIdFromFileName throws NumberFormatException in PagingStoreImpl.start
        if ps.current_page != 0:
            try:
                _page_messages(ps, ps.current_page)
            except (FormatError, OSError):
                return
        counts.append((ps.page_files + rollover, ps.current_page + rollover))
    for ps, (n, current) in zip(stores, counts):
        yield HASH_LINE
        yield f"Exploring store {ps.address} folder = {ps.folder}"
        yield f"Number of pages ::{n}, Current writing page ::{current}"
        pgid = ps.first_page if ps.first_page is not None else 0
        for pg in range(n):
            if 0 <= max_pages < pg:
                yield f"******* Giving up at Page {pgid}, System has a total of {n} pages"
                break
            while pgid not in ps.pages and pgid < current:
                pgid += 1
            yield f"*******   Page {pgid}"
            try:
                lines = _page_lines(ps, pgid, view, safe, tz)
            except (FormatError, OSError):
                return  # the exception ends printPages
            yield from lines
            pgid += 1


# --- print JSON ----------------------------------------------------------------------------------------------


def iter_paging_json(store, *, safe: bool = False, max_pages: int = -1,
                     view: PagingJournalView | None = None) -> Iterator[str]:
    """The ``paging`` section of the print document as streamed JSON text: page stores, their pages and
    paged messages with their state (one page in memory at a time), and the large-message files.
    ``max_pages`` limits the pages listed per store (-1 all, 0 none)::

        {"directory", "stores": [{"address", "folder", "numberOfPages", "firstPage", "currentPage",
          "missingPages", "pages": [{"pageId", "file", "size", "records", "end", "endOffset"}],
          "messages": [PagedEntry.to_json()], "undecodable": [...]}], "notes": [...],
         "largeMessages": [{"messageId", "file", "size", "declaredSize", "journal", "paged"}]}
    """
    dumps = json.dumps
    view = load_view(store, view)
    stores, notes = find_page_stores(store.paging_dir)
    use_native = native.HAVE_PAGE_JSON  # else the Python reference: PagedEntry.to_json + json.dumps
    tables = WalkTables(view) if use_native else None
    large_by_page: list[list[tuple[int, dict | None]]] = []  # per store: (page, its core large messages)
    yield '{"directory": %s, "stores": [' % dumps(str(store.paging_dir) if store.paging_dir is not None else None)
    with ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(_json_workers())) if use_native else None
        for si, ps in enumerate(stores):
            yield from _json_store(store, si, ps, view, tables, pool, safe, max_pages, large_by_page)
    yield '], "notes": %s' % dumps([{"code": n.code, "path": n.path, "message": n.message} for n in notes])
    paged = _paged_large_ids(store, stores, large_by_page) if use_native else None
    yield ', "largeMessages": %s}' % dumps(large_messages_json(store, view, paged))


def _json_store(store, si: int, ps: PageStore, view, tables, pool, safe: bool, max_pages: int,
                large_by_page: list) -> Iterator[str]:
    """One item of the ``stores`` array: through the C walk when ``pool`` is given, else the Python path."""
    dumps = json.dumps
    pages = []
    errors: list = []
    store_large: list[tuple[int, dict | None]] = []
    large_by_page.append(store_large)
    yield ("" if si == 0 else ", ") + '{"address": %s, "folder": %s, "numberOfPages": %d, "firstPage": %s, ' \
        '"currentPage": %d, "missingPages": %s, "messages": [' % (
            dumps(ps.address), dumps(str(ps.folder)), ps.page_files, dumps(ps.first_page), ps.current_page,
            dumps(ps.missing_pages()))
    first = [True]
    pids = sorted(ps.pages)[:max_pages] if max_pages >= 0 else sorted(ps.pages)
    if pool is not None:
        yield from _json_pages_native(ps, pids, view, tables, pool, safe, store.large_messages_dir, pages,
                                      errors, store_large)
        pids = []
    for pid in pids:
        try:
            with PageFile(ps.page_path(pid)) as pf:
                end = page_framing(pf.buf, pf.size)
            pages.append(_page_json(ps, pid, end))
            for e in _entries_of_page(ps, pid, view, errors):
                yield ("" if first[0] else ",") + "\n  " + dumps(e.to_json(safe, store.large_messages_dir),
                                                                 ensure_ascii=False)
                first[0] = False
        except OSError as err:
            pages.append({"pageId": pid, "file": ps.pages[pid], "error": err.strerror})
    yield '], "pages": %s, "undecodable": %s}' % (dumps(pages), dumps(
        [{"page": pid, "messageNumber": n, "offset": off, "error": str(err)} for _, pid, n, off, err in errors]))


def _page_json(ps: PageStore, pid: int, end: PageScanEnd) -> dict:
    return {"pageId": pid, "file": ps.pages[pid], "size": end.size, "records": end.records, "end": end.reason,
            "endOffset": end.offset}


_JSON_RUN = 4096  # paged messages per C call and per task: bounds the text held at once


def _json_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


@dataclass
class _PageRuns:
    """A page whose runs of records are being formatted: open until its last run is written."""

    pid: int
    file: "PageFile"
    runs_left: int = 0
    stopped: bool = False  # a record did not decode: the page's messages end there
    large: dict | None = field(default_factory=dict)  # its core large messages (None: scan the page again)


def _json_pages_native(ps: PageStore, pids: list[int], view: PagingJournalView, tables: WalkTables, pool,
                       safe: bool, large_dir, pages: list, errors: list, store_large: list) -> Iterator[str]:
    """The ``messages`` items of ``pids`` as the Python path writes them, formatted by the C walk (mode 2) in
    runs of :data:`_JSON_RUN` records on ``pool``'s threads (the walk releases the GIL: SHA-256 of the bodies
    is most of the work), written here in order with at most one run more than there are threads in flight.
    Framing (``pages``), ``errors`` and the pages' core large messages (``store_large``: page -> message id
    -> declared size, or None where the pass cannot stand for :func:`_page_large_ids`) as the Python path
    finds them."""
    pending: deque = deque()
    first = True
    opened: list[_PageRuns] = []
    workers = _json_workers()  # the pool's size

    def written(state: _PageRuns, future) -> Iterator[str]:
        nonlocal first
        texts, errs, large, stopped = future.result()
        if not state.stopped:
            errors.extend(errs)
            if large is None:
                state.large = None
            elif state.large is not None:
                state.large.update(large)
            for text in texts:
                if first and text:
                    text, first = text[1:], False  # every run's items start with ","
                yield text
            state.stopped = stopped
        state.runs_left -= 1
        if state.runs_left == 0:
            store_large.append((state.pid, state.large))
            state.file.close()

    try:
        for state, pos, number, count in _page_runs(ps, pids, pages, opened):
            pending.append((state, pool.submit(_json_run, ps, state, pos, number, count, view, tables, safe,
                                               large_dir)))
            while len(pending) > workers:
                yield from written(*pending.popleft())
        while pending:
            yield from written(*pending.popleft())
    finally:
        for _, future in pending:
            future.cancel()
        for _, future in pending:
            if not future.cancelled():
                future.exception()  # wait: its thread still reads the page
        for state in opened:
            state.file.close()


def _page_runs(ps: PageStore, pids: list[int], pages: list, opened: list) -> Iterator[tuple]:
    """(page, start offset, start message number, records) of each run of each page, the page's framing
    appended to ``pages`` (C framing walk, :data:`_JSON_RUN` records at a time)."""
    walk = native.page_walk
    for pid in pids:
        try:
            pf = PageFile(ps.page_path(pid))
        except OSError as err:
            pages.append({"pageId": pid, "file": ps.pages[pid], "error": err.strerror})
            continue
        state = _PageRuns(pid, pf)
        opened.append(state)
        runs = []
        pos = number = 0
        while True:
            status, npos, nnumber, length, _ = walk(pf.buf, pos, number, _WALK_FRAME, limit=_JSON_RUN)
            runs.append((pos, number, nnumber - number))
            if status != _WALK_PAUSE:
                break
            pos, number = npos, nnumber
        pages.append(_page_json(ps, pid, _end_of_walk(status, npos, nnumber, length, pf.size)))
        state.runs_left = len(runs)
        for pos, number, count in runs:
            yield state, pos, number, count


def _json_run(ps: PageStore, state: _PageRuns, pos: int, number: int, count: int, view: PagingJournalView,
              tables: WalkTables, safe: bool, large_dir):
    """One run of records (in a worker thread): ``(texts, errors, large, stopped)``. The C walk formats the
    core and AMQP messages; the records it hands back (core and AMQP large messages, records that do not
    decode) go through :class:`PagedEntry` here."""
    walk, dumps = native.page_walk, json.dumps
    buf, pid = state.file.buf, state.pid
    table = tables.page(pid)
    flag = array("q", [0])  # items start with ","
    texts: list[str] = []
    errors: list = []
    large: dict | None = {}
    stop = number + count
    while number < stop:
        status, pos, number, length, text = walk(buf, pos, number, _WALK_JSON, table, flag, None, pid, safe,
                                                 stop - number, _dumps_unicode)
        if text:
            texts.append(text)
        if status != _WALK_HANDBACK:
            break
        start, end = pos + 5, pos + 5 + length
        try:
            sr = summarize_record(buf, start, end)
            if sr.header is not None and large is not None:
                large[sr.message_id] = _declared_size(buf, sr.header)
        except FormatError:
            large = None
        try:
            pm = PagedMessage.read(Reader(buf, start, end))
        except FormatError as err:
            errors.append((ps, pid, number, pos, err))
            return texts, errors, None, True
        states = [(q, view.queue_state(q, pid, number)) for q in pm.queue_ids]
        entry = PagedEntry(ps.address, pid, number, pos, pm, view.tx_state(pm.transaction_id), states)
        texts.append(",\n  " + dumps(entry.to_json(safe, large_dir), ensure_ascii=False))
        pos += 6 + length
        number += 1
    return texts, errors, large, False


_dumps_unicode = partial(json.dumps, ensure_ascii=False)  # an address's JSON, as the Python path writes it


def paging_document(store, *, safe: bool = False, max_pages: int = -1,
                    view: PagingJournalView | None = None) -> dict:
    """:func:`iter_paging_json` as one dict."""
    return json.loads("".join(iter_paging_json(store, safe=safe, max_pages=max_pages, view=view)))


def large_messages_json(store, view: PagingJournalView, paged: dict[int, int | None] | None = None) -> list[dict]:
    """The ``.msg`` files with their sizes and what points at them. ``paged``: the core large messages of the
    pages (:func:`_paged_large_ids`), when the caller already has them."""
    files = _msg_files(store.large_messages_dir)
    if paged is None:
        paged = _paged_large_ids(store)
    out = []
    for mid in sorted(set(files) | set(view.large) | set(paged)):
        path = files.get(mid)
        size = None
        if path is not None:
            try:
                size = os.stat(path).st_size
            except OSError:
                pass
        j = view.large.get(mid)
        declared = j.declared_size if j else paged.get(mid)
        out.append({"messageId": mid, "file": os.path.basename(path) if path else None, "size": size,
                    "declaredSize": declared, "journal": j.state if j else None, "paged": mid in paged})
    return out


def _msg_files(lm_dir) -> dict[int, str]:
    files: dict[int, str] = {}
    if lm_dir is None:
        return files
    try:
        names = os.listdir(lm_dir)
    except OSError:
        return files
    for n in names:
        stem, _, ext = n.partition(".")
        if ext == "msg" and stem.isdigit():
            files[int(stem)] = str(Path(lm_dir) / n)
    return files


def _paged_large_ids(store, stores: list[PageStore] | None = None,
                     known: list[list[tuple[int, dict | None]]] | None = None) -> dict[int, int | None]:
    """Message id -> declared size of every core large message in the pages (a page's scan stops at a record
    that does not summarize). ``known``: per store of ``stores``, (page, its large messages or None) for pages
    a previous pass already covered; the others are scanned here. Later pages win, as in a full scan."""
    out: dict[int, int | None] = {}
    if stores is None:
        stores, _ = find_page_stores(store.paging_dir)
    for si, ps in enumerate(stores):
        done = dict(known[si]) if known is not None else {}
        for pid in sorted(ps.pages):
            found = done.get(pid)
            if found is None:
                try:
                    with PageFile(ps.page_path(pid)) as pf:
                        found = _page_large_ids(pf.buf, pf.size)
                except OSError:
                    continue
            out.update(found)
    return out


_NO_TABLES = (array("q"), array("q"), array("q"), array("i"))


def _page_large_ids(buf, size: int) -> dict[int, int | None]:
    """The core large messages of one page (message id -> declared size), up to the first record that does
    not summarize."""
    out: dict[int, int | None] = {}
    if native.page_walk is None:
        for _, off, ln in PageScanner(buf, size):
            try:
                s = summarize_record(buf, off + 5, off + 5 + ln)
            except FormatError:
                break
            if s.header is not None:
                out[s.message_id] = _declared_size(buf, s.header)
        return out
    acc, lists = array("q", bytes(16)), ([], [])
    pos = number = 0
    while True:  # the C walk skips the rest; core large messages are handed back
        status, pos, number, length, _ = native.page_walk(buf, pos, number, _WALK_VERIFY, _NO_TABLES, acc, lists)
        if status != _WALK_HANDBACK:
            return out
        try:
            s = summarize_record(buf, pos + 5, pos + 5 + length)
        except FormatError:
            return out
        if s.header is not None:
            out[s.message_id] = _declared_size(buf, s.header)
        pos += 6 + length
        number += 1
        lists[0].clear()
        lists[1].clear()


def _declared_size(buf, header: tuple[int, int]) -> int | None:
    try:
        return LargeMessage.read(Reader(buf, header[0], header[1])).large_size
    except FormatError:
        return None


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


def _torn_like(buf, end: PageScanEnd) -> bool:
    """An ending a crash mid-append leaves: a short tail, a length that runs past the end of the file, or a
    start byte followed by nothing but zeros (a tail the filesystem zero-filled)."""
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


def _first_undecodable(buf, size: int) -> tuple[int, int, FormatError] | None:
    """The first well-framed record of a page whose message does not decode as ``Page.read`` decodes it
    (``PagedMessageImpl.decode``: the message with its headers and properties, the queue ids), or None.

    The framing and the fast summary (:func:`summarize_record`) skip a core message's properties and body by
    their lengths, so a flipped bit inside them passed both while the broker, and ``export``, stop reading
    the page at that record and lose every message after it. About 25 µs a paged message.
    """
    for number, off, ln in PageScanner(buf, size):
        try:
            PagedMessage.read(Reader(buf, off + 5, off + 5 + ln))
        except FormatError as err:
            return number, off, err
    return None


class PagingVerifier:
    """The paging part of ``verify``: fed the journals' load results, then :meth:`verify` reads every page."""

    def __init__(self, store, progress: Callable[[int], None] | None = None):
        self.store = store
        self.view = PagingJournalView()
        self.progress = progress
        self.summary = PagingSummary()
        self._tables: WalkTables | None = None
        self._gaps: list[tuple[PageStore, list[int], int, list[int]]] = []

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
            findings.append(Finding(sev, n.code, n.message, n.path))
        expected: dict[int, int] = {}
        not_found: dict[int, int] = {}  # page tx -> messages
        prepared: dict[int, int] = {}
        for ps in stores:
            self.summary.stores += 1
            self._verify_store(ps, findings, expected, not_found, prepared, paged_large)
        self._tx_findings(findings, not_found, prepared)
        self._gap_findings(findings, expected)
        if stores or view.counter_value or view.counter_inc:
            self._counter_findings(findings, expected)
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
        for ps, missing, present, acked_missing in self._gaps:
            folder = str(ps.folder)
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            queues = sorted(q for q, a in view.queue_address.items() if a == ps.address and q in view.queues)
            lost = {q: stored[q] - expected.get(q, 0) for q in queues
                    if q in stored and stored[q] > expected.get(q, 0)}
            if acked_missing and not lost:
                findings.append(Finding(
                    Severity.CRITICAL, "page-missing",
                    f"address {ps.address!r}: page(s) {', '.join(map(str, acked_missing[:10]))} are gone although "
                    f"cursor acknowledgements point into them (partly consumed): their unconsumed messages are lost",
                    folder, None, {"missingPages": missing, "ackedMissingPages": acked_missing,
                                   "messagesLost": None}))
            elif lost:
                n = sum(lost.values())
                findings.append(Finding(
                    Severity.CRITICAL, "page-missing",
                    f"address {ps.address!r}: page(s) {shown} are gone and the page counters of its queues say "
                    f"{n} unconsumed message reference(s) ("
                    + ", ".join(f"queue {q}: {v}" for q, v in lost.items())
                    + ") are not in the pages that remain: they were in the missing page(s) and are lost",
                    folder, None,
                    {"missingPages": missing, "ackedMissingPages": acked_missing, "messagesLost": n,
                     "lostByQueue": {str(q): v for q, v in lost.items()}}))
            else:
                findings.append(Finding(
                    Severity.WARNING, "page-gap",
                    f"address {ps.address!r}: page(s) {shown} missing between page {ps.first_page} and the "
                    f"current page {ps.current_page}; the broker removes a page from the middle only once every "
                    f"queue has consumed it, and nothing here shows unconsumed messages were in it", folder,
                    None, {"missingPages": missing, "presentPages": present}))

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
            self._gaps.append((ps, missing, len(ps.pages), acked_missing))
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
                self.summary.pages += 1
                self.summary.bytes += pf.size
                buf = pf.buf
                account = _PageAccount(self, pid, str(path), buf, expected, not_found, prepared, paged_large)
                if use_native:
                    end, error = self._walk_page(buf, pf.size, pid, account)
                else:
                    s = PageSummaries(buf, pf.size)
                    record = account.record
                    for number, _, _, tx_id, _, mid, qids, header in s:
                        record(number, tx_id, mid, qids, header)
                    end, error = s.end, s.error
                if error is None:
                    error = _first_undecodable(buf, pf.size)
                if error is not None:
                    number, off, err = error
                    undecodable += 1
                    if undecodable <= MAX_LISTED:
                        after = sum(1 for _ in PageScanner(buf, pf.size)) - number
                        findings.append(Finding(
                            Severity.CRITICAL, "page-record-undecodable",
                            f"page {pid} message {number}: {err.message}; the broker stops reading this page "
                            f"there: this message and the {after - 1} after it are not delivered", str(path), off,
                            {"page": pid, "message": number, "messagesLost": after}))
                if self.progress is not None:
                    self.progress(pf.size)
                if end is None or end.reason == END_CLEAN:
                    continue  # clean, or cut short by an undecodable record (reported above)
                left = end.size - end.offset
                is_current = pid == current
                if _torn_like(buf, end):
                    where = "the current page" if is_current else f"page {pid} (not the current page)"
                    findings.append(Finding(
                        Severity.WARNING, "page-torn-tail",
                        f"{left} byte(s) of a partly written record after message {end.records - 1} of {where}: "
                        f"the broker stopped mid-write; it ignores these bytes"
                        + (" and starts a new page" if is_current else ""), str(path), end.offset,
                        {"page": pid, "messages": end.records, "reason": end.reason}))
                else:
                    what = {END_BAD_START: "no '{' start marker", END_BAD_END: "no '}' end marker after "
                            f"{end.length} bytes", END_BAD_LENGTH: f"a record length of {end.length}"}[end.reason]
                    findings.append(Finding(
                        Severity.CRITICAL, "page-damaged",
                        f"page {pid}: {what} at message {end.records}; the broker stops reading the page there, "
                        f"so the {left} byte(s) after it (any messages in them) are lost", str(path), end.offset,
                        {"page": pid, "messages": end.records, "reason": end.reason}))
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

    def summary_json(self) -> dict:
        return self.summary.to_json()


__all__ = [
    "PAGE_TX_COMMITTED", "PAGE_TX_PREPARED", "PAGE_TX_NOT_FOUND", "Q_ACKED", "Q_COMPLETE", "Q_NO_QUEUE",
    "Q_PENDING", "PagingJournalView", "load_view", "PageStore", "find_page_stores", "PageFile", "PagedEntry",
    "iter_paged_entries", "store_pages", "iter_paged_rows", "describe_paging", "message_line", "paging_document",
    "iter_paging_json",
    "PagingVerifier", "PagedLarge", "large_message_file", "live_page_rollover", "paged_export_rows",
]


# --- export ------------------------------------------------------------------------------------------------


def _record_for_export(pm: PagedMessage) -> tuple[int, bytes]:
    """(user record type, body) the export's ``decode_message`` takes: a core large message's header as a
    type-30 body, anything else as a type-45 body (persister byte + message)."""
    if pm.is_core_large:
        return R.ADD_LARGE_MESSAGE, pm.message.encode()
    return R.ADD_MESSAGE_PROTOCOL, pm.message.encode()


def paged_export_rows(store, *, bindings, large=None, safe: bool = False,
                      wants: Callable[[str], bool] | None = None, view: PagingJournalView | None = None,
                      problem: Callable[[int, str], None] | None = None,
                      count_row: Callable[[str, str], None] | None = None,
                      pages: list[tuple[PageStore, int]] | None = None) -> Iterator[tuple]:
    """Export rows (``export.schema.MESSAGE_COLUMNS``, built by ``export.parse.message_row``) of the paged
    messages: one per (paged message, queue that still has to consume it), flagged ``paged`` with the page
    number and 0-based position. Messages of a committed or non-transactional page send are
    ``committed``; those of a page transaction in a prepared XA transaction are ``prepared`` (with that
    transaction's id); messages whose page transaction is gone are skipped, as the broker skips them.
    Order: page stores in exploring order, pages by id, messages by position; queues in routed order.

    ``bindings`` is the export's ``Bindings`` (queue names and routing types), ``large`` its ``LargeBodies``;
    ``wants(queue name)`` filters queues; ``problem(message id, text)`` receives undecodable records and
    ``count_row(queue, state)`` every row written. ``pages`` (a run of :func:`store_pages`) limits the walk
    to those pages: the Spark engine splits the pages over its tasks, each with the ``view`` facts of its
    pages. Page files are read one at a time, so memory does not grow with the paging directory."""
    from amqtool.engines.export.parse import decode_message, message_row

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
        try:
            msg = decode_message(utype, body, message_id=pm.message_id, large=large, safe=safe)
        except FormatError as err:
            if problem is not None:
                problem(pm.message_id, f"paged message (page {entry.page}, message {entry.number}): {err.message}")
            continue
        for q in queues:
            name = bindings.queue_name(q)
            if count_row is not None:
                count_row(name, state)
            yield message_row(msg, queue=name, queue_id=q, routing_type=bindings.routing_type(q),
                              transaction_state=state, transaction_id=tx_id, paged=True, page=entry.page,
                              page_position=entry.number)
    if problem is not None:
        for ps, pid, number, off, err in errors:
            problem(-1, f"{ps.folder}/{ps.pages.get(pid, pid)}: record {number} at offset {off}: {err}")
