"""Offline compaction of an Artemis journal directory, crash-safe by Artemis' own protocol (§4).

What is written (``JournalCompactor``, artemis-journal-format.md §4.2), derived from the load result so the
compacted journal loads to exactly the same state (the acceptance of ``amqtool compact``):

* every entry of the live list, in list order: non-transactional ADD/UPDATE as ADD/UPDATE; records of
  committed transactions **kept as ADD_TX/UPDATE_TX followed by a COMMIT** whose ``numberOfRecords`` is the
  count of that transaction's records in the COMMIT's output file (the compactor's ``flushTX``). The live
  list already holds committed records at their COMMIT's place, which is where ``flushTX`` writes them;
* records of transactions still open at the end of the load (Artemis' ``pendingTransactions``): copied as
  they are (ADD_TX/UPDATE_TX/DELETE_TX with its body). A valid prepared transaction gets a PREPARE with its
  extra data (the Xid) and the counter of its records in the PREPARE's output file, as
  ``producePrepareRecord`` does.
* **Open transactions that were never prepared** (or whose PREPARE failed the count check) are carried over
  unresolved, as the online compactor carries every pending transaction (fixture 04b shows exactly this:
  failed tx 2003 survives Artemis' compaction). ``artemis data compact`` instead appends a ROLLBACK to the
  *source* first (load with changeData). We do not: a compactor that may run on a copy (``-o``) or be
  interrupted must not write to the source before its commit point, and the outcome is the same either way
  because the broker rolls such a transaction back at its next start. A failed *prepared* transaction keeps
  its PREPARE (and Xid) with a ``numberOfRecords`` of -1, which can never match, so it stays failed: a
  count rewritten to match would turn an incomplete transaction into a valid in-doubt one.
* every update where the load has it, replaceable ones (message journal: 34 UPDATE_DELIVERY_COUNT, 36
  SET_SCHEDULED_DELIVERY_TIME) included: ``JournalCompactor.onReadUpdateRecord`` writes each update of a live
  record in scan order, and a real broker's compaction keeps every record in identical load order. (An earlier
  version kept only the last replaceable update per id, moved to the end: a compacted store then loaded with
  updates missing and delivery-count updates after the ack of their reference, which the broker logs as
  "cannot find message" at start-up.) Replaceable updates are still counted for ``needsCompact``'s update
  factor;
* compactCount + 1 on ADD/UPDATE/ADD_TX/UPDATE_TX, saturating at 127; 0 on DELETE_TX/PREPARE/COMMIT;
  the ``COMPACT_SPLIT_LINE`` (2) rule starts a new output file once, at the first record with an original
  compactCount below 2 that follows records at or above it;
* output header fileIDs reuse the lowest old data file's ID upwards (``nextOrderingID``); output files are
  named with fresh numbers above every header ID and name number (``nextFileID``), written whole
  (``fileSize`` bytes, zero after the last record).

Two deliberate differences from Artemis' compactor, both to keep the *loaded* state identical: liveness is
taken from the load result (so an ADD that follows a DELETE of the same id, which Artemis' load drops but
its compactor would resurrect, stays dead, and an UPDATE whose ADD was reclaimed stays in the list); and
when the highest record id (``maxID``) belongs to a record that is not kept, an ADD + DELETE pair of that id
(userRecordType 0, empty body) is appended so that load still reports the same maxID. Neither record is
ever handed to the broker (load removes deleted ids from its list).

How (performance): the load keeps each live entry's source record type and transaction id
(``load_journal(sources=True)``); the layout and the encoding of each output file run in C
(native/compact_write.c: version-2 records are copied whole, neighbours with one ``pread``, only tag and
compactCount rewritten), with :func:`_items`/:class:`_Layout` as the Python reference and fallback. Memory:
the packed live list and the plan (58 bytes a record) plus one buffer per output file in flight
(:data:`FILL_THREADS`).

Switch-over (``JournalImpl.compact`` + ``renameFiles`` + ``checkControlFile``, §4.3): the new files are
written as ``<name>.cmp`` and fsynced, into the store's free files first (renamed to ``.cmp`` and rewritten
whole, as ``JournalFilesRepository.openFileCMP`` takes them from the pool) and only then into new files, so
repeated compaction does not grow the store; ``journal-rename-control.ctr`` (old names, ``.cmp`` names) is
written to a temporary name, fsynced and renamed into place, and the directory fsynced: **that rename is
the commit point**. Then each old file goes to the attic (wrong size), is reinitialised with a new header
fileID (pool not full) or deleted; each ``.cmp`` is renamed to its final name; the reinitialised files and the
directory are fsynced (together, not one round trip per step: the control file makes each step redoable
until it is gone); the control file is deleted.
A crash before the commit leaves ``.cmp`` files that Artemis (and :func:`open_journal`) discards; a crash
after it is rolled forward by Artemis' ``checkControlFile`` at the next start. Every old file but the free
files taken for outputs is listed in the control file, because every one of them is rewritten or removed
after the commit; a taken one is not, because the roll-forward deletes listed old files before it renames
the ``.cmp`` files.

The package follows those seams: :mod:`.settings` (thresholds, settings, the report), :mod:`.plan` (what
goes where, read-only), :mod:`.write` (filling and writing the output files), :mod:`.switch` (the commit
protocol, the copy, interrupted compactions), :mod:`.reclaim_only` and :mod:`.run` (the command's engine).
"""
from __future__ import annotations

from amqtool.engines.artemis.compact.plan import plan_journal
from amqtool.engines.artemis.compact.reclaim_only import reclaim_in_place
from amqtool.engines.artemis.compact.run import CompactRequest, compact_store
from amqtool.engines.artemis.compact.settings import (
    REPLACEABLE_MESSAGE_TYPES,
    CompactSettings,
    JournalCompaction,
    name_number,
    needs_compact,
    settings_for,
)
from amqtool.engines.artemis.compact.switch import compact_copy, compact_in_place, finish_interrupted, predict_after
from amqtool.formats.artemis.control import CONTROL_FILE_NAME

__all__ = [
    "CONTROL_FILE_NAME", "REPLACEABLE_MESSAGE_TYPES", "CompactRequest", "CompactSettings", "JournalCompaction",
    "compact_copy", "compact_in_place", "compact_store", "finish_interrupted", "name_number", "needs_compact",
    "plan_journal", "predict_after", "reclaim_in_place", "settings_for",
]
