"""Offline compaction of a KahaDB store (and each sub-store of an mKahaDB): the live state rewritten into
new journal files, switched in atomically, the index left for the broker to rebuild.

The broker frees a ``db-N.log`` only when nothing in it is still needed (kahadb-format.md §6.1); one old
message, an idle durable subscription or a chain of acks keeps a whole 32 MiB file. Its own remedy, ack
compaction, moves acks, not messages. Here the store's live state (replayed as the broker's recovery does:
:mod:`amqtool.engines.kahadb.replay`) is written as the shortest journal whose replay gives that state
back (:mod:`.script`), by the broker's appender rules (:mod:`.write`), and switched in with a protocol
that a kill at any instant leaves on the old store or the new one (:mod:`.switch`).

Public entry: :func:`compact_kahadb` with a :class:`KahaCompactRequest`; one :class:`DirReport` per
directory. The mKahaDB ``txStore`` is left as it is (it holds only transaction outcomes).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.engines.kahadb.compact.script import ScriptFigures, compacted_records
from amqtool.engines.kahadb.compact.switch import (
    carry_plain_files,
    finish_interrupted,
    marker_doc,
    prepare_staging,
    staging_dir,
    switch,
    write_marker,
)
from amqtool.engines.kahadb.compact.write import DEFAULT_MAX_FILE_LENGTH, JournalWriter
from amqtool.errors import AmqtoolError, Finding, Severity, UsageError
from amqtool.store import atomic

TOP_DESTINATIONS = 10


@dataclass
class KahaCompactRequest:
    dry_run: bool = False
    output: Path | None = None
    if_needed: bool = False
    live_below: float = 50.0  # --if-needed: compact when live bytes are below this percentage of log bytes
    pinned_below: int = 0  # --if-needed: ... or when a file is kept by fewer than this many live messages
    force: bool = False
    max_file_length: int | None = None
    # write even though verify calls the store CRITICAL (refused otherwise: compaction keeps only what loads,
    # so what the damaged bytes held, which `recover` may still read, would be gone)
    salvage: bool = False


@dataclass
class DirReport:
    directory: str
    action: str  # compacted | copied | would-compact | not-needed | left (txStore) | refused (--dry-run, damaged)
    files_before: int = 0
    bytes_before: int = 0
    live_bytes: int = 0  # record bytes of the live state in the old journal
    files_after: int = 0
    bytes_after: int = 0
    messages: int = 0
    acks: int = 0
    subscriptions: int = 0
    prepared_transactions: int = 0
    open_transactions_dropped: int = 0
    live_ratio: float | None = None
    lightly_pinned_files: int = 0
    reasons: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    top: list = field(default_factory=list)  # DestinationFigures.to_json(), most bytes first
    files: list = field(default_factory=list)  # names of the log files that go

    @property
    def reclaimed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after) if self.action in ("compacted", "would-compact") else 0

    def to_json(self) -> dict:
        return {
            "directory": self.directory, "action": self.action,
            "before": {"files": self.files_before, "bytes": self.bytes_before},
            "after": {"files": self.files_after, "bytes": self.bytes_after},
            "reclaimedBytes": self.reclaimed, "liveBytes": self.live_bytes,
            "liveRatio": self.live_ratio, "lightlyPinnedFiles": self.lightly_pinned_files,
            "messages": self.messages, "acks": self.acks, "subscriptions": self.subscriptions,
            "preparedTransactions": self.prepared_transactions,
            "openTransactionsDropped": self.open_transactions_dropped,
            "reasons": self.reasons, "notes": self.notes, "topDestinations": self.top, "filesThatGo": self.files,
        }


def _max_file_length(store, d, req: KahaCompactRequest) -> int:
    if req.max_file_length:
        return req.max_file_length
    configured = store.settings.get("journalMaxFileLength")
    if configured:
        from amqtool.store.brokerxml import parse_byte_size

        try:
            return parse_byte_size(str(configured))
        except ValueError:
            pass
    # preallocated files (the broker's default, and what compaction writes) are journalMaxFileLength long
    sizes = [f.size for f in d.files]
    return max(sizes) if sizes and max(sizes) >= 16 * 1024 else DEFAULT_MAX_FILE_LENGTH


def _checksums(store) -> bool:
    v = str(store.settings.get("checksumJournalFiles", "true")).lower()
    return v != "false"


def _refuse_damage(d) -> None:
    """Compaction keeps what the replay saw; a damaged journal may hold more the broker could still read.
    A torn tail of the newest file (what a crash leaves) is not refused."""
    corrupt = d.damage() - (d.torn_tail() is not None)
    if corrupt:
        raise AmqtoolError(f"the journal has {corrupt} damaged batch(es) or record(s): compaction would keep only "
                           f"what can be read; run 'amqtool verify' and decide first", path=str(d.directory))


def _needed(rep: DirReport, d, req: KahaCompactRequest) -> None:
    counts: dict[int, int] = {}
    for st in d.replay.destinations.values():
        for m in st.messages.values():
            counts[m.file_id] = counts.get(m.file_id, 0) + 1
    rep.lightly_pinned_files = sum(1 for n in counts.values() if 0 < n < req.pinned_below)
    if rep.live_ratio is not None and rep.live_ratio * 100 < req.live_below:
        rep.reasons.append(f"live bytes are {rep.live_ratio:.1%} of the log bytes (< {req.live_below:g}%)")
    if rep.lightly_pinned_files:
        rep.reasons.append(f"{rep.lightly_pinned_files} file(s) kept by fewer than {req.pinned_below} live "
                           f"message(s)")


def compact_kahadb(store, req: KahaCompactRequest, progress=None, judged: list | None = None) -> list[DirReport]:
    """Compact every directory of ``store`` (a KahaDBStore) as ``req`` says; see the module docstring.

    ``judged``: verify's findings on the load the plan is made from are appended to it (one load:
    amqtool.engines.verdicts). With ``--dry-run``, which judges, a directory compaction would refuse for its
    damage gives an INFO ``compaction-refused`` finding instead of an error: verify's findings carry the
    verdict.

    Writing (in place or ``-o``) takes verify's verdict on the same load too: a store verify calls CRITICAL
    is refused with :class:`~amqtool.engines.verdicts.SourceCriticalError` (exit 2) before anything is
    written, unless ``req.salvage`` (which also lifts the refusal of damaged batches); a WARNING one (a torn
    tail) is compacted.

    ``-o DEST`` is claimed first (:mod:`amqtool.store.output`) and written aside
    (``.<DEST>.amqtool-compact-<pid>``), then renamed into place: DEST is absent or complete."""
    if req.output is None or req.dry_run:
        return _compact_kahadb(store, req, progress, judged)
    from dataclasses import replace

    from amqtool.store import output

    with output.claiming(req.output, inputs=output.store_inputs(store)) as claimed:
        tmp = atomic.aside_dir(claimed.path, "compact")
        try:
            reports = _compact_kahadb(store, replace(req, output=tmp), progress, judged)
            atomic.fsync_dir(tmp)
            atomic.switch_dir(tmp, claimed.path)
        except atomic.InjectedFault:
            raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return reports


def _compact_kahadb(store, req: KahaCompactRequest, progress=None, judged: list | None = None) -> list[DirReport]:
    from amqtool.store import locks

    lock_paths = [store.root / "lock"] + [Path(p) / "lock" for p in store.directories]
    writing = not req.dry_run
    writer = None
    if writing and req.output is None:
        locks.ensure_not_locked(lock_paths, force=req.force)
        # amqtool's own writer lock on every directory it switches, held to the end (see store.locks)
        writer = locks.WriterLock([store.root] + [Path(p) for p in store.directories])
    try:
        return _compact(store, req, progress, writer, judged)
    finally:
        if writer is not None:
            writer.release()


def _compact(store, req: KahaCompactRequest, progress, writer, judged: list | None = None) -> list[DirReport]:
    from amqtool.engines.kahadb.load import load_store

    writing = not req.dry_run
    reports_pre: dict[str, list[str]] = {}
    if writing and req.output is None:
        for directory in store.directories:
            done = finish_interrupted(Path(directory))
            if done:
                reports_pre.setdefault(str(directory), []).append(done)
    elif req.dry_run:
        for directory in store.directories:
            if staging_dir(Path(directory)).exists() or (Path(directory) / "amqtool-compact.json").exists():
                reports_pre.setdefault(str(directory), []).append(
                    "an interrupted compaction is pending: the next compaction finishes it first")
    if req.output is not None:
        out = Path(req.output)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"-o {out}: the destination exists and is not an empty directory")

    results = load_store(store, progress=progress)
    if judged is not None or writing:
        from amqtool.engines.kahadb.verify import judge_results

        # verify's verdict on the very load compaction would write from (amqtool.engines.verdicts)
        findings = judge_results(store, results)
        if judged is not None:
            judged.extend(findings)
        if writing:
            from amqtool.engines.verdicts import refuse_compaction

            refuse_compaction(findings, req.salvage, str(store.root))
    reports = []
    for d in results:
        rep = DirReport(str(d.directory), "left")
        rep.notes += reports_pre.get(str(d.directory), [])
        reports.append(rep)
        rep.files_before = len(d.files)
        rep.bytes_before = sum(f.size for f in d.files)
        if d.is_tx_store:
            rep.notes.append("mKahaDB txStore: left as it is (it holds transaction outcomes only)")
            if req.output is not None and not req.dry_run:
                _copy_as_is(Path(d.directory), Path(req.output) / Path(d.directory).relative_to(store.root))
            continue
        try:
            if not req.salvage:
                _refuse_damage(d)
        except AmqtoolError as err:
            if judged is None or not req.dry_run:
                raise
            judged.append(Finding(Severity.INFO, "compaction-refused", err.message, err.path))
            rep.action = "refused"
            continue
        rep.live_bytes = sum(m.length for st in d.replay.destinations.values() for m in st.messages.values())
        rep.live_ratio = rep.live_bytes / rep.bytes_before if rep.bytes_before else None
        rep.open_transactions_dropped = sum(1 for t in d.open_transactions if t.state != "prepared")
        _needed(rep, d, req)
        if req.if_needed and not rep.reasons:
            rep.action = "not-needed"
            continue
        max_len = _max_file_length(store, d, req)
        checksums = _checksums(store)
        figures = ScriptFigures()
        if req.dry_run:
            files = write_compacted(d, None, max_len, checksums, figures)
            rep.action = "would-compact"
        elif req.output is not None:
            rel = Path(d.directory).relative_to(store.root) if store.multi else Path(".")
            target = Path(req.output) / rel
            target.mkdir(parents=True, exist_ok=True)
            atomic.copy_owner_and_mode(d.directory, target)
            files = write_compacted(d, target, max_len, checksums, figures)
            atomic.fsync_dir(target)
            rep.action = "copied"
        else:
            directory = Path(d.directory)
            atomic.ensure_free_space(directory.parent, rep.live_bytes + 2 * max_len)
            staged = prepare_staging(directory)
            try:
                writer.add(staged)  # it becomes the store: held before it is switched in
                files = write_compacted(d, staged, max_len, checksums, figures)
                carry_plain_files(directory, staged)
                write_marker(staged, marker_doc(directory, rep.files_before, rep.bytes_before,
                                                len(files), sum(f.size for f in files)))
            except BaseException:
                # before the switch the store is untouched: the partial copy goes (or the next run removes it)
                try:
                    finish_interrupted(directory)
                except OSError:
                    pass
                raise
            switch(directory, staged)
            rep.action = "compacted"
        rep.files_after = len(files)
        rep.bytes_after = sum(f.size for f in files)
        rep.messages, rep.acks = figures.messages, figures.acks
        rep.subscriptions, rep.prepared_transactions = figures.subscriptions, figures.prepared_transactions
        rep.files = [f.path.name for f in d.files]
        rep.top = [f.to_json() for f in sorted(figures.destinations.values(), key=lambda f: -f.bytes)
                   [:TOP_DESTINATIONS]]
    return reports


def _copy_as_is(src: Path, target: Path) -> None:
    """A directory's plain files copied (owner, group, mode and times kept), for ``-o``."""
    target.mkdir(parents=True, exist_ok=True)
    atomic.copy_owner_and_mode(src, target)
    for p in sorted(src.iterdir()):
        if p.is_file() and not p.is_symlink():
            shutil.copy2(p, target / p.name)
            atomic.copy_owner_and_mode(p, target / p.name)
            with open(target / p.name, "rb") as fh:
                atomic.fsync(fh.fileno(), target / p.name)
    atomic.fsync_dir(target)


def write_compacted(d, target: Path | None, max_len: int, checksums: bool, figures: ScriptFigures):
    """The compacted journal of directory ``d`` (:func:`.script.compacted_records`) written into ``target``
    (new files with the owner and mode of ``d``'s first log file, the directory fsynced); ``target`` None
    only counts what would be written. Returns the written (or counted) files. Recovery writes its salvaged
    live set the same way."""
    writer = JournalWriter(target, max_len, checksums)
    try:
        for payload in compacted_records(d, figures):
            writer.append(payload)
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    if target is None:
        return files
    reference = d.files[0].path if d.files else None
    for f in files:
        if reference is not None:
            atomic.copy_owner_and_mode(reference, f.path)
    atomic.fsync_dir(target)
    return files
