"""Journals written by the real Artemis JournalImpl under a seeded broker-like workload
(tests/data/artemis/tools/Writer.java, README there), which amqtool's demo writer never produces: a clean
stop of a journal never compacted whose reclaimer freed files in the middle and deleted them (a pool of 2:
journal-pool-files bounds it), so fileIDs are missing between data files with nothing lost.

Each store keeps ``oracle-load.jsonl``: what the real JournalImpl loads from it (the artemis-oracle harness:
one line a live record, then the load's summary)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amqtool.formats.artemis.records import scan_records_py
from tests.support import MESSAGES, REPO, loaded_like_oracle, oracle_load

RECLAIMED = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"
# the writer routed to the queues of this real broker's bindings journal (ids 4, 9, 11, 16)
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"

BROKER_XML = """\
<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <journal-directory>data/journal</journal-directory>
  <bindings-directory>data/bindings</bindings-directory>
  <journal-file-size>16384</journal-file-size>
  {pool}
</core></configuration>
"""


def test_the_reclaimed_journal_loads_like_journalimpl():
    records, info = oracle_load(RECLAIMED / "oracle-load.jsonl")
    result, mine = loaded_like_oracle(RECLAIMED / "journal")
    assert mine == records
    assert (result.max_id, len(result.prepared), len(result.failed)) == \
        (info["maxID"], info["prepared"], info["failedTx"])
    assert [f"{f.name}#{f.file_id}" for f in result.data_files] == info["dataFileNames"]
    # what makes the store worth keeping: ids missing between data files, no compaction, nothing lost
    ids = [f.file_id for f in result.data_files]
    assert max(ids) - min(ids) + 1 > len(ids) and not any(r.compact_count for r in result.live)


def _instance(tmp_path: Path, pool: str) -> Path:
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    inst = tmp_path / "broker"
    shutil.copytree(RECLAIMED / "journal", inst / "data" / "journal")
    shutil.copytree(BINDINGS, inst / "data" / "bindings")
    (inst / "etc").mkdir()
    (inst / "etc" / "broker.xml").write_text(BROKER_XML.format(pool=pool))
    return inst


def _last_record_end(tmp_path: Path):
    """A copy of the journal, its file 10 (not the newest), that file's bytes and where its last record ends."""
    journal = shutil.copytree(RECLAIMED / "journal", tmp_path / "journal")
    victim = journal / "activemq-data-10.amq"
    data = bytearray(victim.read_bytes())
    tag = int.from_bytes(data[8:16], "big") & 0x7FFFFFFF
    records, _ = scan_records_py(bytes(data), tag, 2)
    return journal, victim, data, records[-1][1] + records[-1][2]


def _codes(doc, severity=None):
    return {f["code"] for f in doc["findings"] if severity is None or f["severity"] == severity}


def test_gaps_of_a_never_compacted_journal_without_broker_xml_are_no_lost_file(run_json):
    # main called this healthy, cleanly stopped store CRITICAL missing-journal-file ("its records are lost"),
    # then a WARNING, which a nightly cron on a healthy broker raises forever: nothing left refers to what the
    # missing ids held, and a bounded pool (journal-pool-files 10 under `artemis create`) deletes freed files
    code, doc, _ = run_json("verify", str(RECLAIMED / "journal"))
    assert "missing-journal-file" not in _codes(doc)
    (gap,) = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert (code, doc["verdict"], gap["severity"]) == (0, "OK", "info")
    assert gap["details"]["liveUpdatesWithoutAdd"] == 0 and gap["details"]["missingFileIds"] == [17, 18, 19, 20, 21]


def test_a_bounded_pool_in_broker_xml_explains_the_gaps(run_json, tmp_path):
    code, doc, _ = run_json("verify", str(_instance(tmp_path, "<journal-pool-files>2</journal-pool-files>")))
    (gap,) = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert (code, doc["verdict"], gap["severity"]) == (0, "OK", "info")
    assert "journal-pool-files 2" in gap["message"]


def test_an_unbounded_pool_cannot_have_deleted_them(run_json, tmp_path):
    # Artemis' default pool (-1) keeps every freed file: in a journal never compacted a gap is a removal
    code, doc, _ = run_json("verify", str(_instance(tmp_path, "")))
    (gap,) = [f for f in doc["findings"] if f["code"] == "missing-journal-file"]
    assert (code, gap["severity"]) == (2, "critical")


def test_the_tail_of_an_earlier_use_s_record_after_the_data_is_stale(run_json, tmp_path):
    # A reused file keeps its earlier use's bytes behind the new records (reinitializeFile rewrites the header
    # only), and the new records can end inside an old one: what is left starts with no record type and ends
    # with the old record's size, which counts back under the last new record (a real JournalImpl store
    # compacted by Artemis has one: 29 bytes of a 39-byte UPDATE_TX). main called it a damaged tail (WARNING).
    journal, victim, data, end = _last_record_end(tmp_path)
    assert not any(data[end:end + 64])
    # an UPDATE_TX of 39 bytes that began 10 bytes before the end of the last record
    old = bytes([14]) + (999).to_bytes(4, "big") + b"\x01" + (2147486280).to_bytes(8, "big") + (8).to_bytes(8, "big") \
        + (8).to_bytes(4, "big") + bytes([32]) + (4).to_bytes(8, "big") + (39).to_bytes(4, "big")
    assert len(old) == 39 and old[10] not in range(10, 20)
    data[end:end + 29] = old[10:]
    victim.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(journal))
    (stale,) = [f for f in doc["findings"] if f["code"] == "stale-records" and f["path"].endswith(victim.name)]
    assert stale["offset"] == end and "damaged-tail" not in _codes(doc)
    assert code == 0 and not _codes(doc, "warning")  # the gaps are the pool's, as above


@pytest.mark.parametrize("size", [39, 20])
def test_a_damaged_last_record_is_not_taken_for_a_stale_one(run_json, tmp_path, size):
    # the trailing size of a damaged record of this use counts back to its own start at the earliest
    journal, victim, data, end = _last_record_end(tmp_path)
    data[end:end + size] = b"\xee" * (size - 4) + size.to_bytes(4, "big")
    victim.write_bytes(bytes(data))
    code, doc, _ = run_json("verify", str(journal))
    assert not [f for f in doc["findings"] if f["code"] == "stale-records" and f["path"].endswith(victim.name)]


def test_one_update_whose_id_flipped_does_not_make_the_gaps_a_lost_file(run_json, tmp_path):
    # The campaign over real JournalImpl stores (fuzz_verdicts --stores): a flipped bit in the id of one
    # reference update made it "a live update without its add", and the reclaimer's gaps became CRITICAL
    # missing-journal-file. One such id, one bit from a live message's, is that record's damaged id; a lost
    # file leaves the updates of every add it held.
    journal = shutil.copytree(RECLAIMED / "journal", tmp_path / "journal")
    records, _ = oracle_load(RECLAIMED / "oracle-load.jsonl")
    live = {r["id"] for r in records}
    adds = {r["id"] for r in records if not r["isUpdate"]}
    for path in sorted(journal.glob("*.amq")):
        data = bytearray(path.read_bytes())
        tag = int.from_bytes(data[8:16], "big") & 0x7FFFFFFF
        recs, _ = scan_records_py(bytes(data), tag, 2)
        hit = [r for r in recs if r[0] == 12 and r[5] in adds and r[5] ^ 1 << 3 not in live]
        if hit:
            data[hit[0][1] + 6 + 7] ^= 1 << 3  # the low byte of its id (after type, tag, compactCount)
            path.write_bytes(bytes(data))
            break
    else:
        pytest.fail("no live reference update in the kept store")
    code, doc, _ = run_json("verify", str(journal))
    (gap,) = [f for f in doc["findings"] if f["code"] == "file-id-gap"]
    assert (gap["severity"], gap["details"]["liveUpdatesWithoutAdd"]) == ("info", 0)
