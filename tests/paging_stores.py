"""Broker data directories with paging and large messages, written for the paging tests.

The journals are written with :class:`JournalWriter` (byte-identical to Artemis' NIO appends) and the page
files with the page-record codec, following what a broker writes (§5, §7): queue bindings in the bindings
journal; page transactions (35), cursor acks (39), page-complete (42) and page counters (40) in the message
journal; ``<9-digit id>.page`` files under ``paging/<folder>/`` with ``address.txt``; ``<id>.msg`` bodies
under ``large-messages/``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from amqtool.formats.artemis.message import TEXT_TYPE, CoreMessage, LargeMessage, MessageHeaders
from amqtool.formats.artemis.paging import PagedMessage, encode_page_record, page_file_name
from amqtool.formats.artemis.primitives import Property, TypedProperties, Writer
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

from amqtool.formats.artemis.primitives import INT, LONG  # noqa: E402



def queue_binding(name: str, address: str) -> bytes:
    """A QUEUE_BINDING_RECORD body with the mandatory fields (name, address, filter, metadata, autoCreated)."""
    return (Writer().simple_string(name).simple_string(address).nullable_simple_string(None)
            .nullable_simple_string("").bool_a(False).getvalue())


def core_message(mid: int, address: str, text: str, *, user_id: bytes | None = None) -> CoreMessage:
    return CoreMessage.build(message_id=mid, address=address, body=CoreMessage.text_body(text), type=TEXT_TYPE,
                             durable=True, timestamp=1735689600000 + mid, priority=4, user_id=user_id,
                             properties=TypedProperties.of([Property("seq", INT, mid)]))


def large_message(mid: int, address: str, size: int) -> LargeMessage:
    headers = MessageHeaders(mid, address, None, 4, True, 0, 1735689600000, 4,
                             TypedProperties.of([Property("_AMQ_LARGE_SIZE", LONG, size)]))
    return LargeMessage(headers)


@dataclass
class Layout:
    """What a built store holds (the test's manifest)."""

    root: Path
    queues: dict[int, tuple[str, str]]
    pages: dict[str, dict[int, list[PagedMessage]]]  # address -> page id -> messages
    folders: dict[str, Path] = field(default_factory=dict)
    large_files: dict[int, int] = field(default_factory=dict)  # message id -> body size


def build_store(root: Path, *, queues: dict[int, tuple[str, str]],
                pages: dict[str, dict[int, list[PagedMessage]]],
                page_tx: dict[int, int] | None = None, prepared_page_tx: dict[int, int] | None = None,
                acks: list[tuple[int, int, int]] = (), completes: list[tuple[int, int]] = (),
                counters: dict[int, int] | None = None, large_bodies: dict[int, int] | None = None,
                journal_large: dict[int, int] | None = None) -> Layout:
    """Write ``root/{bindings,journal,paging,large-messages}``.

    ``page_tx``: committed page transactions (txID -> numberOfMessages); ``prepared_page_tx``: page
    transactions inside a prepared XA transaction; ``acks``: (queue, page, message number);
    ``completes``: (queue, page); ``counters``: queue -> PAGE_CURSOR_COUNTER_VALUE; ``large_bodies``:
    message id -> size of the ``.msg`` file to write; ``journal_large``: message id -> body size of
    large messages that live in the journal (type 30 + ADD_REF).
    """
    root = Path(root)
    next_id = [1000]

    def nid() -> int:
        next_id[0] += 1
        return next_id[0]

    with JournalWriter.create(root / "bindings", BINDINGS) as w:
        for qid, (name, address) in queues.items():
            tx = nid()
            w.append_add_tx(tx, qid, 21, queue_binding(name, address))
            w.append_commit(tx)
    with JournalWriter.create(root / "journal", MESSAGES, file_size=1024 * 1024) as w:
        for txid, n in (page_tx or {}).items():
            tx = nid()
            w.append_add_tx(tx, nid(), 35, Writer().i64(txid).i32(n).getvalue())
            w.append_commit(tx)
        for q, page, msg in acks:
            w.append_add(nid(), 39, Writer().i64(q).i64(page).i32(msg).getvalue())
        for q, page in completes:
            tx = nid()
            w.append_add_tx(tx, nid(), 42, Writer().i64(q).i64(page).i32(0).getvalue())
            w.append_commit(tx)
        for q, value in (counters or {}).items():
            tx = nid()
            w.append_add_tx(tx, nid(), 40, Writer().i64(q).i64(value).i64(0).getvalue())
            w.append_commit(tx)
        for mid, size in (journal_large or {}).items():
            w.append_add(mid, 30, large_message(mid, "jl", size).encode())
            w.append_update(mid, 32, Writer().i64(next(iter(queues))).getvalue())
        for txid, n in (prepared_page_tx or {}).items():
            tx = nid()
            w.append_add_tx(tx, nid(), 35, Writer().i64(txid).i32(n).getvalue())
            w.append_prepare(tx, b"")
    layout = Layout(root, queues, pages)
    paging = root / "paging"
    paging.mkdir()
    for i, (address, by_page) in enumerate(pages.items()):
        folder = paging / f"{i:08x}-1111-2222-3333-444455556666"
        folder.mkdir()
        (folder / "address.txt").write_text(address + "\n")
        layout.folders[address] = folder
        for pid, msgs in by_page.items():
            (folder / page_file_name(pid)).write_bytes(b"".join(encode_page_record(m) for m in msgs))
    lm = root / "large-messages"
    lm.mkdir()
    for mid, size in {**(journal_large or {}), **(large_bodies or {})}.items():
        (lm / f"{mid}.msg").write_bytes(bytes((mid + i) % 251 for i in range(size)))
        layout.large_files[mid] = size
    return layout


def sample_store(root: Path) -> Layout:
    """Two paged addresses: acks, a page-complete, committed, prepared and missing page transactions, a
    queue with no binding, and a paged large message with its body."""
    q = {7: ("orders", "orders"), 10: ("orders.audit", "orders"), 12: ("events", "events")}
    orders = {
        1: [PagedMessage.build(core_message(101, "orders", "a"), [10, 7]),
            PagedMessage.build(core_message(102, "orders", "b", user_id=bytes(range(16))), [10, 7]),
            PagedMessage.build(core_message(103, "orders", "c"), [10, 7], transaction_id=500)],
        2: [PagedMessage.build(large_message(104, "orders", 3000), [10, 7]),
            PagedMessage.build(core_message(105, "orders", "e"), [10, 7], transaction_id=501)],
        3: [PagedMessage.build(core_message(106, "orders", "f"), [10, 7, 99], transaction_id=502)],
    }
    events = {5: [PagedMessage.build(core_message(201, "events", "x" * 40), [12])]}
    return build_store(
        root, queues=q, pages={"orders": orders, "events": events},
        page_tx={500: 2}, prepared_page_tx={501: 2},
        acks=[(10, 1, 0), (7, 1, 0), (10, 1, 1)], completes=[(12, 5)], counters={7: 4, 10: 3},
        large_bodies={104: 3000})
