"""A journal file none of whose records carry its header's fileID: a free file, or a damaged header.

When Artemis frees a data file (reclaimed, or compacted away) and its pool keeps it, ``JournalFilesRepository
.addFreeFile`` re-initialises it (``reinitializeFile``): a new header with a fresh fileID
(``generateFileID``, above every fileID issued so far) and nothing else written, so the records of its
earlier use stay after the header under their old tag. The pool keeps such files whenever
``journal-pool-files`` is -1 (the default) or not yet reached. Read under their old tag those records change
the live state (their deletes may have been reclaimed since, or dropped by a compaction): that is no evidence
of a damaged header.

What a free file cannot do:

* sort before a file with records of its own. Its fileID was issued after every data file's of the time;
  files issued later are taken from the pool in that order (``freeFiles`` is a FIFO queue) or created when it
  is empty, and each gets a record as it becomes current; and ``JournalImpl.load`` re-initialises every file
  without data it reads (``addFreeFile`` again), so after a restart too every free file sorts last;
* hold the add of a live update. ``Reclaimer.scan`` frees a file only when every add or update in it has its
  delete in the same or a later file (criterion 1), and a file holding deletes only once the files it deletes
  from go too (criterion 2); compaction copies the live adds. So a live add is in a data file, and an update
  whose record was deleted keeps its delete beside it. The exception: ``JournalImpl.load`` links no update to
  an add it did not read ("It's legal for this to be null"), so after a restart the file of such an update's
  delete can be freed and the update read live; if its add's file is still a free file, this reads as a
  damaged header, but the journal is CRITICAL ``missing-journal-file`` (live updates without their add,
  verify's gap rule) without it: restart_orphans.py excuses a lone such orphan only when no add of a lower id
  survives anywhere, dead ones in a free file included;
* carry a fileID far above every other file's. ``JournalImpl.load`` sets ``nextFileID`` to the highest fileID
  or name number of its files (``JournalFilesRepository.calculateNextfileID``), and every id issued since
  (``generateFileID``) went to a file created (named after it) or re-initialised (which keeps it as its fileID),
  the free ones in order, each still there unless its pool deleted it whole. The free file issued last sits
  just above the rest: in 43 stores the real JournalImpl wrote (pools of 2 to unbounded, compactions,
  restarts, SIGKILLs) never more than one above the highest other fileID or name number. More than
  :data:`FAR_ABOVE` above is taken for a flipped bit of the fileID (a bound, not a broker rule).

The first and the last are also what a damaged header of a free file shows, which changes nothing (the broker
frees it all the same): they count only when the header's fileID is one flipped bit from its records' tag, as a
data file's damaged header is (a free file's fresh fileID has no such tie to its old records' tag). So does such
a header on the only record-less file of the journal, a weaker sign (a bet on the count): a pool that keeps free
files keeps each file a reclaim or a compaction frees, and those of the stores above that had any held 2 to 22,
while a journal whose pool deletes them (or that amqtool's compaction freed: it zeroes them) holds none. Any one
seen means the header's fileID was damaged: the broker frees the file and loses what it held.
"""
from __future__ import annotations

from amqtool.engines.artemis.load import LoadResult, load_journal
from amqtool.store.journal_writer import name_number


FAR_ABOVE = 64


def header_damaged(result: LoadResult, index: int, tag: int, retagged, lone: bool,
                   explained: frozenset[int] | set[int] = frozenset()) -> bool:
    """Whether file ``index`` of ``result`` (no record of its own; its records carry ``tag``) shows what a free
    file cannot (the module docstring). ``retagged``: makes the journal with that file's header set to ``tag``
    (loaded only when the live updates of ``result`` lack an add); ``lone``: no other file of the journal is
    record-less; ``explained``: ids whose DELETE other damage took (``lost_deletes.py``), whose live updates
    prove nothing of this header."""
    one_bit = bin(result.files[index].file_id ^ tag).count("1") == 1
    return ((one_bit and (lone or sorts_before_data(result, index) or far_above_others(result, index)))
            or supplies_live_updates(result, retagged, explained))


def far_above_others(result: LoadResult, index: int) -> bool:
    """Whether file ``index``'s fileID exceeds by more than :data:`FAR_ABOVE` the highest fileID of the other
    files and the highest number their names (and its own) carry."""
    own = result.files[index].file_id
    prefix = result.opened.journal.spec.prefix
    highest = max([f.file_id for i, f in enumerate(result.files) if i != index]
                  + [n for n in (name_number(f.name, prefix) for f in result.files) if n is not None], default=None)
    return highest is not None and own > highest + FAR_ABOVE


def sorts_before_data(result: LoadResult, index: int) -> bool:
    """Whether file ``index`` (no record of its own) sorts before a file with records of its own."""
    own = result.files[index].file_id
    return any(s.records > 0 and s.file.file_id > own for s in result.scans)


def supplies_live_updates(result: LoadResult, retagged, explained: frozenset[int] | set[int] = frozenset()) -> bool:
    """Whether loading ``retagged()`` (the journal with one file's header set to its records' tag) gives an
    add record to an id that has live updates but no add in ``result``: the message record a live update
    of the damaged load lacks. Ids in ``explained`` do not count: their DELETE was in bytes other damage took
    (or in a transaction it made the load discard), so their updates are live because of that damage, and a
    free file may well keep their add, which the broker wrote before it deleted them and freed its file."""
    adds = {r[0] for r in result.live if not r[2]}
    orphans = {r[0] for r in result.live if r[2] and r[0] not in adds} - set(explained)
    if not orphans:
        return False
    with retagged() as opened:
        other = load_journal(opened)
    return any(not r[2] and r[0] in orphans for r in other.live)
