"""`print --style artemis` in C (amqtool._native.describe_body / describe_lines, native/describe.c) writes the
very text the Python decoders write (amqtool.engines.artemis.describe with the C hooks switched off): every
fixture store, a demo store (safe and with bodies), Hypothesis-generated core messages with every property
type, and random or mutated bytes for every user record type (C answers the same text or leaves the record
to Python -- never a different text, never a crash)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.artemis import describe
from amqtool.engines.artemis.demo import create_demo
from amqtool.formats.artemis.message import CoreMessage
from amqtool.engines.artemis.paging import PagingJournalView, message_line
from amqtool.engines.artemis.paging.describe import _queues_line
from amqtool.formats.artemis.paging import PagedMessage
from amqtool.formats.artemis.primitives import Property, TypedProperties
from amqtool.store.layout import detect
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(native.describe_lines is None, reason=f"C extension not built: {native.NATIVE_REASON}")

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORES = [ORACLE / s / "journal" for s in ORACLE_SCENARIOS] + list(PUBLIC_JOURNALS)


def _text(store, safe, monkeypatch, use_native):
    with monkeypatch.context() as m:
        if not use_native:
            m.setattr(describe, "_describe_body", None)
            m.setattr(describe, "_describe_lines", None)
            m.setattr(describe, "_describe_live", None)
            m.setattr(native, "describe_paged", None)
        return "\n".join(describe.describe_store(store, safe=safe))


def _assert_twins(path, monkeypatch):
    store = detect(str(path))
    texts = []
    for safe in (False, True):
        c = _text(store, safe, monkeypatch, True)
        py = _text(store, safe, monkeypatch, False)
        assert c == py
        texts.append(c)
    return texts[0]


def test_there_are_fixture_stores():
    assert len(STORES) >= 20


@pytest.mark.parametrize("path", STORES, ids=lambda p: "/".join(p.parts[-3:]))
def test_native_text_equals_python_on_fixture(path, monkeypatch):
    _assert_twins(path, monkeypatch)


def test_native_text_equals_python_on_demo_store(tmp_path, monkeypatch):
    root = tmp_path / "demo"
    manifest = create_demo(root, 6 * 1024 * 1024, file_size=1024 * 1024, seed=11)
    text = _assert_twins(root, monkeypatch)
    # the C path did the work: every message the demo sent appears as a core message line
    assert text.count("operation@AddRecord") + text.count("operation@AddRecordTX") > 0
    assert text.count(";msg=CoreMessage[") >= manifest["counts"]["messagesWritten"]
    assert manifest["counts"]["pagedSent"] > 0 and text.count(", msg=CoreMessage[") > 0  # the paging section


def test_c_covers_the_common_records():
    # None would mean "left to Python": these must come out of C (the speed-up depends on it)
    assert native.describe_body(32, struct.pack(">q", 7), 1, True, False) == "AddRef;QueueEncoding [queueID=7]"
    body = CoreMessage.build(message_id=5, address="q", properties=TypedProperties.of(
        {"a": (9, 1.5), "b": (10, "x")})).encode()
    assert native.describe_body(45, body, 5, False, False).startswith("Message(messageID=5;msg=CoreMessage[")


# --- generated messages -------------------------------------------------------------------------------------

_keys = st.one_of(st.text(max_size=12), st.sampled_from(["_AMQ_ROUTE_TO", "_AMQ_ROUTE_TOx", "k", "", "ключ",
                                                          "\U0001F600"]))


@st.composite
def _property(draw, surrogates: bool):
    key = draw(_keys if not surrogates else st.text(alphabet=st.characters(), max_size=6))
    t = draw(st.sampled_from([0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]))
    bits = None
    if t == 0:
        v = None
    elif t == 2:
        v = draw(st.booleans())
    elif t in (3, 5, 6, 7):
        b = {3: 8, 5: 16, 6: 32, 7: 64}[t]
        v = draw(st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1))
    elif t == 4:
        v = draw(st.binary(max_size=draw(st.sampled_from([8, 40, 120]))))
    elif t == 8:
        bits = draw(st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0x7FC00000, 0x80000000, 0x00000001,
                                                                          0x7F7FFFFF, 0x3F800000])))
        v = struct.unpack(">f", struct.pack(">I", bits))[0]
    elif t == 9:
        bits = draw(st.one_of(st.integers(0, 2**64 - 1),
                              st.floats(allow_nan=True).map(lambda f: struct.unpack(">Q", struct.pack(">d", f))[0]),
                              st.sampled_from([1, 0x44B52D02C7E14AF6, 0x8000000000000000])))
        v = struct.unpack(">d", struct.pack(">Q", bits))[0]
    elif t == 10:
        v = draw(st.text(max_size=20) if not surrogates else st.text(alphabet=st.characters(), max_size=6))
    else:
        v = chr(draw(st.integers(0, 0xFFFF) if surrogates else
                     st.integers(0, 0xFFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF)))
    return Property(key, t, v, bits)


@st.composite
def _core_message(draw, surrogates=False):
    props = draw(st.lists(_property(surrogates), max_size=draw(st.sampled_from([3, 12, 40]))))
    entries = None if not props and draw(st.booleans()) else tuple(props)
    address = draw(st.none() | st.sampled_from(["orders", "", "événements", "\U0001F4E6box"]) | st.text(max_size=8))
    inner = address if draw(st.booleans()) else draw(st.none() | st.text(max_size=8))
    ms = st.one_of(st.just(0), st.integers(-(2**63), 2**63 - 1), st.integers(-62135596800000 - 5, 253402300800000 + 5))
    msg = CoreMessage.build(message_id=draw(st.integers(-(2**63), 2**63 - 1)), address=inner,
                            body=draw(st.binary(max_size=30)), type=draw(st.integers(0, 9)),
                            durable=draw(st.booleans()), expiration=draw(ms), timestamp=draw(ms),
                            priority=draw(st.integers(0, 255)),
                            user_id=draw(st.none() | st.binary(min_size=16, max_size=16)),
                            properties=TypedProperties(entries))
    msg = CoreMessage(msg.message_id, address, msg.body, msg.headers, draw(st.binary(max_size=4)))
    return msg.encode() + draw(st.binary(max_size=3))


def _same(utype, body, rid=3, is_update=False):
    for safe in (False, True):
        c = native.describe_body(utype, body, rid, is_update, safe)
        py = describe.object_text_py(rid, utype, body, is_update, safe)
        if c is not None:
            assert c == py
    return native.describe_body(utype, body, rid, is_update, False)


@SETTINGS
@given(_core_message())
def test_generated_core_messages(body):
    c = _same(45, body)
    py = describe.object_text_py(3, 45, body, False, False)
    if not py.startswith("** undecodable"):
        assert c is not None  # no surrogates, in-range dates or not: C writes it (or Python, by date range)
        assert c == py


@SETTINGS
@given(_core_message(surrogates=True))
def test_generated_core_messages_with_lone_surrogates(body):
    _same(45, body)


@SETTINGS
@given(_core_message(), st.integers(0, 400), st.integers(0, 255), st.booleans())
def test_mutated_core_messages(body, pos, byte, truncate):
    b = bytearray(body)
    if truncate:
        b = b[: pos % (len(b) + 1)]
    else:
        b[pos % len(b)] = byte
    _same(45, bytes(b))


@SETTINGS
@given(st.integers(-1, 60), st.binary(max_size=80), st.integers(-(2**63), 2**63 - 1), st.booleans())
def test_random_bodies_every_type(utype, body, rid, is_update):
    _same(utype, body, rid, is_update)


@SETTINGS
@given(st.sampled_from([32, 33, 34, 35, 36, 37, 39, 40, 41, 42, 43, 24, 29, 22, 46]), st.binary(min_size=0, max_size=40),
       st.booleans())
def test_random_fixed_layout_bodies(utype, body, is_update):
    c = _same(utype, body, 9, is_update)
    py = describe.object_text_py(9, utype, body, is_update, False)
    if not py.startswith("** undecodable"):
        assert c == py


@SETTINGS
@given(st.text(max_size=10), st.binary(max_size=30))
def test_duplicate_id_bodies(address, dup):
    prefix = st_bridge = "BRIDGE" + address
    for a in (address, st_bridge):
        raw = a.encode("utf-16-le", "surrogatepass")
        body = struct.pack(">i", len(raw)) + raw + struct.pack(">i", len(dup)) + dup
        assert _same(37, body) == describe.object_text_py(3, 37, body, False, False)
    raw = prefix.encode("utf-16-le")
    body = struct.pack(">i", len(raw)) + raw + struct.pack(">i", 24) + bytes(range(24))
    assert "nodeUUID=" in _same(37, body)


# --- paged messages -----------------------------------------------------------------------------------------


@SETTINGS
@given(_core_message(), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), st.integers(-(2**63), 2**63 - 1),
       st.sampled_from([0, 2, 1, -1]), st.binary(max_size=3), st.integers(0, 400), st.integers(-1, 255))
def test_generated_paged_messages(message, queue_ids, tx, ltype, trailing, pos, byte):
    # a page record: i64 tx, i8 largeMessageType, the persisted message, i32 n + n queue ids, trailing bytes
    rec = bytearray(struct.pack(">qb", tx, ltype) + message + struct.pack(">i", len(queue_ids))
                    + b"".join(struct.pack(">q", q) for q in queue_ids) + trailing)
    if byte >= 0:  # and mutated copies
        rec[pos % len(rec)] = byte
    rec = bytes(rec)
    view = PagingJournalView()
    for safe in (False, True):
        got = native.describe_paged(b"xx" + rec + b"yy", 2, 2 + len(rec), safe)
        try:
            pm = PagedMessage.decode(rec)
            py = message_line(pm, 3, 4, view, safe)
        except Exception as exc:  # noqa: BLE001 -- whatever Python raises, C must have declined
            assert got is None, exc
            continue
        if got is not None:
            assert _queues_line(got[2], got[0], got[1], 3, 4, view) == py


def test_no_native_prints_the_same_and_says_so_once(tmp_path):
    import os
    import subprocess
    import sys

    root = tmp_path / "demo"
    create_demo(root, 6 * 1024 * 1024, file_size=1024 * 1024, seed=3)
    cmd = [sys.executable, "-c", "import sys; from amqtool.commands.main import main; sys.exit(main(sys.argv[1:]))",
           "print", str(root), "--style", "artemis"]
    fast = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, AMQTOOL_NO_NATIVE="0"))
    slow = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, AMQTOOL_NO_NATIVE="1"))
    assert fast.returncode == slow.returncode == 0
    assert fast.stdout == slow.stdout and fast.stdout.count("CoreMessage[") > 0
    assert fast.stderr == ""
    assert slow.stderr.count("running without the C extension (disabled by AMQTOOL_NO_NATIVE=1)") == 1
    assert len(slow.stderr.splitlines()) == 1


# --- whole journal files, mutated -----------------------------------------------------------------------------


def _fixture_files():
    files = []
    for path in STORES:
        files += sorted(p for p in path.rglob("*") if p.suffix in (".amq", ".bindings") and p.stat().st_size < 2**21)
    return files


_FILES = _fixture_files()


@SETTINGS
@given(st.sampled_from(_FILES) if _FILES else st.nothing(), st.lists(st.tuples(st.integers(0, 2**21), st.integers(0, 255)),
                                                                     max_size=12), st.booleans())
def test_mutated_journal_files_lines(path, flips, safe):
    from amqtool.formats.artemis.records import scan_records_py

    data = bytearray(path.read_bytes())
    for pos, byte in flips:
        data[16 + pos % max(1, len(data) - 16)] = byte
    data = bytes(data)
    version = int.from_bytes(data[0:4], "big", signed=True)
    tag = int.from_bytes(data[8:16], "big", signed=True) & 0x7FFFFFFF
    records, _ = scan_records_py(data, tag, version, False, 16)
    c_lines, counters_c = [], {}
    for item in native.describe_lines(data, version, records, safe):
        if isinstance(item, str):
            c_lines.append(item)
        else:
            c_lines += describe._record_lines(data, version, records[item:item + 1], safe, counters_c)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(describe, "_describe_body", None)
        py_lines = list(describe._record_lines(data, version, records, safe, {}))
    assert "\n".join(c_lines) == "\n".join(py_lines)
