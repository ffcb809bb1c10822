"""Shell completion (issue 19): the bash script generated at build time completes subcommands, options,
``--format`` values and store paths, in a real bash, without running amqtool."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amqtool.commands.completion import INSTALL_PATHS, command_tree, write_all


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict[str, Path]:
    """The installed scripts (a non-editable install puts them under the prefix), else the build step's own
    output (setup.py runs this same write_all)."""
    installed = {shell: Path(sys.prefix) / d / name for shell, (d, name) in INSTALL_PATHS.items()}
    if all(p.is_file() for p in installed.values()):
        return installed
    return write_all(tmp_path_factory.mktemp("completions"))


def complete(script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """COMPREPLY of the script's function for ``words`` (the last one is being completed), in bash, with no
    amqtool on PATH (so nothing could run it)."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    prog = (f"source '{script}'\n"
            f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=()\n"
            "_amqtool\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=30)
    assert out.returncode == 0, out.stderr
    return [x for x in out.stdout.splitlines() if x]


def test_bash_completes_subcommands_and_format_values(scripts):
    bash = scripts["bash"]
    assert complete(bash, ["amqtool", "ex"]) == ["export"]
    export = next(n for n in command_tree() if n.path == "export")
    formats = next(o.choices for o in export.options if "--format" in o.names)
    assert complete(bash, ["amqtool", "export", "--format", ""]) == formats == ["xml", "jsonl", "parquet"]
    assert complete(bash, ["amqtool", "export", "-f", "p"]) == ["parquet"]
    assert complete(bash, ["amqtool", "verify", "--format", ""]) == ["text", "json", "jsonl", "prometheus"]
    assert complete(bash, ["amqtool", "stat", "--sort", ""]) == ["bytes", "messages", "oldest"]
    assert sorted(complete(bash, ["amqtool", "check", ""])) == ["aio", "all", "db", "disk-space", "write-cache"]
    assert complete(bash, ["amqtool", "check", "disk-space", "--nag"]) == ["--nagios"]
    top = set(complete(bash, ["amqtool", ""]))
    assert {"print", "verify", "stat", "create", "compact", "export", "check", "bench"} <= top


def test_bash_completes_store_paths(scripts, tmp_path):
    (tmp_path / "broker-a").mkdir()
    (tmp_path / "broker-b").mkdir()
    (tmp_path / "other").mkdir()
    bash = scripts["bash"]
    assert sorted(complete(bash, ["amqtool", "verify", "bro"], cwd=tmp_path)) == ["broker-a", "broker-b"]
    # after an option's value the next word is a path again, not the value list
    assert complete(bash, ["amqtool", "export", "--format", "xml", "oth"], cwd=tmp_path) == ["other"]
    assert complete(bash, ["amqtool", "stat", "--metrics-file", "oth"], cwd=tmp_path) == ["other"]


def test_every_command_is_in_the_scripts(scripts):
    nodes = command_tree()
    text = {shell: p.read_text() for shell, p in scripts.items()}
    for n in nodes:
        for sub in n.subcommands:
            assert all(sub in t for t in text.values()), sub
    assert "amqtool" in text["zsh"].splitlines()[0] and text["zsh"].startswith("#compdef amqtool")
    for shell, checker in (("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])):
        if shutil.which(checker[0]):
            r = subprocess.run(checker + [str(scripts[shell])], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr


def test_fish_completes_the_same(scripts):
    fish = shutil.which("fish")
    if fish is None:
        pytest.skip("fish is not installed (apt-get install fish)")

    def comp(line: str) -> list[str]:
        r = subprocess.run([fish, "--no-config", "-c", f"source '{scripts['fish']}'; complete -C '{line}'"],
                           capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin",
                                                                            "HOME": os.environ.get("HOME", "/tmp")})
        assert r.returncode == 0, r.stderr
        return sorted(x.split("\t", 1)[0] for x in r.stdout.splitlines() if x)

    assert comp("amqtool ex") == ["export"]
    assert comp("amqtool export --format ") == ["jsonl", "parquet", "xml"]
    assert comp("amqtool check di") == ["disk-space"]
