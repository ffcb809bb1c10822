"""Page stores on disk (``PagingStoreFactoryNIO.reloadStores``): folders, ``address.txt``, page files."""
from __future__ import annotations

import errno
import mmap
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.formats.artemis.paging import (
    ADDRESS_FILE,
    PAGE_SUFFIX,
    page_id_from_name,
)
from amqtool.formats.artemis.primitives import simple_string_hash
from amqtool.engines.artemis.paging.walk import page_framing


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

    def open_page(self, page_id: int) -> "PageFile":
        """The page's bytes (``.buf``, ``.size``), as a context manager; a database store's page stores
        (:class:`MemoryPageStore`) hold theirs in memory."""
        return PageFile(self.page_path(page_id))

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


class MemoryPage:
    """A page's bytes already read (a database row's large object), as :class:`PageFile` offers them."""

    def __init__(self, data: bytes):
        self.buf = data
        self.size = len(data)

    def __enter__(self) -> "MemoryPage":
        return self

    def __exit__(self, *exc) -> None:
        pass


@dataclass
class MemoryPageStore(PageStore):
    """An address's page store whose pages are in memory: ``PagingStoreFactoryDatabase``'s table per address
    (``folder`` is the table's name, so problems name ``<table>/<page file>``)."""

    data: dict[int, bytes] = field(default_factory=dict)  # page id -> its bytes

    def open_page(self, page_id: int) -> MemoryPage:
        return MemoryPage(self.data[page_id])


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
