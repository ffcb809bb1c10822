"""The export's verdict is verify's on what it read (issue 25, "one rule for every command that judges"),
single store and fleet, and a source verify calls CRITICAL is refused unless --salvage (cases 16, 17, 18, 21).
Each case failed on main c381a60: the export said OK (exit 0) where verify said WARNING or CRITICAL."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from amqtool.errors import Severity
from amqtool.engines.artemis.verify import verify_store
from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.fleet import FleetRequest, export_fleet_local, fleet_document, plan_stores, run_fleet_export
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.writers import OutputTarget
from amqtool.engines.verdicts import SourceCriticalError
from amqtool.errors import Verdict, overall_verdict
from amqtool.store.layout import detect
from tests.engines.export_store import read_jsonl_table
from tests.support import tree_hashes


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return path


def _copy(demo: Path, tmp_path: Path, name: str = "store") -> Path:
    dst = tmp_path / name
    shutil.copytree(demo, dst)
    return dst


def _journal_files(store: Path) -> list[Path]:
    """The message journal's files in header fileID order."""
    files = list((store / "data" / "journal").glob("*.amq"))
    return sorted(files, key=lambda p: int.from_bytes(p.read_bytes()[8:16], "big"))


def _verify(store: Path) -> Verdict:
    return overall_verdict(verify_store(detect(str(store))).findings)


def _export(store: Path, out: Path, **kw):
    return run_export(ExportRequest(str(store), str(out), "jsonl", engine="local", **kw))


def test_clean_store_is_ok(demo, tmp_path):
    doc, verdict = _export(demo, tmp_path / "o")
    assert verdict is Verdict.OK == _verify(demo) and doc["findings"] == []


def test_missing_journal_file_follows_verify(demo, tmp_path):
    # case 16: a store missing a journal file exported as exit 0, OK
    store = _copy(demo, tmp_path)
    files = _journal_files(store)
    files[len(files) // 2].unlink()
    judged = _verify(store)
    assert judged is not Verdict.OK
    doc, verdict = _export(store, tmp_path / "o", salvage=True)
    assert verdict is judged
    assert "missing-journal-file" in {f["code"] for f in doc["findings"]}


def test_duplicate_file_follows_verify(demo, tmp_path):
    # case 17: `cp activemq-data-1.amq activemq-data-9.amq`: export exit 0 while verify said duplicate-file-id
    store = _copy(demo, tmp_path)
    first = _journal_files(store)[0]
    shutil.copy(first, first.with_name("activemq-data-99.amq"))
    judged = _verify(store)
    assert judged is not Verdict.OK
    before = tree_hashes(store)
    if judged is Verdict.CRITICAL:
        with pytest.raises(SourceCriticalError, match="duplicate-file-id") as err:
            _export(store, tmp_path / "o")
        assert err.value.exit_code == 2 and not (tmp_path / "o").exists()
    doc, verdict = _export(store, tmp_path / "o", salvage=True)
    assert verdict is judged and doc["rows"] > 0
    assert "duplicate-file-id" in {f["code"] for f in doc["findings"]}
    assert tree_hashes(store) == before


def test_truncated_file_follows_verify(demo, tmp_path):
    # case 17: a truncated journal file: export OK while verify WARNING
    store = _copy(demo, tmp_path)
    # the newest file holding records, cut in the middle of them
    newest = [p for p in _journal_files(store) if p.read_bytes()[16:].strip(b"\0")][-1]
    os.truncate(newest, len(newest.read_bytes().rstrip(b"\0")) // 2)
    judged = _verify(store)
    assert judged is not Verdict.OK
    doc, verdict = _export(store, tmp_path / "o", salvage=True)
    assert verdict is judged and doc["findings"]


def test_missing_message_journal_with_pages_is_critical(demo, tmp_path, run_cli):
    # case 18: the message journal directory gone, the pages holding messages: export and verify said OK
    store = _copy(demo, tmp_path)
    shutil.rmtree(store / "data" / "journal")
    code, out, _ = run_cli("verify", store, "--format", "json")
    import json

    doc = json.loads(out)
    (f,) = [f for f in doc["findings"] if f["code"] == "messages-journal-missing"]
    assert code == 2 and f["severity"] == "critical" and f["details"]["pendingMessages"] > 0
    code, _, err = run_cli("export", store, "-o", tmp_path / "o", "-f", "jsonl", "--engine", "local")
    assert code == 2 and "messages-journal-missing" in err and "--salvage" in err
    assert not (tmp_path / "o").exists()
    code, out, _ = run_cli("export", store, "-o", tmp_path / "o", "-f", "jsonl", "--engine", "local", "--salvage",
                           "--report", "json")
    doc = json.loads(out)
    assert code == 2 and doc["verdict"] == "CRITICAL" and doc["rows"] == 0
    assert "messages-journal-missing" in {f["code"] for f in doc["findings"]}


def test_no_message_journal_without_pages_or_large_messages_proves_no_loss(demo, tmp_path):
    # (public stores are often committed with their bindings journal alone): a warning that the journal is
    # missing, whose content nothing left tells; CRITICAL needs pages or body files (above)
    store = _copy(demo, tmp_path)
    shutil.rmtree(store / "data" / "journal")
    shutil.rmtree(store / "data" / "paging")
    shutil.rmtree(store / "data" / "large-messages")
    findings = verify_store(detect(str(store))).findings
    (f,) = [f for f in findings if f.code == "messages-journal-missing"]
    assert f.severity == Severity.WARNING and f.details["largeMessageFiles"] == 0


def test_fleet_rows_follow_verify_and_what_was_read(demo, tmp_path):
    # case 16 (fleet): a journal file deleted after the fleet was planned: the row said OK with the planned
    # file count; case 21: a random-bytes activemq-data-1.amq was kind=artemis WARNING: not a store, UNKNOWN;
    # a store verify calls CRITICAL (its message journal gone, pages left) is a CRITICAL row without rows
    good = _copy(demo, tmp_path / "fleet", "good")
    shrunk = _copy(demo, tmp_path / "fleet", "shrunk")
    gone = _copy(demo, tmp_path / "fleet", "gone")
    shutil.rmtree(gone / "data" / "journal")
    junk = tmp_path / "fleet" / "junk"
    (junk / "journal").mkdir(parents=True)
    (junk / "journal" / "activemq-data-1.amq").write_bytes(os.urandom(70000))

    def export(salvage: bool, out: str):
        stores = plan_stores([str(good), str(shrunk), str(gone), str(junk)])
        planned = {s.name: s.files for s in stores}
        files = _journal_files(shrunk)
        if len(files) == len(list((demo / "data" / "journal").glob("*.amq"))):
            files[len(files) // 2].unlink()  # gone between the survey and the read
        target = OutputTarget(str(tmp_path / out), is_dir=True)
        with target.writing():
            outcomes = export_fleet_local(stores, ExportOptions(salvage=salvage), "jsonl", target)
            doc = fleet_document(outcomes, engine="local", fmt="jsonl", output=str(target.out))
        return planned, outcomes, {r["store"]: r for r in doc["stores"]}, doc

    planned, outcomes, rows, doc = export(False, "out")
    assert rows["good"]["verdict"] == "OK"
    assert rows["shrunk"]["verdict"] == _verify(shrunk).name != "OK"
    assert rows["gone"]["verdict"] == "CRITICAL" and rows["gone"]["rows"] == 0
    assert "messages-journal-missing" in rows["gone"]["problem"] and "--salvage" in rows["gone"]["problem"]
    assert rows["junk"]["verdict"] == "UNKNOWN" and "not-a-store" in rows["junk"]["problem"]
    assert "gone" not in {r["store"] for r in read_jsonl_table(tmp_path / "out" / "messages")}
    assert doc["storesByVerdict"]["CRITICAL"] >= 1
    # with --salvage every store is read: the shrunk one's row gives the files read and says they changed
    shutil.rmtree(shrunk)
    _copy(demo, tmp_path / "fleet", "shrunk")
    planned, outcomes, rows, doc = export(True, "out2")
    assert rows["shrunk"]["files"] == planned["shrunk"] - 1
    assert "store-changed" in {f.code for f in outcomes[1].summary.findings}
    assert rows["shrunk"]["verdict"] == _verify(shrunk).name != "OK"
    assert rows["gone"]["verdict"] == "CRITICAL"  # salvaged: what survives (no journal: no rows) and CRITICAL


def test_fleet_salvage_exports_the_critical_store(demo, tmp_path):
    bad = _copy(demo, tmp_path, "bad")
    gone = sorted((bad / "data" / "large-messages").glob("*.msg"))[0]
    gone.unlink()  # verify: large-message-missing, CRITICAL
    doc, verdict = run_fleet_export(FleetRequest(stores=[str(bad), str(_copy(demo, tmp_path, "ok"))],
                                                 out=str(tmp_path / "out"), fmt="jsonl", engine="local",
                                                 salvage=True))
    rows = {r["store"]: r for r in doc["stores"]}
    assert verdict is Verdict.CRITICAL and rows["bad"]["verdict"] == "CRITICAL" and rows["bad"]["rows"] > 0
    assert rows["ok"]["verdict"] == "OK"


def _without_dac(argv: list[str]):
    """Run ``amqtool argv`` as a process that mode bits bind: root without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH (setpriv), anyone else as they are."""
    import json
    import subprocess
    import sys

    cmd = [str(Path(sys.executable).with_name("amqtool")), *argv]  # the installed command
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root reads mode-000 files; setpriv (util-linux) is needed to drop that")
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", "--bounding-set", drop, "--inh-caps", drop, "--", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def _unreadable_target(store: Path, what: str) -> Path:
    if what == "large-message":
        return sorted((store / "data" / "large-messages").glob("*.msg"))[0]
    if what == "page":
        return sorted(p for p in (store / "data" / "paging").glob("*/*.page") if p.stat().st_size > 100)[-1]
    files = [p for p in _journal_files(store) if p.read_bytes()[16:].strip(b"\0")]
    return files[len(files) // 2]


@pytest.mark.parametrize("what", ["large-message", "page", "journal"])
def test_an_unreadable_file_is_unknown_for_what_it_holds_and_the_rest_is_exported(demo, tmp_path, what):
    # case 20: an unreadable .msg made the whole store UNKNOWN with 0 rows; an unreadable journal file gave
    # WARNING; an unreadable page file "message -1: ... record None at offset None". Now: the file is named
    # in verify's unknown finding, the export's verdict is that UNKNOWN (3), and the rest is exported.
    store = _copy(demo, tmp_path)
    victim = _unreadable_target(store, what)
    full, _ = _export(demo, tmp_path / "full")
    os.chmod(victim, 0)
    try:
        code, doc, err = _without_dac(["verify", str(store), "--format", "json"])
        assert code == 3, err[-2000:]
        assert [f["path"] for f in doc["findings"] if f["code"] == "unreadable"] == [str(victim)]
        assert not [f for f in doc["findings"] if f["severity"] == "critical"]
        argv = ["export", str(store), "-o", str(tmp_path / "o"), "-f", "jsonl", "--engine", "local",
                "--report", "json"]
        if what == "journal":
            # its records may acknowledge others: refused (3) unless --salvage, which brings back what they
            # acknowledged, and says so
            code, doc, err = _without_dac(argv)
            assert code == 3 and "refused" in err and str(victim) in err and not (tmp_path / "o").exists()
            argv.append("--salvage")
        code, doc, err = _without_dac(argv)
        assert code == 3 and doc["verdict"] == "UNKNOWN", err[-2000:]
        assert [f["path"] for f in doc["findings"] if f["code"] == "unreadable"] == [str(victim)]
        assert doc["rows"] > 0 and (what == "journal" or doc["rows"] <= full["rows"])
        assert not any("None" in p["message"] or p["messageId"] == -1 for p in doc["problems"]), doc["problems"]
    finally:
        os.chmod(victim, 0o644)


def test_a_missing_large_message_body_is_critical_loss(demo, tmp_path):
    # case 20: a missing .msg gave WARNING with rows; verify calls it CRITICAL large-message-missing
    store = _copy(demo, tmp_path)
    gone = sorted((store / "data" / "large-messages").glob("*.msg"))[0]
    gone.unlink()
    with pytest.raises(SourceCriticalError, match="large-message-missing"):
        _export(store, tmp_path / "o")
    doc, verdict = _export(store, tmp_path / "o", salvage=True)
    assert verdict is Verdict.CRITICAL is _verify(store) and doc["rows"] > 0
    assert any(gone.stem in p["message"] for p in doc["problems"])


@pytest.mark.parametrize("damage", ["duplicate", "truncated", "journal-gone"])
def test_print_verdict_is_verifys(demo, tmp_path, run_cli, damage):
    # "one rule": print said OK (exit 0) on each of these while verify said CRITICAL or WARNING
    import json

    store = _copy(demo, tmp_path)
    if damage == "duplicate":
        first = _journal_files(store)[0]
        shutil.copy(first, first.with_name("activemq-data-99.amq"))
    elif damage == "truncated":
        newest = [p for p in _journal_files(store) if p.read_bytes()[16:].strip(b"\0")][-1]
        os.truncate(newest, len(newest.read_bytes().rstrip(b"\0")) // 2)
    else:
        shutil.rmtree(store / "data" / "journal")
    vcode, out, _ = run_cli("verify", store, "--format", "json")
    want = json.loads(out)["verdict"]
    assert vcode != 0
    code, out, _ = run_cli("print", store, "--format", "json", "--safe")
    assert (code, json.loads(out)["verdict"]) == (vcode, want)
    code, _, _ = run_cli("print", store)
    assert code == vcode
