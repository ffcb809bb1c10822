"""Opening an Artemis journal directory read-only, as ``JournalImpl.load`` would see it.

Artemis first processes ``journal-rename-control.ctr`` (rolling a committed compaction forward), deletes
leftover ``.cmp``/``.tmp`` files and short files, then orders the rest by header fileID (§1.4, §4.3). A
read-only tool must not do any of that on disk, so :func:`open_journal` computes the same *view* in memory:
which bytes Artemis would load under which names, and what it would have changed first (reported as
:class:`PendingAction` so ``verify`` can say so).

Files are read through bounded windows of :data:`WINDOW` bytes (``pread``), never whole: Artemis reads a
journal file into one buffer, but a tool that did the same would need as much memory as the largest file (up
to 2 GiB). :meth:`OpenedJournal.scan_windows` gives a file's records window by window, :class:`BodyWindows`
the windows that hold given records' bodies; the C loader reads through the same kind of window. Nothing is
``mmap``-ed: a file that a running broker truncates while we read it would raise SIGBUS and kill the
process, where ``pread`` just returns fewer bytes.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.errors import FormatError, UnknownStoreError
from amqtool.formats.artemis.control import CONTROL_FILE_NAME, ControlFile, decode_control_file
from amqtool.formats.artemis.records import HEADER_SIZE, FileHeader, decode_header, file_tag
from amqtool.store.layout import JournalDir


MAX_LOADABLE_SIZE = 2**31 - 1  # readJournalFile's (int) file size
WINDOW = 4 << 20  # bytes of one journal file held at once (more only for one record larger than this);
#                   4 MiB loads fastest here: the window stays in the L2/L3 caches while it is scanned


@dataclass
class JournalFile:
    """One journal file as Artemis would load it. ``path`` is where the bytes are (a ``.cmp`` file when a
    committed compaction is still to be rolled forward); ``name`` is the name Artemis would give it."""

    path: Path
    name: str
    size: int
    header: FileHeader

    @property
    def file_id(self) -> int:
        return self.header.file_id

    @property
    def tag(self) -> int:
        return self.header.tag

    @property
    def version(self) -> int:
        return self.header.version


@dataclass
class PendingAction:
    """Something Artemis would do to the directory at its next start before loading."""

    code: str  # control-file-rollforward | control-file-discard | leftover-cmp | leftover-tmp | short-file | ...
    path: str
    message: str


@dataclass
class SkippedFile:
    """A journal file Artemis would refuse (its load fails) or drop."""

    path: str
    code: str  # bad-header-version | user-version-mismatch | bad-file-id | not-a-regular-file | unreadable
    message: str
    offset: int | None = 0


FD_CACHE = 32  # descriptors an OpenedJournal keeps open at once (OpenedJournal.fd)

@dataclass
class OpenedJournal:
    """The ordered journal files of one directory, mapped read-only. Use as a context manager."""

    journal: JournalDir
    files: list[JournalFile] = field(default_factory=list)
    pending: list[PendingAction] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    control: ControlFile | None = None
    _fds: dict = field(default_factory=dict, repr=False)  # file index -> descriptor, oldest opened first

    def __enter__(self) -> "OpenedJournal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        # The descriptors are forgotten before they are closed: a signal's exception (SIGTERM) raised between
        # a close and the forgetting made the unwinding close it a second time ("Bad file descriptor", exit 3
        # instead of 143; or worse, closing a descriptor reused meanwhile). Now an exception there leaks them
        # at most, and the process is ending.
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def bytes_total(self) -> int:
        return sum(f.size for f in self.files)

    def read_file(self, index: int) -> bytes:
        """The whole file ``files[index]`` as Artemis reads it (``readJournalFile`` reads the file into one
        buffer). Only the pure-Python reference paths use this (their memory follows the file's size); the
        others read through :meth:`scan_windows`, :class:`BodyWindows` or the C loader. The size is what was
        there when it was read; a file that changed since listing is read as it is now."""
        f = self.files[index]
        try:
            with open(f.path, "rb", buffering=0) as fh:
                data = fh.read()
        except OSError as err:
            raise UnknownStoreError(f"cannot read journal file: {err.strerror}", path=str(f.path)) from None
        f.size = len(data)
        return data

    def fd(self, index: int) -> int:
        """A read-only descriptor of ``files[index]``, owned by this object (valid until the next call for
        another file or :meth:`close`). The last ``FD_CACHE`` files' descriptors are kept: the loader reads in
        file order, but the judges read a damaged region's neighbours, a record's body and the next file's head
        by turns (one descriptor opened and closed some 200 times a fault of the fault campaign)."""
        fd = self._fds.get(index)
        if fd is not None:
            return fd
        if len(self._fds) >= FD_CACHE:
            oldest = next(iter(self._fds))
            os.close(self._fds.pop(oldest))
        try:
            fd = os.open(self.files[index].path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            raise UnknownStoreError(f"cannot open journal file: {err.strerror}",
                                    path=str(self.files[index].path)) from None
        self._fds[index] = fd
        return fd

    def pread(self, index: int, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of ``files[index]`` (fewer if the file shrank meanwhile)."""
        fd = self.fd(index)
        try:
            return os.pread(fd, length, offset)
        except OSError as err:
            raise UnknownStoreError(f"cannot read journal file: {err.strerror}",
                                    path=str(self.files[index].path)) from None

    def scan_windows(self, index: int, check_tag: bool = True, window: int = WINDOW, start: int = 16):
        """``readJournalFile``'s scan of ``files[index]``, one window at a time: yields
        ``(base, data, records, marked)`` where ``data`` holds the file's bytes from ``base``, ``records`` are
        scanner tuples (``scan_records_py``'s layout) with offsets relative to ``base``, each wholly in
        ``data``, and ``marked`` is whether the scan so far made Artemis mark the file as a data file (final
        at the last window). Yields at least once. Without the C extension the file is read whole (the
        reference scanner has no windows). ``start``: where the scan begins (16, the end of the header; or
        the end of a record an earlier scan accepted, from which the scan goes on exactly as it would)."""
        from amqtool import native

        f = self.files[index]
        if not native.HAVE_NATIVE:
            from amqtool.formats.artemis.records import scan_records_py

            data = self.read_file(index)
            records, marked = scan_records_py(data, f.tag, f.version, check_tag, max(16, start))
            yield 0, data, records, marked
            return
        fd = self.fd(index)
        pos, marked = max(16, start), False
        while True:
            try:
                base, data, records, pos, marked, done = native.scan_window(fd, pos, f.tag, f.version,
                                                                            check_tag, marked, window)
            except OSError as err:
                raise UnknownStoreError(f"cannot read journal file: {err.strerror}", path=str(f.path)) from None
            yield base, data, records, marked
            if done:
                f.size = pos  # the size as read
                return


def read_span(path: str | os.PathLike, offset: int, length: int) -> bytes:
    """``length`` bytes of the journal file at ``path`` from ``offset`` (fewer at its end), on a descriptor of
    the caller's own: for threads that read one store's files at once (OpenedJournal keeps one shared)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)
    except OSError as err:
        raise UnknownStoreError(f"cannot read journal file: {err.strerror}", path=str(path)) from None


class BodyWindows:
    """Windows of an open journal's files that hold the bodies of live entries, read as asked for: at least
    :data:`WINDOW` bytes from the first body asked for (a body larger than that gets a window of its own
    size). The two windows used last stay, since live entries come mostly in file order and a committed
    transaction's entries point back into the files it spanned."""

    def __init__(self, opened: OpenedJournal, window: int = WINDOW):
        self.opened = opened
        self.window = window
        self._held: list[tuple[int, int, bytes]] = []  # (file index, base, data), most recent last

    @staticmethod
    def clip(size: int, offset: int, length: int) -> tuple[int, int]:
        """The span of a body as ``LoadResult.body`` reads it: cut at the end of the file."""
        start = min(max(offset, 0), size)
        end = start if length <= 0 else min(offset + length, size)
        return start, max(end, start)

    def holding(self, index: int, offset: int, length: int) -> tuple[int, bytes]:
        """``(base, data)``: a window of ``files[index]`` holding the body at ``offset`` of ``length``."""
        start, end = self.clip(self.opened.files[index].size, offset, length)
        for k, (fi, base, data) in enumerate(self._held):
            if fi == index and base <= start and end <= base + len(data):
                if k != len(self._held) - 1:
                    self._held.append(self._held.pop(k))
                return base, data
        # no further than the file's end as loaded: os.pread allocates what it is asked for, and a 4 MiB
        # buffer for a 64 KiB file costs ten times the read itself
        want = max(min(self.window, self.opened.files[index].size - start), end - start)
        data = self.opened.pread(index, start, want)
        if len(data) < want and start + len(data) < self.opened.files[index].size:
            # the file shrank since it was loaded: it ends here now (LoadResult.body reads fewer bytes too)
            self.opened.files[index].size = start + len(data)
        if len(self._held) >= 2:
            self._held.pop(0)
        self._held.append((index, start, data))
        return start, data

    def body(self, index: int, offset: int, length: int) -> bytes:
        if self._held and length > 0 and offset >= 0:  # the common case: in the window used last
            fi, base, data = self._held[-1]
            if fi == index and base <= offset and offset + length <= base + len(data) \
                    and offset + length <= self.opened.files[index].size:
                return data[offset - base:offset + length - base]
        start, end = self.clip(self.opened.files[index].size, offset, length)
        base, data = self.holding(index, offset, length)
        return data[start - base:end - base]


def _cannot(what: str, err: OSError) -> str:
    """The reason a file could not be checked, naming a permission problem as such."""
    if err.errno in (errno.EACCES, errno.EPERM):
        return (f"cannot {what} it: permission denied for this user (uid {os.geteuid()}); run as the broker's "
                f"user or root")
    return f"cannot {what} it: {err.strerror}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def _read_small(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _bad_file_id_message(header: FileHeader, head: bytes) -> str:
    """What a negative header fileID (``generateFileID`` never hands one out) does, by the first record's tag.
    ``JournalFileImpl`` tags records with ``(int)(fileID & 0x7FFFFFFF)``, so the broker still reads records
    carrying the header's low 31 bits (only its high bits were damaged) and loads the file first (the
    comparator orders by the whole fileID); records carrying another tag it reads as an empty free file, and
    reuses it, overwriting them."""
    tag = file_tag(header.file_id)
    first = (int.from_bytes(head[HEADER_SIZE + 1:HEADER_SIZE + 5], "big", signed=True)
             if len(head) >= HEADER_SIZE + 5 and 10 <= head[HEADER_SIZE] <= 19 else None)
    said = f"header fileID {header.file_id} is not one Artemis issues (negative)"
    if first is None:
        return f"{said}; the file starts with no record"
    if first == tag:
        return (f"{said}, but its records carry its low 31 bits ({tag}, the tag Artemis gives them): only its high "
                f"bits were damaged; the broker reads its records and loads this file before every other")
    return (f"{said}, and its first record carries tag {first}, not the header's low 31 bits ({tag}): the broker "
            f"reads none of this file's records and will reuse it as a free file, overwriting them")


def open_journal(journal: JournalDir, user_version: int = 0) -> OpenedJournal:
    """List, recover (in memory) and order the files of ``journal`` without changing anything on disk.

    Raises UnknownStoreError when the directory cannot be listed.
    """
    directory = journal.directory
    ext = "." + journal.spec.extension
    try:
        names = sorted(os.listdir(directory))
    except OSError as err:
        raise journal.listing_error(err) from None
    result = OpenedJournal(journal)

    # name -> path holding the bytes Artemis would load under that name
    effective: dict[str, Path] = {n: directory / n for n in names if n.endswith(ext)}
    consumed: set[str] = set()

    # 1. checkControlFile (§4.3): a valid control file rolls the compaction forward.
    if CONTROL_FILE_NAME in names:
        ctl_path = directory / CONTROL_FILE_NAME
        try:
            control = decode_control_file(_read_small(ctl_path))
        except FormatError as err:
            control = None
            result.pending.append(PendingAction("control-file-unreadable", str(ctl_path),
                                                f"control file has a valid record but an unreadable body: {err}"))
        except OSError as err:
            raise UnknownStoreError(f"cannot read control file: {err.strerror}", path=str(ctl_path)) from None
        result.control = control
        if control is None:
            result.pending.append(PendingAction(
                "control-file-discard", str(ctl_path),
                "interrupted compaction that never committed: Artemis will delete the control file and the "
                ".cmp files and keep the old files"))
        else:
            result.pending.append(PendingAction(
                "control-file-rollforward", str(ctl_path),
                f"interrupted compaction that committed: Artemis will delete {len(control.old_files)} old "
                f"file(s) and rename {len(control.new_files)} .cmp file(s) at its next start"))
            for old in control.old_files:
                effective.pop(old, None)
            for new in control.new_files:
                if new in names and new.endswith(".cmp"):
                    effective[new[: -len(".cmp")]] = directory / new
                    consumed.add(new)
            for src, dst in control.renames:
                if src in names:
                    effective[dst] = directory / src
                    effective.pop(src, None)
                    consumed.add(src)

    # 2. cleanupTmpFiles(".cmp"), (".tmp")
    for n in names:
        if n in consumed:
            continue
        for suffix, code in ((ext + ".cmp", "leftover-cmp"), (ext + ".tmp", "leftover-tmp")):
            if n.endswith(suffix):
                result.pending.append(PendingAction(
                    code, str(directory / n), f"leftover {suffix[len(ext):]} file: Artemis deletes it at start"))

    # 3. orderFiles (§1.4): short files are deleted by Artemis; headers must be readable and compatible.
    files: list[JournalFile] = []
    for name, path in effective.items():
        try:
            st = os.stat(path)
        except OSError as err:
            result.skipped.append(SkippedFile(str(path), "unreadable", _cannot("stat", err), None))
            continue
        if not stat.S_ISREG(st.st_mode):
            # JournalFilesRepository lists every name with the extension (File.list), so the broker takes it
            # for a journal file; never opened here (a FIFO would block the reader, as it blocks the broker).
            result.skipped.append(SkippedFile(
                str(path), "not-a-regular-file",
                f"a {_kind(st.st_mode)} named like a journal file: Artemis lists it with the journal files and "
                f"cannot read a header from it", None))
            continue
        if st.st_size > MAX_LOADABLE_SIZE:
            # readJournalFile: `final int filesize = (int) file.getFile().size()` and one buffer of that size;
            # past 2^31 - 1 bytes the cast wraps and the load fails. Never read whole here either.
            result.skipped.append(SkippedFile(
                str(path), "file-too-large",
                f"file is {st.st_size} bytes; Artemis reads a journal file into one buffer of int size and "
                f"cannot load a file over {MAX_LOADABLE_SIZE} bytes", None))
            continue
        if st.st_size < HEADER_SIZE:
            result.pending.append(PendingAction(
                "short-file", str(path),
                f"file is {st.st_size} bytes, shorter than the 16-byte header: Artemis deletes it at start"))
            continue
        try:
            with open(path, "rb") as fh:
                head = fh.read(HEADER_SIZE + 5)  # and the first record's type and tag (for a bad fileID)
        except OSError as err:
            result.skipped.append(SkippedFile(str(path), "unreadable", _cannot("read", err), None))
            continue
        try:
            header = decode_header(head[:HEADER_SIZE], path=str(path))
        except FormatError as err:
            result.skipped.append(SkippedFile(str(path), "bad-header-version", err.message))
            continue
        if header.file_id < 0:
            result.skipped.append(SkippedFile(str(path), "bad-file-id", _bad_file_id_message(header, head), 8))
            continue
        if header.user_version != user_version:
            result.skipped.append(SkippedFile(
                str(path), "user-version-mismatch",
                f"header userVersion is {header.user_version}, expected {user_version}: Artemis refuses to load"))
            continue
        files.append(JournalFile(path=path, name=name, size=st.st_size, header=header))
    # Artemis sorts by header fileID only; ties keep listing order, which we make deterministic by name.
    files.sort(key=lambda f: (f.file_id, f.name))
    result.files = files
    return result


def read_head(path: Path) -> tuple[FileHeader, int, int | None] | None:
    """(header, size, the tag of the record right after the header -- None when no record type begins there)
    of the journal file at ``path``, read apart from any opened journal (a file the open skipped); None when it
    cannot be read or its header does not decode."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEADER_SIZE + 5)
        header = decode_header(head[:HEADER_SIZE], path=str(path))
        size = path.stat().st_size
    except (OSError, FormatError):
        return None
    first_tag = (int.from_bytes(head[HEADER_SIZE + 1:HEADER_SIZE + 5], "big", signed=True)
                 if len(head) == HEADER_SIZE + 5 and 10 <= head[HEADER_SIZE] <= 19 else None)
    return header, size, first_tag


def with_negative_ids(opened: OpenedJournal, judged: bool = False) -> OpenedJournal:
    """``opened`` with the files it skipped for a negative header fileID (``bad-file-id``) put back where the
    broker loads them: first, as ``JournalImpl.orderFiles`` sorts by the whole 64-bit fileID
    (``JOURNAL_FILE_COMPARATOR``), their records read under the low 31 bits (``JournalFileImpl``'s recordID).
    ``readFileHeader`` refuses no fileID: the real JournalImpl (the oracle) loads such a file, first, and its
    records with it. A new object: the caller closes it (``opened`` keeps its own descriptors).

    ``judged``: for verify, which names each such file (``bad-file-id``, judged by what its place changes): the
    skipped entries stay, and only a file whose first record carries the header's low bits is put back (its
    records are read; one whose records carry another tag is read by the broker as a free file)."""
    files = list(opened.files)
    kept = []
    for s in opened.skipped:
        if s.code != "bad-file-id":
            kept.append(s)
            continue
        path = Path(s.path)
        got = read_head(path)
        if got is None:
            kept.append(s)
            continue
        header, size, first_tag = got
        if judged:
            kept.append(s)
            if first_tag != file_tag(header.file_id):
                continue
        files.append(JournalFile(path=path, name=path.name, size=size, header=header))
    files.sort(key=lambda f: (f.file_id, f.name))
    return OpenedJournal(opened.journal, files, list(opened.pending), kept, opened.control)
