"""Order-index entries the broker reads twice: one sequence id held by two entries of a destination's order
index.

The broker gives each message of a destination one sequence id (``orderIndex.getNextMessageId``) and puts it
in the one priority B-tree its priority picks (``MessageOrderIndex.put``), so a store it wrote holds every
sequence once. A damaged root page id can make two priority trees one (the low-priority root reading 2, the
default tree's root): ``KahaDBStore.recoverNextMessages`` then walks the same entries twice, and the queue's
cursor takes the second read of each message for a duplicate from the store
(``AbstractStoreCursor.recoverMessage``), which ``BaseDestination.duplicateFromStore`` poison-acknowledges
(and sends to the DLQ when so configured): the message leaves the queue. Nothing in the journal explains such
an index, and each set of message ids still matches the journal, so the index-journal comparison cannot see
it.
"""
from __future__ import annotations

from amqtool.engines.kahadb.pins import qualified
from amqtool.errors import Finding, Severity


def duplicate_entries(d) -> list[Finding]:
    """One CRITICAL ``kahadb-index-duplicate-entry`` per destination whose order index holds a sequence id
    more than once (``d.indexed``: what :func:`amqtool.engines.kahadb.indexed.read_indexed` gave)."""
    out = []
    for key, dest in sorted((d.indexed or {}).items()):
        seen: dict[int, int] = {}
        for m in dest.messages:
            seen[m.seq] = seen.get(m.seq, 0) + 1
        twice = sorted(s for s, n in seen.items() if n > 1)
        if not twice:
            continue
        ids = sorted({m.message_id for m in dest.messages if m.seq in set(twice)})
        out.append(Finding(
            Severity.CRITICAL, "kahadb-index-duplicate-entry",
            f"the order index of {qualified(key)} holds {len(twice)} sequence id(s) twice ({', '.join(map(str, twice[:5]))}"
            f"{' ...' if len(twice) > 5 else ''}): the broker reads those messages twice and poison-acknowledges "
            f"the second read as a duplicate from the store, taking them off the destination "
            f"({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''})",
            str(d.directory / "db.data"), None,
            {"destination": key, "sequences": twice[:100], "messageIds": ids[:100]}))
    return out
