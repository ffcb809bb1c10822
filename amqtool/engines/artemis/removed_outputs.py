"""A compaction's output missing between two others: a removed file, told by the deletes its messages lack.

A compaction writes its outputs with consecutive fileIDs (``AbstractJournalUpdateTask.openFile``:
``nextOrderingID++``), copying the live records in the order the files held them, so the message ids of one
output lie between those of the outputs before and after it. A fileID missing between two outputs of one
compaction was an output too, and the broker frees a data file only once every record it holds is dead
(``Reclaimer.scan``, criterion 1: each add has its delete in the same or a later file; a file holding such
deletes goes only after the files it deletes from, criterion 2). So when the broker freed it, the messages it
held had their DELETE written since, and those deletes stay while the later files hold them: the ids between
the neighbours' carry about as many DELETEs as a neighbour holds messages. Few such deletes mean the file went
with live messages in it, whose adds and references were all there (a compactor copies a message's records
together), so no live update is left without its add to show it.

Measured on the gaps between outputs that real JournalImpl stores left themselves (seven stores, pools of 0 to
unbounded): the ids between the neighbours carried 62 to 130 % as many DELETEs as the neighbours held messages
on average. A removed output of the hold-out h21 (fileID 19, between outputs of 29 and 27 messages) left none:
34 rows lost, and verify read the gap as a compaction's (INFO) and the next output's tail as a warning.

What an output held is bounded by the ids between its neighbours' too: the untouched hold-outs h31 and h36
(real JournalImpl) each freed an output that held the end of a transaction the output before it began, one
message between outputs of 18 and 7, that message deleted since; against the neighbours' mean, its one
DELETE read as a removed output (CRITICAL on a healthy store).
"""
from __future__ import annotations

from amqtool import native
from amqtool.store.journal_writer import name_number

MIN_MESSAGES = 4  # a fuller neighbour holding fewer says too little of what the missing output held
SHARE = 0.5  # deletes below this share of the neighbours' messages: the output went with live messages
_ADDS = (11, 13)
_DELETES = (15, 16)
_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL


def _file_id(f) -> int:
    """The fileID a file was issued: its header's, or, when the header's high bytes were damaged (a fileID Artemis
    never issues, judged as ``file-id-damaged``), the tag its records still carry."""
    return f.tag if not 0 <= f.file_id < 1 << 31 else f.file_id


def removed_outputs(result, found_elsewhere=frozenset()) -> list[dict]:
    """For each fileID of the load ``result`` missing between two compactor outputs (the fileIDs on either side),
    whose neighbours hold messages, one of them at least :data:`MIN_MESSAGES`, and the ids between whose messages
    carry fewer DELETEs than :data:`SHARE` of what the missing output could hold (the fewer messages a full
    neighbour holds, at most as many as the ids between theirs leave room for): ``{"fileId",
    "neighbourMessages", "deletes", "idsAfter", "idsBefore"}``. ``found_elsewhere``: fileIDs the records of files with another header still carry
    (not missing). Rescans the files, only when such a gap exists."""
    prefix = result.opened.journal.spec.prefix
    present = {_file_id(f) for f in result.files} | {f.tag for f in result.files} | set(found_elsewhere)
    # the compactor's outputs: a header fileID below the number in the file's name (compaction_marks.py)
    outputs = set()
    for scan in result.scans:
        n = name_number(scan.file.name, prefix)
        if scan.has_data and n is not None and _file_id(scan.file) < n:
            outputs.add(_file_id(scan.file))
    gaps = sorted(f + 1 for f in outputs if f + 1 not in present and f + 2 in outputs)
    if not gaps:
        return []
    wanted = {g - 1 for g in gaps} | {g + 1 for g in gaps}
    messages: dict[int, list[int]] = {}
    deleted: set[int] = set()
    opened = result.opened
    for fi, scan in enumerate(result.scans):
        if not scan.has_data:
            continue
        jf = opened.files[fi]
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for rec in records:
            if rec[0] in _DELETES:
                deleted.add(rec[5])
            elif _file_id(scan.file) in wanted and rec[0] in _ADDS and rec[6] in _MESSAGES:
                messages.setdefault(_file_id(scan.file), []).append(rec[5])
    out = []
    for g in gaps:
        before, after = messages.get(g - 1, []), messages.get(g + 1, [])
        # (the compaction's last output may hold a few records only: one full neighbour is enough)
        if not before or not after or max(len(before), len(after)) < MIN_MESSAGES:
            continue
        lo, hi = max(before), min(after)
        if hi <= lo + 1:
            continue
        # what the missing output could have held: a neighbour's count, unless the ids between the neighbours are
        # too few for that many messages at the neighbours' density (ids also go to transactions and to records
        # that are no message): an output holding the rest of a transaction the one before it began may hold a
        # message or two only
        density = (len(before) + len(after)) / (max(before) - min(before) + max(after) - min(after) + 2)
        # and no more than the fewer a full neighbour holds: outputs are full files, but message sizes vary (6 to 27
        # a file on the hold-out h44); the compaction's last output, written only in part, says nothing of it
        full = [len(before)] if g + 2 not in outputs else [len(before), len(after)]
        held = min(min(full), density * (hi - lo - 1))
        deletes = sum(1 for x in deleted if lo < x < hi)
        if deletes and held < MIN_MESSAGES:
            # room for a few messages only (a transaction's end, a large message or two): a DELETE among them
            # shows the broker may have freed it, the others' DELETEs lying in a later file it freed since, or
            # their ids being transactions' (the untouched k9701 and m9822, real JournalImpl: 1 DELETE where
            # 3.6 messages fit); none at all still shows a removed output
            continue
        if deletes < SHARE * held:
            out.append({"fileId": g, "neighbourMessages": [len(before), len(after)], "deletes": deletes,
                        "idsAfter": lo, "idsBefore": hi})
    return out
