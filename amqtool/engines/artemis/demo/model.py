"""The simulated broker's objects: queues, addresses, messages, paged messages, page transactions and
stores, and its ID generator (``BatchingIDGenerator``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from amqtool.formats.artemis.paging import ADDRESS_FILE, page_file_name
from amqtool.formats.artemis.userrecords import (
    IdCounterRecord,
    JournalRecordIds as R,
)
from amqtool.engines.artemis.demo.constants import ID_BATCH
from amqtool.engines.artemis.demo.expected import _Journal


# --- the broker model ----------------------------------------------------------------------------------------

@dataclass
class _Queue:
    id: int
    name: str
    address: str
    routing_type: int
    filter: str | None = None
    user: str | None = None
    auto_created: bool = False
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    status: str = "RUNNING"


@dataclass
class _Address:
    id: int
    name: str
    routing_types: tuple[int, ...]
    auto_created: bool = False
    queues: list[_Queue] = field(default_factory=list)


@dataclass
class _Message:
    id: int
    address: str
    type: str  # "text" | "bytes" | "large"
    body_size: int
    body_sha256: str
    record_size: int
    queues: list[int]  # queue ids routed (ADD_REF)
    acked: set[int] = field(default_factory=set)
    delivery_count: dict[int, int] = field(default_factory=dict)
    scheduled: dict[int, int] = field(default_factory=dict)
    duplicate_id: str | None = None
    large_file: str | None = None
    tx: int | None = None
    deleted: bool = False


@dataclass
class _Paged:
    """One message in a page file."""

    id: int
    store: "_PageStore"
    page: int
    number: int
    queues: list[int]
    tx: int | None  # page transaction id (None: not transactional)
    body_size: int
    body_sha256: str
    persistent_size: int
    large_file: str | None = None
    acked: set[int] = field(default_factory=set)
    ack_records: dict[int, int] = field(default_factory=dict)  # queue -> ACKNOWLEDGE_CURSOR record id


@dataclass
class _PageTx:
    tx: int
    record_id: int | None  # PAGE_TRANSACTION record id (None when never stored: rolled back)
    state: str  # "open" (being sent) | "committed" | "prepared" | "not-found" (rolled back)
    messages: list[_Paged] = field(default_factory=list)


class _PageStore:
    """``<paging>/<uuid>/``: address.txt and 9-digit page files, appended as PagingStoreImpl.page does
    (a new page when the next message would pass page-size-bytes and the page is not empty)."""

    def __init__(self, directory: Path, folder: str, address: str, page_size: int):
        self.dir = directory / folder
        self.folder = folder
        self.address = address
        self.page_size = page_size
        self.dir.mkdir(parents=True)
        (self.dir / ADDRESS_FILE).write_text(address + "\n", encoding="utf-8")
        self.current = 1
        self.buf = bytearray()
        self.pages: dict[int, list[_Paged]] = {1: []}  # pages that exist -> messages in order
        self.sizes: dict[int, int] = {}
        self.complete: dict[tuple[int, int], int] = {}  # (queue, page) -> PAGE_CURSOR_COMPLETE record id

    def _flush(self) -> None:
        with open(self.dir / page_file_name(self.current), "wb") as fh:
            fh.write(self.buf)
        self.sizes[self.current] = len(self.buf)

    def append(self, record: bytes) -> tuple[int, int, bool]:
        """Add one framed record; returns (page, message number, whether a page was closed)."""
        rolled = False
        if len(self.buf) + len(record) > self.page_size and self.pages[self.current]:
            self._flush()
            self.current += 1
            self.pages[self.current] = []
            self.buf = bytearray()
            rolled = True
        self.buf += record
        return self.current, len(self.pages[self.current]), rolled

    def close(self) -> None:
        self._flush()


class _IdGenerator:
    """BatchingIDGenerator with CHECKPOINT_BATCH_SIZE = Integer.MAX_VALUE, storing to the bindings journal."""

    def __init__(self, bindings: _Journal):
        self.b = bindings
        self.counter = 0
        self.next_id = 0
        self.records: list[int] = []  # record ids of counter records in the journal (cleanup list)

    def _store(self, record_id: int, value: int) -> None:
        self.b.add(record_id, R.ID_COUNTER_RECORD, IdCounterRecord(id=value).encode())
        self.records.append(record_id)

    def generate(self) -> int:
        rid = self.counter
        self.counter += 1
        if rid >= self.next_id:
            self.next_id += ID_BATCH
            cp = self.counter
            self.counter += 1
            self._store(cp, self.next_id)
        return rid

    def persist_current(self) -> None:
        """stop(): persistCurrentID."""
        self.counter += 1
        self._store(self.counter, self.counter)

    def restart(self) -> None:
        """loadState for every counter record (the last one wins), then cleanup(): delete all but the last."""
        last_value = self.counter  # the value of the last record (persist_current stores counter)
        self.next_id = last_value + 1
        self.counter = self.next_id
        for rid in self.records[:-1]:
            self.b.delete(rid)
        self.records = self.records[-1:]
