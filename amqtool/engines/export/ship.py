"""Shipping amqtool to Spark workers that do not have it: the running virtual environment packed as a
``tar.gz`` and handed to the cluster with ``spark.archives``, as Spark's Python package management guide
describes for virtualenv (``venv-pack`` there): each executor unpacks it into its working directory as
``environment/`` and runs its Python workers with ``PYSPARK_PYTHON=./environment/bin/python``
(``spark.pyspark.python``).

What is packed (:func:`pack_environment`): ``sys.prefix`` (the venv: its ``bin/`` with the interpreter
links, ``pyvenv.cfg``, ``lib/pythonX.Y/site-packages`` with pyarrow and the rest), with symlinks kept as
symlinks, except PySpark itself (~0.5 GB of jars; the executors' Python workers take ``pyspark.zip`` from
their own Spark installation, first on their ``PYTHONPATH``). An editable install (``pip install -e``: the
package lives in a source tree the workers may not see, reached through setuptools' ``__editable__``
finder) ships the source packages instead of the finder: each package the finder maps (``amqtool``, with
its C extension built in place, ``amqtool.commands``, ...) is packed under site-packages as a regular
package.

Like a venv-pack archive, the environment carries no interpreter: its ``bin/python`` links to the base
Python the venv was made from (``pyvenv.cfg`` ``home``), which must exist at that path on every worker
(the same Python build: the C extensions are compiled for it).

Caching: the archive is named by a hash of what it holds (every packed file's path, mode and bytes, and
each symlink's target), under ``$XDG_CACHE_HOME/amqtool`` (``~/.cache/amqtool``); a second run with the same
environment reuses it (written aside as ``.env-<hash>.tar.gz.<pid>.tmp`` and renamed, so a concurrent or
interrupted run never leaves a partial archive under that name).

The cache is kept small (:func:`prune_cache`, after every pack): the archive in use and the ``KEEP_OTHERS``
most recently used others stay (a reused archive's modification time is set to now, so "recent" is "last
used": a job of another environment that started lately keeps its archive); older archives are removed, and
so are temporaries whose writer is gone (its pid is not alive here and the file has not changed for
``STALE_TMP_S``). A temporary being written is never touched, and a complete archive only under the cache's
lock (``.lock``, ``flock``), which a reuse takes too, so that an archive chosen for a job is not removed
between its choice and its timestamp.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import re
import stat
import sys
import tarfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from amqtool.errors import CapabilityError

ARCHIVE_ALIAS = "environment"
KEEP_OTHERS = 2  # archives kept besides the one in use
STALE_TMP_S = 3600  # a temporary unchanged this long, whose writer is not alive, is an interrupted run's
PACK_VERSION = 1  # changes what is packed: part of the hash
SKIP_TOP = ("pyspark",)  # top-level site-packages entries left out (and their dist-info)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "amqtool"


def _site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def editable_packages(site: Path) -> dict[str, str]:
    """The packages an editable install maps to source directories (setuptools' ``__editable___*_finder``
    modules' ``MAPPING``: dotted name -> directory); ``{}`` when nothing is installed editable."""
    out: dict[str, str] = {}
    for f in sorted(site.glob("__editable___*_finder.py")):
        try:  # loaded from its file (not imported by name: the prefix need not be this interpreter's)
            spec = importlib.util.spec_from_file_location(f"_amqtool_ship_{f.stem}", f)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception:  # noqa: BLE001 - a broken finder maps nothing
            continue
        out.update(getattr(mod, "MAPPING", {}) or {})
    return out


def _skipped(rel: Path) -> bool:
    parts = rel.parts
    if len(parts) >= 4 and parts[0] == "lib" and parts[2] == "site-packages":
        top = parts[3]
        if top in SKIP_TOP or any(top.startswith(f"{s}-") and top.endswith(".dist-info") for s in SKIP_TOP):
            return True
        if top.startswith("__editable__"):
            return True
    return False


def packed_files(prefix: Path | None = None) -> Iterator[tuple[str, Path]]:
    """``(name in the archive, path)`` of everything :func:`pack_environment` packs, sorted (see the module
    docstring): the venv without PySpark and the editable finders, then the editable packages' sources."""
    prefix = Path(prefix or sys.prefix)
    if not (prefix / "pyvenv.cfg").exists():
        raise CapabilityError("--ship packs the running virtual environment, and amqtool is not running in one "
                              "(give --no-ship when the workers have amqtool)")
    site = _site_packages(prefix)
    entries: list[tuple[str, Path]] = []
    for dirpath, dirs, names in os.walk(prefix):
        d = Path(dirpath)
        rel_dir = d.relative_to(prefix)
        keep_dirs = []
        for n in sorted(dirs):
            rel = rel_dir / n
            if _skipped(rel):
                continue
            if (d / n).is_symlink():
                entries.append((rel.as_posix(), d / n))  # a link, packed as one
            else:
                keep_dirs.append(n)
        dirs[:] = keep_dirs
        for n in sorted(names):
            rel = rel_dir / n
            if not _skipped(rel):
                entries.append((rel.as_posix(), d / n))
    site_rel = site.relative_to(prefix)
    for dotted, src in sorted(editable_packages(site).items()):
        base = site_rel.joinpath(*dotted.split("."))
        for dirpath, dirs, names in os.walk(src):
            dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "build") and not x.startswith("."))
            d = Path(dirpath)
            for n in sorted(names):
                if n.endswith((".pyc", ".o")):
                    continue
                entries.append(((base / d.relative_to(src) / n).as_posix(), d / n))
    yield from sorted(entries)


def environment_hash(entries: list[tuple[str, Path]]) -> str:
    """sha256 of what the archive holds: each entry's name, mode and content (a symlink: its target)."""
    h = hashlib.sha256(f"amqtool-ship {PACK_VERSION}\n".encode())
    for name, path in entries:
        st = os.lstat(path)
        h.update(f"{name}\0{stat.S_IMODE(st.st_mode):o}\0".encode())
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + os.readlink(path).encode())
        elif stat.S_ISREG(st.st_mode):
            h.update(b"F%d\0" % st.st_size)
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


_ARCHIVE = re.compile(r"^env-[0-9a-f]{24}\.tar\.gz$")
_TEMPORARY = re.compile(r"^\.env-[0-9a-f]{24}\.tar\.gz\.(\d+)\.tmp$")


@contextmanager
def _cache_lock(cache: Path):
    """The cache's lock (an exclusive ``flock`` on ``.lock``): held to choose or remove archives."""
    fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def prune_cache(cache: Path, in_use: Path, keep: int = KEEP_OTHERS, now: float | None = None) -> list[Path]:
    """Remove from ``cache`` the archives other than ``in_use`` and the ``keep`` most recently used others,
    and the temporaries of writers that are gone (see the module docstring). Returns what was removed."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    with _cache_lock(cache):
        archives, temporaries = [], []
        for entry in os.scandir(cache):
            if not entry.is_file(follow_symlinks=False):
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:  # removed meanwhile (a temporary renamed into place)
                continue
            if _ARCHIVE.match(entry.name) and entry.name != in_use.name:
                archives.append((mtime, entry.name))
            elif (m := _TEMPORARY.match(entry.name)) and now - mtime > STALE_TMP_S and not _alive(int(m.group(1))):
                temporaries.append(entry.name)
        archives.sort(reverse=True)
        for name in [n for _, n in archives[keep:]] + temporaries:
            try:
                os.unlink(cache / name)
            except FileNotFoundError:
                continue
            removed.append(cache / name)
    return removed


def pack_environment(prefix: Path | None = None, cache: Path | None = None,
                     status: Callable[[str], None] | None = None, keep: int = KEEP_OTHERS) -> Path:
    """The archive of the running environment (made once per content, see the module docstring); the cache
    is pruned after (:func:`prune_cache`), each removal said through ``status``."""
    entries = list(packed_files(prefix))
    digest = environment_hash(entries)
    cache = Path(cache or cache_dir())
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / f"env-{digest[:24]}.tar.gz"
    with _cache_lock(cache):
        try:
            os.utime(archive)  # last used now: see prune_cache
            reused = True
        except FileNotFoundError:
            reused = False
    if not reused:
        _write_archive(archive, entries)
    if status is not None:
        status(f"shipping {'cached ' if reused else 'new '}environment archive {archive}")
    for p in prune_cache(cache, archive, keep):
        if status is not None:
            status(f"removed {'stale temporary' if p.name.startswith('.') else 'old environment archive'} {p} "
                   f"from the cache (keeping the one in use and the {keep} most recently used)")
    return archive


def _write_archive(archive: Path, entries: list[tuple[str, Path]]) -> None:
    """Pack ``entries`` aside (``.<name>.<pid>.tmp``, never touched by :func:`prune_cache` while its writer
    lives), then rename it to ``archive``."""
    cache = archive.parent
    tmp = cache / f".{archive.name}.{os.getpid()}.tmp"
    try:
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for name, path in entries:
                tar.add(path, arcname=name, recursive=False)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, archive)
    finally:
        if tmp.exists():
            tmp.unlink()


def ship_conf(archive: str | os.PathLike) -> dict[str, str]:
    """The session settings that hand ``archive`` to the executors and run their Python from it."""
    return {"spark.archives": f"{os.path.abspath(archive)}#{ARCHIVE_ALIAS}",
            "spark.pyspark.python": f"./{ARCHIVE_ALIAS}/bin/python"}


@contextmanager
def shipped_python(conf: dict[str, str]):
    """While a SparkContext is made from ``conf``: ``PYSPARK_PYTHON`` set to the shipped interpreter when
    ``conf`` ships one. PySpark's SparkContext takes its workers' Python from that variable only
    (``SparkContext.pythonExec``; ``spark.pyspark.python`` is read by spark-submit's launcher, which sets the
    variable), so a session started in process must set it, as Spark's packaging guide does; it is put back
    afterwards (the context keeps its own copy), so that later sessions are not affected."""
    if "spark.archives" not in conf or ARCHIVE_ALIAS not in conf.get("spark.pyspark.python", ""):
        yield
        return
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved


def wants_ship(master: str | None, ship: bool | None) -> bool:
    """Whether a session for ``master`` ships the environment: never for ``local`` masters (the tasks run
    here); else as ``--ship``/``--no-ship`` say, shipping by default."""
    master = master or os.environ.get("MASTER") or "local[*]"
    if master.startswith("local"):
        return False
    return True if ship is None else ship
