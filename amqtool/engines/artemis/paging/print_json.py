"""The paging part of ``print --format json``, and large messages."""
from __future__ import annotations

import json
import os
from array import array
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Iterator

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import LargeMessage
from amqtool.formats.artemis.paging import (
    PagedMessage,
    PageScanEnd,
    PageScanner,
    summarize_record,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.engines.artemis.paging.entries import PagedEntry, _entries_of_page
from amqtool.engines.artemis.paging.stores import PageFile, PageStore, find_page_stores
from amqtool.engines.artemis.paging.view import PagingJournalView, load_view
from amqtool.engines.artemis.paging.walk import WalkTables, _WALK_FRAME, _WALK_HANDBACK, _WALK_JSON, _WALK_PAUSE, _WALK_VERIFY, _end_of_walk, page_framing


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
