"""A damaged run of a bindings journal filled by binding records the surviving DELETEs name: deleted since.

In the bindings journal the broker changes bindings only in transactions, one binding record to a transaction:
``ActiveMQServerImpl.createQueue`` (``addQueueBinding``) and ``SimpleAddressManager.addAddressInfo`` /
``updateAddressInfo`` (``addAddressBinding``) each append one ADD_TX under an id of their own, then
``commitBindings`` (a COMMIT); a binding leaves by a DELETE_TX (``deleteQueueBinding``, ``deleteAddressBinding``),
and the DELETE_TX is the broker's only way to remove one. ``appendDeleteRecordTransactional`` does not look the
record up, and ``ActiveMQServerImpl.removeAddressInfo`` deletes id 0 for an address it never stored
(``addAddressBinding`` alone sets an address's id): id 0 names nothing.

So when the journal is its whole history -- one file, the first the broker created (file id 1), no record of a
compaction, no other damage -- every record a surviving DELETE names was written in it, and one that no record
holds was in the damaged run (``[last record read's end, next valid record)``: records are written back to back,
so the run is whole records). Those are deleted since: the broker would not have them at start either. What
else the run held fits in its bytes less theirs, counted at the least:

* a binding's ADD_TX a committed DELETE_TX names: 31 bytes and the shortest binding encoding
  (``bindings_run``'s bound), and its transaction's COMMIT (22) unless a COMMIT after the run has lost its
  records (``commit-unknown-tx``: one such for each);
* a record a plain DELETE names: a plain ADD's 23 bytes;
* the run's last record, when its trailing size word survives (``JournalImpl`` checks that word) and the rest of
  the run is too short for any record named: that record is one of them, at its own length.

When fewer bytes than a DELETE_TX (30, the shortest record of a binding change) are left, the run held no other
binding change: at most plain records (no binding: ``bindings_run``) and COMMITs or ROLLBACKs, whose loss leaves a
transaction open or counted short -- the load's failed transactions and ``commit-count-mismatch``, which this rule
does not judge, but for a failed transaction whose every binding a committed DELETE_TX after the run removes: the
broker deletes only a binding it holds, so that transaction committed, its COMMIT (22 bytes, counted) was in the
run, and without it the broker binds nothing it would still hold. A journal with a grouping record is not judged
either (``addGrouping`` writes a plain ADD that ``deleteGrouping`` removes with a DELETE_TX: no COMMIT, a shorter
encoding); a broker with a grouping handler writes one for every message group, so a journal whose only grouping
record the run took is not weighed.

Zeroed runs inside the bindings journals of 15 public broker-written stores (431 runs a seed): same/CRITICAL
67 -> 62 at seed 9871 and 61 -> 55 at seed 9406, loss/CRITICAL unchanged (256, 246). Most runs that took
queue and address creations deleted since stay CRITICAL: a binding's encoding (its names, filter, user) is
longer than the least counted here, and nothing surviving tells its length but the run's last record's size word.
"""
from __future__ import annotations

import struct

from amqtool import native
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as _R

_ADD, _ADD_TX, _DELETE_TX, _DELETE, _PREPARE, _COMMIT, _ROLLBACK = 11, 13, 15, 16, 17, 18, 19
_TX_RECORDS = (13, 14, 15, 17, 19)  # the records a transaction's id ties to its COMMIT
_HEADER = 16  # a journal file's header (version, user version, file id)


def deleted_since(result, index: int, first: int, end: int) -> str | None:
    """Why the damaged run ending at ``end`` (its first damaged byte ``first``) in file ``index`` of the bindings
    journal of load ``result`` held no binding the broker still holds (see the module's contract), or None when
    that cannot be shown."""
    from amqtool.engines.artemis.bindings_run import SMALLEST_BINDING_ADD

    opened = result.opened
    version = opened.files[index].version
    if version < 2 or any(a.code == "commit-count-mismatch" for a in result.anomalies):
        return None
    scans = [native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, _HEADER)[0]
             for fi, jf in enumerate(opened.files)]
    if [fi for fi, rs in enumerate(scans) if rs] != [index] or opened.files[index].file_id != 1:
        return None  # not the journal's whole history: a reclaimed file may have held what a DELETE names
    records = scans[index]
    if any(r[3] for r in records) or any(r[0] in (_ADD, _ADD_TX) and r[6] == _R.GROUP_RECORD for r in records):
        return None  # compacted, or a grouping's (a plain ADD a DELETE_TX removes)
    before = [r for r in records if r[1] < end]
    after = [r for r in records if r[1] >= end]
    start = before[-1][1] + before[-1][2] if before else _HEADER
    if not after or after[0][1] != end or not start <= first < end or not _back_to_back(before, after):
        return None  # another damaged run: its records may be what a DELETE names
    txs = {r[4] for r in records if r[0] in _TX_RECORDS}
    if any(r[0] in (_PREPARE, _ROLLBACK) and r[4] not in txs for r in records):
        return None
    bare = sum(1 for r in after if r[0] == _COMMIT and r[4] not in txs)  # COMMITs the run took the records of
    ended = _ended_in_run(result.failed, after, index, first)
    if ended is None:
        return None
    held = {r[5] for r in records if r[0] in (_ADD, _ADD_TX)}
    committed = {r[4] for r in records if r[0] == _COMMIT}
    named: dict[int, int] = {}  # id no record holds -> the fewest bytes of its record
    for r in after:
        if (r[0] == _DELETE or (r[0] == _DELETE_TX and r[4] in committed)) and r[5] != 0 and r[5] not in held:
            least = SMALLEST_BINDING_ADD if r[0] == _DELETE_TX else fixed_size(_ADD, version)
            named[r[5]] = max(named.get(r[5], 0), least)
    if not named:
        return None
    total = end - start
    bindings = sum(1 for least in named.values() if least == SMALLEST_BINDING_ADD)
    commits = (max(0, bindings - bare) + ended) * fixed_size(_COMMIT, version)
    least = sorted(named.values())
    counted = sum(least) + commits
    last = struct.unpack(">i", opened.pread(index, end - 4, 4))[0]
    if fixed_size(_DELETE, version) <= last <= total and total - last < least[0]:
        # no named record fits before the last one: the last is the one named, at its own length
        if len(least) > 1 or last < least[0]:
            return None  # they cannot all fit: not the records this reading assumes
        counted += last - least[0]
    left = total - counted
    if left >= fixed_size(_DELETE_TX, version):
        return None
    return (f"the {len(named)} record(s) surviving DELETEs name and no record holds were in them (a journal of one "
            f"file, its whole history: a record is written before its DELETE), {bindings} of them bindings"
            f"{_commits_clause(ended)}; at "
            f"least {counted} of their {total} bytes, leaving {max(left, 0)}, fewer than the "
            f"{fixed_size(_DELETE_TX, version)} of a DELETE_TX: every binding they held was deleted since, so no "
            f"binding was lost, and the bindings journal holds no message")


def _commits_clause(ended: int) -> str:
    if not ended:
        return ""
    return (f", with the COMMIT of {ended} transaction(s) the load fails, whose bindings a later DELETE_TX removes "
            f"(so they committed)")


def _ended_in_run(failed: list, after: list, index: int, first: int) -> int | None:
    """How many of the load's failed transactions lost their COMMIT in the run, when every one did and held only
    bindings a committed DELETE_TX after the run removes; None otherwise (a failed transaction this rule cannot
    weigh). The broker deletes only a binding it holds (``deleteQueueBinding`` for a queue it created,
    ``deleteAddressBinding`` for an address it added), so a transaction whose binding was deleted later had
    committed, and its COMMIT, written after its records and before that DELETE_TX, was in the run: without it
    the broker never binds what it held, as it would not since."""
    committed = {r[4] for r in after if r[0] == _COMMIT}
    removed = {r[5] for r in after if r[0] == _DELETE_TX and r[4] in committed}
    for tx in failed:
        if tx.prepared or tx.records_to_delete or not tx.records:
            return None
        if any(rec.is_update or rec.id not in removed or rec.file_index != index or rec.body_offset >= first
               for rec in tx.records):
            return None
    return len(failed)


def _back_to_back(before: list, after: list) -> bool:
    """Whether the records before the run and those after it each follow one another with no byte between, from
    the file's header on."""
    if before and before[0][1] != _HEADER:
        return False
    return all(a[1] + a[2] == b[1] for part in (before, after) for a, b in zip(part, part[1:]))
