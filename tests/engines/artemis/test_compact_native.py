"""The native compaction path (native/compact_write.c, Loader(sources=True)) against the Python reference:
the same live sources, the same layout and byte-identical output files on every fixture journal and on
generated stores (transactions committed in other files, prepared and failed ones, replaceable updates,
the split line, the maxID marker, version-1 sources); and a source that changes after the load is refused."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from amqtool import native
from amqtool.engines.artemis import compact as C
from amqtool.engines.artemis.load import load_journal
from amqtool.errors import AmqtoolError
from amqtool.formats.artemis import records as R
from amqtool.formats.artemis.records import ADD, ADD_TX, UPDATE, UPDATE_TX, fixed_size
from amqtool.store.journal_files import open_journal
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import MESSAGES
from tests.engines.artemis.compact_helpers import build_store, store_snapshot, journal_of, pending_codes, state
from tests.support import ARTEMIS, copy_tree, tree_hashes

pytestmark = pytest.mark.skipif(not native.HAVE_COMPACT, reason="the C extension is not built")

FIXTURE_JOURNALS = sorted({p.parent for p in ARTEMIS.rglob("*.amq")} | {p.parent for p in ARTEMIS.rglob("*.bindings")})
_SRC = struct.Struct(native.SOURCE_FORMAT)


def _sources_from_headers(opened, live) -> list[tuple[int, int]]:
    """(tx id, record type) of each live entry read back from the record header in front of its body,
    independently of either load: both layouts end with (id, bodyLen, userRecordType) before the body,
    and when both readings fit, the record's checkSize (31+N vs 23+N) decides."""
    out = []
    for rec in live:
        jf = opened.files[rec.file_index]
        v = jf.version
        tx_hdr, nt_hdr = fixed_size(ADD_TX, v) - 4, fixed_size(ADD, v) - 4
        start = rec.body_offset - tx_hdr
        prefix = (b"\x00" * -start + opened.pread(rec.file_index, 0, rec.body_offset) if start < 0
                  else opened.pread(rec.file_index, start, tx_hdr))
        tag = struct.pack(">i", jf.tag)
        tx_type, nt_type = (UPDATE_TX, UPDATE) if rec.is_update else (ADD_TX, ADD)
        as_tx = prefix[0] == tx_type and prefix[1:5] == tag
        k = tx_hdr - nt_hdr
        as_plain = prefix[k] == nt_type and prefix[k + 1:k + 5] == tag
        if as_tx and as_plain:
            end = opened.pread(rec.file_index, rec.body_offset + rec.body_len, 4)
            as_tx = struct.unpack(">i", end)[0] == fixed_size(ADD_TX, v) + rec.body_len
        assert as_tx or as_plain
        out.append((struct.unpack_from(">q", prefix, 6 if v >= 2 else 5)[0], tx_type) if as_tx else (-1, nt_type))
    return out


def _stores(tmp_path: Path) -> list[Path]:
    stores = [copy_tree(src, tmp_path / f"fx{i}") for i, src in enumerate(FIXTURE_JOURNALS)]
    for seed, n, size in ((7, 1500, 64 * 1024), (11, 900, 32 * 1024), (23, 3000, 128 * 1024)):
        stores.append(build_store(tmp_path / f"gen{seed}", seed=seed, n=n, file_size=size))
    return stores


def test_native_and_python_loads_give_the_same_sources(tmp_path):
    for d in _stores(tmp_path):
        with open_journal(journal_of(d)) as opened:
            c = load_journal(opened, sources=True, use_native=True)
            py = load_journal(opened, sources=True, use_native=False)
            assert c.live == py.live
            assert c.live_sources == py.live_sources, d
            assert len(c.live_sources) == _SRC.size * len(c.live)
            assert list(_SRC.iter_unpack(c.live_sources)) == _sources_from_headers(opened, c.live), d
            # asking for sources changes nothing else
            plain = load_journal(opened, use_native=True)
            assert plain.live_sources is None and plain.live == c.live and plain.max_id == c.max_id


def _outputs(report):
    return [(o.file_id, o.records, o.used) for o in report.outputs]


def _copy(d: Path, dest: Path, use_native: bool, **overrides):
    jd = journal_of(d)
    prep = C.plan_journal(jd, C.settings_for(jd, **overrides), use_native=use_native)
    assert (prep.plan is not None) == use_native
    dest.mkdir()
    try:
        report = C.compact_copy(prep, dest)
    finally:
        prep.opened.close()
    return report, {p.name: p.read_bytes() for p in sorted(dest.iterdir())}


@pytest.mark.parametrize("overrides", [{}, {"file_size": 24 * 1024}], ids=["own-size", "small-files"])
def test_native_write_is_byte_identical_to_the_python_reference(tmp_path, overrides):
    for i, d in enumerate(_stores(tmp_path)):
        hashes = tree_hashes(d)
        try:
            rc, files_c = _copy(d, tmp_path / f"c{i}", True, **overrides)
        except AmqtoolError as err:  # a record larger than the smaller file size: both refuse alike
            with pytest.raises(AmqtoolError) as py_err:
                _copy(d, tmp_path / f"p{i}", False, **overrides)
            assert str(py_err.value) == str(err)
            continue
        rp, files_py = _copy(d, tmp_path / f"p{i}", False, **overrides)
        assert _outputs(rc) == _outputs(rp)
        assert (rc.live_bytes, rc.reasons, rc.max_id_marker) == (rp.live_bytes, rp.reasons, rp.max_id_marker)
        assert files_c == files_py, d
        assert tree_hashes(d) == hashes


def _to_version_1(d: Path) -> None:
    """Rewrite every journal file of ``d`` in format version 1 (same records, no compactCount byte)."""
    for p in sorted(d.glob("*.amq")):
        data = p.read_bytes()
        hdr = R.decode_header(data[:R.HEADER_SIZE])
        recs, _ = R.scan_records_py(data, hdr.tag, hdr.version)
        out = bytearray(len(data))
        out[0:16] = R.FileHeader(1, hdr.user_version, hdr.file_id).encode()
        pos = 16
        for r in recs:
            b = R.decode_record(data, r[1], hdr.version)
            b = R.Record(**{**{k: getattr(b, k) for k in b.__slots__}, "compact_count": 0}).encode(1)
            out[pos:pos + len(b)] = b
            pos += len(b)
        p.write_bytes(bytes(out))


def test_version_1_sources_are_rewritten_as_version_2(tmp_path):
    """A version-1 file has no compactCount byte: its records cannot be copied whole."""
    d = tmp_path / "v1"
    with JournalWriter.create(d, MESSAGES, file_size=64 * 1024) as w:
        for i in range(1, 200):
            w.add(i, 45, bytes([i % 256]) * (i * 7 % 300))
        w.add_tx(900, 500, 45, b"tx add")
        w.update_tx(900, 3, 103, b"tx update")
        w.commit(900)
        for i in range(1, 200, 3):
            w.delete(i)
        w.update(5, 34, b"dc")
        w.add_tx(901, 501, 45, b"prepared")
        w.delete_tx(901, 8)
        w.prepare(901, b"xid")
    _to_version_1(d)
    with open_journal(journal_of(d)) as opened:
        assert {f.version for f in opened.files} == {1}
        assert len(load_journal(opened).live) > 100
    expected = state(d, bump=True)
    rc, files_c = _copy(d, tmp_path / "c", True)
    rp, files_py = _copy(d, tmp_path / "p", False)
    assert files_c == files_py
    assert state(tmp_path / "c") == expected


def test_long_runs_of_neighbouring_records_and_splits(tmp_path):
    """Runs of records copied with one read cross file boundaries and the split line correctly."""
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=16 * 1024) as w:
        for i in range(1, 1200):
            w.add(i, 45, os.urandom(37 + i % 90))
        for i in range(2, 1200, 5):
            w.delete(i)
    expected = state(d, bump=True)
    rc, files_c = _copy(d, tmp_path / "c", True)
    rp, files_py = _copy(d, tmp_path / "p", False)
    assert files_c == files_py and len(rc.outputs) > 3
    assert state(tmp_path / "c") == expected
    # twice more with appends between: records at compactCount 2 followed by new ones at 0 (the split line)
    _copy(tmp_path / "c", tmp_path / "c2", True)
    with JournalWriter.open(tmp_path / "c2", MESSAGES, file_size=16 * 1024) as w:
        for i in range(5000, 5100):
            w.add(i, 45, os.urandom(60))
    again = state(tmp_path / "c2", bump=True)
    assert {e[3] for e in again[0]} == {1, 3}
    rc3, files_c3 = _copy(tmp_path / "c2", tmp_path / "c3", True)
    rp3, files_py3 = _copy(tmp_path / "c2", tmp_path / "p3", False)
    assert files_c3 == files_py3
    assert state(tmp_path / "c3") == again
    # the split: the new records start a file of their own
    with open_journal(journal_of(tmp_path / "c3")) as opened:
        r = load_journal(opened)
        first_new = next(x for x in r.live if x.id == 5000)
        assert all(x.file_index < first_new.file_index for x in r.live if x.id < 5000)


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
def test_a_source_changed_after_the_load_is_refused(tmp_path, damage):
    d = build_store(tmp_path / "j", n=800)
    jd = journal_of(d)
    prep = C.plan_journal(jd, C.settings_for(jd), use_native=True)
    # change the file holding the first live record after the load saw it
    rec = prep.load.live[0]
    path = prep.opened.files[rec.file_index].path
    if damage == "truncate":
        os.truncate(path, rec.body_offset)
    else:
        with open(path, "r+b") as fh:
            fh.seek(rec.body_offset - 13)  # inside the record's id field
            fh.write(b"\x7f" * 8)
    before = store_snapshot(d)
    try:
        with pytest.raises(AmqtoolError, match="changed or shrank while compacting"):
            C.compact_in_place(prep)
    finally:
        prep.opened.close()
    assert store_snapshot(d) == before
    assert pending_codes(d) == []
