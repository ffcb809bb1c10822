"""``amqtool create --demo SIZE PATH``: a realistic Artemis broker store, and a manifest of what it holds.

The store is written the way a broker writes it, record by record, through
:class:`~amqtool.store.journal_writer.JournalWriter` and the broker-record codecs
(:mod:`amqtool.formats.artemis.userrecords`, :mod:`~amqtool.formats.artemis.message`). It simulates two
broker runs:

1. **First start**: both journals are created; the ID generator (``BatchingIDGenerator``, batch
   ``Integer.MAX_VALUE``) stores its first checkpoint (ID_COUNTER_RECORD 24); addresses (44) and queues (21)
   are created, each in its own bindings transaction (ADD_TX + COMMIT); a few messages are sent; the broker
   stops and stores its current id (24).
2. **Restart**: the journals are reopened exactly as ``JournalImpl.load`` would (free files re-initialised
   with new fileIDs); the ID generator deletes all its counter records but the last and stores a new
   checkpoint; one queue is paused (QUEUE_STATUS_RECORD 22); then traffic runs until the message journal
   reaches the requested size: core messages (45, persister 1) with properties of every TypedProperties type,
   TEXT and BYTES bodies, routed to one or several queues (ADD_REF 32 updates, a filtered subscription),
   acknowledged (33) and deleted (16) once every reference is acked, some in committed transactions, some
   sent in transactions that roll back, delivery-count (34) and scheduled-delivery (36) updates, duplicate
   ids (37) for messages carrying ``_AMQ_DUPL_ID``, a few messages moved to the DLQ, core large messages (30
   plus ``large-messages/<id>.msg``), and at the end one prepared XA transaction (PREPARE with the Xid
   as extra data) that stays unresolved. The broker stops: ID counter (24).

Layout: ``PATH/data/{bindings,journal,paging,large-messages}`` (a broker instance's data directory, as
``artemis create`` names it) and ``PATH/manifest.json``. Everything is written under a temporary sibling
directory with large buffered writes, fsynced once at the end, then renamed into place, so PATH appears
complete or not at all.

Deterministic: the same ``seed``, size, ``live_ratio`` and file settings give byte-identical stores (no
clock, no os.urandom, no hash randomisation involved).

The manifest's ``expected`` section is computed from what was written, applying Artemis' load rules
independently of amqtool's loader (adds/updates in append order, committed transaction records at their
commit, deletes removing every entry of an id, rolled-back and prepared records left out). The schema is
documented in ``man/amqtool-create.1``.

The package: :mod:`.constants`, :mod:`.model` (the simulated broker's objects and ID generator),
:mod:`.broker` (the runs and their message traffic), :mod:`.paging` (paging traffic), :mod:`.expected` (the
load state computed from what is written) and :mod:`.manifest`.
"""
from __future__ import annotations

import json
import os
from typing import Callable

from amqtool.engines.artemis.create import resolve_messages_settings
from amqtool.errors import UsageError
from amqtool.store import atomic, output
from amqtool.engines.artemis.demo.broker import _Demo
from amqtool.engines.artemis.demo.constants import MIN_SIZE


def create_demo(path: str | os.PathLike, size: int, *, seed: int = 1, live_ratio: float = 0.3,
                file_size: int | None = None, min_files: int | None = None,
                progress: Callable[[int], None] | None = None, large_messages: bool = True,
                paging: bool = True) -> dict:
    """Write a demo broker store of about ``size`` bytes at ``path`` and return its manifest (also written to
    ``path/manifest.json``). ``path`` must not exist or be an empty directory. ``progress(n)`` receives
    bytes of progress (they add up to ``size``)."""
    if not 0.0 <= live_ratio <= 1.0:
        raise UsageError("--live-ratio must be between 0 and 1")
    if size < MIN_SIZE:
        raise UsageError(f"demo size must be at least {MIN_SIZE // (1024 * 1024)} MiB")
    fs, mf = resolve_messages_settings(file_size, min_files)
    if fs < 64 * 1024:
        raise UsageError("a demo needs journal files of at least 64 KiB (large message headers and "
                         "transactions must fit)")
    with output.claiming(path) as claimed:  # absent or empty (amqtool.store.output); one writer at a time
        target = claimed.path
        atomic.ensure_free_space(target.parent, int(size * 1.1) + 4 * fs)
        with atomic.tree_aside(target) as tmp:
            demo = _Demo(tmp, size, seed, live_ratio, fs, mf, progress, large_messages, paging)
            demo.run()
            manifest = demo.manifest()
            with open(tmp / "manifest.json", "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, ensure_ascii=False, separators=(",", ":"))  # the C encoder: fast
                fh.write("\n")
    return manifest
