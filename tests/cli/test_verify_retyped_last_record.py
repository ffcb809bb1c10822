"""The last record of a journal file that is not the newest, its type byte damaged (real-JournalImpl store
c256k-s4, seed 8888027664003058: loss/OK). ``JournalImpl.readJournalFile`` skips a byte that is no record
type, and with it the record: the message it added is lost (here, a reference: lost to its queue). verify took the bytes after the file's last
valid record for an earlier use's (stale records follow), while they carry this use's tag: a record written
in this use, damaged (:func:`amqtool.engines.artemis.stale_tail.own_record_start`)."""
from __future__ import annotations

import shutil

import pytest

from amqtool.formats.artemis.records import scan_records_py
from tests.faults.artemis import delivered
from tests.faults.stores import campaign_demo, messages_files


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = campaign_demo(tmp_path_factory.mktemp("pristine") / "store")
    return root, delivered(root)


def test_a_retyped_last_record_of_an_older_file_is_a_loss(run_json, pristine, tmp_path):
    store = shutil.copytree(pristine[0], tmp_path / "store")
    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]
    data = [(p, rs) for p, rs in files if rs][:-1]  # not the newest
    # the last record of a file: an add or update of a message still delivered (its reference, here)
    live = pristine[1]
    delivered_ids = {key[1] for key in live.rows}
    path, last = next((p, rs[-1]) for p, rs in data if rs[-1][0] in (11, 12) and rs[-1][5] in delivered_ids)
    # a reused file: records of its earlier use (another, older tag) lie after this use's data
    older_path, older = data[0][0], data[0][1][1]
    stale = older_path.read_bytes()[older[1]:older[1] + older[2]]
    with open(path, "r+b") as f:
        f.seek(last[1] + last[2] + 512)
        f.write(stale)
    code, doc, _ = run_json("verify", store)
    assert code == 0 and [f["code"] for f in doc["findings"] if f["path"] == str(path)] == ["stale-records"]
    with open(path, "r+b") as f:
        f.seek(last[1])
        f.write(bytes([last[0] ^ 0x20]))
    diff = live.diff(delivered(store))
    assert diff["lost"] + diff["back"] > 0  # the truth: the broker skips the record
    code, doc, _ = run_json("verify", store)
    assert code == 2, [(f["code"], f["severity"], f["message"]) for f in doc["findings"] if f["severity"] != "info"]
    assert any(f["code"] == "damaged-tail" and f["severity"] == "critical" and f["offset"] == last[1]
               and f["path"] == str(path) for f in doc["findings"]), doc["findings"]
