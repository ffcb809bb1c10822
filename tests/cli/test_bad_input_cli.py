"""Every command on input it cannot use: one error line on stderr, exit 3, and with --format json a document
that still carries the verdict."""
from __future__ import annotations

import json
import os

import pytest

READERS = [["print"], ["verify"], ["compact", "--dry-run"], ["compact"], ["bench", "--seconds", "0.01", "-m", "nio"]]


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "random.bin").write_bytes(os.urandom(65536))
    return {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "random": tmp_path / "random.bin"}


def _one_error(run_cli, *argv):
    code, out, err = run_cli(*argv, "--format", "json")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("amqtool: error: ") and "Traceback" not in err, err
    return code, json.loads(out), lines[0]


@pytest.mark.parametrize("argv", READERS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("kind", ["missing", "random"])
def test_unusable_path(run_cli, inputs, argv, kind):
    code, doc, line = _one_error(run_cli, *argv, inputs[kind])
    assert code == 3 and doc["verdict"] == "UNKNOWN" and str(inputs[kind]) in doc["error"]
    assert ("no such" in line) if kind == "missing" else ("not a directory" in line)


@pytest.mark.parametrize("argv", READERS[:4], ids=lambda a: " ".join(a[:2]))
def test_directory_without_a_store(run_cli, inputs, argv):
    code, doc, line = _one_error(run_cli, *argv, inputs["empty"])
    assert code == 3 and doc["verdict"] == "UNKNOWN" and "no Artemis journal, KahaDB or LevelDB store" in line


def test_create_refuses_files(run_cli, inputs):
    code, doc, line = _one_error(run_cli, "create", inputs["random"])
    assert code == 3 and doc["verdict"] == "UNKNOWN" and "exists and is not a directory" in line
    code, doc, line = _one_error(run_cli, "create", inputs["random"] / "sub")
    assert code == 3 and "a parent directory is a file" in line


@pytest.mark.parametrize("sub", ["write-cache", "disk-space", "aio", "all"])
def test_check_missing_path(run_json, inputs, sub):
    extra = ["--probe-seconds", "0"] if sub == "all" else []
    code, doc, _ = run_json("check", sub, inputs["missing"], *extra)
    assert code == 3 and doc["verdict"] == "UNKNOWN"
    assert "path-not-found" in [f["code"] for f in doc["findings"]]


def test_os_error_still_gives_a_json_verdict(capsys):
    import errno

    import typer

    from amqtool.commands.output import OutputFormat, guarded

    with pytest.raises(typer.Exit) as exc:
        with guarded(OutputFormat.json):
            raise OSError(errno.EACCES, "Permission denied", "/srv/journal")
    out, err = capsys.readouterr()
    assert exc.value.exit_code == 3 and json.loads(out)["verdict"] == "UNKNOWN"
    assert err == 'amqtool: error: path "/srv/journal": Permission denied\n'


def test_an_empty_directory_and_a_symlink_loop_say_what_they_are(run_cli, tmp_path):
    # Issue 13 item 18: `verify EMPTY_DIR` said `file "empty"`; a symlink loop said "no such file or directory".
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for command in (["verify"], ["print"], ["compact"], ["export", "-o", str(tmp_path / "out")]):
        code, _, err = run_cli(command[0], empty, *command[1:])
        assert code == 3 and err == f'amqtool: error: directory "{empty}": it is empty: no Artemis journal, KahaDB or LevelDB store found here\n'
        code, _, err = run_cli(command[0], tmp_path / "a", *command[1:])
        assert code == 3 and err == f'amqtool: error: path "{tmp_path / "a"}": too many levels of symbolic links (a symlink loop)\n'


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", [["print", "--format", "json"], ["print"], ["verify", "--format", "json"],
                                  ["stat", "--format", "json"], ["print", "--format", "jsonl"]],
                         ids=lambda a: " ".join(a))
def test_a_full_standard_output_is_one_line_and_exit_3(tmp_path, argv):
    """`amqtool print ... > file` on a full disk (here /dev/full): the output cannot be written, so the
    command says so on one line and exits 3 (UNKNOWN: its verdict never reached the reader); no traceback,
    not even from the interpreter's last flush. Before, the error document was written to the same full
    output and the second failure was a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    from amqtool.engines.artemis.demo import create_demo

    store = tmp_path / "s"
    create_demo(store, 4 * 1024 * 1024, file_size=512 * 1024, seed=3)
    amqtool = Path(sys.executable).parent / "amqtool"
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(amqtool), *argv[:1], str(store), *argv[1:]], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    lines = p.stderr.splitlines()
    assert p.returncode == 3, p.stderr
    assert len(lines) == 1 and lines[0].startswith("amqtool: error: ") and "No space left" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr
