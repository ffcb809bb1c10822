"""Single-byte flips judged by what the broker loses (issue 25), from the fault campaign at seed 90210: the
last record of an address's current page, torn as a crash leaves it (WARNING, while the same damage with a
record after it stays CRITICAL); a lost page transaction whose paged messages were all consumed; a reference
whose id was flipped onto a message of another address; an ADD_REF whose user record type was flipped. Each
is a damaged copy of a campaign demo store (tests/faults/stores.py campaign_demo), held to its verdict and
finding."""
from __future__ import annotations

import os

import pytest

from amqtool.engines.artemis.paging import find_page_stores
from amqtool.errors import FormatError
from amqtool.formats.artemis.paging import PagedMessage, PageScanner
from amqtool.formats.artemis.primitives import Reader
from tests.support import copy_tree, flip_byte


def _findings(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """The campaign's demo stores by seed, built on first use."""
    from tests.faults.stores import campaign_demo

    base, built = tmp_path_factory.mktemp("demos"), {}

    def get(seed: int):
        if seed not in built:
            built[seed] = campaign_demo(base / f"demo-s{seed}", seed)
        return built[seed]
    return get


def _current_page(store):
    """(path, records) of the first address's current page holding two records or more, and the records'
    (offset, length) as the broker frames them."""
    from amqtool.store.layout import detect

    stores, _ = find_page_stores(detect(store).paging_dir)
    for ps in stores:
        path = ps.page_path(ps.current_page)
        data = path.read_bytes()
        records = [(off, ln) for _, off, ln in PageScanner(data)]
        if len(records) >= 2:
            return path, records
    raise AssertionError("no current page with two records in the demo store")


_S1_BACKLOG = "data/paging/0445d656-de3a-1db5-954e-d51212093d26/000000001.page"  # current page, 34004 bytes
_S1_TELEMETRY = "data/paging/6816de06-0a04-1f48-921b-18a91ab1c42f/000000002.page"  # current page, 9974 bytes


@pytest.mark.parametrize("page,start,stop,torn,verdict", [
    # backlog's last record: 1438 bytes at 32566, across the 4 KiB boundary at 32768, the one message of the
    # prepared XA transaction 598 (in no page counter until it commits). Its PREPARE is in the journal, which the
    # broker writes only once the page is synced (PageTimedWriter), so no zeroing of it is a crash's: each is
    # CRITICAL page-damaged (once read as torn tails where the blocks were whole: the crash model alone)
    (_S1_BACKLOG, 32566, 34004, False, 2),   # the whole last record zero
    (_S1_BACKLOG, 32566, 32768, False, 2),   # from the write's start to the block boundary
    (_S1_BACKLOG, 32768, 34004, False, 2),   # the record's second block, to the end of the file
    (_S1_BACKLOG, 32566, 32572, False, 2),   # a run ending inside a block before written bytes
    (_S1_BACKLOG, 33000, 34004, False, 2),
    # telemetry's last record: 210 bytes at 9764, a large message two queues still have to consume
    (_S1_TELEMETRY, 9764, 9770, False, 2),   # seed 3303009911000075: the broker loses it, and no crash did that
    (_S1_TELEMETRY, 9764, 9974, True, 1),    # the whole record zero: a crash's torn tail
])
def test_a_zeroed_run_in_the_current_pages_last_record_is_torn_only_as_a_crash_leaves_it(
        run_json, tmp_path, demos, page, start, stop, torn, verdict):
    from tests.faults.artemis import ArtemisSites
    from tests.faults.model import Fault

    store = copy_tree(demos(1), tmp_path / "s")
    path = store / page
    data = path.read_bytes()
    records = [(off, ln + 6) for _, off, ln in PageScanner(data)]
    last = records[-1][0]
    assert (last, len(data)) in ((32566, 34004), (9764, 9974))
    # the harness's truth reads the fault by the same model (amqtool/formats/artemis/torn_write.py, and the
    # page synced before a COMMIT or PREPARE of its transaction)
    assert ArtemisSites.read(store).torn(Fault("zero", page, start, stop - start)) is torn
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(stop - start))
    code, doc, _ = run_json("verify", store)
    assert code == verdict
    if torn:
        (f,) = _findings(doc, "page-torn-tail")
        assert (f["severity"], f["offset"]) == ("warning", last)
        assert not _findings(doc, "page-damaged")
    elif page == _S1_BACKLOG:  # transaction 598's record: synced before its PREPARE
        # its transaction id read (page-damaged), or zeroed with the rest: then its PAGE_TRANSACTION record counts
        # a reference the pages no longer hold (page-torn-tail raised by paging/synced_refs.py)
        (f,) = _findings(doc, "page-damaged") or _findings(doc, "page-torn-tail")
        assert (f["severity"], f["offset"]) == ("critical", last) and "598" in f["message"]
    else:
        assert not _findings(doc, "page-torn-tail")
        (f,) = _findings(doc, "page-damaged")
        assert (f["severity"], f["offset"]) == ("warning", last) and "no crash leaves it so" in f["message"]
        assert len(_findings(doc, "page-messages-lost")) == (verdict == 2)


@pytest.mark.parametrize("which,where", [("last", "start"), ("last", "end"), ("first", "end")])
def test_a_flipped_marker_in_the_current_page_is_damage_not_a_crash(run_json, tmp_path, demos, which, where):
    # campaign seeds 90210270632000054, 90210270630000179 (once read as torn tails): a crash leaves the last
    # record cut or whole 4 KiB blocks of it zero (amqtool/formats/artemis/torn_write.py), never a changed bit:
    # a flipped '{' or '}' is damage done after the write, and the message the broker drops (two queues of
    # telemetry still had it to consume, their page counters say so) is proven loss
    store = copy_tree(demos(1), tmp_path / "s")
    path = store / _S1_TELEMETRY
    records = [(off, ln) for _, off, ln in PageScanner(path.read_bytes())]
    off, ln = records[-1] if which == "last" else records[0]
    flip_byte(path, off if where == "start" else off + 5 + ln, 0x20)
    code, doc, _ = run_json("verify", store)
    assert code == 2 and not _findings(doc, "page-torn-tail")
    (f,) = _findings(doc, "page-damaged")
    assert f["offset"] == off
    if which == "last":
        assert f["severity"] == "warning" and "no crash leaves it so" in f["message"]
        (lost,) = _findings(doc, "page-messages-lost")
        assert lost["details"]["messagesLost"] == 2
    else:
        assert f["severity"] == "critical" and "no crash leaves it so" not in f["message"]


def _undecodableflip_byte(data: bytes, off: int, ln: int) -> int:
    """The first byte of the record at ``off`` whose flip (0x80) leaves its framing whole but its message
    undecodable, as ``Page.read`` decodes it."""
    for k in range(off + 5, off + 5 + ln):
        damaged = bytearray(data)
        damaged[k] ^= 0x80
        try:
            PagedMessage.read(Reader(bytes(damaged), off + 5, off + 5 + ln))
        except FormatError:
            return k
    raise AssertionError("no flip makes this record undecodable")


@pytest.mark.parametrize("which", ["last", "first"])
def test_an_undecodable_record_of_the_current_page_by_a_flip_is_proven_loss(run_json, tmp_path, demos, which):
    # campaign seeds 90210271634003207, 90210273632009032 (once read as torn tails): the message of the current
    # page's record does not decode after a flip and no block of the record reads zero: no crash leaves that,
    # and the broker, which stops reading there, loses the message(s) from there on
    store = copy_tree(demos(2), tmp_path / "s")
    path, records = _current_page(store)
    off, ln = records[-1] if which == "last" else records[0]
    flip_byte(path, _undecodableflip_byte(path.read_bytes(), off, ln), 0x80)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "page-record-undecodable")
    assert f["offset"] == off and "tornTail" not in f["details"]
    assert (code, f["severity"], f["details"]["messagesLost"]) == (2, "critical", 1 if which == "last" else len(records))
    assert ("no crash leaves it so" in f["message"]) == (which == "last")


@pytest.mark.parametrize("offset,mask,code_", [(9961, 0x40, "page-queue-id-damaged"),
                                               (9786, 0x08, "large-message-missing")])
def test_a_flipped_id_in_the_current_pages_last_record_is_proven_loss(run_json, tmp_path, demos, offset, mask,
                                                                      code_):
    # campaign seeds 90210270630000165 (the record's queue id) and 90210270633000205 (its large message's id),
    # once read as torn tails: page 2 is its address's current page and the record at 9764 its last one, but a
    # flipped bit is no crash's (torn_write.py), so the message the broker loses is proven loss
    store = copy_tree(demos(1), tmp_path / "s")
    path = store / _S1_TELEMETRY
    assert [off for _, off, _ in PageScanner(path.read_bytes())][-1] == 9764
    flip_byte(path, offset, mask)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, code_)
    assert (code, doc["verdict"], f["severity"]) == (2, "CRITICAL", "critical")
    assert "last record of the current page" not in f["message"]


_JOURNAL = "data/journal/activemq-data-{}.amq"


@pytest.mark.parametrize("file,offset,pending", [(11, 22567, False), (1, 30080, False), (7, 18840, False),
                                                 (11, 40917, True), (9, 51954, True)])
def test_a_lost_commit_of_a_page_transaction_is_judged_by_its_pending_messages(run_json, tmp_path, demos, file,
                                                                                offset, pending):
    # campaign seeds 90210273630009124, 90210273633009258: the type byte of a COMMIT whose transaction holds
    # one PAGE_TRANSACTION record; the broker rolls it back and every cursor skips that page transaction's
    # messages, a loss only when some queue still had to consume one of them
    store = copy_tree(demos(4), tmp_path / "s")
    victim = store / _JOURNAL.format(file)
    assert victim.read_bytes()[offset] == 18  # a COMMIT record
    flip_byte(victim, offset, 0x80)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-record")
    assert f["offset"] == offset and "a commit in transaction" in f["message"]
    assert (code, f["severity"]) == ((2, "critical") if pending else (1, "warning"))


def test_a_commit_whose_tx_id_flipped_onto_a_consumed_page_transaction_is_a_warning(run_json, tmp_path, demos):
    # campaign seed 90210273634009169: the commit of 391 now names 407; 391's one record, a PAGE_TRANSACTION
    # whose message was consumed, is rolled back to no effect
    store = copy_tree(demos(4), tmp_path / "s")
    flip_byte(store / _JOURNAL.format(11), 22580, 0x10)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (1, "WARNING") and not _findings(doc, "commit-damaged")
    (f,) = _findings(doc, "page-tx-incomplete")
    assert f["details"]["pageTransaction"] == 391


@pytest.mark.parametrize("seed,file,offset,mask", [(1, 6, 32516, 0x01), (1, 13, 62996, 0x20),
                                                   (3, 12, 48962, 0x20)])
def test_a_reference_flipped_onto_a_message_of_another_address_is_not_a_lost_message(run_json, tmp_path, demos,
                                                                                      seed, file, offset, mask):
    # campaign seeds 90210270632000161, 90210270637000053, 90210272630006094: the id of a deleted message's
    # ADD_REF flipped; the one live message a bit away is routed to queues of another address only, so the
    # reference was never its (the broker drops it: nothing it delivers changes)
    store = copy_tree(demos(seed), tmp_path / "s")
    flip_byte(store / _JOURNAL.format(file), offset, mask)
    code, doc, _ = run_json("verify", store)
    assert code in (0, 1) and not _findings(doc, "message-record-missing")


def test_an_add_ref_whose_user_type_flipped_explains_its_acknowledgement(run_json, tmp_path, demos):
    # campaign seed 90210272632006047: message 133's ADD_REF on queue 23 now reads as user type 40, which the
    # broker never writes as an update; 133 is acknowledged on queue 23, so it is not delivered there either way,
    # and its acknowledgement without the reference is no finding. But the load decodes a live record of type 40
    # as a PageCountRecord (queue id and value, 16 bytes) whatever it was written as: the 8-byte body makes it
    # throw, and the broker does not start (record-undecodable; the harness's truth knows that decoder now)
    store = copy_tree(demos(3), tmp_path / "s")
    victim = store / _JOURNAL.format(4)
    assert victim.read_bytes()[9044] == 32  # ADD_REF
    flip_byte(victim, 9044, 0x08)
    code, doc, _ = run_json("verify", store)
    assert not _findings(doc, "ack-without-ref")
    assert code == 2 and [f["code"] for f in doc["findings"] if f["severity"] == "critical"] == ["record-undecodable"]


@pytest.mark.parametrize("seed,file,offset,mask,owner", [(1, 16, 2005, 0x04, 450), (1, 7, 24608, 0x02, 155),
                                                         (4, 10, 63724, 0x20, 165)])
def test_an_acknowledgement_whose_message_id_flipped_is_a_lost_acknowledgement(run_json, tmp_path, demos, seed,
                                                                               file, offset, mask, owner):
    # campaign seeds 90210270630000035 (a transactional ack), 90210270632000103, 90210273633009036: the ack's
    # id now names no message and no deleted one; the message a bit away, still on that queue, comes back
    store = copy_tree(demos(seed), tmp_path / "s")
    flip_byte(store / _JOURNAL.format(file), offset, mask)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "ack-moved")
    assert (code, f["severity"], f["details"]["messageIds"]) == (2, "critical", [owner])


def test_a_record_whose_transaction_id_flipped_is_weighed_with_its_transaction(run_json, tmp_path, demos):
    # campaign seed 90210271636003061: an acknowledgement of transaction 405 now names another transaction,
    # left open; 405's commit no longer counts its records and the broker discards it, acknowledgement too:
    # the acknowledged message comes back. The three records left in 405 change nothing by themselves.
    store = copy_tree(demos(2), tmp_path / "s")
    flip_byte(store / _JOURNAL.format(12), 64853, 0x80)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "commit-count-mismatch")
    assert (code, f["severity"], f["details"]["txId"]) == (2, "critical", 405)


def test_a_reference_whose_queue_id_flipped_onto_another_of_its_queues_is_a_lost_reference(run_json, tmp_path,
                                                                                           demos):
    # campaign seed 25000075000224: message 224's ADD_REF on queue 23 now names queue 19, which it already has
    # a reference on (the broker routes a message to a queue once); queue 23, of the same address and one bit
    # from 19, never delivers it
    store = copy_tree(demos(1), tmp_path / "s")
    flip_byte(store / _JOURNAL.format(7), 49199, 0x04)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "ref-moved")
    assert (code, f["severity"], f["details"]["messageIds"]) == (2, "critical", [224])
    assert "message 224 on queue 23" in f["message"]


@pytest.mark.parametrize("offset,mask", [(9766, 0x01), (9767, 0x20)])
def test_a_flipped_length_past_the_end_of_the_current_page_is_not_a_cut(run_json, tmp_path, demos, offset, mask):
    # campaign seeds 4001012004000018 and 4001012004000079: a length byte of the last record flipped so that it
    # runs past the end of the file reads like a cut, but the bytes to the end frame the record whole under the
    # length one bit away and its message decodes: the length was changed, which no crash does
    store = copy_tree(demos(1), tmp_path / "s")
    path = store / _S1_TELEMETRY
    flip_byte(path, offset, mask)
    code, doc, _ = run_json("verify", store)
    assert code == 2 and not _findings(doc, "page-torn-tail")
    (f,) = _findings(doc, "page-damaged")
    assert (f["offset"], f["details"]["reason"], f["details"]["crash"]) == (9764, "bad-length", False)


def test_a_cut_of_the_current_page_256_bytes_short_of_a_brace_is_still_a_cut(run_json, tmp_path, demos):
    # campaign seed 4001015003009144: telemetry's current page cut to 15527, inside a record whose length
    # (2329) is one bit (256) from framing it to the cut, where a '}' of its JSON body happens to lie; the
    # shortened message does not decode, so its framing is what a crash leaves: a torn tail. But the cut also
    # took the records after it, among them those of committed page transactions the broker had synced before
    # their COMMIT (their records count references the pages no longer hold): no crash's, CRITICAL
    from tests.faults.artemis import ArtemisSites, _tail_only
    from tests.faults.model import Fault

    store = copy_tree(demos(4), tmp_path / "s")
    rel = "data/paging/0d8c202b-ad3e-15b8-806e-eb6fa06f72b1/000000002.page"
    path = store / rel
    data = path.read_bytes()
    records = [(off, ln + 6) for _, off, ln in PageScanner(data)]
    assert (13448, 2335) in records and data[15526] == 0x7D
    assert _tail_only(Fault("truncate", rel, 15527), records, data)  # the crash model alone
    assert not ArtemisSites.read(store).torn(Fault("truncate", rel, 15527))  # synced records cut
    os.truncate(path, 15527)
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "page-torn-tail")
    assert (code, f["offset"], f["severity"]) == (2, 13448, "critical") and not _findings(doc, "page-damaged")
    assert f["details"]["pageTransactionsShort"]


_S1_JOURNAL = "data/journal/activemq-data-16.amq"  # the current file: its last record, a COMMIT, at 12497


def test_a_damaged_end_of_the_current_journal_file_that_no_crash_leaves(run_json, tmp_path, demos):
    # the COMMIT that ends the current file, zeroed from its fourth byte to its end: its type and the start of
    # its tag survive in the block the zeros end in, so no crash left it (torn_write.py); the broker drops the
    # commit and the transaction's records with it
    from tests.faults.artemis import ArtemisSites, _tail_only
    from tests.faults.model import Fault

    store = copy_tree(demos(1), tmp_path / "s")
    (jf,) = [f for fs in ArtemisSites.read(store).journals.values() for f in fs if f.rel == _S1_JOURNAL]
    assert jf.current and (jf.records[-1][1], jf.records[-1][2]) == (12497, 22)
    records = [(r[1], r[2]) for r in jf.records]
    assert not _tail_only(Fault("zero", _S1_JOURNAL, 12500, 19), records, jf.data, journal=True)
    assert _tail_only(Fault("zero", _S1_JOURNAL, 12497, 22), records, jf.data, journal=True)
    with open(store / _S1_JOURNAL, "r+b") as f:
        f.seek(12500)
        f.write(bytes(19))
    code, doc, _ = run_json("verify", store)
    assert not _findings(doc, "torn-tail")
    (f,) = _findings(doc, "damaged-tail")
    assert (f["offset"], f["details"]["crash"]) == (12497, False) and "no crash leaves it so" in f["message"]


def test_a_damaged_end_of_the_current_bindings_file_with_queues_still_counted(run_json, tmp_path, demos):
    # campaign seed 777003697: the current bindings file zeroed from inside a record (1859) to past its end:
    # the three paged queues' bindings are gone, while their page counters still count messages: CRITICAL
    store = copy_tree(demos(1), tmp_path / "s")
    with open(store / "data/bindings/activemq-bindings-1.bindings", "r+b") as f:
        f.seek(1859)
        f.write(bytes(4096))
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-tail")
    assert (code, f["severity"], f["details"]["queuesLost"]) == (2, "critical", [35, 37, 41])


def test_a_zeroed_run_over_the_end_of_the_current_files_transactional_record(run_json, tmp_path, demos):
    # campaign seed 3303012909009248: demo-s4's current file zeroed from inside its first record (a 12099-byte
    # ADD_RECORD_TX) to the end of its last: the zeros, read as the fill, wiped the transaction's COMMIT and the
    # records after it (3 messages lost), so the record's transaction being left open proves nothing harmless.
    # It was a WARNING ("its loss changes nothing"): CRITICAL
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.artemis import DeliveredReader

    store = copy_tree(demos(4), tmp_path / "s")
    path = store / _S1_JOURNAL
    data = path.read_bytes()
    records, _ = scan_records_py(data, int.from_bytes(data[8:16], "big") & 0x7FFFFFFF, 2)
    first, last = records[0], records[-1]
    assert first[0] == 13 and first[2] > 8192  # a transactional record, across two 4 KiB blocks
    start, end = first[1] + 8575, last[1] + last[2] + 1
    reader = DeliveredReader(store)
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
    assert reader.pristine.diff(reader.damaged(store))["lost"] > 0  # the truth
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-tail")
    assert (code, f["severity"], f["offset"], f["details"]["crash"]) == (2, "critical", first[1], False)


def test_a_zeroed_run_over_the_end_of_the_current_files_message_and_the_records_after_it(run_json, tmp_path,
                                                                                           demos):
    # campaign seed 8484044452057028 (small-s23, a store written by JournalImpl): the current file zeroed from
    # inside a message's ADD to inside the last record after it: the message and its references gone, and no
    # crash leaves zeros ending inside a block before written bytes. The message's loss alone read "harmless"
    # (no reference of it survived): a WARNING. The zeros ran over the record's end, so the records after it
    # were wiped with it: CRITICAL
    from tests.faults.artemis import ArtemisSites, DeliveredReader

    store = copy_tree(demos(2), tmp_path / "s")
    (jf,) = [f for fs in ArtemisSites.read(store).journals.values() for f in fs if f.current and "journal" in f.rel]
    recs = [(r[0], r[1], r[2]) for r in jf.records]
    i = max(k for k, r in enumerate(recs) if r[0] == 11 and r[2] > 200)  # the last non-transactional ADD
    assert recs[i + 1][0] == 12  # its reference follows it
    start, end = recs[i][1] + 100, recs[-1][1] + recs[-1][2] - 5
    assert end % 4096 > 5  # the zeros end inside a block, before written bytes: no crash leaves them
    reader = DeliveredReader(store)
    with open(store / jf.rel, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
    assert reader.pristine.diff(reader.damaged(store))["lost"] >= 1  # the truth
    code, doc, _ = run_json("verify", store)
    (f,) = _findings(doc, "damaged-tail")
    assert (code, f["severity"], f["offset"], f["details"]["crash"]) == (2, "critical", recs[i][1], False)
