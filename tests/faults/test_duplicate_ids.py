"""The truth counts the broker's duplicate-detection caches (tests/faults/artemis.py ``duplicate_ids``): the
DUPLICATE_ID records (user type 37) the broker loads into each address's cache. Losing one lets the broker
accept a resend it would have rejected, so a fault that loses one is a loss, though no row changes; a changed
value is a content change (no checksum)."""
from __future__ import annotations

import shutil
from collections import Counter
from types import SimpleNamespace

import pytest

from tests.faults import artemis
from tests.faults.model import CONTENT, LOSS, classify
from tests.faults.runner import verify_verdict
from tests.faults.stores import campaign_demo, fixtures, messages_files


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("dups") / "d", 2)


def _duplicate_record(root):
    """(path, (type, pos, total, ...)) of the first DUPLICATE_ID add of a message file that is not the newest."""
    from amqtool.formats.artemis.records import scan_records_py

    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(root)]
    data = [(p, rs) for p, rs in files if rs][:-1]
    return next((p, r) for p, rs in data for r in rs if r[0] == 11 and r[6] == 37)


def _truth(pristine, root):
    damaged = artemis.delivered(root)
    return classify(pristine, damaged, lambda d: False, lambda: bool(artemis.broker_could_write(root)),
                    moved=True), damaged


def test_the_demo_and_the_broker_written_fixture_have_duplicate_ids(store):
    # the demo writes one DUPLICATE_ID record per message carrying _AMQ_DUPL_ID (never deleted: the cache
    # evicts only past id-cache-size), and so did the real broker that wrote the fixture
    manifest_count = __import__("json").loads((store / "manifest.json").read_text())["counts"]["duplicateIds"]
    d = artemis.delivered(store)
    committed = sum(n for (_, _, state), n in d.caches.items() if state == "committed")
    assert 0 < committed <= manifest_count
    stores = dict(fixtures())
    if "02_broker_mixed_compacted" in stores:
        assert sum(artemis.delivered(stores["02_broker_mixed_compacted"]).caches.values()) == 18


def test_a_lost_duplicate_id_record_is_a_loss(store, tmp_path):
    # Campaign seed 5151 called 12 such faults "same" (the truth compared rows only) while verify said CRITICAL:
    # the broker does lose the cache entry. Zero one DUPLICATE_ID record of an older file but its type byte
    # (what is left proves the damage: a run of zeros alone between records is no proof, see broker_could_write).
    root = shutil.copytree(store, tmp_path / "s")
    pristine = artemis.delivered(store)
    path, rec = _duplicate_record(root)
    with open(path, "r+b") as f:
        f.seek(rec[1] + 1)
        f.write(bytes(rec[2] - 1))
    (truth, diff), damaged = _truth(pristine, root)
    assert damaged.rows == pristine.rows and damaged.bindings == pristine.bindings
    assert (truth, diff["lost"], diff["back"], diff["caches"]) == (LOSS, 1, 0, 1)
    assert verify_verdict(root)[0] == "CRITICAL"


def test_a_changed_duplicate_id_value_is_content(store, tmp_path):
    root = shutil.copytree(store, tmp_path / "s")
    pristine = artemis.delivered(store)
    path, rec = _duplicate_record(root)
    last = rec[1] + rec[2] - 5  # the last byte of the body (a byte of the duplicate id), before the checkSize
    data = bytearray(path.read_bytes())
    data[last] ^= 0x01
    path.write_bytes(bytes(data))
    (truth, diff), _ = _truth(pristine, root)
    assert (truth, diff["lost"], diff["back"], diff["content"]) == (CONTENT, 0, 0, 2)


@pytest.mark.parametrize("seed", [5151016453003207, 5151017453006140, 5151016459003228])
def test_campaign_seed_5151_lost_duplicate_ids_are_loss(store, seed, tmp_path):
    # three of the 12: a zeroed run and cuts of older files of demo-s2 and demo-s3, whose only loss is
    # duplicate-detection entries
    from tests.faults.campaign import reproduce

    src = store if str(seed).startswith("5151016") else campaign_demo(tmp_path / "d3", 3)
    o = reproduce(src, seed)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL")
    assert o.diff["lost"] == o.diff["caches"] > 0 and not o.diff["back"]


class _Load(SimpleNamespace):
    def body(self, rec):
        return rec.data


def _rec(rid, address: bytes, dup: bytes, utype=37):
    from amqtool.formats.artemis.primitives import Writer

    w = Writer().i32(len(address)).raw(address).i32(len(dup)).raw(dup)
    return SimpleNamespace(id=rid, user_record_type=utype, data=w.getvalue())


def test_each_address_keeps_its_last_id_cache_size_entries(monkeypatch):
    # PersistentDuplicateIDCache.load keeps the last id-cache-size entries of an address's list (in load order)
    # and deletes the older ones; other record types and prepared transactions' entries as documented; a record
    # loaded twice (a duplicated journal file) is one entry
    monkeypatch.setattr(artemis, "ID_CACHE_SIZE", 2)
    live = [_rec(1, b"a", b"1"), _rec(2, b"a", b"2"), _rec(3, b"b\x00", b"3"), _rec(3, b"b\x00", b"3"),
            _rec(4, b"a", b"4"), _rec(5, b"a", b"5", utype=32)]
    tx = SimpleNamespace(records=[_rec(6, b"a", b"6")])
    counts, content = artemis.duplicate_ids(_Load(live=live, prepared=[tx]))
    D = artemis.DUPLICATE_IDS
    assert counts == Counter({(D, 2, "committed"): 1, (D, 3, "committed"): 1, (D, 4, "committed"): 1,
                              (D, 6, "prepared"): 1})
    assert (D, 3, "committed", (b"b\x00", b"3")) in content  # an odd-length address: raw bytes, as Java reads


@pytest.mark.parametrize("body", [b"", b"\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x08ab\x00\x00\x00\x00",
                                  b"\x00\x00\x00\x01a\xff\xff\xff\xff", b"\x00\x00\x00\x01a\x00\x00\x00\x02b"])
def test_a_duplicate_id_record_whose_decode_throws_stops_the_broker(body):
    # DuplicateIDEncoding.decode: readSimpleString throws on a negative length or one past the buffer, new
    # byte[size] on a negative size, readBytes past the end; loadMessageJournal rethrows: nothing is delivered
    live = [SimpleNamespace(id=1, user_record_type=37, data=body)]
    assert artemis.duplicate_ids(_Load(live=live, prepared=[])) is None


def test_a_store_whose_duplicate_id_record_does_not_decode_delivers_nothing(store, tmp_path):
    # the address length's top bit flipped: negative, the decode throws, the broker does not start
    root = shutil.copytree(store, tmp_path / "s")
    pristine = artemis.delivered(store)
    path, rec = _duplicate_record(root)
    body = rec[1] + rec[2] - 4 - rec[7]  # the body starts after the header fields; it ends before the checkSize
    data = bytearray(path.read_bytes())
    data[body] ^= 0x80
    path.write_bytes(bytes(data))
    (truth, _), damaged = _truth(pristine, root)
    assert damaged.undecodable and not damaged.rows
    assert truth == LOSS


def test_a_duplicated_journal_file_brings_back_no_duplicate_id(store):
    # seed 4303: activemq-data-2.amq copied as activemq-data-99.amq loads its records twice; a cache entry held
    # twice is the same entry (the cache is keyed by the duplicate id), so the broker rejects nothing more
    from tests.faults.campaign import reproduce
    from tests.faults.model import SAME

    o = reproduce(store, 4303013909003163)
    assert o.fault.kind == "duplicate"
    assert (o.truth, o.verdict) == (SAME, "WARNING")
