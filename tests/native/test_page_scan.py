"""The C page walk (native/page_scan.c) equals the Python reference of amqtool.engines.artemis.paging: framing,
verify's paging findings and summary, print's paging JSON (safe or not, all pages or --max-pages) and the
paged large messages, on the stores of tests/paging_stores.py, a ``create --demo`` store, damaged copies and
Hypothesis-written (and mutated) pages."""
from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from amqtool import native
from amqtool.engines.artemis import paging
from amqtool.engines.artemis.paging import PagingJournalView, PagingVerifier, find_page_stores, iter_paging_json, load_view
from amqtool.formats.artemis.message import AmqpMessage, CoreMessage, LargeMessage, MessageHeaders
from amqtool.formats.artemis.paging import PagedMessage, PageScanner, encode_page_record, page_file_name
from amqtool.formats.artemis.primitives import (
    BOOLEAN, BYTES, CHAR, INT, LONG, NULL, STRING, Property, TypedProperties,
)
from amqtool.store.layout import detect
from tests.paging_stores import build_store, core_message, large_message, sample_store

pytestmark = pytest.mark.skipif(native.page_walk is None, reason="the C extension is not built")


@contextmanager
def python_only():
    """Run amqtool.engines.artemis.paging without the C page walk (its Python reference path)."""
    saved = native.page_walk, native.HAVE_PAGE_JSON
    native.page_walk, native.HAVE_PAGE_JSON = None, False
    try:
        yield
    finally:
        native.page_walk, native.HAVE_PAGE_JSON = saved


def _verify(store, view):
    v = PagingVerifier(store)
    v.view = view
    findings = []
    large = v.verify(findings)
    return [f.to_json() for f in findings], v.summary_json(), large


def _json(store, view, **kw):
    return "".join(iter_paging_json(store, view=view, **kw))


def _framings(store):
    out = []
    for ps in find_page_stores(store.paging_dir)[0]:
        for pid in sorted(ps.pages):
            data = ps.page_path(pid).read_bytes()
            s = PageScanner(data)
            records = list(s)
            out.append((paging.page_framing(data, len(data)), s.end, len(records)))
            found = paging.print_json._page_large_ids(data, len(data))
            with python_only():
                assert paging.print_json._page_large_ids(data, len(data)) == found
    return out


def assert_twins(store, view) -> dict:
    """Everything paging computes from the pages is the same with and without the C walk; returns the
    native print JSON (parsed) for further checks."""
    for native_end, python_end, n in _framings(store):
        assert native_end == python_end and python_end.records == n
    got = {"verify": _verify(store, view)}
    variants = [dict(), dict(safe=True), dict(max_pages=1), dict(max_pages=0, safe=True)]
    for i, kw in enumerate(variants):
        got[i] = _json(store, view, **kw)
    saved = paging.print_json._JSON_RUN
    paging.print_json._JSON_RUN = 2  # many runs per page, formatted by two threads and written in order
    try:
        assert _json(store, view) == got[0]
    finally:
        paging.print_json._JSON_RUN = saved
    with python_only():
        assert _verify(store, view) == got["verify"]
        for i, kw in enumerate(variants):
            assert _json(store, view, **kw) == got[i], kw
    assert _export_entries(store, view, native_walk=True) == _export_entries(store, view, native_walk=False)
    return json.loads(got[0])


def _export_entries(store, view, *, native_walk: bool):
    """What the export takes from the pages (paging.export's entries and their page errors), through the C
    walk's export mode or the reference."""
    from amqtool.engines.artemis.paging import export

    from amqtool.engines.export.parse import decode_message
    from amqtool.errors import FormatError

    def decoded(utype, body, mid):
        # the C walk slices the stored bytes, the reference encodes its decoded message again: the export
        # sees the same columns either way (a stored flag byte of 2 is "present" as 1 is)
        try:
            return decode_message(utype, body, message_id=mid)
        except FormatError as err:
            return str(err)

    errors: list = []
    walk = export._native_entries if native_walk else export._reference_entries
    entries = [(*e[:5], e[5], decoded(e[5], e[6], e[7]), e[7]) for e in walk(store, view, errors, None)]
    return entries, [(ps.folder, pid, n, off, str(err)) for ps, pid, n, off, err in errors]


# --- stores on disk --------------------------------------------------------------------------------------


def test_sample_store(tmp_path):
    layout = sample_store(tmp_path / "data")
    store = detect(layout.root)
    doc = assert_twins(store, load_view(store))
    ids = [m["messageId"] for s in doc["stores"] for m in s["messages"]]
    assert sorted(ids) == [101, 102, 103, 104, 105, 106, 201]
    # a fast-path record and a handed-back one (the core large message) in the same page run
    orders = next(s for s in doc["stores"] if s["address"] == "orders")
    assert [m["large"] for m in orders["messages"]] == [False, False, False, True, False, False]


@pytest.mark.parametrize("damage", ["cut", "end-marker", "start-marker", "undecodable", "zero-tail",
                                    "removed-page", "garbage-length"])
def test_damaged_sample_store(tmp_path, damage):
    layout = sample_store(tmp_path / "data")
    folder = layout.folders["orders"]
    p1, p2 = folder / page_file_name(1), folder / page_file_name(2)
    data = bytearray(p1.read_bytes())
    if damage == "cut":
        p1.write_bytes(data[:len(data) - 7])
    elif damage == "end-marker":
        data[-1] = 0x00
        p1.write_bytes(data)
    elif damage == "start-marker":
        data[0] = 0x41
        p1.write_bytes(data)
    elif damage == "undecodable":  # the persister byte of the second record
        second = 6 + int.from_bytes(data[1:5], "big")
        data[second + 5 + 9] = 0x63
        p1.write_bytes(data)
    elif damage == "zero-tail":
        p2.write_bytes(p2.read_bytes() + b"{" + bytes(40))
    elif damage == "removed-page":
        p2.unlink()
    elif damage == "garbage-length":
        data[1:5] = (2 ** 31 - 1).to_bytes(4, "big")
        p1.write_bytes(data)
    store = detect(layout.root)
    assert_twins(store, load_view(store))


def test_broken_core_records_are_handed_back(tmp_path):
    """Core records the fast path must refuse (odd address length, a body past the buffer, an unknown
    property type, a negative queue count): the Python reference decides, and the result is the same."""
    good = PagedMessage.build(core_message(301, "q", "ok"), [7]).encode()
    bad = []
    b = bytearray(good)
    b[9 + 1 + 8 + 1 + 3] ^= 1  # persister address length made odd
    bad.append(bytes(b))
    b = bytearray(good)
    addr_end = 9 + 1 + 8 + 1 + 4 + 2
    b[addr_end + 4:addr_end + 8] = (10 ** 6).to_bytes(4, "big")  # endOfBodyPosition past the buffer
    bad.append(bytes(b))
    b = bytearray(good)
    b[-12:-8] = (-1).to_bytes(4, "big", signed=True)  # queue count
    bad.append(bytes(b))
    for i, body in enumerate(bad):
        root = tmp_path / f"s{i}"
        layout = build_store(root, queues={7: ("q", "q")}, pages={"q": {1: []}})
        page = layout.folders["q"] / page_file_name(1)
        page.write_bytes(encode_page_record(good) + b"{" + len(body).to_bytes(4, "big") + body + b"}"
                         + encode_page_record(good))
        store = detect(root)
        assert_twins(store, load_view(store))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("demo") / "broker"
    create_demo(root, 8 * 1024 * 1024)
    return root


def test_demo_store(demo):
    store = detect(demo)
    doc = assert_twins(store, load_view(store))
    assert sum(len(s["messages"]) for s in doc["stores"]) > 100


def test_demo_store_mutated(demo, tmp_path):
    root = tmp_path / "broker"
    shutil.copytree(demo, root)
    pages = sorted((root / "data" / "paging").glob("*/*.page"))
    for i, p in enumerate(pages):  # a different damage per page
        data = bytearray(p.read_bytes())
        if not data:
            continue
        at = (i * 7919) % len(data)
        data[at] ^= 0x5A
        p.write_bytes(data[:len(data) - (i % 3) * 11])
    store = detect(root)
    assert_twins(store, load_view(store))


def test_shared_view_equals_a_fresh_load(tmp_path):
    """print hands the journals it loaded to the paging section: the same document as loading them again."""
    layout = sample_store(tmp_path / "data")
    store = detect(layout.root)
    from amqtool.engines.artemis.journal_print import PrintOptions, iter_json

    view = PagingJournalView()
    text = "".join(iter_json(store, PrintOptions(safe=True), on_result=view.add_journal,
                             tail=lambda: iter(["x"])))
    assert view.bindings_loaded and view.messages_loaded and text.endswith("x}\n")
    assert _json(store, view) == _json(store, None)


# --- Hypothesis: pages of every fast-path kind, and mutated ---------------------------------------------

I64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
QUEUE = st.sampled_from([1, 2, 3, 7, 99])
TX = st.sampled_from([-1, -1, 0, 5, 6, 8])
VALUE = st.one_of(
    st.tuples(st.just(INT), st.integers(-(2 ** 31), 2 ** 31 - 1)),
    st.tuples(st.just(LONG), I64),
    st.tuples(st.just(STRING), TEXT),
    st.tuples(st.just(BYTES), st.binary(max_size=6)),
    st.tuples(st.just(BOOLEAN), st.booleans()),
    st.tuples(st.just(NULL), st.none()),
    st.tuples(st.just(CHAR), st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))),
)
PROPS = st.lists(st.tuples(TEXT, VALUE), max_size=3).map(
    lambda kv: TypedProperties.of([Property(k, t, v) for k, (t, v) in kv]))


@st.composite
def messages(draw):
    mid = draw(I64)
    kind = draw(st.sampled_from(["core", "core", "amqp", "large", "raw"]))
    if kind == "raw":
        return draw(st.binary(max_size=60))
    if kind == "amqp":
        persister = draw(st.sampled_from([2, 3, 5]))
        props = draw(st.none() | PROPS.filter(lambda p: p.entries is not None))
        extra = len(props.encode()) if props is not None else 0
        msg = AmqpMessage(persister, mid, draw(I64), draw(st.none() | TEXT), draw(st.binary(max_size=40)),
                          extra if persister != 2 else 0, props if persister != 2 else None,
                          draw(I64) if persister == 5 else 0)
    else:
        address = draw(st.none() | TEXT)
        h = MessageHeaders(mid, draw(st.sampled_from([address, "other"])), draw(st.none() | st.binary(min_size=16, max_size=16)),
                           draw(st.sampled_from([0, 3, 4])), draw(st.booleans()), draw(I64), draw(I64),
                           draw(st.integers(0, 9)), draw(PROPS))
        if kind == "large":
            msg = LargeMessage(h)
        else:
            msg = CoreMessage(mid, address, draw(st.binary(max_size=48)), h, draw(st.sampled_from([b"", b"\x01\x02"])))
    pm = PagedMessage.build(msg, draw(st.lists(QUEUE, max_size=4)), draw(TX))
    if draw(st.integers(0, 9)) == 0:
        pm = PagedMessage(pm.transaction_id, pm.large_message_type, pm.message, pm.queue_ids, pm.header_size,
                          b"\x00\x07")
    return pm.encode()


@st.composite
def mutations(draw, size):
    if size == 0 or draw(st.booleans()):
        return []
    return draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)), min_size=1, max_size=3))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hypothesis_pages(data):
    bodies = data.draw(st.lists(messages(), max_size=6))
    page = bytearray(b"".join(b"{" + len(b).to_bytes(4, "big") + b + b"}" for b in bodies))
    for at, x in data.draw(mutations(len(page))):
        page[at] ^= x
    cut = data.draw(st.integers(0, 8))
    if cut and len(page) > cut and data.draw(st.booleans()):
        page = page[:-cut]
    view = PagingJournalView(bindings_loaded=True, messages_loaded=True)
    view.queues = set(data.draw(st.lists(st.sampled_from([1, 2, 3, 7]), max_size=4)))
    view.page_tx = {5}
    view.page_tx_prepared = {6: 77}
    for q in (1, 2, 3, 7):
        view.acks[q] = {(1, n) for n in data.draw(st.lists(st.integers(0, 6), max_size=3))}
    if data.draw(st.booleans()):
        view.complete[data.draw(st.sampled_from([1, 2, 3, 7]))] = {1}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "paging" / "f0"
        folder.mkdir(parents=True)
        (folder / "address.txt").write_text("addr\n")
        (folder / page_file_name(1)).write_bytes(bytes(page))
        (folder / page_file_name(2)).write_bytes(b"".join(b"{" + len(b).to_bytes(4, "big") + b + b"}"
                                                          for b in bodies))
        (root / "large-messages").mkdir()
        store = SimpleNamespace(paging_dir=root / "paging", large_messages_dir=root / "large-messages")
        assert_twins(store, view)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=12), st.builds(lambda b: b"{" + len(b).to_bytes(4, "big") + b + b"}",
                                                              st.binary(max_size=30))), max_size=6).map(b"".join))
def test_any_bytes_frame_as_the_python_scanner(page):
    s = PageScanner(page)
    n = len(list(s))
    end = paging.page_framing(page, len(page))
    assert end == s.end and end.records == n
    found = paging.print_json._page_large_ids(page, len(page))
    with python_only():
        assert paging.print_json._page_large_ids(page, len(page)) == found
