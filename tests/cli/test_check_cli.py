"""`amqtool check ...` on the command line: JSON documents, exit codes, no tracebacks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amqtool.commands.main import main

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/inspectors"))


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(argv, capsys):
    rc, out, err = run(argv + ["--format", "json"], capsys)
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["verdict"] in ("OK", "WARNING", "CRITICAL", "UNKNOWN")
    assert rc == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}[doc["verdict"]]
    if "error" in doc:  # the command could not run at all: one error line, UNKNOWN
        return rc, doc
    for f in doc["findings"]:
        assert set(f) >= {"severity", "code", "message", "path", "offset"}
    return rc, doc


def _vda_write_back() -> bool:
    try:
        return Path("/sys/block/vda/queue/write_cache").read_text().strip() == "write back"
    except OSError:
        return False


@pytest.mark.skipif(not _vda_write_back(), reason="acceptance machine only: a virtio vda reporting 'write back'")
def test_acceptance_write_cache_finds_and_explains_vda(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, doc = run_json(["check", "write-cache", "."], capsys)
    disks = [d for p in doc["checks"]["paths"] for d in p["disks"]]
    if not any(d["name"] == "vda" for d in disks):
        pytest.skip("the repository is not on vda here")
    warn = [f for f in doc["findings"] if f["code"] == "write-cache-virtual"]
    assert warn and "vda" in warn[0]["message"] and "hypervisor" in warn[0]["message"]
    assert rc >= 1
    rc_text, out, _ = run(["check", "write-cache", "."], capsys)
    assert rc_text == rc and "write-cache-virtual" in out and "verdict: " in out


def test_text_and_json_agree_on_exit_code(capsys, tmp_path):
    rc_json, doc = run_json(["check", "disk-space", str(tmp_path), "--max-disk-usage", "100"], capsys)
    rc_text, out, _ = run(["check", "disk-space", str(tmp_path), "--max-disk-usage", "100"], capsys)
    assert rc_text == rc_json
    assert f"verdict: {doc['verdict']}" in out


def test_disk_space_flag_limits(capsys, tmp_path):
    _, doc = run_json(["check", "disk-space", str(tmp_path), "--min-disk-free", "1EB"], capsys)  # bad unit
    assert doc["verdict"] == "UNKNOWN" and "invalid byte size" in doc["error"]
    rc, doc = run_json(["check", "disk-space", str(tmp_path), "--min-disk-free", "1000000GB"], capsys)
    assert rc == 2 and doc["checks"]["limit"]["mode"] == "min-disk-free"
    assert any(f["code"] == "disk-limit-breached" for f in doc["findings"])
    rc, doc = run_json(["check", "disk-space", str(tmp_path), "--max-disk-usage", "-1"], capsys)
    assert rc == 1 and doc["findings"][0]["code"] == "disk-limit-off"
    rc, _, err = run(["check", "disk-space", str(tmp_path), "--max-disk-usage", "140"], capsys)
    assert rc == 3 and "--max-disk-usage must be at least 0 and at most 100" in err


def test_broker_xml_directories_and_limits(capsys, tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (tmp_path / "data/journal").mkdir(parents=True)
    (etc / "broker.xml").write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<max-disk-usage>100</max-disk-usage><journal-max-io>999999999</journal-max-io>"
        "</core></configuration>")
    rc, doc = run_json(["check", "disk-space", "--broker-xml", str(etc / "broker.xml")], capsys)
    [fs] = doc["checks"]["filesystems"]
    assert sorted(fs["roles"]) == ["bindings", "journal", "large-messages", "paging"]
    assert doc["checks"]["limit"] == {"mode": "max-disk-usage", "maxDiskUsage": 100, "minDiskFree": None}
    created = [f for f in doc["findings"] if f["code"] == "directory-not-created"]
    assert len(created) == 3  # bindings, paging, large-messages do not exist yet
    rc, doc = run_json(["check", "aio", str(tmp_path / "data/journal"), "--broker-xml", str(etc / "broker.xml")],
                       capsys)
    assert rc == 2 and any(f["code"] == "aio-max-nr-low" for f in doc["findings"])
    assert os.listdir(tmp_path / "data/journal") == []


def test_missing_path_is_unknown_without_traceback(capsys, tmp_path):
    for sub in ("write-cache", "disk-space", "aio", "all"):
        argv = ["check", sub, str(tmp_path / "missing")] + (["--probe-seconds", "0"] if sub == "all" else [])
        rc, doc = run_json(argv, capsys)
        assert rc == 3, sub
        assert any(f["code"] == "path-not-found" for f in doc["findings"]), sub


def test_missing_broker_xml_is_a_usage_error(capsys, tmp_path):
    rc, out, err = run(["check", "write-cache", "--broker-xml", str(tmp_path / "broker.xml")], capsys)
    assert rc == 3 and "broker.xml not found" in err and "Traceback" not in err


def test_unknown_device_from_a_recorded_tree(capsys, tmp_path):
    from machine_support import RecordedMachine

    m = RecordedMachine(tmp_path / "m")
    m.mount("/", 8, 77, "ext4", "/dev/sdq1")
    rc, doc = run_json(["check", "write-cache", "/srv", "--root", str(m.root)], capsys)
    assert rc == 3 and [f["code"] for f in doc["findings"]] == ["device-unknown"]


def test_usage_error_is_exit_3(capsys):
    rc, _, err = run(["check", "aio"], capsys)
    assert rc == 3 and "usage error" in err


def test_all_runs_every_check_and_reports_the_probe(capsys, tmp_path):
    rc, doc = run_json(["check", "all", str(tmp_path), "--probe-seconds", "0.2"], capsys)
    assert set(doc["checks"]) == {"writeCache", "diskSpace", "aio", "fsyncProbe"}
    codes = [f["code"] for f in doc["findings"]]
    assert "fs-type" in codes and ("disk-space" in codes or "disk-headroom-low" in codes
                                   or "disk-limit-breached" in codes)
    assert "fsync-rate" in codes or "fsync-probe-skipped" in codes
    assert os.listdir(tmp_path) == []


# A fresh interpreter (started as root: it lives under /root, which nobody cannot reach) runs the check once
# as root on a directory of its own, so that every module and codec it loads lazily is loaded, then drops to
# uid/gid 65534 and runs it for real. Not a fork of the test process: by the time this runs the test process
# may hold other threads (a Spark gateway's), and a forked child can inherit one of their locks held for ever.
_AS_NOBODY = """
import contextlib, io, os, shutil, sys, tempfile
from amqtool.commands.main import main
argv = sys.argv[1:]
warm = tempfile.mkdtemp()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main([warm if a.startswith("/") else a for a in argv])
shutil.rmtree(warm)
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
sys.exit(main(argv))
"""


def _as_nobody(argv: list[str]) -> tuple[int, dict, str]:
    """Run ``amqtool argv --format json`` as uid/gid 65534; returns (exit code, document, stderr)."""
    run = subprocess.run([sys.executable, "-c", _AS_NOBODY, *argv, "--format", "json"], capture_output=True,
                         text=True, timeout=300, cwd="/")
    return run.returncode, json.loads(run.stdout), run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_errors_are_findings_not_tracebacks(tmp_path):
    base = Path("/tmp") / f"amqtool-perm-{os.getpid()}"
    closed = base / "closed"
    readonly = base / "readonly"
    try:
        closed.mkdir(parents=True)
        readonly.mkdir()
        os.chmod(base, 0o755)
        os.chmod(closed, 0o700)
        os.chmod(readonly, 0o555)
        rc, doc, err = _as_nobody(["check", "write-cache", str(closed / "journal")])
        assert "Traceback" not in err
        assert rc == 3 and doc["findings"][0]["code"] == "permission-denied"
        rc, doc, err = _as_nobody(["check", "aio", str(readonly)])
        assert "Traceback" not in err
        assert rc == 3 and any(f["code"] == "o-direct-not-tested" for f in doc["findings"])
        assert os.listdir(readonly) == []
    finally:
        subprocess.run(["rm", "-rf", str(base)])


@pytest.mark.parametrize("columns, width", [("100", 100), (None, 80)])
def test_tables_fit_columns_or_80_when_piped(tmp_path, columns, width):
    # Issue 13 item 15: tables were ~160 columns even when piped and ignored COLUMNS.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    from tests.support import REPO

    p = subprocess.run([str(REPO / ".venv" / "bin" / "amqtool"), "check", "disk-space", str(tmp_path)],
                       capture_output=True, text=True, env=env)
    lines = p.stdout.splitlines()
    assert p.returncode in (0, 1, 2) and any("disk-space" in line for line in lines)
    assert max(len(line.rstrip()) for line in lines) <= width


def test_long_lines_are_folded_not_cut(monkeypatch):
    """Issue 27: long lines are folded to the width, piped or not (80 columns piped), and nothing is left out;
    ``wide`` keeps them whole. (They used to be cut on a terminal and left 1,000 characters wide piped.)"""
    from amqtool.commands import tables

    monkeypatch.setenv("COLUMNS", "60")
    long = "   add    id=3 QueueConfiguration [" + ", ".join(f"key{i}=value{i}" for i in range(80)) + "]"
    folded = list(tables.fold_lines([long, "short"]))
    assert folded[-1] == "short" and len(folded) > 3
    assert all(len(x) <= 60 for x in folded)
    assert all(x.startswith(" " * 7) for x in folded[1:-1])  # continuation: the line's indent plus four
    assert "".join("".join(folded[:-1]).split()) == "".join(long.split())  # every character, in order
    assert list(tables.fold_lines([long, "short"], wide=True)) == [long, "short"]
    assert list(tables.fold_lines(["x" * 200], width=80)) == ["x" * 80, "    " + "x" * 76, "    " + "x" * 44]
