"""A newest journal file shorter than its siblings (amqtool/engines/kahadb/preallocated.py), on a store a real
5.17.2 broker wrote after ``journalMaxFileLength`` was lowered between two runs (tests/data/kahadb/f11-shrink-kill:
db-1 and db-2 of 64 KiB, then a run with 16 KiB files SIGKILLed while db-3.log was its only file)."""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.engines.kahadb.judged import verdict

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f11-shrink-kill" / "kahadb"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    return root


def test_the_pristine_store_is_a_killed_broker_s(tmp_path):
    root = _copy(tmp_path)
    assert [(p.name, p.stat().st_size) for p in sorted(root.glob("db-*.log"))] == [
        ("db-1.log", 65536), ("db-2.log", 65536), ("db-3.log", 16384)]
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index"})


def test_a_torn_write_in_a_newest_file_preallocated_shorter_is_a_warning(tmp_path):
    # campaign seed 7201 (f11-shrink-kill, 72012000085): db-3.log@9415 ^0x10, inside its last batch (9382,
    # after lastUpdate 2:53395), what a crash mid-write leaves. db-3 is 16384 bytes against 65536 for the
    # others, and was read as a 64 KiB file cut short: CRITICAL kahadb-truncated-file. It still ends with the
    # end marker Journal.doPreallocationSparseFile writes into a file's last five bytes: it was not cut
    root = _copy(tmp_path)
    assert (root / "db-3.log").read_bytes()[-5:] == b"-qMa4"
    p = root / "db-3.log"
    data = bytearray(p.read_bytes())
    data[9415] ^= 0x10
    p.write_bytes(bytes(data))
    assert verdict(root) == ("WARNING", {"kahadb-journal-ahead-of-index", "kahadb-truncated-tail"})


def test_the_newest_file_cut_is_still_critical(tmp_path):
    # cut inside its last batch: no crash leaves a preallocated file short of its end marker
    root = _copy(tmp_path)
    p = root / "db-3.log"
    p.write_bytes(p.read_bytes()[:9382 + 500])
    said, codes = verdict(root)
    assert said == "CRITICAL" and "kahadb-truncated-file" in codes


def test_a_one_file_mkahadb_child_shorter_than_its_siblings_unmarked_was_cut(tmp_path):
    # kl48, campaign seed 8668 on the hold-out store h3-mkahadb-restarts-kill (86682000290: fx.h3.q4's only file
    # db-1.log cut at 17211, after its checkpoint; loss judged WARNING, a torn tail): a child store of one file
    # has no sibling file in its directory to show the length the journal preallocates to. The other child
    # stores of the mKahaDB do: every file of theirs ends with the sparse preallocation's end marker. A one-file
    # child shorter than all of them without it was cut (tests/data/kahadb/f8-mkahadb-kill's files here)
    from types import SimpleNamespace

    from amqtool.engines.kahadb.preallocated import preallocated_length

    f8 = STORE.parents[1] / "f8-mkahadb-kill" / "mkahadb"
    sibling = f8 / "queue#3a#2f#2ffx.f8.grp.#3e"
    siblings = (SimpleNamespace(files=[SimpleNamespace(size=p.stat().st_size, path=p)
                                       for p in sorted(sibling.glob("db-*.log"))]),)
    own = sorted((f8 / "queue#3a#2f#2ffx.f8.own").glob("db-*.log"))[-1]
    cut = tmp_path / "db-1.log"
    cut.write_bytes(own.read_bytes()[:9000])
    whole = tmp_path / "db-2.log"
    whole.write_bytes(own.read_bytes())
    one = lambda p: SimpleNamespace(files=[SimpleNamespace(size=p.stat().st_size, path=p)])  # noqa: E731
    assert preallocated_length(one(cut), siblings) == 16384
    assert preallocated_length(one(whole), siblings) is None  # full length, marked: not cut
    assert preallocated_length(one(cut)) is None  # (no sibling: nothing to tell)
