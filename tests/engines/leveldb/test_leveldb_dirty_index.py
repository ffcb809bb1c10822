"""``dirty.index`` as amqtool reads it: the broker never loads it on start (``LevelDBClient.replay_init``
deletes it and copies the last snapshot over it), so it only serves verify as evidence of what the live broker
had written. amqtool reads it once when it is the snapshot's copy byte for byte, and apart otherwise; what it
reads must be what the broker's own LevelDB library reads from it (``dirty-index.json``, dumped by the iq80
library from the store the broker left)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amqtool.engines.leveldb.load import load, same_database
from amqtool.store.layout import detect
from tests.support import REPO, copy_tree

DUMPS = sorted((REPO / "tests").glob("**/dirty-index.json"))


@pytest.mark.skipif(not DUMPS, reason="no dirty-index.json")
@pytest.mark.parametrize("dump", DUMPS, ids=[f"{d.parent.parent.name}/{d.parent.name}" for d in DUMPS])
def test_dirty_index_reads_as_the_brokers_library_reads_it(dump):
    # killed-snappy: after the snapshot taken at the last rotation the live index went on writing inside its
    # write-ahead log, which iq80 maps at 1 MiB: the same names and sizes as the snapshot's, 91 more entries
    doc = json.loads(dump.read_text())
    want = {bytes.fromhex(r["key"]): bytes.fromhex(r["value"]) for r in doc["records"]}
    assert len(want) == doc["entries"]
    with load(detect(dump.parent / "store")) as st:
        assert st.dirty_db is not None and st.dirty_db.data == want


def test_killed_snappy_dirty_index_is_not_the_snapshot():
    case = REPO / "tests" / "data" / "leveldb" / "killed-snappy" / "store"
    with load(detect(case)) as st:
        assert st.dirty_db is not st.snapshot_db
        assert len(st.dirty_db.data) - len(st.snapshot_db.data) == 354 - 263
        # the recovered index is the snapshot's, replayed: never dirty.index's
        assert all(st.index.get(k) == v for k, v in st.snapshot_db.data.items() if k[:1] == b"c")


def _index_dir(d: Path, files: dict) -> Path:
    d.mkdir()
    for n, b in files.items():
        (d / n).write_bytes(b)
    return d


def test_same_database_compares_bytes_not_names_and_sizes(tmp_path):
    files = {"CURRENT": b"MANIFEST-000002\n", "MANIFEST-000002": b"m" * 64, "000004.log": b"a" * 100,
             "000005.sst": b"t" * 300}
    snap = _index_dir(tmp_path / "snap", files)
    live = tmp_path / "live"
    live.mkdir()
    os.link(snap / "000005.sst", live / "000005.sst")  # copyIndex hard links the tables, copies the rest
    for n in ("CURRENT", "MANIFEST-000002", "000004.log"):
        (live / n).write_bytes(files[n])
    (live / "LOCK").write_bytes(b"")
    (live / "LOG").write_bytes(b"info log of another open")  # leveldbjni's info log: no part of the data
    assert same_database(live, snap)
    # the live index wrote on inside its preallocated write-ahead log: same name, same size, other bytes
    (live / "000004.log").write_bytes(b"a" * 50 + b"b" + b"a" * 49)
    assert not same_database(live, snap)
    (live / "000004.log").write_bytes(files["000004.log"])
    (live / "000006.log").write_bytes(b"")
    assert not same_database(live, snap)


def test_killed_snappy_copied_without_hard_links(tmp_path):
    # a store copied file by file (no hard links): the tables are compared by their bytes
    root = copy_tree(REPO / "tests" / "data" / "leveldb" / "killed-snappy" / "store", tmp_path / "store")
    snap = root / "00000000000220ef.index"
    assert not same_database(root / "dirty.index", snap)
    for n in ("000004.log",):
        (root / "dirty.index" / n).write_bytes((snap / n).read_bytes())
    assert same_database(root / "dirty.index", snap)
    with load(detect(root)) as st:
        assert st.dirty_db is st.snapshot_db
