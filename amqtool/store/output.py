"""The one output rule of every writer (export, recover -o, compact -o, create, create --from).

Before a writer does any work it claims its output with :func:`claim` (an :class:`Output`), which:

1. **resolves the output's real path**: symlinks are followed (``-o link`` writes where the link points,
   the link stays), and the part of the path that does not exist yet is kept as given;
2. **refuses an output that is, contains or lies inside an input**. The inputs are the paths the command
   reads (:func:`store_inputs`: the path given, the store's root and its journal, paging and large-message
   directories, KahaDB sub-stores) and the store's broker instance (the directory whose ``etc/broker.xml``
   names the store's directories, or whose ``conf/activemq.xml`` names the KahaDB directory). Paths are
   compared by ``(st_dev, st_ino)`` of every real ancestor, never by name, so a second path to the same
   directory (a symlink, a bind mount) is seen: the output's ancestors are compared with each input, and
   each input's ancestors with the output;
3. **refuses a target that is neither a regular file nor a directory** (``/dev/full``, a fifo, a socket):
   it is never replaced, ``--force`` or not;
4. **replaces only an earlier output of amqtool**, and only with ``force``: a target that exists is refused
   unless ``force`` is given and the :class:`OutputKind` recognises it by its marker (an export directory by
   ``export.json`` and nothing but export tables beside it; an export XML file by the ``user.amqtool.output``
   extended attribute set when it was written). Kinds without a marker (the Artemis and KahaDB stores that
   ``compact -o``, ``recover -o`` and ``create`` write) are never replaced: their output must be absent or an
   empty directory;
5. **excludes a second writer of the same output**: an exclusive ``flock`` on ``.<name>.amqtool-lock`` in the
   output's real parent, held until the output is in place (:meth:`Output.release`, or the process ends);
   the second writer gets exit 3 and one line naming the holder's PID;
6. **removes the leftovers of killed writers** beside the output (:func:`sweep_leftovers`): a temporary
   ``.<name>.amqtool-<label>-<pid>`` whose process is gone (or whose PID now belongs to a process started
   after the temporary was last changed: a reused PID), and a lock file nobody holds. Each removal is
   reported through :data:`notice` (the command line prints it on stderr: the library never prints).

Every refusal is a :class:`~amqtool.errors.UsageError` (exit 3) naming the output, raised before anything
is written.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from amqtool.errors import AmqtoolError, UsageError

#: Called with one line for each leftover removed (the command line sets it to print on stderr).
notice: Callable[[str], None] | None = None

#: The extended attribute that marks a single-file output written by amqtool (``export -f xml``): the file's
#: bytes are `artemis data exp`'s document, so the mark cannot be inside it.
XATTR = "user.amqtool.output"

# `.<name>.amqtool-<label>-<pid>`: aside_dir's and the export work directory's names
_TEMP = re.compile(r"^\.(?P<name>.+)\.amqtool-(?P<label>[a-z]+)-(?P<pid>\d+)$")
_LOCK_SUFFIX = ".amqtool-lock"
# a live writer's temporary was changed no earlier than its process started; allow for clock granularity
_START_SLACK = 1.0


# --- what an output is -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputKind:
    """What a writer writes: a directory or one file, and how an earlier one of amqtool is recognised
    (``recognise(path) -> reason it is not, or None``); ``recognise=None``: never replaced."""

    name: str
    is_dir: bool
    recognise: Callable[[Path], str | None] | None = None
    marker: str | None = None  # for messages: what identifies an earlier output
    make_parents: bool = False  # missing parent directories are created (once the output is claimed)
    existing_dir_ok: bool = False  # an existing directory is written into (the writer refuses what it holds)


EXPORT_TABLES = frozenset({"messages", "bindings", "subscriptions", "stores"})


def _not_export_dir(path: Path) -> str | None:
    """None when ``path`` is an export directory of amqtool: ``export.json`` (a JSON object with the export
    document's ``schemaVersion``, ``format`` and ``output``) and, beside it, only the table directories, whose
    files are all ``part-*`` files (and Spark's partition directories)."""
    try:
        with open(path / "export.json", "rb") as fh:
            doc = json.loads(fh.read(1 << 24))
    except (OSError, ValueError):
        return "it holds no export.json of amqtool"
    if not isinstance(doc, dict) or not {"schemaVersion", "format", "output"} <= doc.keys():
        return "its export.json is not amqtool's export document"
    for entry in os.scandir(path):
        if entry.name == "export.json":
            continue
        if entry.name not in EXPORT_TABLES or not entry.is_dir(follow_symlinks=False):
            return f"it holds {entry.name!r}, which no export writes"
        for dirpath, dirs, names in os.walk(entry.path):
            for d in dirs:
                if os.path.islink(os.path.join(dirpath, d)):
                    return f"it holds a symbolic link {os.path.join(dirpath, d)!r}"
            for n in names:
                p = os.path.join(dirpath, n)
                if not n.startswith("part-") or not stat.S_ISREG(os.lstat(p).st_mode):
                    return f"it holds {os.path.relpath(p, path)!r}, which no export writes"
    return None


def _not_export_file(path: Path) -> str | None:
    try:
        value = os.getxattr(path, XATTR, follow_symlinks=False)
    except OSError:
        return f"it does not carry the {XATTR} mark of an amqtool export"
    return None if value == b"export" else f"its {XATTR} mark is not an export's"


EXPORT_DIR = OutputKind("export", True, _not_export_dir, "export.json")
EXPORT_FILE = OutputKind("export", False, _not_export_file, f"the {XATTR} extended attribute")
STORE = OutputKind("store", True, None, make_parents=True)
#: ``create``: journals pre-created in a directory that may exist (a broker instance, a journal directory);
#: the writer refuses one that holds journal files, and a failed create removes what it wrote.
JOURNAL_DIR = OutputKind("journal", True, None, make_parents=True, existing_dir_ok=True)


def mark_file(path: str | os.PathLike) -> None:
    """Mark a single-file export as amqtool's (best effort: a filesystem without user extended attributes
    leaves it unmarked, and a later ``--force`` then refuses to replace it)."""
    try:
        os.setxattr(path, XATTR, b"export")
    except OSError:
        pass


# --- real paths and identity ------------------------------------------------------------------------------

def real_path(path: str | os.PathLike) -> Path:
    """``path`` with every symlink resolved, made absolute; the parts that do not exist are kept."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _ancestors(path: Path) -> list[tuple[Path, tuple[int, int]]]:
    """``path`` (when it exists) and each existing ancestor, real paths, with their identities."""
    out = []
    p = real_path(path)
    while True:
        ident = _identity(p)
        if ident is not None:
            out.append((p, ident))
        if p.parent == p:
            return out
        p = p.parent


def _is_under(path: Path, ident: tuple[int, int]) -> bool:
    return any(i == ident for _p, i in _ancestors(path))


# --- the inputs of a command ------------------------------------------------------------------------------

def store_inputs(store, given: str | os.PathLike | None = None) -> list[Path]:
    """Every directory a command reading ``store`` (a layout ``ArtemisStore`` or ``KahaDBStore``) reads, and
    the broker instance holding it when one is found. ``given``: the path on the command line."""
    paths: list[Path] = []
    for g in (given, getattr(store, "given", None)):
        if g is not None:
            paths.append(Path(g))
    root = getattr(store, "root", None)
    if root is not None:
        paths.append(Path(root))
    if getattr(store, "kind", None) in ("kahadb", "leveldb", "replicated-leveldb"):
        paths += [Path(d) for d in store.directories if d is not None]
        log_dir = getattr(store, "log_directory", None)  # LevelDB's logs may live apart
        if log_dir is not None:
            paths.append(Path(log_dir))
        if store.activemq_xml:
            xml = Path(store.activemq_xml)
            paths.append(xml)
            if xml.parent.name == "conf":  # <instance>/conf/activemq.xml: the instance
                paths.append(xml.parent.parent)
    else:
        for jd in (getattr(store, "bindings", None), getattr(store, "messages", None), getattr(store, "jms", None)):
            if jd is not None:
                paths.append(Path(jd.directory))
        for d in (getattr(store, "paging_dir", None), getattr(store, "large_messages_dir", None)):
            if d is not None:
                paths.append(Path(d))
        settings = getattr(store, "settings", None)
        if settings is not None and getattr(settings, "source", None):
            xml = Path(settings.source)
            paths.append(xml)
            if xml.parent.name == "etc" and settings.instance_dir is not None:  # <instance>/etc/broker.xml
                paths.append(Path(settings.instance_dir))
    paths += _instances_of(paths, kahadb=getattr(store, "kind", None) != "artemis")
    return paths


def _instances_of(paths: list[Path], *, kahadb: bool) -> list[Path]:
    """The broker instances above ``paths``: an ancestor whose ``etc/broker.xml`` (Artemis) or
    ``conf/activemq.xml`` (Classic) names one of them as a store directory."""
    idents = {i for i in (_identity(p) for p in paths) if i is not None}
    found: list[Path] = []
    seen: set[Path] = set()
    for p in paths:
        for anc, _ident in _ancestors(p):
            if anc in seen:
                continue
            seen.add(anc)
            try:
                if kahadb:
                    xml = anc / "conf" / "activemq.xml"
                    if xml.is_file():
                        from amqtool.store.activemqxml import read_activemq_xml

                        dirs = [read_activemq_xml(xml).store_directory]
                    else:
                        continue
                else:
                    xml = anc / "etc" / "broker.xml"
                    if xml.is_file():
                        from amqtool.store.brokerxml import read_broker_xml

                        s = read_broker_xml(xml)
                        dirs = [s.journal_dir, s.bindings_dir, s.paging_dir, s.large_messages_dir]
                    else:
                        continue
            except (AmqtoolError, OSError):
                continue
            if any(d is not None and _identity(Path(d)) in idents for d in dirs):
                found.append(anc)
    return found


# --- the rule ---------------------------------------------------------------------------------------------

def check(out: str | os.PathLike, kind: OutputKind, *, inputs: Iterable[str | os.PathLike] = (),
          force: bool = False) -> Path:
    """Apply the rule (module docstring, 1-4) to ``out``; returns its real path. UsageError on refusal."""
    given = os.fspath(out)
    real = real_path(out)
    inputs = [Path(p) for p in inputs]
    for p in inputs:
        ident = _identity(p)
        if ident is None:
            continue
        # the output is the input, or lies inside it (a bind mount or symlink is another path to the same inode)
        if _is_under(real, ident):
            what = "is" if _identity(real) == ident else "lies inside"
            raise UsageError(f"the output {what} the input {p}: refusing to write into what is being read",
                             path=given)
        # the output contains the input (replacing it would delete the input)
        out_ident = _identity(real)
        if out_ident is not None and _is_under(p, out_ident):
            raise UsageError(f"the output contains the input {p}: refusing to replace it", path=given)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise UsageError(f"cannot examine the output: {err.strerror}", path=given) from None
    if st is not None:
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise UsageError("the output is neither a regular file nor a directory: refusing to replace it",
                             path=given)
        if kind.existing_dir_ok:
            if not stat.S_ISDIR(st.st_mode):
                raise UsageError("the output exists and is not a directory", path=given)
        elif kind.recognise is None:
            if not stat.S_ISDIR(st.st_mode) or any(os.scandir(real)):
                raise UsageError("the output exists and is not an empty directory", path=given)
        elif not force:
            raise UsageError("output exists; use --force to replace an earlier output of amqtool", path=given)
        else:
            if stat.S_ISDIR(st.st_mode) != kind.is_dir:
                raise UsageError(f"output exists and is a {'directory' if stat.S_ISDIR(st.st_mode) else 'file'}; "
                                 f"--force replaces only an earlier {kind.name} of amqtool", path=given)
            why = kind.recognise(real)
            if why is not None:
                raise UsageError(f"--force replaces only an earlier {kind.name} of amqtool, and {why}", path=given)
    parent = real.parent
    if kind.make_parents:
        while not os.path.lexists(parent) and parent.parent != parent:
            parent = parent.parent
    if not parent.is_dir():
        raise UsageError("output directory does not exist" if not os.path.lexists(parent) else
                         "the output's parent is not a directory", path=str(parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError("output directory is not writable", path=str(parent))
    return real


# --- the lock -------------------------------------------------------------------------------------------

def lock_path(real: Path) -> Path:
    return real.parent / f".{real.name}{_LOCK_SUFFIX}"


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path`` (created if needed), or None when another holds it.
    The lock file is removed by its holder on release, so after locking we check that ``path`` still names
    the inode we locked; if not, someone released and removed it meanwhile: try again."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        return "another process"
    return f"process {text}" if text.isdigit() else "another process"


class Output:
    """A claimed output: its real :attr:`path`, the lock held on it, and the leftovers removed."""

    def __init__(self, path: Path, kind: OutputKind, lock_fd: int | None, removed: list[Path]):
        self.path = path
        self.kind = kind
        self._lock_fd = lock_fd
        self.removed = removed

    def release(self) -> None:
        """Drop the lock (and its file). Idempotent."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        try:
            os.unlink(lock_path(self.path))  # while still holding it: see _try_lock
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> "Output":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim(out: str | os.PathLike, kind: OutputKind, *, inputs: Iterable[str | os.PathLike] = (),
          force: bool = False) -> Output:
    """Check ``out`` (:func:`check`), lock it against a second writer, remove dead writers' leftovers beside
    it, then check again under the lock (a writer that finished meanwhile may have created it)."""
    inputs = list(inputs)
    real = check(out, kind, inputs=inputs, force=force)
    if kind.make_parents:
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UsageError(f"cannot create the output's directory: {err.strerror}", path=str(real.parent)) from None
    lp = lock_path(real)
    try:
        fd = _try_lock(lp)
    except OSError as err:
        raise UsageError(f"cannot lock the output: {err.strerror}", path=str(lp)) from None
    if fd is None:
        raise UsageError(f"another amqtool ({_holder(lp)}) is writing this output; try again when it is done",
                         path=os.fspath(out))
    result = Output(real, kind, fd, [])
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        result.removed = sweep_leftovers(real.parent)
        check(out, kind, inputs=inputs, force=force)
    except BaseException:
        result.release()
        raise
    return result


@contextlib.contextmanager
def claiming(out: str | os.PathLike | None, kind: OutputKind = STORE, *, inputs: Iterable[str | os.PathLike] = (),
             force: bool = False) -> Iterator[Output | None]:
    """:func:`claim` ``out`` for the block and release it afterwards; ``out=None`` (nothing to write, a dry
    run): yields None and claims nothing."""
    if out is None:
        yield None
        return
    claimed = claim(out, kind, inputs=inputs, force=force)
    try:
        yield claimed
    finally:
        claimed.release()


# --- leftovers --------------------------------------------------------------------------------------------

def _writer_alive(pid: int, changed: float) -> bool:
    """True when ``pid`` may still be the writer of a temporary last changed at ``changed``: it runs, and it
    started no later than that (a process started afterwards got a reused PID)."""
    if pid == os.getpid():
        return True
    try:
        import psutil

        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.create_time() <= changed + _START_SLACK
    except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and friends: not alive, or not ours to judge
        return not _gone(pid)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep_leftovers(directory: str | os.PathLike) -> list[Path]:
    """Remove, in ``directory``, the temporaries of amqtool writers that died (module docstring, 6) and lock
    files nobody holds; returns what was removed (each is also reported through :data:`notice`)."""
    directory = Path(directory)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP.match(entry.name)
        p = Path(entry.path)
        if m is not None:
            pid = int(m.group("pid"))
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if _writer_alive(pid, st.st_mtime):
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            except FileNotFoundError:
                continue
            except OSError as err:
                _say(f"could not remove the leftover {p} of a killed amqtool (pid {pid}): {err.strerror}")
                continue
            removed.append(p)
            _say(f"removed {p}, left by an amqtool run (pid {pid}) that did not finish")
        elif entry.name.startswith(".") and entry.name.endswith(_LOCK_SUFFIX):
            fd = None
            try:
                fd = _try_lock(p)
                if fd is not None:
                    os.unlink(p)
            except OSError:
                pass
            finally:
                if fd is not None:
                    os.close(fd)
    return removed


def _say(line: str) -> None:
    if notice is not None:
        notice(line)


def remove_leftovers_beside(path: str | os.PathLike) -> list[Path]:
    """:func:`sweep_leftovers` in the directory that holds ``path`` (its real parent)."""
    try:
        return sweep_leftovers(real_path(path).parent)
    except OSError as err:  # pragma: no cover - a directory that vanished meanwhile
        if err.errno == errno.ENOENT:
            return []
        raise
