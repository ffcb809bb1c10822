"""``amqtool export``: exit codes, the JSON report, refusals, and that the source is never written."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engines.export_store import EXPECTED, build_store, read_jsonl_table
from tests.support import tree_hashes

REPO = Path(__file__).resolve().parents[2]
AMQTOOL = [sys.executable, "-m", "amqtool.commands.main"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("broker"))


def test_jsonl_report_and_warning_exit(run_cli, store, tmp_path):
    before = tree_hashes(store)
    out = tmp_path / "o"
    # --salvage: verify calls the built store CRITICAL on purpose (a reference to a queue with no binding, a
    # legacy record), and the export's verdict is verify's (issue 25)
    code, stdout, stderr = run_cli("export", store, "-o", out, "--format", "jsonl", "--engine", "local",
                                   "--report", "json", "--quiet", "--salvage")
    doc = json.loads(stdout)
    assert code == 2 and doc["verdict"] == "CRITICAL"  # verify's; and one live legacy record does not decode
    assert doc["rows"] == len(EXPECTED) and doc["problemCount"] == 1 and doc["problems"][0]["messageId"] == 111
    assert doc["engine"] == "local" and doc["format"] == "jsonl" and doc["bindings"] == 5
    assert len(read_jsonl_table(out / "messages")) == len(EXPECTED)
    assert json.loads((out / "export.json").read_text())["rows"] == len(EXPECTED)
    assert tree_hashes(store) == before
    assert stderr == ""


def test_queue_filter_ok_exit_and_text(run_cli, store, tmp_path):
    code, stdout, _ = run_cli("export", store, "-o", tmp_path / "o", "-f", "parquet", "--engine", "local",
                              "--queue", "events.*", "-q", "--salvage")
    assert code == 2  # verify's verdict on the (CRITICAL on purpose) built store
    # the report line is folded to the width (80 here): read it with its blanks joined again
    assert " ".join(stdout.split()).startswith("exported 82 rows (42 messages on 2 queues, 5 bindings) to ")


@pytest.mark.parametrize("args", [
    ["--format", "xml", "--safe"],
    ["--format", "csv"],
    ["--engine", "local", "--master", "spark://127.0.0.1:1"],
    ["--mode", "999"],
])
def test_usage_errors_exit_3(run_cli, store, tmp_path, args):
    code, _, stderr = run_cli("export", store, "-o", tmp_path / "o", *args)
    assert code == 3 and "Traceback" not in stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("mode", ["000", "200", "444"])
def test_a_mode_the_owner_cannot_read_and_write_is_refused(run_cli, store, tmp_path, mode):
    # Issue 13 item 18: `--mode 000` was accepted.
    code, _, stderr = run_cli("export", store, "-o", tmp_path / "o", "--mode", mode, "--engine", "local")
    assert code == 3 and f"--mode {mode} leaves the owner unable to read or replace the export" in stderr
    assert not (tmp_path / "o").exists()


def test_a_queue_filter_that_matches_nothing_warns_with_the_queues(run_json, run_cli, store, tmp_path):
    # Issue 13 item 17: `--queue 'nomatch*'` exported 0 rows with exit 0.
    code, stdout, _ = run_cli("export", store, "-o", tmp_path / "o", "-f", "jsonl", "--engine", "local",
                              "--queue", "nomatch*", "--report", "json", "-q", "--salvage")
    doc = json.loads(stdout)
    assert (code, doc["verdict"], doc["rows"]) == (2, "CRITICAL", 0)  # verify's, with the problem below
    (problem,) = doc["problems"]
    assert problem["message"].startswith("no queue matches --queue nomatch*; the store's queues: ")
    assert problem["message"].endswith("events.a, events.b, orders")


def test_the_local_engine_shows_no_spark_bar(tmp_path, store):
    from amqtool.commands.export_cmd import _ExportBar

    with _ExportBar(quiet=False) as bar:
        bar.enabled = True  # as on a terminal
        assert bar.bar is None  # nothing shown until an engine reports
        bar.advance(100)
        assert bar.bar is not None and not bar.spark
        assert bar.bar.tasks[0].description == "reading"


def test_a_spark_export_on_a_terminal_shows_one_bar_driven_by_its_tasks(run_cli, store, tmp_path, monkeypatch):
    # Issue 27 item 7: a "reading ... 0 B" bar that never moved alternated with "spark tasks" on one line.
    import rich.progress

    from amqtool.commands import export_cmd

    started = []

    class Recording(rich.progress.Progress):
        def start(self):
            started.append(self)
            super().start()

    def spark_like_export(req, *, progress=None, task_progress=None, status=None, **_):
        for done in range(5):  # what spark._Progress reports from the status tracker
            task_progress(min(done, 4), 4)
            progress(1024)  # a bytes report meanwhile (none should show)
        seen.append([(t.description, t.completed, t.total) for t in started[0].tasks])
        return {"rows": 0, "messages": 0, "rowsByQueue": {}, "bindings": 0, "output": req.out, "format": req.fmt,
                "engine": "spark", "problemCount": 0, "problems": []}, export_cmd_verdict.OK

    from amqtool.errors import Verdict as export_cmd_verdict

    seen: list = []
    monkeypatch.setattr(rich.progress, "Progress", Recording)
    monkeypatch.setattr(export_cmd, "show_progress", lambda quiet: True)  # as on a terminal
    monkeypatch.setattr("amqtool.commands.output.show_progress", lambda quiet: True)
    monkeypatch.setattr("amqtool.engines.export.run_export", spark_like_export)
    code, _, _ = run_cli("export", store, "-o", tmp_path / "o", "-f", "parquet", "--engine", "spark")
    assert code == 0
    assert len(started) == 1  # one live display
    assert seen == [[("spark tasks", 4, 4)]]


def test_existing_output_refused_then_forced(run_cli, store, tmp_path):
    out = tmp_path / "x.xml"
    out.write_text("keep me")
    code, stdout, stderr = run_cli("export", store, "-o", out, "--engine", "local", "--report", "json", "-q")
    assert code == 3 and json.loads(stdout)["verdict"] == "UNKNOWN" and "--force" in stderr
    assert out.read_text() == "keep me"
    # --force replaces only an earlier export of amqtool (issue 26): a file it did not write stays
    code, _, stderr = run_cli("export", store, "-o", out, "--engine", "local", "--force", "-q", "--salvage")
    assert code == 3 and "only an earlier export" in stderr and out.read_text() == "keep me"
    out.unlink()
    code, _, _ = run_cli("export", store, "-o", out, "--engine", "local", "-q", "--salvage")
    assert code == 2 and out.read_text().startswith("\n<activemq-journal>")  # verify's verdict on the store
    first = out.stat().st_ino
    code, _, _ = run_cli("export", store, "-o", out, "--engine", "local", "--force", "-q", "--salvage")
    assert code == 2 and out.read_text().startswith("\n<activemq-journal>") and out.stat().st_ino != first


def test_unknown_store_exit_3(run_cli, tmp_path):
    code, _, stderr = run_cli("export", tmp_path, "-o", tmp_path / "o")
    assert code == 3 and "amqtool: error:" in stderr


@pytest.mark.spark
def test_spark_engine_keeps_jvm_chatter_off_the_terminal(store, tmp_path):
    """A real process: the JVM's log4j lines must not reach our stderr; the rows equal the local engine's."""
    out = tmp_path / "s"
    p = subprocess.run([str(REPO / ".venv" / "bin" / "amqtool"), "export", str(store), "-o", str(out), "-f", "jsonl",
                        "--engine", "spark", "--master", "local[2]", "--report", "json", "--salvage"],
                       capture_output=True, text=True, timeout=600)
    doc = json.loads(p.stdout)
    # the built store is CRITICAL on purpose (a queue with no binding): salvaged, exit 2 (verify's verdict)
    assert p.returncode == 2 and doc["engine"] == "spark" and doc["rows"] == len(EXPECTED)
    assert p.stderr == "", p.stderr[:2000]
    rows = read_jsonl_table(out / "messages")
    assert {(r["message_id"], r["queue"]): r["transaction_state"] for r in rows} == EXPECTED
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s"]


def test_refused_journal_file_is_reported_not_silently_empty(run_cli, tmp_path):
    # A lone file Artemis cannot read a header from (random bytes) is not a store: UNKNOWN, as verify says
    # (issue 25 case 21; it was WARNING), never an empty store reported as OK; and nothing to export from, so
    # the export is refused and writes nothing (it wrote an empty export before)
    journal = tmp_path / "journal"
    journal.mkdir()
    (journal / "activemq-data-1.amq").write_bytes(bytes(range(256)) * 300)
    code, out, err = run_cli("export", journal, "-o", tmp_path / "out", "--format", "jsonl", "--engine", "local",
                             "--report", "json")
    doc = json.loads(out)
    assert code == 3 and doc["verdict"] == "UNKNOWN" and not (tmp_path / "out").exists()
    assert "not-a-store" in doc["error"] and "activemq-data-1.amq" in doc["error"]
    assert "journal format version" in doc["error"] and "nothing was written" in doc["error"]
    code, out, _ = run_cli("verify", journal, "--format", "json")
    assert code == 3 and [f["code"] for f in json.loads(out)["findings"]] == ["not-a-store"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_export_leaves_nothing_behind(tmp_path, sig):
    # Issue 13 item 12: SIGTERM left .OUT.amqtool-tmp-PID (53 MB) behind; only SIGINT cleaned up.
    from amqtool.engines.artemis.demo import create_demo

    store = tmp_path / "store"
    create_demo(store, 48 * 1024 * 1024, seed=2)
    exe = REPO / ".venv" / "bin" / "amqtool"
    proc = subprocess.Popen([str(exe), "export", str(store), "-o", str(tmp_path / "out"), "--format", "jsonl",
                             "--engine", "local", "-q"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while not [p for p in tmp_path.iterdir() if "amqtool-tmp" in p.name]:
        assert proc.poll() is None, "the export finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert f"interrupted ({sig.name})" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


@pytest.mark.spark
def test_a_spark_failure_names_a_log_that_still_exists(tmp_path):
    # Issue 13 item 13: the error named .../amqtool-tmp-N/spark.log, deleted with the work directory before the
    # message was read. The log now sits beside OUT and is kept when the export fails.
    store = build_store(tmp_path / "store")
    out = tmp_path / "out"
    p = subprocess.run([str(REPO / ".venv" / "bin" / "amqtool"), "export", str(store), "-o", str(out),
                        "--format", "jsonl", "--engine", "spark", "--master", "bogus://nowhere", "-q"],
                       capture_output=True, text=True, timeout=300)
    log = tmp_path / "out.spark.log"
    assert p.returncode == 3 and f"(see {log})" in p.stderr
    assert log.is_file() and log.stat().st_size > 0
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.spark.log", "store"]


def test_a_full_disk_names_the_output_and_leaves_nothing(run_cli, tmp_path):
    # Issue 13 item 18: a full disk in export said only "No space left on device".
    from amqtool.engines.artemis.demo import create_demo
    from tests.inspectors.machine_support import tmpfs_mount

    store = tmp_path / "store"
    create_demo(store, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    small = tmp_path / "small"
    small.mkdir()
    with tmpfs_mount(small, "256k"):
        out = small / "out"
        code, _, err = run_cli("export", store, "-o", out, "--format", "jsonl", "--engine", "local", "-q")
        assert code == 3
        assert err.startswith(f'amqtool: error: path "{out}": writing the export failed: No space left on device')
        assert os.listdir(small) == []


def _default_sigint() -> None:
    """SIGINT as a terminal delivers it: a runner started in the background (``cmd &``) hands its children
    SIGINT ignored, and Python then installs no KeyboardInterrupt at all."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
