"""native.migrate_records (native/migrate_records.c) against its Python reference (decode_message + convert +
message_record): the same record bytes for every message it converts, None (Python's path) for the others;
and ``create --from`` writing byte-identical stores with and without it, on the LevelDB stores (the fixture,
the stores kept under tests/, AMQTOOL_TEST_LEVELDB_STORES) and the KahaDB fixtures."""
from __future__ import annotations

import hashlib
import random
import shutil
import struct

import pytest

from amqtool import native
from amqtool.engines.migrate import records as records_mod
from amqtool.engines.migrate import write
from amqtool.engines.migrate.convert import NotConvertible, convert
from amqtool.engines.migrate.write import DEFAULT_LARGE_THRESHOLD, message_record
from amqtool.errors import FormatError
from amqtool.formats.kahadb.openwire import decode_message
from tests.engines.leveldb.stores import CASE_IDS, CASES
from tests.engines.migrate.openwire_builder import message, prim_map, text_content
from tests.support import KAHADB

pytestmark = pytest.mark.skipif(native.migrate_records is None, reason="C extension not built")

FILE_SIZE = 10 * 1024 * 1024


def reference(raw: bytes, mid: int, address: str, rt: int, threshold: int, file_size: int | None):
    """What the Python path makes of one stored message: (record, body length, redelivery), or None where it
    refuses it (FormatError, NotConvertible) or writes a large message."""
    try:
        msg = decode_message(raw, 11)
        core = convert(msg, message_id=mid, address=address, routing_type=rt, store_version=11)
    except (FormatError, NotConvertible):
        return None
    utype, rec, large = message_record(core, threshold, file_size)
    if large is not None:
        return None
    return rec, len(core.body), msg.redelivery_counter


def c_one(raw, mid=77, address="orders", rt=1, threshold=DEFAULT_LARGE_THRESHOLD, file_size=FILE_SIZE):
    return native.migrate_records([raw], mid, address.encode("utf-16-le"), rt, threshold, file_size)[0]


def _text(s: str) -> bytes:
    return text_content(s)


# (name, stored message, whether C must convert it itself)
ALL_PROPS = [("b", 1, True), ("y", 2, -5), ("c", 3, "é"), ("s", 4, -300), ("i", 5, 70000), ("l", 6, -(1 << 40)),
             ("d", 7, 2.5), ("f", 8, -0.75), ("str", 9, "héllo"), ("raw", 10, b"\x00\xff"), ("n", 0, None)]
CASES_MSG = [
    ("text", message(28, _text("hello")), True),
    ("text non-ASCII", message(28, _text("grüße, 東京 and 😀")), True),
    ("text: ASCII runs around other chars",
     message(28, _text("a" * 37 + "é" + "b" * 16 + "😀" + "c" * 15 + "\u20ac")), True),
    ("text: 32 ASCII chars", message(28, _text("0123456789abcdef" * 2)), True),
    ("text NUL as C0 80", message(28, struct.pack(">i", 5) + b"a\xc0\x80bc"), True),
    ("text null (-1)", message(28, struct.pack(">i", -1)), True),
    ("text no content", message(28, None), True),
    ("text empty", message(28, _text("")), True),
    ("bytes", message(24, bytes(range(256)) * 3), True),
    ("bytes empty", message(24, b""), True),
    ("object", message(26, b"\xac\xed\x00\x05serialized"), True),
    ("plain message", message(23, None), True),
    ("every property type", message(28, _text("x"), props=ALL_PROPS), True),
    ("many properties", message(24, b"z", props=[(f"p{i}", 5, i) for i in range(40)]), True),
    ("200 properties", message(24, b"z", props=[(f"k{i}", 6, i) for i in range(200)]), True),
    ("empty property map", message(24, b"z", props=[]), True),
    ("group, correlation, type, reply-to", message(28, _text("g"), group="grp", group_seq=3, correlation="corr-1",
                                                   jms_type="Order", reply_to=(101, "replies")), True),
    ("priority above 127, not persistent", message(24, b"p", priority=200, persistent=False, expiration=99), True),
    ("redelivered", message(24, b"r", redelivery=3), True),
    ("non-ASCII property name", message(24, b"n", props=[("schlüssel", 9, "wert")]), True),
    ("4-byte UTF-8 in a property", message(24, b"n", props=[("emoji", 9, "😀")]), True),
    # left to Python
    ("compressed text", message(28, _text("zip me " * 50), compressed=True), False),
    ("compressed bytes", message(24, b"abc" * 100, compressed=True), False),
    ("map body", message(25, prim_map([("a", 5, 1)])), False),
    ("stream body", message(27, b"\x05\x00\x00\x00\x01"), False),
    ("blob", message(29, None), False),
    ("nested map property", message(24, b"m", props=[("m", 11, [("x", 5, 1)])]), False),
    ("list property", message(24, b"m", props=[("l", 12, [(5, 1), (9, "a")])]), False),
    ("NaN double property", message(24, b"m", props=[("nan", 7, float("nan"))]), False),
    ("a property named like a header", message(24, b"m", props=[("JMSType", 9, "mine")], jms_type="T"), False),
    ("a property put twice", message(24, b"m", props=[("k", 5, 1), ("k", 5, 2)]), False),
    ("lone surrogate in text", message(28, struct.pack(">i", 3) + b"\xed\xa0\x80"), False),
    ("invalid UTF-8 in text", message(28, struct.pack(">i", 2) + b"\xc3\x28"), False),
    ("large body", message(24, b"L" * (DEFAULT_LARGE_THRESHOLD + 1)), False),
    ("truncated", message(24, b"abc")[:-3], False),
    ("bad size prefix", b"\x00\x00\x00\x09" + message(24, b"abc")[4:], False),
]


@pytest.mark.parametrize("name,raw,covered", CASES_MSG, ids=[c[0] for c in CASES_MSG])
def test_one_message_matches_the_reference(name, raw, covered):
    for rt, address in ((1, "orders"), (0, "tópico.ü")):
        want = reference(raw, 77, address, rt, DEFAULT_LARGE_THRESHOLD, FILE_SIZE)
        got = c_one(raw, address=address, rt=rt)
        if covered:
            assert want is not None and got == want, name
        else:
            assert got is None, name


def test_record_too_large_for_a_journal_file_is_left_to_python():
    raw = message(24, b"B" * 5000)
    assert c_one(raw, file_size=5000) is None
    assert c_one(raw, file_size=6000) == reference(raw, 77, "orders", 1, DEFAULT_LARGE_THRESHOLD, 6000)


def test_ids_count_the_readable_items_only():
    raws = [message(24, b"a"), None, b"\x00", message(24, b"b")]
    out = native.migrate_records(raws, 10, "q".encode("utf-16-le"), 1, 1000, FILE_SIZE)
    assert out[1] is None and out[2] is None
    assert out[0] == reference(raws[0], 10, "q", 1, 1000, FILE_SIZE)
    assert out[3] == reference(raws[3], 12, "q", 1, 1000, FILE_SIZE)  # the unreadable b"\x00" took id 11


def test_damaged_messages_are_converted_alike_or_left_to_python():
    """Any bytes: C's record equals the reference's, or C leaves the message to Python."""
    rng = random.Random(28)
    base = [raw for _, raw, covered in CASES_MSG if covered]
    tried = converted = 0
    for _ in range(3000):
        raw = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(raw))
            if op < 0.6:
                raw[pos] = rng.randrange(256)
            elif op < 0.8:
                del raw[pos:pos + rng.randint(1, 8)]
            else:
                raw[pos:pos] = rng.randbytes(rng.randint(1, 8))
        raw = bytes(raw)
        got = c_one(raw)
        tried += 1
        if got is not None:
            converted += 1
            assert got == reference(raw, 77, "orders", 1, DEFAULT_LARGE_THRESHOLD, FILE_SIZE), raw.hex()
    assert converted > 100  # some mutations keep the message valid (a byte of a body, a timestamp)


# --- whole stores: the C path and the Python path write the same files ------------------------------------


def _tree(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _create_both(tmp_path, monkeypatch, src, **kw):
    """create --from with the C path, then (same DEST path) without it: the file hashes of each, and how
    many messages C converted."""
    calls = []
    real = native.migrate_records

    def counting(items, *a):
        out = real(items, *a)
        calls.append(sum(r is not None for r in out))
        return out

    dest = tmp_path / "artemis"
    monkeypatch.setattr(native, "migrate_records", counting)
    write.create_from(dest, src, salvage=True, **kw)
    with_c = _tree(dest)
    shutil.rmtree(dest)
    monkeypatch.setattr(native, "migrate_records", None)
    write.create_from(dest, src, salvage=True, **kw)
    return with_c, _tree(dest), sum(calls)


def _small(case) -> bool:
    return sum(p.stat().st_size for p in (case / "store").glob("*.log")) < 64 * 2**20


SMALL = [(c, i) for c, i in zip(CASES, CASE_IDS) if _small(c)]


@pytest.mark.parametrize("case", [c for c, _ in SMALL], ids=[i for _, i in SMALL])
def test_leveldb_store_written_alike(case, tmp_path, monkeypatch):
    with_c, with_py, by_c = _create_both(tmp_path, monkeypatch, case / "store", include_prepared=True)
    assert with_c == with_py
    assert any(k.startswith("data/journal/") for k in with_c)


def test_leveldb_fixture_goes_through_c(tmp_path, monkeypatch):
    from tests.engines.leveldb.stores import FIXTURE

    with_c, with_py, by_c = _create_both(tmp_path, monkeypatch, FIXTURE / "store")
    assert with_c == with_py and by_c == 29  # of its 31 migrated messages, 2 are map/stream messages (Python)


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
@pytest.mark.parametrize("ds,kw", [("basic", {}), ("gc", {}), ("mkahadb", {}), ("tx", {"include_prepared": True})])
def test_kahadb_store_written_alike(ds, kw, tmp_path, monkeypatch):
    with_c, with_py, by_c = _create_both(tmp_path, monkeypatch, KAHADB / ds, **kw)
    assert with_c == with_py and by_c > 0


def test_small_batches_with_python_items_in_between(tmp_path, monkeypatch):
    """Batches of 3 over the fixture: the id bookkeeping around messages Python takes (and the re-run of a
    batch when they move the ids) gives the same store."""
    from tests.engines.leveldb.stores import FIXTURE

    monkeypatch.setattr(records_mod, "BATCH", 3)
    with_c, with_py, by_c = _create_both(tmp_path, monkeypatch, FIXTURE / "store")
    assert with_c == with_py and by_c >= 29


class _Plan:
    def __init__(self):
        self.next_id = 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def _python_one(plan, raw):
    """The reference for one item: (id, record), taking an id only when it converts."""
    if raw is None:
        return None
    got = reference(raw, plan.next_id, "q", 1, 1000, FILE_SIZE)
    if got is None:
        return None
    return plan._id(), got[0]


@pytest.mark.parametrize("batch", [1, 2, 3, 256])
def test_batches_give_the_ids_and_records_of_the_reference(batch, monkeypatch):
    """Messages C leaves to Python between C's: one Python converts (a map body: takes an id), one Python
    refuses (a BLOB: takes none, so the rest of the batch is converted again), an unreadable one (None: C
    gives it no id either)."""
    raws = [message(24, b"a"), message(29, None), message(24, b"b"), None, message(25, prim_map([("k", 5, 1)])),
            message(28, _text("c")), message(29, None), message(24, b"d"), message(24, b"e")]
    ref_plan = _Plan()
    want = [r for r in (_python_one(ref_plan, raw) for raw in raws) if r is not None]
    monkeypatch.setattr(records_mod, "BATCH", batch)
    plan = _Plan()
    got = list(records_mod.convert_batches(
        plan, raws, raw=lambda it: it, python=lambda it: _python_one(plan, it),
        make=lambda it, rec, blen, red, mid: (mid, rec), address="q", routing_type=1, records=(1000, FILE_SIZE)))
    assert [g[0] for g in got] == list(range(1, 7)) and got == want and plan.next_id == ref_plan.next_id


def test_ids_the_consumer_takes_between_messages_are_respected(monkeypatch):
    """The writer takes an id between two messages (a prepared transaction's id): the next message gets the
    id after it, as on the Python path (the rest of the batch is converted again)."""
    raws = [message(24, bytes([i])) for i in range(6)]
    plan = _Plan()
    got = []
    for mid, rec in records_mod.convert_batches(
            plan, raws, raw=lambda it: it, python=lambda it: _python_one(plan, it),
            make=lambda it, rec, blen, red, mid: (mid, rec), address="q", routing_type=1, records=(1000, FILE_SIZE)):
        got.append((mid, rec))
        if mid in (2, 5):
            plan._id()  # the consumer's
    assert [g[0] for g in got] == [1, 2, 4, 5, 7, 8]
    assert got == [(mid, reference(raw, mid, "q", 1, 1000, FILE_SIZE)[0]) for (mid, _), raw in zip(got, raws)]

