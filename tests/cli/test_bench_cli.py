"""`amqtool bench` and `amqtool bench sync-methods` from the command line: JSON, exit codes, cleanup on
SIGINT/SIGTERM, and a clear exit 3 without the C extension. No timing is asserted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amqtool import native
from amqtool.commands.main import main

REPO = Path(__file__).resolve().parents[2]
AMQTOOL = [str(Path(sys.executable).parent / "amqtool")]  # the installed entry point
needs_c = pytest.mark.skipif(not native.HAVE_NATIVE, reason="C extension not built")


def _run(args, **env):
    return subprocess.run(AMQTOOL + args, capture_output=True, text=True, env=dict(os.environ, **env), timeout=120)


def _leftovers(d: Path):
    return [p.name for p in d.iterdir() if p.name.startswith("amqtool-")]


@needs_c
def test_bench_json(tmp_path, capsys):
    rc = main(["bench", str(tmp_path), "--writes", "20", "--file-size", "128KiB", "--producers", "4", "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == {"OK": 0, "WARNING": 1}[doc["verdict"]]
    assert len(doc["results"]) == 8
    assert {r["journalType"] for r in doc["results"]} == {"NIO", "ASYNCIO", "MAPPED", "IO_URING"}
    for r in doc["results"]:
        if r["available"]:
            assert r["ops"] == 20 and set(r["latency"]) >= {"p50Us", "p90Us", "p99Us", "p999Us", "maxUs"}
        else:
            assert r["reason"]
    assert set(doc["recommendation"]) >= {"journalType", "journalBufferTimeout", "journalMaxIo",
                                          "pageSyncTimeout", "brokerXml"}
    assert _leftovers(tmp_path) == []


@needs_c
def test_bench_text_table_and_recommendation(tmp_path, capsys):
    rc = main(["bench", str(tmp_path), "--writes", "10", "--file-size", "64KiB", "--method", "nio",
               "--method", "mapped", "--pattern", "one"])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "NIO" in out and "MAPPED" in out and "ASYNCIO" not in out.split("Recommended")[0]
    assert "<journal-buffer-timeout>" in out and "<page-sync-timeout>" in out


@needs_c
def test_bench_explicit_unavailable_method_exits_3(tmp_path):
    r = _run(["bench", str(tmp_path), "--method", "io_uring", "--writes", "3", "--file-size", "64KiB", "--pattern", "one", "-f", "json"],
             AMQTOOL_NO_IO_URING="1")
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "UNKNOWN"
    assert doc["results"][0]["available"] is False and "AMQTOOL_NO_IO_URING" in doc["results"][0]["reason"]
    # not asked for: n/a with the reason, and the run goes on
    r = _run(["bench", str(tmp_path), "--writes", "3", "--file-size", "64KiB", "--pattern", "one", "--wide"],
             AMQTOOL_NO_IO_URING="1")
    assert r.returncode in (0, 1), r.stderr
    assert "n/a: IO_URING 1 producer: io_uring unavailable: disabled by AMQTOOL_NO_IO_URING=1" in r.stdout


def test_missing_extension_exit_3(tmp_path):
    for args in (["bench", str(tmp_path)], ["bench", "sync-methods", str(tmp_path)],
                 ["bench", str(tmp_path), "--compat", "perf-journal"]):
        r = _run(args + ["-f", "json"], AMQTOOL_NO_NATIVE="1")
        assert r.returncode == 3
        assert "needs the C extension amqtool._native" in r.stderr
        # the error line, after the one note that the extension is off
        assert r.stderr.count("running without the C extension (disabled by AMQTOOL_NO_NATIVE=1)") == 1
        assert len(r.stderr.strip().splitlines()) == 2
        assert json.loads(r.stdout)["verdict"] == "UNKNOWN"
    assert _leftovers(tmp_path) == []


@needs_c
def test_sync_methods_json(tmp_path, capsys):
    rc = main(["bench", "sync-methods", str(tmp_path), "--writes", "2", "--seconds", "0.05", "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["verdict"] == "OK"
    assert len(doc["results"]) == 16 and doc["blockSize"] == 8192


@needs_c
def test_sync_methods_text(tmp_path, capsys):
    rc = main(["bench", "sync-methods", str(tmp_path), "--writes", "2", "--seconds", "0.05"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Compare file sync methods using one 8kB write:" in out
    assert "Compare file sync methods using two 8kB writes:" in out
    assert sum(" ops/sec " in line for line in out.splitlines()) == 16


@needs_c
def test_compat_perf_journal_text(tmp_path, capsys):
    rc = main(["bench", str(tmp_path), "--compat", "perf-journal", "--journal-type", "NIO", "--writes", "10",
               "--tries", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert lines[:3] == ["", "Auto tuning journal ...",
                         "Performing 2 tests writing 10 blocks of 4096 on each test, sync=true with journalType = NIO"]
    assert lines[6] == "" and lines[7].startswith("<journal-buffer-timeout>")


def test_usage_errors_exit_3(tmp_path, capsys):
    assert main(["bench", str(tmp_path), "--method", "bogus"]) == 3
    assert main(["bench", str(tmp_path), "--sync-writes"]) == 3
    assert main(["bench", str(tmp_path / "missing"), "--writes", "1"]) == 3


@needs_c
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_signal_removes_the_temp_file(tmp_path, sig, code):
    proc = subprocess.Popen(AMQTOOL + ["bench", str(tmp_path), "--method", "nio", "--pattern", "one",
                                       "--seconds", "60", "--file-size", "1MiB", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 30
        while not _leftovers(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _leftovers(tmp_path), "the benchmark file never appeared"
        time.sleep(0.3)  # inside the timed loop
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "interrupted" in err
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("args", [["--seconds", "0"], ["--seconds", "-1"], ["--writes", "0"],
                                  ["sync-methods", "-s", "0"], ["sync-methods", "--writes", "0"],
                                  ["--compat", "perf-journal", "--tries", "0"], ["--producers", "0"]],
                         ids=lambda a: " ".join(a))
def test_zero_or_negative_bounds_are_usage_errors(run_cli, tmp_path, args):
    # Issue 13 item 11: `bench --seconds 0` never ended; `--writes 0` printed rows of "-" with exit 0.
    if args[0] == "sync-methods":
        argv = ["bench", "sync-methods", str(tmp_path), *args[1:]]
    else:
        argv = ["bench", str(tmp_path), *args]
    code, out, err = run_cli(*argv)
    assert code == 3 and "must be " in err
    assert list(tmp_path.iterdir()) == []  # refused before any file is made


def _default_sigint() -> None:
    """SIGINT as a terminal delivers it: a runner started in the background (``cmd &``) hands its children
    SIGINT ignored, and Python then installs no KeyboardInterrupt at all."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
