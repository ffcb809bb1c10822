"""amqtool.engines.bench: statistics, perf-journal arithmetic, the temporary file, n/a paths, findings.
Small files and a handful of writes; no timing is asserted."""
from __future__ import annotations

import array
from pathlib import Path

import pytest

from amqtool import native
from amqtool.engines import bench
from amqtool.errors import CapabilityError, Severity, UsageError, Verdict

needs_c = pytest.mark.skipif(not native.HAVE_NATIVE, reason="C extension not built")


def _leftovers(d: Path):
    return [p.name for p in d.iterdir() if p.name.startswith("amqtool-")]


def test_latency_stats_nearest_rank():
    s = bench.latency_stats(array.array("Q", [i * 1000 for i in range(1, 1001)]))  # 1..1000 µs
    assert s["count"] == 1000
    assert (s["p50Us"], s["p90Us"], s["p99Us"], s["p999Us"], s["maxUs"]) == (500, 900, 990, 999, 1000)
    assert s["minUs"] == 1 and s["meanUs"] == 500.5
    assert sum(b["count"] for b in s["histogram"]) == 1000
    assert s["histogram"][0] == {"leUs": 10, "count": 10}
    assert bench.latency_stats([]) == {"count": 0}


@pytest.mark.parametrize("time_ms,text,timeout", [
    # real `artemis create` outputs quoted in peers.md §1.4: 250 writes in t whole milliseconds
    (31, "8.06", 124000), (4, "62.5", 16000), (5, "50", 20000), (18, "13.89", 72000), (17, "14.71", 68000),
    (121, "2.07", 484000), (136, "1.84", 544000), (379, "0.66", 1516000), (9, "27.78", 36000), (1, "250", 4000),
])
def test_perf_journal_arithmetic(time_ms, text, timeout):
    wpm = 250 / time_ms
    assert bench.java_decimal_format(wpm) == text
    assert int(1_000_000 / wpm) == timeout
    assert bench.buffer_timeout_ns(250, time_ms * 1e6) == timeout


def test_check_room_refuses(tmp_path):
    with pytest.raises(CapabilityError, match="not enough free space"):
        bench.check_room(tmp_path, 1 << 62)


def test_bench_file_prefilled_and_removed_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with bench.bench_file(tmp_path, 100_000) as t:
            assert t.path.read_bytes() == bytes(100_000)  # zeros, like JournalFilesRepository
            assert t.odirect and t.align >= 512
            raise RuntimeError("boom")
    assert _leftovers(tmp_path) == []
    with pytest.raises(UsageError):
        with bench.bench_file(tmp_path / "nope", 10):
            pass


@needs_c
def test_run_bench_small(tmp_path):
    r = bench.run_bench(tmp_path, file_size=256 * 1024, writes=40, producers=4)
    assert [(x.method, x.pattern) for x in r.results] == [(m, p) for m in bench.METHODS for p in ("one", "many")]
    for x in r.results:
        if x.available:
            assert x.ops == 40 and x.latency["count"] == (40 if x.pattern == "one" or x.method in ("asyncio", "io_uring") else 10)
            assert x.ops_per_sec > 0 and x.mb_per_sec > 0
            if x.method in ("nio", "mapped"):  # the sync call alone, one per op, never above the op
                assert x.sync_latency["count"] == x.latency["count"]
                assert 0 < x.sync_latency["p50Us"] <= x.latency["maxUs"]
                assert x.to_json()["syncLatency"]["count"] == x.latency["count"]
            else:
                assert x.sync_latency == {} and x.to_json()["syncLatency"] is None
    rec = r.recommendation
    assert rec["journalType"] in ("NIO", "ASYNCIO", "MAPPED")
    assert rec["journalBufferTimeout"] > 0 and rec["pageSyncTimeout"] > 0
    assert rec["brokerXml"][0] == f"<journal-type>{rec['journalType']}</journal-type>"
    doc = r.to_json()
    assert doc["verdict"] in ("OK", "WARNING") and len(doc["results"]) == 8
    assert _leftovers(tmp_path) == []


@needs_c
def test_io_uring_unavailable_is_na_or_unknown_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "HAVE_IO_URING", False)
    monkeypatch.setattr(native, "IO_URING_REASON", "io_uring_setup failed: Operation not permitted")
    r = bench.run_bench(tmp_path, file_size=64 * 1024, writes=5, patterns=["one"])
    row = [x for x in r.results if x.method == "io_uring"][0]
    assert not row.available and "Operation not permitted" in row.reason
    assert r.verdict != Verdict.UNKNOWN
    r = bench.run_bench(tmp_path, methods=["io_uring"], file_size=64 * 1024, writes=5, patterns=["one"])
    assert r.verdict == Verdict.UNKNOWN
    assert [f.code for f in r.findings if f.severity == Severity.UNKNOWN] == ["method-unavailable"]


@needs_c
def test_o_direct_na_on_ramfs(ramfs):
    r = bench.run_bench(ramfs, file_size=64 * 1024, writes=5, patterns=["one"])
    by = {x.method: x for x in r.results}
    assert by["nio"].available and by["mapped"].available
    for m in ("asyncio", "io_uring"):
        assert not by[m].available and "O_DIRECT" in by[m].reason and "ramfs" in by[m].reason
    assert "memory-filesystem" in [f.code for f in r.findings]
    assert r.recommendation["journalType"] in ("NIO", "MAPPED")
    sm = bench.run_sync_methods(ramfs, seconds=None, writes=2)
    assert [x["available"] for x in sm["results"]] == [not x["oDirect"] for x in sm["results"]]
    assert _leftovers(ramfs) == []


def test_implausible_fsync_on_rotational_device(tmp_path):
    t = bench.Target(tmp_path, tmp_path / "f", 4096, "ext4", {"name": "sda", "rotational": True}, True, "")
    fast = bench.Result("nio", "one", 1, 4096, "fdatasync", ops=5000, elapsed_ns=1_000_000_000)
    slow = bench.Result("nio", "one", 1, 4096, "fdatasync", ops=150, elapsed_ns=1_000_000_000)
    codes = [f.code for f in bench._judge(t, [fast], False, True)]
    assert "fsync-implausible" in codes
    assert "fsync-implausible" not in [f.code for f in bench._judge(t, [slow], False, True)]
    t.device["rotational"] = False
    assert "fsync-implausible" not in [f.code for f in bench._judge(t, [fast], False, True)]


@needs_c
def test_perf_journal_lines(tmp_path):
    doc = bench.run_perf_journal(tmp_path, journal_type="NIO", writes=10, tries=2)
    lines = doc["lines"]
    assert lines[0] == "" and lines[1] == "Auto tuning journal ..."
    assert lines[2] == "Performing 2 tests writing 10 blocks of 4096 on each test, sync=true with journalType = NIO"
    assert lines[3].startswith("Your system can execute ") and lines[3].endswith(" writes per millisecond")
    assert lines[4] == f"Your journal-buffer-timeout should be:{doc['journalBufferTimeout']}"
    assert lines[7] == f"<journal-buffer-timeout>{doc['journalBufferTimeout']}</journal-buffer-timeout>"
    assert len(doc["triesNs"]) == 2 and doc["bestMs"] == min(doc["triesNs"]) // 1_000_000
    assert _leftovers(tmp_path) == []
    for jt in ("MAPPED", "ASYNCIO"):
        if jt == "ASYNCIO" and not native.HAVE_AIO:
            continue
        assert f"journalType = {jt}" in bench.run_perf_journal(tmp_path, journal_type=jt, writes=5, tries=1)["lines"][2]


@needs_c
def test_sync_methods_rows(tmp_path):
    doc = bench.run_sync_methods(tmp_path, seconds=None, writes=3)
    rows = doc["results"]
    assert len(rows) == 16
    assert {(r["writesPerOp"], r["method"], r["oDirect"]) for r in rows} == {
        (n, m, d) for n in (1, 2) for m in ("open_datasync", "fdatasync", "fsync", "open_sync") for d in (True, False)}
    assert all(r["ops"] == 3 for r in rows if r["available"])
    assert bench.pg_line("fdatasync", 1234.5678, 810.2) == "        fdatasync                          1234.568 ops/sec     810 usecs/op"


@pytest.mark.parametrize("have_native", [True, False])
def test_fsync_probe(tmp_path, monkeypatch, have_native):
    if have_native and not native.HAVE_NATIVE:
        pytest.skip("C extension not built")
    monkeypatch.setattr(native, "HAVE_NATIVE", have_native)
    res = bench.fsync_probe(str(tmp_path), 0.05)
    assert res["native"] is have_native
    assert res["count"] > 0 and res["opsPerSec"] > 0
    assert res["p50Us"] <= res["p99Us"] <= res["maxUs"]
    assert _leftovers(tmp_path) == []


def test_bench_needs_the_extension(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "_native", None)
    with pytest.raises(CapabilityError, match="C extension"):
        bench.run_bench(tmp_path, writes=1)
