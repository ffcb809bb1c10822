"""The parts of an Artemis store that ``compact -o DEST`` carries over unchanged: page files, large-message
files and the node manager's ``server.lock``, so that DEST is a store a broker can start from.

A broker started on the journals alone would find every paged message and every large-message body
missing (``verify`` reports ``large-message-missing``). Each file is cloned (``FICLONE``: copy-on-write, when
source and destination share a filesystem that supports it, such as XFS or Btrfs) or else copied, then
fsynced, with the source's owner, group and mode. Hard links are never used: a broker started on DEST appends
to its page files in place (``Page.write``), and a hard link would carry those writes into the source store.

``server.lock`` holds the node ID (``FileLockNodeManager``): keeping it keeps the broker's identity, which
names its store-and-forward queues and duplicate-detection caches, so DEST can replace the source. Two brokers
must then never run on both at once; the man page says so. The lock files proper (``serverlock.1``,
``serverlock.2``, ``lock/cli.lock``) are not copied: they mean nothing on disk.
"""
from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from amqtool.store import atomic

FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h
_CHUNK = 1 << 20


@dataclass
class CarriedOver:
    """What was copied into DEST besides the compacted journals."""

    files: int = 0
    bytes: int = 0
    cloned: int = 0  # of ``files``, by FICLONE

    def to_json(self) -> dict:
        return {"files": self.files, "bytes": self.bytes, "cloned": self.cloned}


def _copy_bytes(sfd: int, dfd: int, dst: Path) -> None:
    """In-kernel copy (``copy_file_range``), else read and write, in bounded chunks."""
    pos = 0
    kernel = hasattr(os, "copy_file_range")
    while True:
        atomic.checkpoint("write", dst)
        if kernel:
            try:
                n = os.copy_file_range(sfd, dfd, _CHUNK, pos, pos)
            except OSError as err:
                if err.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                kernel = False
                continue
        else:
            chunk = os.pread(sfd, _CHUNK, pos)
            n = os.pwrite(dfd, chunk, pos) if chunk else 0
        if n == 0:
            return
        pos += n


def _clone_or_copy(src: Path, dst: Path, done: CarriedOver, warnings: list[str]) -> None:
    st = os.stat(src)
    sfd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, st.st_mode & 0o7777)
        try:
            try:
                fcntl.ioctl(dfd, FICLONE, sfd)
                done.cloned += 1
            except OSError as err:
                if err.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EPERM):
                    raise
                _copy_bytes(sfd, dfd, dst)
            atomic.fsync(dfd, dst)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    warnings.extend(atomic.copy_owner_and_mode(src, dst))
    done.files += 1
    done.bytes += st.st_size


def _copy_tree(src: Path, dst: Path, done: CarriedOver, warnings: list[str], exclude=frozenset()) -> None:
    dst.mkdir()
    warnings.extend(atomic.copy_owner_and_mode(src, dst))
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        path = Path(entry.path)
        if path in exclude:
            continue
        if entry.is_dir(follow_symlinks=False):
            _copy_tree(path, dst / entry.name, done, warnings, exclude)
        elif entry.is_file(follow_symlinks=False):
            _clone_or_copy(path, dst / entry.name, done, warnings)
    atomic.fsync_dir(dst)


def carry_over(store, dest: Path, warnings: list[str], exclude=frozenset()) -> CarriedOver:
    """Copy ``store``'s paging and large-messages directories (under their own names) and its node ID file
    into ``dest``, the directory that receives the compacted journals as its sub-directories. Files whose
    paths are in ``exclude`` are left out (``recover``: damaged page and large-message files)."""
    done = CarriedOver()
    for directory in (store.paging_dir, store.large_messages_dir):
        if directory is not None and Path(directory).is_dir():
            _copy_tree(Path(directory), dest / Path(directory).name, done, warnings, exclude)
    if store.messages is not None:
        node = store.messages.directory / "server.lock"
        if node.is_file():
            _clone_or_copy(node, dest / store.messages.directory.name / "server.lock", done, warnings)
    atomic.fsync_dir(dest)
    return done
