"""Packing the environment for Spark workers (:mod:`amqtool.engines.export.ship`): what goes in (the venv
without PySpark; an editable install's source packages instead of its finder), the cache by content, and
the session settings. The cluster test is tests/integration/test_spark_ship.py."""
from __future__ import annotations

import os
import tarfile
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
    mtime = a.stat().st_mtime_ns
    assert ship.pack_environment(prefix, cache) == a and a.stat().st_mtime_ns == mtime  # reused, not rebuilt
    (tmp_path / "src" / "commands" / "main.py").write_text("print(2)\n")  # an edited source: a new archive
    b = ship.pack_environment(prefix, cache)
    assert b != a and sorted(p.name for p in cache.iterdir()) == sorted([a.name, b.name])


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
