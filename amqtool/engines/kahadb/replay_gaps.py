"""Journal files missing (or emptied) between the index checkpoint and the newest file: records lost that the
broker would have replayed at start.

ActiveMQ 5.17's journal GC (``MessageDatabase.checkpointUpdate(tx, cleanup)``) never deletes the file of
``lastUpdate`` nor any after it (``gcCandidateSet.removeAll(gcCandidateSet.tailSet(lastUpdate.getDataFileId()))``),
and ``DataFileAppender`` only rotates to a new file when the current one is full, so every file id from the
checkpoint's file to the newest exists and holds records in a store the broker wrote. A file there that is
gone or empty lost records ``MessageDatabase.recover`` would replay onto the index: sends that are not
delivered, acknowledgements whose messages come back. The broker starts anyway (the replay walks the files
that exist), so nothing but this gap shows the loss. The newest file itself is left out: an empty newest file
is what a crash while creating it leaves, and a deleted newest file leaves no trace.
"""
from __future__ import annotations


def replay_gaps(d, last_update_file: int | None) -> list[tuple[int, str]]:
    """``(file id, "missing" | "empty")`` for each journal file of store directory ``d`` after the checkpoint's
    file ``last_update_file`` and before its newest non-empty file that is absent or of size 0. A checkpoint
    naming no file of the journal (page 0 damaged: any 32-bit id) has no gap after it: that file is what is
    missing (the broker's replay cannot start there, ``Journal.getDataFile``), another finding's business.

    ``None``: the index has no checkpoint yet (page 0 without ``lastUpdate``: a broker killed before its
    first checkpoint). The journal GC only runs in a checkpoint, so every file from db-1.log on was written
    and is replayed from the start (``getRecoveryPosition``: ``getNextLocation(null)``)."""
    sizes = {f.id: f.size for f in d.files}
    written = [fid for fid, size in sizes.items() if size]
    if last_update_file is None:
        last_update_file = 0
    elif last_update_file not in sizes:
        return []
    if not written:
        return []
    newest = max(written)
    return [(fid, "missing" if fid not in sizes else "empty") for fid in range(last_update_file + 1, newest)
            if not sizes.get(fid)]
