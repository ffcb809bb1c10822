"""``--reclaim-only``: free the data files the Reclaimer would free, without compacting."""
from __future__ import annotations

import os

from amqtool.formats.artemis.records import (
    FORMAT_VERSION,
    FileHeader,
)
from amqtool.store import atomic
from amqtool.engines.artemis.compact.plan import _Prepared
from amqtool.engines.artemis.compact.settings import JournalCompaction, OldFileFate
from amqtool.engines.artemis.compact.switch import _after_figures, _pool_keep

# --- reclaim without compaction --------------------------------------------------------------------------

def reclaim_in_place(prep: _Prepared, *, dry_run: bool = False) -> JournalCompaction:
    """Free the files the Reclaimer would free (``--reclaim-only``): reinitialised, deleted or moved to the
    attic as ``addFreeFile`` does. Each step is one file and leaves a loadable store (a header rewrite
    within one sector, or an unlink), as the broker's own reclaiming does."""
    from amqtool.engines.artemis.reclaim import check_reclaim_safe, reclaimable_files

    report = prep.report
    opened = prep.opened
    d = opened.journal.directory
    s = report.settings
    reclaim, data_files = reclaimable_files(opened)
    if reclaim and not check_reclaim_safe(opened, reclaim):
        report.warnings.append("the Reclaimer's counts would free files the load still needs; nothing reclaimed")
        reclaim = []
    remaining = len(data_files) - len(reclaim)
    free_now = len(opened.files) - len(data_files)
    next_id = prep.next_id
    kept = free_now
    fates = []
    for fi in reclaim:
        f = opened.files[fi]
        fate = OldFileFate(f.name, f.file_id, f.size, True)
        if f.size != s.file_size:
            fate.fate = "attic"
        elif _pool_keep(kept, remaining, s):
            next_id += 1
            fate.fate = "reinitialised"
            fate.new_file_id = next_id
            kept += 1
        else:
            fate.fate = "deleted"
        fates.append((f, fate))
    report.old_files = [fate for _, fate in fates]
    report.outputs = []
    if dry_run:
        report.files_after = len(opened.files) - sum(1 for _, x in fates if x.fate != "reinitialised")
        report.bytes_after = report.bytes_before - sum(f.size for f, x in fates if x.fate != "reinitialised")
        report.action = "planned"
        return report
    opened.close()
    attic = d / "attic"
    for f, fate in fates:
        path = d / f.name
        if fate.fate == "attic":
            attic.mkdir(exist_ok=True)
            if len(os.listdir(attic)) < s.max_attic_files:
                atomic.rename(path, attic / f.name)
            else:
                atomic.unlink(path)
                fate.fate = "deleted"
        elif fate.fate == "reinitialised":
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                atomic.checkpoint("write", path)
                os.pwrite(fd, FileHeader(FORMAT_VERSION, 0, fate.new_file_id).encode(), 0)
                atomic.fsync(fd, path)
                # then no byte of the file's earlier use can parse as a record of the new fileID (see switch.py)
                atomic.zero_range(fd, 16, f.size - 16)
                atomic.fsync(fd, path)
            finally:
                os.close(fd)
        else:
            atomic.unlink(path)
    report.action = "reclaimed" if fates else "nothing-to-do"
    _after_figures(report, d, opened.journal.spec)
    return report
