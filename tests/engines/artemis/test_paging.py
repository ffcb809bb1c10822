"""Paging engine: page stores, paged-message state, ``data print``'s paging section and verify's paging
checks, on stores written by tests/paging_stores.py and damaged copies of them."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from amqtool.engines.artemis.paging import (
    PAGE_TX_COMMITTED,
    PAGE_TX_NOT_FOUND,
    PAGE_TX_PREPARED,
    describe_paging,
    find_page_stores,
    iter_paged_entries,
    load_view,
    paging_document,
)
from amqtool.engines.artemis.paging.stores import _chm_order
from amqtool.engines.artemis.verify import verify_store
from amqtool.errors import Severity, overall_verdict, Verdict
from amqtool.formats.artemis.paging import PagedMessage, encode_page_record, page_file_name
from amqtool.formats.artemis.primitives import simple_string_hash
from amqtool.store.layout import detect
from tests.paging_stores import build_store, core_message, sample_store
from tests.support import tree_hashes


@pytest.fixture
def sample(tmp_path):
    layout = sample_store(tmp_path / "data")
    return layout


def _codes(findings):
    return {(f.code, f.severity) for f in findings}


def test_paged_message_states(sample):
    store = detect(sample.root)
    got = [(e.address, e.page, e.number, e.message.message_id, e.tx_state, e.queue_states, e.pending_queues)
           for e in iter_paged_entries(store)]
    assert got == [
        ("events", 5, 0, 201, None, [(12, "page-complete")], []),
        ("orders", 1, 0, 101, None, [(10, "acked"), (7, "acked")], []),
        ("orders", 1, 1, 102, None, [(10, "acked"), (7, "pending")], [7]),
        ("orders", 1, 2, 103, PAGE_TX_COMMITTED, [(10, "pending"), (7, "pending")], [10, 7]),
        ("orders", 2, 0, 104, None, [(10, "pending"), (7, "pending")], [10, 7]),
        ("orders", 2, 1, 105, PAGE_TX_PREPARED, [(10, "pending"), (7, "pending")], [10, 7]),
        ("orders", 3, 0, 106, PAGE_TX_NOT_FOUND, [(10, "pending"), (7, "pending"), (99, "no-queue")], [10, 7]),
    ]
    # every paged message equals what was written
    written = {m.message_id: m for pages in sample.pages.values() for ms in pages.values() for m in ms}
    assert all(e.message == written[e.message.message_id] for e in iter_paged_entries(store))


def test_store_order_is_the_concurrent_hash_map_order():
    keys = [f"address.{i}" for i in range(30)]
    order = _chm_order(keys)
    cap = 64  # 30 keys: 16 -> 32 (at 12) -> 64 (at 24)
    idx = [((simple_string_hash(k) ^ (simple_string_hash(k) >> 16)) & (cap - 1)) for k in keys]
    assert [idx[i] for i in order] == sorted(idx)
    assert sorted(order) == list(range(30))


def test_describe_paging_lines(sample):
    store = detect(sample.root)
    lines = list(describe_paging(store))
    folder_o = sample.folders["orders"]
    assert lines[0] == "#" * 100
    assert lines[1] == f"Exploring store events folder = {sample.folders['events']}"
    assert lines[2] == "Number of pages ::1, Current writing page ::5"
    assert lines[3] == "*******   Page 5"
    assert lines[4].startswith("pg=5, msg=0,pgTX=-1,userMessageID=, msg=CoreMessage[messageID=201, durable=true, ")
    assert lines[4].endswith("properties=TypedProperties[seq=201]]@0,Queues = 12 (PG-COMPLETE)")
    i = lines.index(f"Exploring store orders folder = {folder_o}")
    assert lines[i + 1] == "Number of pages ::3, Current writing page ::3"
    assert lines[i + 2] == "*******   Page 1"
    tails = [ln.split(",Queues = ", 1)[1] for ln in lines[i:] if ",Queues = " in ln]
    assert tails == [
        "10 (ACK),7 (ACK)",
        "10 (ACK),7 (OK) ",
        "10 (OK) ,7 (OK) ",
        "10 (OK) ,7 (OK) ",
        "10 (OK) ,7 (OK) , **PG_TX_NOT_FOUND**",  # prepared page tx: not among the surviving records
        "10 (OK) ,7 (OK) ,99 (N/A) , **PG_TX_NOT_FOUND**",
    ]
    j = next(k for k, ln in enumerate(lines) if ln.startswith("pg=1, msg=1,"))
    assert "userMessageID=00010203-0405-1607-8809-0a0b0c0d0e0f, msg=CoreMessage[messageID=102" in lines[j]
    assert lines[j + 1:j + 3] == ["^^^ Previous record has 1 acked queues and 2 queues routed", ""]
    k = next(k for k, ln in enumerate(lines) if ln.startswith("pg=2, msg=0,"))
    assert lines[k].startswith("pg=2, msg=0,pgTX=-1,userMessageID=, msg=NullStorageLargeServerMessage[messageID=104, "
                               "durable=true, address=orders,properties=TypedProperties[_AMQ_LARGE_SIZE=3000]],Queues")
    m = next(k for k, ln in enumerate(lines) if ln.startswith("pg=3, msg=0,"))
    assert lines[m + 1] == "^^^ Previous record has 1 acked queues and 3 queues routed"


def test_describe_paging_safe(sample):
    lines = [ln for ln in describe_paging(detect(sample.root), safe=True) if ln.startswith("pg=")]
    core = sample.pages["orders"][1][0].message
    lm = sample.pages["orders"][2][0]
    assert lines[1] == f"pg=1, msg=0,pgTX=-1, msg=CoreMessage(safe data, size={core.encode_size()}),Queues = 10 (ACK),7 (ACK)"
    assert lines[4].startswith(f"pg=2, msg=0,pgTX=-1, msg=NullStorageLargeServerMessage(safe data, size={lm.header_size})"
                               f",Queues = ")
    assert all("userMessageID" not in ln for ln in lines)


def test_max_pages_off_by_one_and_skipping(sample):
    store = detect(sample.root)
    lines = list(describe_paging(store, max_pages=1))
    pages = [ln for ln in lines if ln.startswith("*******   Page")]
    assert pages == ["*******   Page 5", "*******   Page 1", "*******   Page 2"]  # N + 1 pages
    assert "******* Giving up at Page 3, System has a total of 3 pages" in lines
    assert list(describe_paging(store, max_pages=0)) == [".... skipping", ""]


def test_no_paging_directory_prints_nothing(tmp_path):
    layout = build_store(tmp_path / "d", queues={1: ("q", "q")}, pages={})
    shutil.rmtree(layout.root / "paging")
    assert list(describe_paging(detect(layout.root))) == []


def test_gap_and_torn_current_page_in_the_page_loop(tmp_path):
    msgs = {p: [PagedMessage.build(core_message(p * 10 + i, "a", "m"), [1]) for i in range(2)] for p in (2, 3, 5)}
    layout = build_store(tmp_path / "d", queues={1: ("a", "a")}, pages={"a": msgs})
    page5 = layout.folders["a"] / page_file_name(5)
    data = page5.read_bytes()
    page5.write_bytes(data[:-10])  # the current page, cut mid-record
    before = tree_hashes(layout.root)
    lines = list(describe_paging(detect(layout.root)))
    # reloadLivePage opens page 6 after the torn current page: counted, printed empty, not created here
    assert lines[2] == "Number of pages ::4, Current writing page ::6"
    assert [ln for ln in lines if ln.startswith("*******")] == [
        "*******   Page 2", "*******   Page 3", "*******   Page 5", "*******   Page 6"]
    assert [ln[:10] for ln in lines if ln.startswith("pg=5")] == ["pg=5, msg=", ]
    assert tree_hashes(layout.root) == before


def test_folders_without_address_are_skipped(sample):
    (sample.root / "paging" / "stray").mkdir()
    (sample.root / "paging" / "empty-address").mkdir()
    (sample.root / "paging" / "empty-address" / "address.txt").write_bytes(b"")
    stores, notes = find_page_stores(sample.root / "paging")
    assert sorted(s.address for s in stores) == ["events", "orders"]
    assert sorted(n.code for n in notes) == ["page-folder-no-address", "page-folder-no-address"]


def test_paging_document(sample):
    doc = paging_document(detect(sample.root), safe=True)
    orders = next(s for s in doc["stores"] if s["address"] == "orders")
    assert orders["numberOfPages"] == 3 and orders["firstPage"] == 1 and orders["currentPage"] == 3
    assert [p["records"] for p in orders["pages"]] == [3, 2, 1]
    assert all(p["end"] == "end" for p in orders["pages"])
    by_id = {m["messageId"]: m for m in orders["messages"]}
    assert by_id[102]["pendingQueues"] == [7] and by_id[102]["deliverable"]
    assert by_id[105]["pageTransaction"] == "prepared" and not by_id[105]["deliverable"]
    assert by_id[104]["large"] and by_id[104]["largeSize"] == 3000
    assert "userId" not in by_id[102]
    assert doc["largeMessages"] == [{"messageId": 104, "file": "104.msg", "size": 3000, "declaredSize": 3000,
                                     "journal": None, "paged": True}]
    limited = paging_document(detect(sample.root), max_pages=1)
    assert [len(s["pages"]) for s in limited["stores"]] == [1, 1]


# --- verify ------------------------------------------------------------------------------------------------


def _verify(root: Path):
    before = tree_hashes(root)
    report = verify_store(detect(root))
    assert tree_hashes(root) == before
    return report


def test_clean_store_verifies_ok(sample):
    report = _verify(sample.root)
    assert overall_verdict(report.findings) is Verdict.OK
    codes = {f.code for f in report.findings}
    assert {"page-tx-prepared", "page-tx-not-found"} <= codes
    assert report.summary()["paging"] == {"stores": 2, "pages": 4, "bytes": report.summary()["paging"]["bytes"],
                                          "messages": 7, "pendingMessages": 3}
    mism = {f.details["queueId"]: (f.details["stored"], f.details["counted"])
            for f in report.findings if f.code == "page-counter-mismatch"}
    assert mism == {7: (4, 3), 10: (3, 2)}


def test_counters_that_match_give_no_finding(tmp_path):
    msgs = {1: [PagedMessage.build(core_message(1, "a", "m"), [1]), PagedMessage.build(core_message(2, "a", "m"), [1])]}
    layout = build_store(tmp_path / "d", queues={1: ("a", "a")}, pages={"a": msgs}, acks=[(1, 1, 0)], counters={1: 1})
    assert [f for f in _verify(layout.root).findings if f.code.startswith("page")] == []


def test_page_cut_mid_record(sample):
    page = sample.folders["orders"] / page_file_name(3)
    data = page.read_bytes()
    page.write_bytes(data[:len(data) - 7])
    f = [x for x in _verify(sample.root).findings if x.code == "page-torn-tail"]
    assert len(f) == 1 and f[0].severity is Severity.WARNING and f[0].offset == 0 and f[0].path == str(page)
    # an older page cut the same way: still a torn tail (a crash, then a restart on a new page)
    p1 = sample.folders["orders"] / page_file_name(1)
    d1 = p1.read_bytes()
    p1.write_bytes(d1[:-5])
    f = [x for x in _verify(sample.root).findings if x.code == "page-torn-tail" and x.path == str(p1)]
    assert len(f) == 1 and f[0].details["messages"] == 2


def test_corrupted_end_marker(sample):
    page = sample.folders["orders"] / page_file_name(1)
    data = bytearray(page.read_bytes())
    first_len = int.from_bytes(data[1:5], "big")
    second = first_len + 6
    second_len = int.from_bytes(data[second + 1:second + 5], "big")
    data[second + 5 + second_len] = ord("]")
    page.write_bytes(bytes(data))
    report = _verify(sample.root)
    f = [x for x in report.findings if x.code == "page-damaged"]
    assert len(f) == 1 and f[0].severity is Severity.CRITICAL and f[0].offset == second
    assert f[0].details == {"page": 1, "messages": 1, "reason": "bad-end-marker"}
    assert overall_verdict(report.findings) is Verdict.CRITICAL


def test_removed_page_in_the_middle(sample):
    os.remove(sample.folders["orders"] / page_file_name(2))
    report = _verify(sample.root)
    # the page counters of queues 7 (4) and 10 (3) are above what pages 1 and 3 still hold (2 and 1): a loss
    f = [x for x in report.findings if x.code in ("page-gap", "page-missing")]
    assert len(f) == 1 and f[0].code == "page-missing" and f[0].severity is Severity.CRITICAL
    assert f[0].details["missingPages"] == [2] and f[0].details["lostByQueue"] == {"7": 2, "10": 2}
    # the paged large message's body is no longer referenced by anything
    assert [x.details["messageId"] for x in report.findings if x.code == "large-message-orphan"] == [104]


def test_removed_page_that_was_partly_consumed(tmp_path):
    msgs = {p: [PagedMessage.build(core_message(p * 10 + i, "a", "m"), [1]) for i in range(3)] for p in (1, 2, 3)}
    layout = build_store(tmp_path / "d", queues={1: ("a", "a")}, pages={"a": msgs}, acks=[(1, 2, 0)])
    os.remove(layout.folders["a"] / page_file_name(2))
    f = [x for x in _verify(layout.root).findings if x.code in ("page-gap", "page-missing")]
    assert [(x.code, x.severity) for x in f] == [("page-missing", Severity.CRITICAL)]


@pytest.mark.parametrize("counter, complete, want", [
    (6, [], ("page-missing", Severity.CRITICAL, 2)),  # the counter says 6 pending, pages 1 and 3 hold 4
    (4, [(1, 2)], ("page-gap", Severity.WARNING, None)),  # page 2 was consumed and the counter agrees
])
def test_removed_middle_page_is_judged_by_the_page_counters(tmp_path, counter, complete, want):
    # Issue 13 item 6: the counters prove whether the missing page still held unconsumed messages.
    msgs = {p: [PagedMessage.build(core_message(p * 10 + i, "a", "m"), [1]) for i in range(2)] for p in (1, 2, 3)}
    layout = build_store(tmp_path / "d", queues={1: ("a", "a")}, pages={"a": msgs}, counters={1: counter},
                         completes=complete)
    os.remove(layout.folders["a"] / page_file_name(2))
    f = [x for x in _verify(layout.root).findings if x.code in ("page-gap", "page-missing")]
    assert [(x.code, x.severity, x.details.get("messagesLost")) for x in f] == [want]


def test_removed_and_stray_msg_files(sample):
    lm = sample.root / "large-messages"
    os.remove(lm / "104.msg")
    (lm / "555.msg").write_bytes(b"orphan")
    report = _verify(sample.root)
    missing = [x for x in report.findings if x.code == "large-message-missing"]
    assert [(x.severity, x.details["messageId"]) for x in missing] == [(Severity.CRITICAL, 104)]
    orphan = [x for x in report.findings if x.code == "large-message-orphan"]
    assert [(x.severity, x.details["messageId"]) for x in orphan] == [(Severity.WARNING, 555)]


def test_msg_file_of_the_wrong_size(sample, tmp_path):
    lm = sample.root / "large-messages" / "104.msg"
    lm.write_bytes(lm.read_bytes()[:1000])
    f = [x for x in _verify(sample.root).findings if x.code == "large-message-size"]
    assert [(x.severity, x.details["size"], x.details["declaredSize"]) for x in f] == [(Severity.CRITICAL, 1000, 3000)]
    # a journal large message (type 30) is checked the same way
    layout = build_store(tmp_path / "j", queues={1: ("a", "a")}, pages={}, journal_large={77: 500})
    (layout.root / "large-messages" / "77.msg").write_bytes(b"x" * 501)
    f = [x for x in _verify(layout.root).findings if x.code.startswith("large-message")]
    assert [(x.code, x.details["messageId"]) for x in f] == [("large-message-size", 77)]


def test_undecodable_page_record(sample):
    # events' page 5 is its current page and record 0 its last, but a persister id changed to 9 is no crash's
    # (a crash leaves whole 4 KiB blocks zero, never a changed byte: torn_write.py): CRITICAL, as the first record
    # of orders' older page 1 is
    for address, number, severity, torn in (("events", 5, Severity.CRITICAL, None),
                                            ("orders", 1, Severity.CRITICAL, None)):
        page = sample.folders[address] / page_file_name(number)
        original = page.read_bytes()
        data = bytearray(original)
        data[5 + 9] = 9  # persister id 9 does not exist
        page.write_bytes(bytes(data))
        f = [x for x in _verify(sample.root).findings if x.code == "page-record-undecodable"]
        page.write_bytes(original)
        assert len(f) == 1 and f[0].severity is severity and f[0].offset == 0, (number, f)
        assert (f[0].details or {}).get("tornTail") is torn
        assert ("no crash leaves it so" in f[0].message) == (address == "events")


def test_page_tx_of_an_incomplete_journal_transaction(tmp_path):
    from amqtool.formats.artemis.primitives import Writer
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import MESSAGES

    msgs = {1: [PagedMessage.build(core_message(1, "a", "m"), [1], transaction_id=77)]}
    layout = build_store(tmp_path / "d", queues={1: ("a", "a")}, pages={"a": msgs})
    with JournalWriter.open(layout.root / "journal", MESSAGES, rollback_incomplete=False, file_size=1024 * 1024) as w:
        w.append_add_tx(9999, 5000, 35, Writer().i64(77).i32(1).getvalue())  # never committed
    f = [x for x in _verify(layout.root).findings if x.code.startswith("page-tx")]
    assert [(x.code, x.severity) for x in f] == [("page-tx-incomplete", Severity.WARNING)]


def test_view_reads_the_journals(sample):
    view = load_view(detect(sample.root))
    assert view.queues == {7, 10, 12}
    assert view.page_tx == {500} and set(view.page_tx_prepared) == {501}
    assert view.acks == {10: {(1, 0), (1, 1)}, 7: {(1, 0)}}
    assert view.complete == {12: {5}}
    assert view.counters() == {7: 4, 10: 3}


def test_page_with_appended_records_round_trips(sample):
    """encode(decode(bytes)) == bytes for every record of every page written."""
    from amqtool.formats.artemis.paging import decode_page

    for folder in sample.folders.values():
        for p in folder.glob("*.page"):
            data = p.read_bytes()
            msgs, end = decode_page(data)
            assert end.reason == "end"
            assert b"".join(encode_page_record(m) for m in msgs) == data


# --- the demo store (amqtool create --demo) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    import json

    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("demo") / "broker"
    create_demo(root, 8 * 1024 * 1024)
    manifest = json.loads((root / "manifest.json").read_text())
    if "paging" not in manifest.get("expected", {}):
        pytest.skip("this demo writer has no paging yet")
    return root, manifest


def test_demo_paged_messages_equal_the_manifest(demo):
    root, manifest = demo
    exp = manifest["expected"]["paging"]
    doc = paging_document(detect(root))
    stores = [{"address": s["address"], "folder": os.path.relpath(s["folder"], root),
               "numberOfPages": s["numberOfPages"], "firstPage": s["firstPage"], "currentPage": s["currentPage"],
               "pages": [{k: p[k] for k in ("pageId", "file", "size", "records")} for p in s["pages"]]}
              for s in doc["stores"]]
    assert stores == exp["stores"]
    keys = set(exp["messages"][0])
    got = [{k: m.get(k) for k in keys if k != "address"} | {"address": s["address"]}
           for s in doc["stores"] for m in s["messages"]]
    assert got == exp["messages"]
    large = {x["messageId"]: (x["size"], x["paged"]) for x in doc["largeMessages"]}
    assert large == {x["messageId"]: (x["size"], x["paged"]) for x in manifest["expected"]["largeMessages"]}


def test_demo_verifies_without_warnings(demo):
    root, _ = demo
    report = _verify(root)
    assert overall_verdict(report.findings) is Verdict.OK, [f.to_json() for f in report.findings
                                                              if f.severity is not Severity.INFO]


def test_demo_page_records_round_trip(demo):
    from amqtool.formats.artemis.paging import decode_page

    root, _ = demo
    pages = list((root / "data" / "paging").glob("*/*.page"))
    assert pages
    for p in pages:
        data = p.read_bytes()
        msgs, end = decode_page(data)
        assert end.reason == "end" and b"".join(encode_page_record(m) for m in msgs) == data
