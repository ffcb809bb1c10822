"""The id-counter records each broker start leaves in the bindings journal, and the damaged runs they fill.

The broker issues every id from one ``BatchingIDGenerator`` whose checkpoint, the ID_COUNTER record (a plain
ADD of user record type 24 whose body is the next batch's end), lives in the bindings journal. Its batch is
``JournalStorageManager``'s ``CHECKPOINT_BATCH_SIZE``, ``Integer.MAX_VALUE``: a start loads the last
checkpoint (``loadState``), the first id it issues stores a new one (``saveCheckPoint``: ``storeID`` with the
record id ``counter.incrementAndGet()`` and the value ``nextID + checkpointSize``) and the start deletes the
record it loaded (``cleanupRecords``: a plain DELETE). No broker issues 2^31 ids in one run, so the record ids
of successive starts step by the same amount (``checkpointSize + 1``), and a broker restarted many times --
what the bindings journals of development brokers hold most -- writes little else there than these ADD and
DELETE pairs.

A start may store more beside its checkpoint and replace it the same way: a divert its configuration deploys
is stored again (``AbstractJournalStorageManager.storeDivertConfiguration`` deletes the record stored under its
name, then adds one with a new id: JatinPandey26's public journal holds a DIVERT_RECORD 13 ids past every
counter record). Such a companion is recognised
by its place: a plain ADD of one user type and body length, the same number of ids past the counter record of
most starts.

That regularity counts what a damaged run between two surviving counter records took: the ADDs of the starts
between them (their ids are the steps between the two, their companions' the same distance past each), the
companions of the start before the run that do not survive, and the DELETEs of what each of those starts found
stored, less those that survive elsewhere. When their sizes fill the run exactly -- from the end of the record
read before it (zeros that ran from there took whole records) to the next valid record -- the run held nothing
else: no binding transaction, so no queue or address was lost (``bindings_run``). A run with a byte to spare or
missing, an uneven step beside it, or no counter record on either side is not judged so.

Zeroed runs inside the bindings journals of 15 public broker-written stores (../shared/fixtures/artemis/public and
more from GitHub; sweep seed 9871, 431 runs): same/CRITICAL 106 -> 67, and no loss judged otherwise. The
runs that stayed CRITICAL there took binding transactions or records of older brokers (steps of a few ids).
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter

from amqtool import native
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as _R

_ADD, _DELETE = 11, 16
_COUNTER_BODY = 8  # IDCounterEncoding: the batch's end, a long
_MIN_STEPS = 2  # steps between surviving counter records that must agree before the step is trusted


def counters_fill(opened, index: int, start: int, end: int) -> int | None:
    """The number of records of successive broker starts (their id-counter ADDs and the records each start
    writes with it, and the DELETEs of what the start before wrote) that fill the bytes ``[start, end)`` of file
    ``index`` of the bindings journal ``opened`` exactly, as the surviving records around them count them (see
    the module docstring); None when they do not, or cannot be counted."""
    version = opened.files[index].version
    adds: list[tuple[tuple[int, int], int, int, int]] = []  # ((file, offset), id, user type, body length)
    deleted: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for t, off, _size, _cc, _tx, rid, utype, body_len, *_rest in records:
            if t == _ADD:
                adds.append(((fi, off), rid, utype, body_len))
            elif t == _DELETE:
                deleted.add(rid)
    counters = [(at, rid) for at, rid, utype, size in adds if utype == _R.ID_COUNTER_RECORD and size == _COUNTER_BODY]
    ids = sorted(rid for _at, rid in counters)
    steps = Counter(b - a for a, b in zip(ids, ids[1:]))
    if not steps:
        return None
    step, seen = steps.most_common(1)[0]
    if step <= 0 or seen < _MIN_STEPS:
        return None
    before = [rid for at, rid in counters if at < (index, start)]
    after = [rid for at, rid in counters if at >= (index, end)]
    if not before or not after:
        return None
    low, high = max(before), min(after)
    if high <= low or (high - low) % step:
        return None
    # the starts on both sides step evenly too (a journal's first starts may not: a store created by an older
    # broker, or ids taken before the first checkpoint)
    if not (_steps_evenly(ids, low, -step) and _steps_evenly(ids, high, step)):
        return None
    kinds = [(0, _COUNTER_BODY)] + _companions(adds, ids, step)  # (id past the start's counter, body length)
    present = {rid for _at, rid, _u, _s in adds}
    starts = [low + k * step for k in range((high - low) // step)]  # low's start, and those lost with the run
    lost_adds = [(c + o, size) for c in starts for o, size in kinds if (c, o) != (low, 0)]
    if any(rid in present for rid, _size in lost_adds[len(kinds) - 1:]):
        return None  # a lost start's record survives: not what the run took
    lost_adds = [(rid, size) for rid, size in lost_adds if rid not in present]
    # each start deletes what the one before it wrote
    lost_deletes = [c - step + o for c in starts for o, _size in kinds if c - step + o not in deleted]
    delete_size = fixed_size(_DELETE, version)
    filled = sum(fixed_size(_ADD, version) + size for _rid, size in lost_adds) + len(lost_deletes) * delete_size
    if end - start == filled:
        return len(lost_adds) + len(lost_deletes)
    if not any(i < low for i in ids):  # low's start may have been the journal's first: it deleted nothing
        first = [rid for rid in lost_deletes if low - step <= rid < low]
        if end - start == filled - len(first) * delete_size:
            return len(lost_adds) + len(lost_deletes) - len(first)
    return None


def _companions(adds: list, ids: list[int], step: int) -> list[tuple[int, int]]:
    """The records each start writes beside its id-counter record (a divert the configuration deploys, stored
    again at every start with the next ids): plain ADDs of one user type and body length whose ids lie the same
    distance past a counter record's at most starts, as (distance, body length)."""
    seen: Counter = Counter()
    for _at, rid, utype, size in adds:
        if utype == _R.ID_COUNTER_RECORD:
            continue
        below = bisect_right(ids, rid) - 1
        if below >= 0 and 0 < rid - ids[below] < step:
            seen[(rid - ids[below], utype, size)] += 1
    return sorted({(o, size) for (o, _utype, size), n in seen.items() if n > _MIN_STEPS and 2 * n >= len(ids)})


def _steps_evenly(ids: list[int], rid: int, step: int) -> bool:
    """Whether the counter record next to ``rid`` on the side of ``step`` is one ``step`` away (or none is)."""
    beyond = [i for i in ids if (i - rid) * step > 0]
    return not beyond or min(beyond, key=lambda i: abs(i - rid)) == rid + step
