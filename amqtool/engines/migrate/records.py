"""``create --from``'s per-message chain on batches: stored OpenWire messages straight to the
ADD_MESSAGE_PROTOCOL record bodies the writer appends, in C (``amqtool.native.migrate_records``,
native/migrate_records.c), for the messages it covers; the others through the Python reference
(:func:`amqtool.engines.migrate.convert.convert` then :func:`amqtool.engines.migrate.write.message_record`).

The two give the same bytes (tests/native/test_migrate_native.py, on every fixture and generated store, and
the created stores compared file by file). Ids stay the plan's: message ``k`` of a batch gets ``first + k``
from C, ``first`` the plan's next id and ``k`` counting the batch's readable messages before it (one with no
bytes to read takes no id). A message C leaves to Python takes the plan's next id when it converts and none
when it does not, and the consumer may take ids between messages (the writer's transaction of prepared
messages); whenever the plan's next id is no longer the one C gave the next message, the rest of the batch is
converted again from there.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterator, Sequence

from amqtool import native

BATCH = 256  # messages per C call: the per-call cost disappears, the batch's records stay a few MiB


def records_wanted(records: tuple[int, int | None] | None, store_version: int) -> bool:
    """Whether the C path applies: a writer asked for records (``(threshold, file_size)``), the extension
    has it, and the store's OpenWire version is one it reads (10+: a MessageId with its textView)."""
    return records is not None and native.migrate_records is not None and store_version >= 10


def convert_batches(plan, items: Sequence, *, raw: Callable, python: Callable, make: Callable, address: str,
                    routing_type: int, records: tuple[int, int | None]) -> Iterator:
    """Yield the plan's messages of ``items`` in order. ``raw(item)``: the stored OpenWire message's bytes
    (a buffer, or None where it cannot be read: Python says why); ``python(item)``: the reference path for
    one item (a PlannedMessage taking ``plan.next_id``, or None after recording the problem);
    ``make(item, record, body_length, redelivery, message_id)``: the PlannedMessage of a record C wrote."""
    threshold, file_size = records
    max_record = file_size if file_size is not None else sys.maxsize
    addr = address.encode("utf-16-le", "surrogatepass") if address is not None else None
    i = 0
    while i < len(items):
        chunk = items[i:i + BATCH]
        raws = [raw(it) for it in chunk]
        k = plan.next_id  # the id C gives the next readable item of the batch
        out = native.migrate_records(raws, k, addr, routing_type, threshold, max_record)
        i += len(chunk)
        for j, r in enumerate(out):
            if r is not None:
                if plan.next_id != k:  # ids moved since (Python, or the writer taking one): redo from here
                    i -= len(chunk) - j
                    break
                yield make(chunk[j], r[0], r[1], r[2], plan._id())
            else:
                pm = python(chunk[j])
                if pm is not None:
                    yield pm
            if raws[j] is not None:
                k += 1
