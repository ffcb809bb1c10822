"""Packing the environment for Spark workers (:mod:`amqtool.engines.export.ship`): what goes in (the venv
without PySpark; an editable install's source packages instead of its finder), the cache by content, and
the session settings. The cluster test is tests/integration/test_spark_ship.py."""
from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from amqtool.engines.export import ship
from amqtool.errors import CapabilityError

PY = "python3.11"


def _fake_venv(root: Path) -> tuple[Path, Path]:
    """A venv-shaped tree: bin/python links, pyvenv.cfg, site-packages with a package, PySpark, and an
    editable install's finder mapping two packages to a source tree outside it."""
    prefix, src = root / "venv", root / "src"
    site = prefix / "lib" / f"python{os.sys.version_info[0]}.{os.sys.version_info[1]}" / "site-packages"
    (prefix / "bin").mkdir(parents=True)
    os.symlink("/usr/bin/python3", prefix / "bin" / "python3")
    os.symlink("python3", prefix / "bin" / "python")
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for rel, text in {"pyarrow/__init__.py": "A = 1\n", "pyspark/__init__.py": "", "pyspark/jars/x.jar": "J" * 100,
                      "pyspark-4.0.0.dist-info/METADATA": "", "__editable__.tool-0.1.pth": "import f\n"}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    (site / "__editable___tool_0_1_finder.py").write_text(
        f"MAPPING = {{'tool': {str(src / 'tool')!r}, 'tool.commands': {str(src / 'commands')!r}}}\n")
    for rel, text in {"tool/__init__.py": "", "tool/_native.so": "ELF", "tool/__pycache__/x.pyc": "",
                      "commands/__init__.py": "", "commands/main.py": "print(1)\n"}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return prefix, site


def test_packed_files(tmp_path):
    prefix, site = _fake_venv(tmp_path)
    names = [n for n, _ in ship.packed_files(prefix)]
    sp = site.relative_to(prefix).as_posix()
    assert names == sorted(names)
    assert set(names) == {"bin/python", "bin/python3", "pyvenv.cfg", f"{sp}/pyarrow/__init__.py",
                          f"{sp}/tool/__init__.py", f"{sp}/tool/_native.so", f"{sp}/tool/commands/__init__.py",
                          f"{sp}/tool/commands/main.py"}
    with pytest.raises(CapabilityError, match="not running in one"):
        list(ship.packed_files(tmp_path / "src"))


def test_archive_cached_by_content(tmp_path):
    prefix, site = _fake_venv(tmp_path)
    cache = tmp_path / "cache"
    a = ship.pack_environment(prefix, cache)
    assert a.parent == cache and a.name.startswith("env-") and a.name.endswith(".tar.gz")
    with tarfile.open(a) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["bin/python"].issym() and members["bin/python"].linkname == "python3"
        sp = site.relative_to(prefix).as_posix()
        assert tar.extractfile(members[f"{sp}/tool/commands/main.py"]).read() == b"print(1)\n"
        assert not any("pyspark" in n or "__editable__" in n for n in members)
    inode = a.stat().st_ino
    assert ship.pack_environment(prefix, cache) == a and a.stat().st_ino == inode  # reused, not rebuilt
    (tmp_path / "src" / "commands" / "main.py").write_text("print(2)\n")  # an edited source: a new archive
    b = ship.pack_environment(prefix, cache)
    assert b != a and sorted(p.name for p in cache.glob("env-*")) == sorted([a.name, b.name])
    assert sorted(p.name for p in cache.iterdir()) == sorted([".lock", a.name, b.name])  # nothing else


def _old_archive(cache: Path, n: int, age: float) -> Path:
    p = cache / f"env-{n:024x}.tar.gz"
    p.write_bytes(b"old")
    t = time.time() - age
    os.utime(p, (t, t))
    return p


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_cache_keeps_the_archive_in_use_and_the_two_last_used(tmp_path):
    """The cache never grows without end: after a pack, the archive in use and the two most recently used
    others stay; older archives go, each one said on the status lines; other files are left alone."""
    prefix, _site = _fake_venv(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    old = [_old_archive(cache, i, age=3600 * (i + 1)) for i in range(5)]  # old[0] the most recent
    (cache / "notes.txt").write_text("mine")
    (cache / "env-dir").mkdir()
    lines: list[str] = []
    a = ship.pack_environment(prefix, cache, status=lines.append)
    kept = sorted(p.name for p in cache.glob("env-*.tar.gz"))
    assert kept == sorted([a.name, old[0].name, old[1].name])
    assert (cache / "notes.txt").read_text() == "mine" and (cache / "env-dir").is_dir()
    removed = [line for line in lines if line.startswith("removed ")]
    assert sorted(removed) == sorted(f"removed old environment archive {p} from the cache (keeping the one in "
                                     f"use and the 2 most recently used)" for p in old[2:])
    assert lines[0] == f"shipping new environment archive {a}"
    # the archive in use, however old, stays, and its reuse makes it the most recently used
    t = time.time() - 10 * 86400
    os.utime(a, (t, t))
    newer = [_old_archive(cache, 10 + i, age=60 * (i + 1)) for i in range(3)]
    lines.clear()
    assert ship.pack_environment(prefix, cache, status=lines.append) == a
    assert lines[0] == f"shipping cached environment archive {a}"
    assert sorted(p.name for p in cache.glob("env-*.tar.gz")) == sorted([a.name, newer[0].name, newer[1].name])
    assert time.time() - a.stat().st_mtime < 600
    # keep=0: only the archive in use stays; the others go, most recently used first
    assert ship.prune_cache(cache, newer[0], keep=0) == [a, newer[1]]
    assert sorted(p.name for p in cache.glob("env-*.tar.gz")) == [newer[0].name]


def test_cache_temporaries_of_live_writers_are_never_removed(tmp_path):
    """Archives are written aside (``.env-<hash>.tar.gz.<pid>.tmp``) and renamed: a temporary is removed only
    when its writer is gone and it has not changed for an hour; never one being written."""
    cache = tmp_path / "cache"
    cache.mkdir()
    in_use = _old_archive(cache, 1, age=0)
    dead = _dead_pid()
    old = time.time() - 2 * ship.STALE_TMP_S

    def tmp(n: int, pid: int, mtime: float | None) -> Path:
        p = cache / f".env-{n:024x}.tar.gz.{pid}.tmp"
        p.write_bytes(b"partial")
        if mtime is not None:
            os.utime(p, (mtime, mtime))
        return p

    writing = tmp(2, os.getpid(), old)  # a live writer (this process), however old the file
    fresh = tmp(3, dead, None)  # a writer this process cannot see (another PID namespace) that still writes
    stale = tmp(4, dead, old)
    assert ship.prune_cache(cache, in_use) == [stale]
    assert writing.exists() and fresh.exists() and in_use.exists() and not stale.exists()


def test_ship_settings(monkeypatch):
    monkeypatch.delenv("MASTER", raising=False)
    assert ship.wants_ship(None, True) is False and ship.wants_ship("local[2]", None) is False
    assert ship.wants_ship("spark://h:7077", None) is True and ship.wants_ship("spark://h:7077", False) is False
    conf = ship.ship_conf("/c/env-1.tar.gz")
    assert conf == {"spark.archives": "/c/env-1.tar.gz#environment",
                    "spark.pyspark.python": "./environment/bin/python"}
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert ship.cache_dir() == Path("/x/amqtool")


def test_shipped_python_only_while_the_context_is_made(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/venv/bin/python")
    with ship.shipped_python(ship.ship_conf("/c/env.tar.gz")):
        assert os.environ["PYSPARK_PYTHON"] == "./environment/bin/python"
    assert os.environ["PYSPARK_PYTHON"] == "/venv/bin/python"
    with ship.shipped_python({"spark.pyspark.python": "/venv/bin/python"}):  # nothing shipped
        assert os.environ["PYSPARK_PYTHON"] == "/venv/bin/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    with pytest.raises(RuntimeError):
        with ship.shipped_python(ship.ship_conf("/c/env.tar.gz")):
            raise RuntimeError("the context failed")
    assert "PYSPARK_PYTHON" not in os.environ


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_says_what_the_cache_pruning_removed(run_cli, tmp_path, monkeypatch, quiet):
    """The export command hands the engines a status callback: its lines (the archive shipped, each file the
    cache's pruning removed) go to stderr, and nowhere with --quiet; stdout keeps the report alone."""
    import json

    from amqtool.engines.export import fleet
    from amqtool.errors import Verdict

    seen = {}

    def fake_run(req, *, store_progress=None, status=None, **kw):
        seen["status"] = status
        if status is not None:
            status("removed old environment archive /c/env-0.tar.gz from the cache")
        return {"stores": []}, Verdict.OK

    monkeypatch.setattr(fleet, "run_fleet_export", fake_run)
    args = ["export", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "out"), "--report", "json"]
    code, out, err = run_cli(*args, *(["--quiet"] if quiet else []))
    assert code == 0 and json.loads(out) == {"verdict": "OK", "stores": []}
    if quiet:
        assert seen["status"] is None and err == ""
    else:
        assert "removed old environment archive /c/env-0.tar.gz from the cache" in err
