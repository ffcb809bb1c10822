"""Issue 26, part 1: no writer destroys what it was not asked to write (amqtool.store.output).

Each case was a data loss on main c381a60: `export e1 -o e1 --force` deleted the broker store, `-o /dev/full
--force` replaced the device node, `-o somedir --force` deleted unrelated files, `-o
d64/data/journal/activemq-data-99.amq` wrote a bad journal file into the store."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import tree_hashes

KAHADB = Path("/work/shared/fixtures/kahadb/basic")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("demo") / "e1"
    create_demo(root, 4 * 1024 * 1024, file_size=256 * 1024, seed=3)
    return root


@pytest.fixture
def e1(demo, tmp_path) -> Path:
    copy = tmp_path / "e1"
    shutil.copytree(demo, copy)
    return copy


def _one_line_3(code, err):
    assert code == 3, err
    assert err.count("\n") == 1 and err.startswith("amqtool: error: ") and "Traceback" not in err


@pytest.mark.parametrize("rel", [".", "..", "data", "data/journal", "data/journal/activemq-data-99.amq",
                                 "data/paging/x"])
def test_export_never_writes_into_around_or_over_the_store(run_cli, e1, rel):
    before = tree_hashes(e1.parent)
    code, _, err = run_cli("export", e1, "-o", e1 / rel, "--force", "-f", "jsonl", "--engine", "local", "-q")
    _one_line_3(code, err)
    assert "the output" in err and "the input" in err
    assert tree_hashes(e1.parent) == before


def test_export_of_a_journal_directory_guards_its_whole_instance(run_cli, e1):
    # the instance: the directory whose etc/broker.xml names the store's directories
    (e1 / "etc").mkdir()
    (e1 / "etc" / "broker.xml").write_text(
        "<configuration><core><journal-directory>data/journal</journal-directory>"
        "<bindings-directory>data/bindings</bindings-directory></core></configuration>")
    before = tree_hashes(e1)
    code, _, err = run_cli("export", e1 / "data" / "journal", "-o", e1 / "exports", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    assert f"lies inside the input {e1}" in err
    assert tree_hashes(e1) == before and not (e1 / "exports").exists()


def test_export_of_a_kahadb_store_into_it(run_cli, tmp_path):
    kaha = tmp_path / "kahadb"
    shutil.copytree(KAHADB, kaha)
    before = tree_hashes(kaha)
    for out in (kaha, tmp_path, kaha / "x"):
        code, _, err = run_cli("export", kaha, "-o", out, "--force", "-f", "jsonl", "-q")
        _one_line_3(code, err)
    assert tree_hashes(kaha) == before


def test_a_device_or_fifo_is_never_replaced(run_cli, e1, tmp_path):
    # a device node of our own with /dev/full's numbers: the machine's /dev/full is shared, and main replaced it
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    code, _, err = run_cli("export", e1, "-o", full, "--force", "-f", "xml", "-q")
    _one_line_3(code, err)
    assert "neither a regular file nor a directory" in err
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = run_cli("export", e1, "-o", fifo, "--force", "-q")
    _one_line_3(code, err)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_force_replaces_only_an_earlier_export(run_cli, e1, tmp_path):
    somedir = tmp_path / "somedir"
    somedir.mkdir()
    (somedir / "keep.txt").write_text("mine")
    code, _, err = run_cli("export", e1, "-o", somedir, "--force", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    assert "holds no export.json" in err and (somedir / "keep.txt").read_text() == "mine"

    out = tmp_path / "out"
    assert run_cli("export", e1, "-o", out, "-f", "jsonl", "-q")[0] == 0
    first = json.loads((out / "export.json").read_text())
    # an earlier export with something else put beside it is not amqtool's alone any more
    (out / "notes.txt").write_text("mine")
    code, _, err = run_cli("export", e1, "-o", out, "--force", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    assert "'notes.txt'" in err and (out / "notes.txt").exists()
    (out / "notes.txt").unlink()
    (out / "messages" / "mine.csv").write_text("x")
    code, _, err = run_cli("export", e1, "-o", out, "--force", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    (out / "messages" / "mine.csv").unlink()
    # the earlier export alone: replaced
    code, _, err = run_cli("export", e1, "-o", out, "--force", "-f", "jsonl", "-q")
    assert code == 0, err
    assert json.loads((out / "export.json").read_text())["rows"] == first["rows"]
    assert sorted(os.listdir(tmp_path)) == ["e1", "out", "somedir"]  # no work directory, no lock file left


def test_a_symlink_to_the_store_is_the_store(run_cli, e1, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(e1)
    before = tree_hashes(e1)
    for out in (link, link / "data" / "x"):
        code, _, err = run_cli("export", e1, "-o", out, "--force", "-f", "jsonl", "-q")
        _one_line_3(code, err)
    code, _, err = run_cli("export", link, "-o", e1 / "y", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    assert tree_hashes(e1) == before


def test_a_bind_mount_of_the_store_is_the_store(run_cli, e1, tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("bind mounts need root and mount(8)")
    m = tmp_path / "m"
    m.mkdir()
    done = subprocess.run(["mount", "--bind", str(e1), str(m)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    try:
        before = tree_hashes(e1)
        code, _, err = run_cli("export", m, "-o", e1 / "data" / "journal" / "x.amq", "-f", "xml", "-q")
        _one_line_3(code, err)
        code, _, err = run_cli("export", e1, "-o", m / "data", "--force", "-f", "jsonl", "-q")
        _one_line_3(code, err)
        code, _, err = run_cli("compact", m, "-o", e1 / "c", "-q")
        _one_line_3(code, err)
        assert tree_hashes(e1) == before
    finally:
        subprocess.run(["umount", str(m)], check=True)


def test_every_store_writer_follows_the_rule(run_cli, e1, tmp_path):
    before = tree_hashes(e1)
    for argv in (("compact", e1, "-o", e1 / "data" / "c"), ("compact", e1, "-o", tmp_path),
                 ("recover", e1, "-o", e1 / "r"), ("recover", e1, "-o", tmp_path),
                 ("create", e1 / "data" / "new", "--from", e1)):
        code, _, err = run_cli(*argv, "-q")
        assert code == 3, (argv, err)
    assert tree_hashes(e1) == before
    kaha = tmp_path / "kahadb"
    shutil.copytree(KAHADB, kaha)
    kbefore = tree_hashes(kaha)
    for argv in (("create", kaha / "artemis", "--from", kaha), ("compact", kaha, "-o", kaha / "c"),
                 ("recover", kaha, "-o", tmp_path)):
        code, _, err = run_cli(*argv, "-q")
        _one_line_3(code, err)
    assert tree_hashes(kaha) == kbefore


def test_create_refuses_a_device(run_cli):
    code, _, err = run_cli("create", "/dev/full")
    _one_line_3(code, err)


# --- part 2: two writers of one output -------------------------------------------------------------------

def test_a_second_writer_of_the_same_output_is_refused(run_cli, e1, tmp_path):
    """Two `export -o same --force` at once both exited 0 and only one's rows remained: the output's lock
    (flock on .<name>.amqtool-lock) makes the second exit 3 with one line, touching nothing."""
    from amqtool.store import output

    out = tmp_path / "same"
    assert run_cli("export", e1, "-o", out, "-f", "jsonl", "-q")[0] == 0
    before = tree_hashes(out)
    held = output.claim(out, output.EXPORT_DIR, force=True)  # as a running writer holds it
    try:
        proc = subprocess.run([str(Path(__file__).parents[2] / ".venv" / "bin" / "amqtool"), "export", str(e1),
                               "-o", str(out), "--force", "-f", "jsonl", "-q"], capture_output=True, text=True)
        _one_line_3(proc.returncode, proc.stderr)
        assert f"another amqtool (process {os.getpid()}) is writing this output" in proc.stderr
        for argv in (("compact", e1, "-o", out), ("recover", e1, "-o", out), ("create", out)):
            code, _, err = run_cli(*argv, "-q")
            assert code == 3, err
    finally:
        held.release()
    assert tree_hashes(out) == before
    assert sorted(os.listdir(tmp_path)) == ["e1", "same"]


def test_a_lock_file_left_by_a_killed_writer_does_not_block(run_cli, e1, tmp_path):
    out = tmp_path / "o"
    (tmp_path / ".o.amqtool-lock").write_text("999999\n")  # nobody holds it
    code, _, err = run_cli("export", e1, "-o", out, "-f", "jsonl", "-q")
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["e1", "o"]


def test_concurrent_forced_exports_never_both_write(e1, tmp_path):
    """The race itself, with real processes started together: whatever the interleaving, every run either
    wrote the output alone (exit 0) or was refused (exit 3); the output is one complete export."""
    amq = str(Path(__file__).parents[2] / ".venv" / "bin" / "amqtool")
    out = tmp_path / "same"
    subprocess.run([amq, "export", str(e1), "-o", str(out), "-f", "jsonl", "-q"], check=True)
    rows = json.loads((out / "export.json").read_text())["rows"]
    procs = [subprocess.Popen([amq, "export", str(e1), "-o", str(out), "--force", "-f", "jsonl", "-q"],
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    codes = [(p.wait(), p.stderr.read()) for p in procs]
    for code, err in codes:
        assert code in (0, 3), err
        if code == 3:
            assert "is writing this output" in err
    assert json.loads((out / "export.json").read_text())["rows"] == rows
    assert sorted(os.listdir(tmp_path)) == ["e1", "same"]


# --- part 3: what killed writers leave ---------------------------------------------------------------------

AMQ = str(Path(__file__).parents[2] / ".venv" / "bin" / "amqtool")


def _killed(argv, point="fsync:2"):
    """Run amqtool with a real SIGKILL at a durable step (store.atomic's fault hook)."""
    env = {**os.environ, "AMQTOOL_FAULT": f"{point}:kill"}
    proc = subprocess.run([AMQ, *map(str, argv)], env=env, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    return proc


@pytest.mark.parametrize("argv, label", [
    (("export", "{e1}", "-o", "{out}", "-f", "jsonl", "-q"), "tmp"),
    (("recover", "{e1}", "-o", "{out}", "-q"), "recover"),
    (("compact", "{e1}", "-o", "{out}", "-q"), "compact"),
])
def test_the_next_run_removes_a_killed_writers_temporary(e1, tmp_path, argv, label):
    out = tmp_path / "out"
    args = [a.format(e1=e1, out=out) for a in argv]
    _killed(args)
    left = [n for n in os.listdir(tmp_path) if n.startswith(".out.amqtool-")]
    assert any(n.startswith(f".out.amqtool-{label}-") for n in left), left
    assert not out.exists()
    # any writer writing beside it cleans up, and says what it removed
    proc = subprocess.run([AMQ, "export", str(e1), "-o", str(tmp_path / "other"), "-f", "jsonl", "-q"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    temp = [n for n in left if not n.endswith("-lock")][0]
    assert f"removed {tmp_path / temp}, left by an amqtool run" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["e1", "other"]


def test_a_live_writers_temporary_is_kept_and_a_reused_pid_is_seen(e1, tmp_path):
    from amqtool.store import output

    mine = tmp_path / f".a.amqtool-tmp-{os.getppid()}"  # pytest's parent: alive, started before it
    mine.mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        reused = tmp_path / f".b.amqtool-recover-{sleeper.pid}"  # alive, but started after it was written
        reused.mkdir()
        (reused / "f").write_bytes(b"x")
        old = os.stat(reused).st_mtime - 3600
        os.utime(reused, (old, old))
        dead = subprocess.Popen(["true"])
        dead.wait()
        gone = tmp_path / f".c.amqtool-tmp-{dead.pid}"
        gone.write_bytes(b"x")
        removed = output.sweep_leftovers(tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sorted(removed) == sorted([reused, gone])
    assert mine.is_dir()


def test_sigterm_early_in_recover_is_one_line(e1, tmp_path):
    """SIGTERM 0.1 s into `recover` printed a traceback and exited 1."""
    import signal
    import time

    for delay in (0.1, 0.3, 0.6, 0.9):
        out = tmp_path / f"r{delay}"
        p = subprocess.Popen([AMQ, "recover", str(e1), "-o", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
        if p.returncode == 0:
            continue  # it finished first
        assert p.returncode in (143, -15), err
        assert "Traceback" not in err and err in ("", "amqtool: interrupted (SIGTERM)\n"), err
        if out.exists():  # the signal came after the rename: then the copy is complete
            done = subprocess.run([AMQ, "verify", str(out), "-q"], capture_output=True, text=True)
            assert done.returncode in (0, 1), done.stderr
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".")) == []


# --- part 4: sizes and numbers -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ("compact", "{e1}", "--file-size", "0"), ("compact", "{e1}", "--min-files", "-2"),
    ("compact", "{e1}", "--compact-percentage", "101"), ("compact", "{e1}", "--pool-files", "-2"),
    ("bench", "sync-methods", "{tmp}", "--seconds", "inf"), ("bench", "sync-methods", "{tmp}", "--seconds", "nan"),
    ("bench", "sync-methods", "{tmp}", "--seconds", "-1"), ("bench", "{tmp}", "--seconds", "inf"),
    ("create", "{tmp}/j", "--file-size", "10.5M"), ("create", "{tmp}/j", "--min-files", "0"),
])
def test_numeric_options_are_validated(run_cli, e1, tmp_path, argv):
    before = tree_hashes(e1)
    code, _, err = run_cli(*[a.format(e1=e1, tmp=tmp_path) for a in argv])
    _one_line_3(code, err)
    assert tree_hashes(e1) == before and not (tmp_path / "j").exists()


def test_create_file_size_10mb_is_artemis_10mb(run_cli, tmp_path):
    code, _, err = run_cli("create", tmp_path / "j", "--file-size", "10MB", "--min-files", "2", "-q")
    assert code == 0, err
    assert {p.stat().st_size for p in (tmp_path / "j").iterdir()} == {10_485_760}


def test_create_on_a_too_small_filesystem_names_the_path_and_leaves_nothing(run_cli, tmp_path):
    from tests.inspectors.machine_support import tmpfs_mount

    small = tmp_path / "small"
    small.mkdir()
    with tmpfs_mount(small, "5m"):
        code, _, err = run_cli("create", small / "tiny", "--file-size", "2MiB", "--min-files", "4")
        _one_line_3(code, err)
        assert "not enough free space" in err and str(small) in err
        assert os.listdir(small) == []


@pytest.mark.parametrize("argv", [
    ("print", "{e1}", "--max-pages", "-2"), ("stat", "{e1}", "--top", "-1"), ("stat", "{e1}", "--at", "-5"),
    ("check", "all", "{tmp}", "--probe-seconds", "inf"), ("check", "all", "{tmp}", "--probe-seconds", "-1"),
    ("check", "disk-space", "{tmp}", "--max-disk-usage", "101"), ("check", "aio", "{tmp}", "--journal-max-io", "0"),
])
def test_every_numeric_option_goes_through_the_validator(run_cli, e1, tmp_path, argv):
    code, _, err = run_cli(*[a.format(e1=e1, tmp=tmp_path) for a in argv])
    _one_line_3(code, err)
    assert " must be " in err


def test_broker_xml_guards_the_instance_not_the_working_directory(run_cli, e1, tmp_path, monkeypatch):
    (e1 / "etc").mkdir()
    xml = e1 / "etc" / "broker.xml"
    xml.write_text("<configuration><core><journal-directory>data/journal</journal-directory>"
                   "<bindings-directory>data/bindings</bindings-directory>"
                   "<large-messages-directory>data/large-messages</large-messages-directory>"
                   "<paging-directory>data/paging</paging-directory></core></configuration>")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli("export", "--broker-xml", xml, "-o", "out", "-f", "jsonl", "-q")
    assert code == 0 and (elsewhere / "out" / "export.json").is_file(), err
    code, _, err = run_cli("export", "--broker-xml", xml, "-o", e1 / "out", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    code, _, err = run_cli("export", "--broker-xml", xml, "-o", xml, "--force", "-f", "xml", "-q")
    _one_line_3(code, err)


def test_a_fleet_export_guards_every_store_and_replaces_its_own(run_cli, e1, tmp_path):
    other = tmp_path / "e2"
    shutil.copytree(e1, other)
    before = tree_hashes(other)
    code, _, err = run_cli("export", e1, other, "-o", other / "x", "-f", "jsonl", "-q")
    _one_line_3(code, err)
    assert tree_hashes(other) == before
    out = tmp_path / "fleet"
    assert run_cli("export", e1, other, "-o", out, "-f", "jsonl", "-q")[0] == 0
    code, _, err = run_cli("export", e1, other, "-o", out, "--force", "-f", "jsonl", "-q")
    assert code == 0, err
    assert json.loads((out / "export.json").read_text())["storeCount"] == 2


def test_a_leveldb_store_is_guarded_too(run_cli, tmp_path):
    src = Path("/work/shared/fixtures/leveldb/basic/store")
    if not src.is_dir():
        pytest.skip("no LevelDB fixture")
    lv = tmp_path / "lv"
    shutil.copytree(src, lv)
    before = tree_hashes(lv)
    for argv in (("export", lv, "-o", lv / "x", "-f", "jsonl"), ("export", lv, "-o", tmp_path, "--force", "-f", "jsonl"),
                 ("create", lv / "a", "--from", lv)):
        code, _, err = run_cli(*argv, "-q")
        _one_line_3(code, err)
    assert tree_hashes(lv) == before


def test_sigterm_raised_inside_an_import_is_an_interruption(capsys):
    """CI at 0abbe5c: SIGTERM 0.1 s into `recover` arrived while a dataclass was being defined (an import);
    CPython 3.11 re-raised it as "RuntimeError: Error calling __set_name__", and amqtool reported an internal
    error (exit 3) instead of the interruption (exit 143, one line)."""
    import typer

    from amqtool.commands.output import OutputFormat, Terminated, guarded

    with pytest.raises(typer.Exit) as exc:
        with guarded(OutputFormat.text):
            try:
                raise Terminated(15)
            except Terminated as signal_err:
                raise RuntimeError("Error calling __set_name__ on 'Field' instance 'nodes'") from signal_err
    assert exc.value.exit_code == 143
    assert capsys.readouterr().err == "amqtool: interrupted (SIGTERM)\n"
