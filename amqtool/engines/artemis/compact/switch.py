"""The switch-over (``JournalImpl.compact`` + ``renameFiles`` + ``checkControlFile``): outputs written as
``.cmp`` (into free files first), the control file's rename as the commit point, then the old files freed;
the copy to ``-o DEST``; an interrupted compaction finished as Artemis finishes it at its start."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from amqtool.errors import AmqtoolError
from amqtool.formats.artemis.control import CONTROL_FILE_NAME, ControlFile
from amqtool.formats.artemis.records import (
    FORMAT_VERSION,
    FileHeader,
)
from amqtool.store import atomic
from amqtool.store.layout import JournalDir
from amqtool.engines.artemis.compact.plan import _Prepared
from amqtool.engines.artemis.compact.settings import CONTROL_TMP_NAME, CompactSettings, JournalCompaction, OldFileFate
from amqtool.engines.artemis.compact.write import _Syncer, _check_space, _reference_file, _write_outputs

def _pool_keep(kept_free: int, outputs: int, settings: CompactSettings) -> bool:
    """``addFreeFile`` with checkDelete: keep (reinitialise) a freed file while the pool is not full.

    Artemis counts ``free + data + 1 (current) + opened < poolSize``; after an offline compaction the last
    output file is the current one and nothing is opened yet, so that is ``free + outputs < poolSize``. The
    journal's minimum file count is kept too, so the broker need not create files at its next start.
    """
    total = kept_free + outputs
    return settings.pool_files < 0 or total < settings.pool_files or total < settings.min_files


def _reusable_free_files(prep: _Prepared) -> list[str]:
    """The store's free files that the outputs are written into, in file order (at most one per output).

    A free file holds no data (its records, if any, are stale: another tag) and has the journal's file size;
    a file that only holds a rejected candidate is free too, as the Reclaimer frees it at the end of
    Artemis' load (``LoadResult.freed_at_start``).
    Artemis' compactor takes its output files from the pool the same way (``JournalFilesRepository
    .openFileCMP`` -> ``takeFile``, renamed to ``.cmp``) and only creates files when the pool is empty; so
    repeated compaction keeps the file count constant instead of adding a file per output every run.
    """
    has_data = {f.name for f in prep.load.start_data_files}
    size = prep.report.settings.file_size
    free = [f.name for f in prep.opened.files if f.name not in has_data and f.size == size]
    return free[:len(prep.report.outputs)]


def _give_back(d: Path, name: str, header: bytes) -> None:
    """Return a taken free file to the pool after a failure before the commit point: its own header again
    (so its fileID clashes with nothing), then its own name. Records already written after the header carry
    the tags of the new layout, not this file's, so the load ignores them as the stale records of a reused
    file. If even that fails the ``.cmp`` is removed, which Artemis would do at its start anyway."""
    cmp = d / (name + ".cmp")
    try:
        fd = os.open(cmp, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, header, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(cmp, d / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(cmp)


def _undo_before_commit(d: Path, err: BaseException, created: list[Path], renamed: list[str],
                        headers: dict[str, bytes]) -> None:
    """After ``err`` stopped an in-place compaction: remove its ``.cmp`` files and give the taken free files
    back, unless the control file is already in place; then raise (``err``, an OSError as AmqtoolError)."""
    if (d / CONTROL_FILE_NAME).exists():
        # The control file's rename happened and what failed came after it (the directory's fsync): the
        # compaction is committed, and Artemis' roll-forward deletes the old files it lists, so the .cmp
        # files must stay. Removing them here, as before the commit point, loses the whole journal.
        if isinstance(err, OSError):
            raise AmqtoolError(f"compaction committed but making it durable failed ({err.strerror or err}); "
                               f"{CONTROL_FILE_NAME} is kept and Artemis completes the compaction at its "
                               "next start", path=err.filename or str(d)) from None
        raise err
    for p in created + [d / CONTROL_TMP_NAME]:
        with contextlib.suppress(OSError):
            os.unlink(p)
    for name in renamed:
        _give_back(d, name, headers[name])
    with contextlib.suppress(OSError):
        atomic.fsync_dir(d)
    if isinstance(err, OSError):
        raise AmqtoolError(f"compaction failed before its commit point, store unchanged: "
                           f"{err.strerror or err}", path=err.filename or str(d)) from None
    raise err


def compact_in_place(prep: _Prepared) -> JournalCompaction:
    """Write the ``.cmp`` files, commit with the control file, then switch over (Artemis' order)."""
    report = prep.report
    opened = prep.opened
    journal = opened.journal
    d = journal.directory
    spec = journal.spec
    settings = report.settings
    if not report.outputs and not opened.files:
        report.action = "nothing-to-do"
        return report
    next_id = prep.next_id
    reused = _reusable_free_files(prep)
    names: list[str] = list(reused)
    while len(names) < len(report.outputs):
        next_id += 1
        names.append(spec.file_name(next_id))
    for out, name in zip(report.outputs, names):
        out.name = name
    cmp_names = [n + ".cmp" for n in names]
    reference = _reference_file(prep)
    _check_space(d, (len(names) - len(reused)) * settings.file_size + 4096)

    created: list[Path] = []
    taken = set(reused)
    headers = {f.name: f.header.encode() for f in opened.files if f.name in taken}
    renamed: list[str] = []
    # A signal after the commit point must not leave the switch-over half done (.cmp files and the control
    # file, which the broker's next start, or amqtool's next compaction, would have to roll forward): it is
    # held back until the journal is switched over, as Artemis' own roll-forward would finish it.
    deferred = atomic.deferred_signals()
    try:
        # A taken free file becomes <name>.cmp before it is overwritten: until the commit point Artemis (and
        # open_journal) discard every .cmp, so a kill costs at most that free file, never a data file.
        for name in reused:
            atomic.rename(d / name, d / (name + ".cmp"), sync_dir=False)
            renamed.append(name)
        _write_outputs(prep, d, cmp_names, reference, created, reused=len(reused))
        atomic.fsync_dir(d)
        # The taken free files are no longer old files: Artemis' roll-forward deletes every old file it
        # lists *before* it renames the .cmp files, so listing one would delete its new contents.
        control = ControlFile(old_files=[f.name for f in opened.files if f.name not in taken], new_files=cmp_names)
        atomic.checkpoint("pre-commit", d)
        # From the control file on, SIGTERM/SIGHUP/SIGINT wait for the switch-over to end (see below).
        deferred.__enter__()
        with atomic.atomic_write(d / CONTROL_FILE_NAME, tmp_path=d / CONTROL_TMP_NAME,
                                 reference=reference) as fh:
            fh.write(control.encode())
        # ---- committed: from here on Artemis rolls forward whatever happens ----
    except atomic.InjectedFault:
        deferred.__exit__(None, None, None)
        raise  # a simulated crash leaves everything as a real one would
    except BaseException as err:
        # (signals stay held through the clean-up: one that came during the commit is acted on after it)
        try:
            _undo_before_commit(d, err, created, renamed, headers)
        finally:
            deferred.__exit__(None, None, None)
    try:
        atomic.checkpoint("commit", d)
        opened.close()
        _switch_over(prep, names, cmp_names, next_id, taken)
    except atomic.InjectedFault:
        raise
    except OSError as err:
        raise AmqtoolError(f"compaction committed but finishing the switch-over failed ({err.strerror or err}); "
                           f"{CONTROL_FILE_NAME} is kept and Artemis completes the compaction at its next start",
                           path=err.filename or str(d)) from None
    finally:
        deferred.__exit__(None, None, None)  # a signal held back is delivered here, the journal switched over
    report.action = "compacted"
    _after_figures(report, d, spec)
    return report


def _switch_over(prep: _Prepared, names: list[str], cmp_names: list[str], next_id: int,
                 taken: set[str] = frozenset()) -> None:
    """``renameFiles`` then ``deleteControlFile``: free every old file (but the free files ``taken`` for
    outputs), rename the new ones."""
    report = prep.report
    opened = prep.opened
    d = opened.journal.directory
    settings = report.settings
    has_data = {f.name for f in prep.load.start_data_files}
    kept_free = 0
    attic = d / "attic"
    attic_used = False
    # Every step below is undone or redone by the control file until it is gone (Artemis' rollforward
    # deletes each listed old file that exists and renames each .cmp that exists), so none needs to be
    # durable on its own: the reinitialised headers are fsynced together and the directory once, all before
    # the control file's removal, which is what must not become durable ahead of them.
    with _Syncer() as syncer:
        for f in opened.files:
            fate = OldFileFate(f.name, f.file_id, f.size, f.name in has_data)
            report.old_files.append(fate)
            if f.name in taken:
                fate.fate = "reused"
                continue
            path = d / f.name
            if f.size != settings.file_size:
                attic.mkdir(exist_ok=True)
                if len(os.listdir(attic)) < settings.max_attic_files:
                    atomic.rename(path, attic / f.name, sync_dir=False)
                    attic_used = True
                    fate.fate = "attic"
                else:
                    atomic.unlink(path, sync_dir=False)
                    fate.fate = "deleted"
            elif _pool_keep(kept_free, len(names), settings):
                next_id += 1
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    atomic.checkpoint("write", path)
                    os.pwrite(fd, FileHeader(FORMAT_VERSION, 0, next_id).encode(), 0)
                    # Zeroed beyond Artemis (which keeps the old bytes): a byte of the file's earlier use could
                    # otherwise parse as a record carrying the new fileID's tag, and the broker would load it.
                    # After the header: until then the records are the old fileID's, which no file has now.
                    atomic.zero_range(fd, 16, f.size - 16)
                except BaseException:
                    os.close(fd)
                    raise
                syncer.submit(fd, path)
                fate.fate = "reinitialised"
                fate.new_file_id = next_id
                kept_free += 1
            else:
                atomic.unlink(path, sync_dir=False)
                fate.fate = "deleted"
        syncer.wait()
    for cmp, final in zip(cmp_names, names):
        atomic.rename(d / cmp, d / final, sync_dir=False)
    if attic_used:
        atomic.fsync_dir(attic)
    atomic.fsync_dir(d)
    atomic.unlink(d / CONTROL_FILE_NAME)


def _after_figures(report: JournalCompaction, directory: Path, spec) -> None:
    ext = "." + spec.extension
    files = [directory / n for n in os.listdir(directory) if n.endswith(ext)]
    report.files_after = len(files)
    report.bytes_after = sum(p.stat().st_size for p in files)


def predict_after(prep: _Prepared) -> None:
    """Dry-run figures: the files and bytes an in-place compaction would leave (same rules as
    :func:`_switch_over`)."""
    report = prep.report
    s = report.settings
    taken = set(_reusable_free_files(prep))
    kept = 0
    for f in prep.opened.files:
        if f.name not in taken and f.size == s.file_size and _pool_keep(kept, len(report.outputs), s):
            kept += 1
    report.files_after = len(report.outputs) + kept
    report.bytes_after = report.files_after * s.file_size


def compact_copy(prep: _Prepared, dest_dir: Path) -> JournalCompaction:
    """Write the compacted journal into ``dest_dir`` (which must exist and be empty): output files named
    after their header fileIDs, plus zero-filled free files up to the journal's minimum file count. The
    caller makes the whole destination appear atomically (temporary directory, then rename)."""
    report = prep.report
    spec = prep.opened.journal.spec
    s = report.settings
    names = [spec.file_name(o.file_id) for o in report.outputs]
    for out, name in zip(report.outputs, names):
        out.name = name
    tmp_names = [n + ".tmp" for n in names]
    reference = _reference_file(prep)
    needed = max(len(names), s.min_files) * s.file_size
    _check_space(dest_dir, needed)
    created: list[Path] = []
    _write_outputs(prep, dest_dir, tmp_names, reference, created)
    for tmp, final in zip(tmp_names, names):
        atomic.rename(dest_dir / tmp, dest_dir / final, sync_dir=False)
    next_id = max([o.file_id for o in report.outputs] + [prep.next_id])
    count = len(names)
    mode = os.stat(reference).st_mode & 0o7777 if reference is not None else 0o644
    while count < s.min_files:
        next_id += 1
        path = dest_dir / spec.file_name(next_id)
        atomic.preallocate(path, s.file_size, header=FileHeader(FORMAT_VERSION, 0, next_id).encode(), mode=mode)
        if reference is not None:
            report.warnings.extend(atomic.copy_owner_and_mode(reference, path))
        count += 1
    atomic.fsync_dir(dest_dir)
    report.action = "copied"
    _after_figures(report, dest_dir, spec)
    return report


# --- interrupted compactions ----------------------------------------------------------------------------

def finish_interrupted(journal: JournalDir) -> list[str]:
    """Do on disk what ``JournalImpl.checkControlFile`` + ``cleanupTmpFiles`` do at the broker's start
    (§4.3): roll a committed compaction forward, or discard an uncommitted one. Returns what was done."""
    from amqtool.formats.artemis.control import decode_control_file

    d = journal.directory
    ext = "." + journal.spec.extension
    done: list[str] = []
    ctl = d / CONTROL_FILE_NAME
    if ctl.exists():
        control = decode_control_file(ctl.read_bytes())
        if control is not None:
            for old in control.old_files:
                if (d / old).exists():
                    atomic.unlink(d / old)
                    done.append(f"deleted {old}")
            for new in control.new_files:
                if (d / new).exists():
                    final = new[: new.rindex(".cmp")]
                    atomic.rename(d / new, d / final)
                    done.append(f"renamed {new} to {final}")
            for src, dst in control.renames:
                if (d / src).exists():
                    atomic.unlink(d / dst, missing_ok=True)
                    atomic.rename(d / src, d / dst)
                    done.append(f"renamed {src} to {dst}")
        atomic.unlink(ctl)
        done.append(f"deleted {CONTROL_FILE_NAME}" + (" (committed: rolled forward)" if control else
                                                      " (not committed: discarded)"))
    for n in sorted(os.listdir(d)):
        if n.endswith(ext + ".cmp") or n.endswith(ext + ".tmp") or n == CONTROL_TMP_NAME:
            atomic.unlink(d / n)
            done.append(f"deleted leftover {n}")
    return done
