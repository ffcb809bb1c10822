"""``artemis data print``'s paging section (``--style artemis``)."""
from __future__ import annotations

from typing import Iterator

from amqtool import native
from amqtool.errors import FormatError
from amqtool.formats.artemis.message import AmqpLargeMessage, AmqpMessage, CoreMessage, LargeMessage
from amqtool.formats.artemis.paging import (
    PagedMessage,
    PageScanner,
)
from amqtool.formats.artemis.primitives import Reader
from amqtool.engines.artemis.paging.stores import PageFile, PageStore, find_page_stores, live_page_rollover
from amqtool.engines.artemis.paging.view import HASH_LINE, PagingJournalView, load_view


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
