"""Which mount holds a path: ``/proc/self/mountinfo`` parsed, longest mount point wins.

Everything takes a ``root`` (default ``/``) so recorded trees (``<tmp>/proc/self/mountinfo``,
``<tmp>/sys/...``) can stand in for the live machine in tests. With a non-default root, paths are taken
literally (no ``realpath``, nothing is stat'ed): they name places in the recorded machine, not this one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# Filesystems by what they mean for a journal (fs type as in mountinfo field 9).
LOCAL_BLOCK_FS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "reiserfs", "bcachefs", "nilfs2", "vfat", "exfat",
    "ntfs", "ntfs3", "hfsplus",
})
MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs", "shm"})
NETWORK_FS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs", "lustre", "gpfs", "ocfs2",
    "gfs2", "afs", "beegfs", "orangefs",
})
UNION_FS = frozenset({"overlay", "overlayfs", "aufs", "unionfs"})


def fs_class(fstype: str) -> str:
    """``local``, ``memory``, ``network``, ``union``, ``fuse``, ``zfs`` or ``other`` for an fs type."""
    t = (fstype or "").lower()
    if t in LOCAL_BLOCK_FS:
        return "local"
    if t in MEMORY_FS:
        return "memory"
    if t in NETWORK_FS:
        return "network"
    if t in UNION_FS:
        return "union"
    if t == "fuseblk":
        return "fuse"  # a block device under FUSE (ntfs-3g, exfat-fuse): FUSE semantics apply
    if t == "fuse" or t.startswith("fuse."):
        return "fuse"
    if t == "zfs":
        return "zfs"
    return "other"


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo (proc(5))."""

    mount_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: str
    fstype: str
    source: str
    super_options: str

    @property
    def fs_class(self) -> str:
        return fs_class(self.fstype)

    def super_option(self, name: str) -> str | None:
        """A ``name=value`` from the superblock options (e.g. overlay ``upperdir``)."""
        for opt in _split_options(self.super_options):
            key, _, value = opt.partition("=")
            if key == name:
                return value
        return None

    @property
    def read_only(self) -> bool:
        return "ro" in self.options.split(",")

    def to_json(self) -> dict:
        return {
            "mountPoint": self.mount_point,
            "fstype": self.fstype,
            "source": self.source,
            "device": f"{self.major}:{self.minor}",
            "options": self.options,
        }


def _split_options(text: str) -> list[str]:
    # Overlay's lowerdir may hold ':' and escaped ','; a plain split on ',' is what the kernel prints.
    return [o for o in text.split(",") if o]


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 0 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse mountinfo text; malformed lines are skipped (the kernel never writes them)."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        try:
            sep = parts.index("-", 6)
            major, minor = parts[2].split(":")
            mounts.append(Mount(
                mount_id=int(parts[0]),
                major=int(major),
                minor=int(minor),
                root=_unescape(parts[3]),
                mount_point=_unescape(parts[4]),
                options=parts[5],
                fstype=parts[sep + 1],
                source=_unescape(parts[sep + 2]) if len(parts) > sep + 2 else "",
                super_options=parts[sep + 3] if len(parts) > sep + 3 else "",
            ))
        except (ValueError, IndexError):
            continue
    return mounts


def read_mounts(root: str = "/") -> list[Mount]:
    """The mount table of ``root`` (``<root>/proc/self/mountinfo``)."""
    with open(os.path.join(root, "proc/self/mountinfo"), encoding="utf-8", errors="surrogateescape") as fh:
        return parse_mountinfo(fh.read())


def _contains(mount_point: str, path: str) -> bool:
    if mount_point == "/":
        return path.startswith("/")
    return path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def resolve_path(path: str, root: str = "/") -> str:
    """The absolute path as the mount table sees it: ``realpath`` on the live machine, literal otherwise."""
    if root in ("/", ""):
        return os.path.realpath(path)
    return os.path.normpath(path if os.path.isabs(path) else "/" + path)


def find_mount(path: str, root: str = "/", mounts: list[Mount] | None = None) -> Mount | None:
    """The mount that holds ``path``: the last-mounted entry with the longest containing mount point.

    On the live machine the candidate must also match the path's ``st_dev`` when one does (bind mounts
    and stacked mounts at one place: the kernel shows the topmost, which is the last line).
    """
    if mounts is None:
        mounts = read_mounts(root)
    path = resolve_path(path, root)
    candidates = [m for m in mounts if _contains(m.mount_point, path)]
    if not candidates:
        return None
    best_len = max(len(m.mount_point) for m in candidates)
    best = [m for m in candidates if len(m.mount_point) == best_len]
    if root in ("/", "") and len(best) > 1:
        try:
            st = os.stat(path)
            same = [m for m in best if (m.major, m.minor) == (os.major(st.st_dev), os.minor(st.st_dev))]
            if same:
                best = same
        except OSError:
            pass
    return best[-1]


def nearest_existing(path: str) -> str:
    """``path`` itself or its nearest existing ancestor (for directories a broker has not created yet)."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p
