"""A message whose ADD was zeroed whole: zeros where the broker wrote it, right before its first reference.

Zeros laid exactly over whole records are a damaged region to the loaders (``load.file_gaps``: the broker writes a
file's records back to back), but nothing of what it held can be read back. What such zeros leave is a message's
references without their message: the broker writes a durable message as its ADD followed by its references
(``JournalStorageManager.storeMessage``, then ``storeReference``), and ``loadMessageJournal`` drops references whose
message it cannot find. Verify takes such an id for a damaged id when its ADD would have lain in a file still there
(``add_placement.in_present_files``), or for a reference whose id byte was damaged (``Evidence.misfiled``); neither
leaves zeros behind. So when the bytes between the first live reference of such a message and the record before it
are all zeros, long enough to have held a record, and no AIO padding (``load.aio_padding``), the message's ADD was
there and was zeroed: the broker loses the message on every queue that still held it.
"""
from __future__ import annotations

from amqtool.engines.artemis.load import aio_padding
from amqtool.engines.artemis.wiped_run import zeroed_from
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as _R

_UPDATE, _UPDATE_TX = 12, 14
_SMALLEST_RECORD = 18  # a DELETE, the shortest record a run of zeros may have held


def zeroed_adds(result, ids: set[int]) -> dict[int, tuple[str, int, int]]:
    """Of ``ids`` (messages with live references and no message record in the messages-journal load
    ``result``), those whose first live reference follows zeros back to the record before it (see the module
    docstring): id -> (file path, where the zeros begin, how many)."""
    first: dict[int, tuple[int, int]] = {}
    for r in result.live:
        if r.is_update and r.user_record_type == _R.ADD_REF and r.id in ids:
            at = (r.file_index, r.body_offset)
            if r.id not in first or at < first[r.id]:
                first[r.id] = at
    out = {}
    opened = result.opened
    for mid, (index, body) in first.items():
        jf = opened.files[index]
        start = None
        for t in (_UPDATE, _UPDATE_TX):  # the reference's own header, before its body
            at = body - (fixed_size(t, jf.version) - 4)
            head = opened.pread(index, at, 5) if at >= 16 else b""
            if len(head) == 5 and head[0] == t and int.from_bytes(head[1:5], "big", signed=True) == jf.tag:
                start = at
                break
        if start is None:
            continue
        zeros = zeroed_from(opened, index, start)
        gap = start - zeros
        if gap >= _SMALLEST_RECORD and not aio_padding(zeros, start):
            out[mid] = (str(jf.path), zeros, gap)
    return out
