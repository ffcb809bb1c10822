"""Switching a KahaDB directory to its compacted journal in one atomic step, and finishing an interrupted one.

The protocol (also in amqtool-compact(1)); D is the store directory, S = ``D/../.<name>.amqtool-compact``:

1. S is created beside D (same filesystem), with D's owner, group and mode. The compacted ``db-N.log``
   files are written into S and fsynced; D's other plain files (``lock``, templates) are hard-linked into
   S, so they keep their inode, owner and mode. The index (``db.data``, ``db.redo``, ``db.free``) is not
   carried over: the broker rebuilds it from the journal.
2. ``S/amqtool-compact.json`` (the marker: what was compacted, when) is written and fsynced, then S itself.
3. ``renameat2(S, D, RENAME_EXCHANGE)`` swaps the two directories in one step (then the parent is
   fsynced): before it, D is the old store and S a partial or complete copy nobody reads; after it, D is
   the new store (with the marker) and S the old one.
4. Sub-directories of the old store (``data-archive/``) are moved into D, then S is removed and the marker
   deleted.

A kill at any instant therefore leaves D either the old store or the new one, never a mix. The next run
finishes the job first (:func:`finish_interrupted`): a marker in D means the exchange happened (finish
step 4); a staging directory without a marker in D is an unfinished copy (removed).

Filesystems that cannot exchange directories (or a D that is a mount point) make in-place compaction
refuse with a one-line error; ``-o DEST`` still works there.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import stat
import time
from pathlib import Path

from amqtool.errors import AmqtoolError
from amqtool.store import atomic

MARKER = "amqtool-compact.json"
INDEX_FILES = ("db.data", "db.redo", "db.free")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def staging_dir(directory: Path) -> Path:
    return directory.parent / f".{directory.name}.amqtool-compact"


def is_journal_name(name: str) -> bool:
    return name.startswith("db-") and name.endswith(".log") and name[3:-4].isdigit()


def exchange(a: Path, b: Path) -> None:
    """Swap two directory entries atomically (``renameat2(2)`` with ``RENAME_EXCHANGE``)."""
    atomic.checkpoint("rename", b)
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise AmqtoolError("this C library has no renameat2(): cannot switch the store atomically; "
                           "compact into a copy with -o DEST instead", path=str(b))
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EBUSY, errno.EOPNOTSUPP):
            raise AmqtoolError(f"cannot swap directories atomically here ({os.strerror(err)}): compact into "
                               f"a copy with -o DEST instead", path=str(b))
        raise OSError(err, os.strerror(err), str(b))
    atomic.fsync_dir(b.parent)


def prepare_staging(directory: Path) -> Path:
    """Create the empty staging directory with ``directory``'s owner, group and mode."""
    s = staging_dir(directory)
    os.mkdir(s, 0o700)
    atomic.copy_owner_and_mode(directory, s)
    return s


def carry_plain_files(old: Path, new: Path) -> None:
    """Hard-link ``old``'s plain files other than journal and index files into ``new``."""
    for name in sorted(os.listdir(old)):
        if is_journal_name(name) or name in INDEX_FILES or name == MARKER:
            continue
        p = old / name
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            os.link(p, new / name)


def write_marker(new: Path, doc: dict) -> None:
    atomic.write_file_atomic(new / MARKER, (json.dumps(doc, indent=1) + "\n").encode())
    atomic.fsync_dir(new)


def switch(directory: Path, staged: Path) -> None:
    """Steps 3 and 4 of the protocol: ``staged`` (complete, with its marker) becomes ``directory``."""
    exchange(staged, directory)
    finish_switched(directory, staged)


def finish_switched(directory: Path, old: Path) -> None:
    """Step 4: move the old store's sub-directories across, remove it, then the marker."""
    if old.is_dir():
        for name in sorted(os.listdir(old)):
            p = old / name
            if os.path.isdir(p) and not os.path.islink(p) and not (directory / name).exists():
                atomic.rename(p, directory / name)
        atomic.checkpoint("unlink", old)
        shutil.rmtree(old)
        atomic.fsync_dir(directory.parent)
    atomic.unlink(directory / MARKER, missing_ok=True)


def finish_interrupted(directory: Path) -> str | None:
    """Finish or undo what a killed run left (see the module docstring); what was done, or None."""
    s = staging_dir(directory)
    if (directory / MARKER).exists():
        finish_switched(directory, s)
        return "finished the switch of an interrupted compaction"
    if s.exists():
        atomic.checkpoint("unlink", s)
        shutil.rmtree(s)
        atomic.fsync_dir(directory.parent)
        return "removed the partial copy of an interrupted compaction"
    return None


def marker_doc(directory: Path, files_before: int, bytes_before: int, files_after: int, bytes_after: int) -> dict:
    return {"tool": "amqtool compact", "store": str(directory), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "filesBefore": files_before, "bytesBefore": bytes_before,
            "filesAfter": files_after, "bytesAfter": bytes_after}
