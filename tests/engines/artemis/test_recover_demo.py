"""``amqtool recover`` on damaged copies of ``amqtool create --demo 16MiB`` (issue 25 cases 10 and 11).

* Nonzero bytes in the zero fill after a file's last record that do not read as a record are no record the
  broker had: the broker loads the same records as before, so recover loses nothing (exit 0) and judges the
  bytes as verify judges a tail (torn-tail in the newest file, damaged-tail in another).
* A damaged message record is named in the lost list (its message id, and its queues from the ADD_REF
  records of the same id that survive) whenever anything identifies it, also when its type byte reads as
  filler and only a reconstruction (evidence.reconstruct) can tell the record.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool import native
from amqtool.commands.main import main
from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.engines.artemis.recover_helpers import flip
from tests.support import copy_tree, tree_hashes

ADD_MESSAGE, ADD_REF = 45, 32


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """``amqtool create --demo 16MiB`` (the command's defaults)."""
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("recover-demo") / "s"
    create_demo(root, 16 * 1024 * 1024)
    return root


def _run(capsys, *args) -> tuple[int, dict]:
    code = main([*map(str, args), "--format", "json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


def _files(store: Path) -> list[tuple[Path, list]]:
    """(file, records the broker's scan accepts) of the messages journal, in load order."""
    out = []
    with open_journal(detect(store).messages) as opened:
        for i, jf in enumerate(opened.files):
            recs, _ = native.scan_records(opened.read_file(i), jf.tag, jf.version, True, 16)
            out.append((jf.path, recs))
    return out


def _live(store: Path) -> dict[str, list[tuple]]:
    """(id, user record type, is update, body) of every live record of each journal, in load order."""
    out = {}
    for jd in detect(store).journals():
        with open_journal(jd) as opened:
            res = load_journal(opened)
            out[jd.kind] = [(r.id, r.user_record_type, bool(r.is_update), res.body(r)) for r in res.live]
    return out


def _queue_names(store: Path) -> dict[int, str]:
    from amqtool.engines.artemis.broker_state import build_broker_state

    st = detect(store)
    with open_journal(st.bindings) as b, open_journal(st.messages) as m:
        state = build_broker_state(load_journal(b), load_journal(m))
        return {q: state.queues[q].name for q in state.queues}


def _refs(store: Path, mid: int) -> list[int]:
    """The queue ids of the live ADD_REF records of message ``mid``."""
    with open_journal(detect(store).messages) as opened:
        res = load_journal(opened)
        return sorted(int.from_bytes(res.body(r)[:8], "big", signed=True) for r in res.live
                      if r.id == mid and r.user_record_type == ADD_REF)


@pytest.mark.parametrize("newest", [False, True], ids=["older-file", "newest-file"])
@pytest.mark.parametrize("gap", [0, 777], ids=["at-the-last-record", "further-in-the-fill"])
def test_flipped_bytes_in_the_fill_after_the_last_record_lose_nothing(demo, tmp_path, capsys, newest, gap):
    src = copy_tree(demo, tmp_path / "src")
    with_records = [(p, recs) for p, recs in _files(src) if recs]
    path, recs = with_records[-1] if newest else with_records[0]
    end = max(r[1] + r[2] for r in recs)
    assert path.read_bytes()[end:end + gap + 16] == bytes(gap + 16)  # the fill: zeros
    for i in range(16):
        flip(path, end + gap + i)
    before = _live(src)
    hashes = tree_hashes(src)

    code, v = _run(capsys, "verify", src)
    tails = [(f["severity"], f["code"], f["path"], f["offset"]) for f in v["findings"]
             if f["code"] in ("torn-tail", "damaged-tail")]
    # flipped fill bytes are no crash's (a crash leaves zeros or what was written: torn_write.py), in the newest
    # file too: a damaged tail, which loses nothing
    assert tails == [("warning", "damaged-tail", str(path), end + gap)]

    code, doc = _run(capsys, "recover", src, "-o", tmp_path / "dest")
    assert (code, doc["verdict"]) == (0, "OK"), doc["lost"]
    assert doc["lost"] == []
    assert (doc["counts"]["recordsLost"], doc["counts"]["bytesSkipped"]) == (0, 0)
    assert [(f["severity"], f["code"], f["path"], f["offset"]) for f in doc["findings"]
            if f["code"] in ("torn-tail", "damaged-tail")] == tails
    assert _live(tmp_path / "dest") == before
    assert tree_hashes(src) == hashes


def _message_record(store: Path, with_refs: int = 1) -> tuple[Path, tuple, list]:
    """A live ADD_MESSAGE record in the middle of a file (followed by records), whose id has ``with_refs``
    or more live ADD_REF records; (file, record, all records of the file)."""
    files = _files(store)
    for path, recs in files:
        for i, r in enumerate(recs[:-1]):
            if r[0] == 11 and r[6] == ADD_MESSAGE and len(_refs(store, r[5])) >= with_refs:
                return path, r, recs
    raise AssertionError("no live message record")


@pytest.mark.parametrize("damage", ["type-reads-as-zero-filler", "type-reads-as-J-filler", "checksize"])
def test_lost_message_record_is_named_with_its_queues(demo, tmp_path, capsys, damage):
    src = copy_tree(demo, tmp_path / "src")
    path, rec, _recs = _message_record(src)
    off, size, mid = rec[1], rec[2], rec[5]
    queues = _refs(src, mid)
    if damage == "type-reads-as-zero-filler":
        flip(path, off, 0x0B)  # ADD (11) -> 0: the broker's scan, and recover's, take it for filler
    elif damage == "type-reads-as-J-filler":
        flip(path, off, 0x41)  # ADD (11) -> 'J' (0x4A), HornetQ's filler
    else:
        flip(path, off + size - 2)
    names = _queue_names(src)

    code, doc = _run(capsys, "recover", src, "--dry-run")
    assert code == 2  # verify calls the lost message record CRITICAL (issue 25)
    lost = [x for x in doc["lost"] if x["kind"] == "record"]
    assert len(lost) == 1, lost
    x = lost[0]
    assert (x["decoded"], x["recordType"], x["recordId"], x["userRecordType"], x["messageId"]) == (
        True, "ADD", mid, ADD_MESSAGE, mid)
    assert (x["offset"], x["length"], x["where"]) == (off, size, "middle")
    assert x["queueIds"] == queues and x["queues"] == [names[q] for q in queues]
    assert x["damagedField"] == ("checksize" if damage == "checksize" else "type")
    assert (doc["counts"]["damagedRecordsDecoded"], doc["counts"]["bytesSkipped"]) == (1, size)

    code, text = main(["recover", str(src), "--dry-run", "--quiet"]), capsys.readouterr().out
    assert f"message={mid} queues={','.join(names[q] for q in queues)}" in text


def test_last_record_whose_type_reads_as_filler_is_still_lost_and_named(demo, tmp_path, capsys):
    # A complete record at a file's end with its type byte damaged to 0 is no torn tail: the broker had it.
    src = copy_tree(demo, tmp_path / "src")
    path, recs = [(p, recs) for p, recs in _files(src) if recs][0]
    last = max(recs, key=lambda r: r[1])
    flip(path, last[1], last[0])  # the type byte -> 0
    code, doc = _run(capsys, "recover", src, "--dry-run")
    assert code == 1
    lost = [x for x in doc["lost"] if x["kind"] == "record"]
    assert [(x["offset"], x["length"], x["where"], x["decoded"], x["recordId"], x["userRecordType"],
             x["damagedField"]) for x in lost] == [(last[1], last[2], "tail", True, last[5], last[6], "type")]
    assert not [f for f in doc["findings"] if f["code"] in ("torn-tail", "damaged-tail")]
