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

Two entries of two messages under one sequence id are another thing: a damaged key (a flipped bit made one
entry's sequence another's). ``recoverNextMessages`` reads each message once (the cursor's duplicate check
is by message id), so the destination delivers what it did; but an ack of the damaged entry's message finds
it by the sequence its ``messageIdIndex`` entry holds (``updateIndex(KahaRemoveMessageCommand)``:
``orderIndex.remove``), not under the damaged key, so the entry stays and the broker delivers the message
again at its next start: a WARNING, ``kahadb-index-entry-damaged``.
"""
from __future__ import annotations

from amqtool.engines.kahadb.pins import qualified
from amqtool.errors import Finding, Severity


def duplicate_entries(d) -> list[Finding]:
    """One CRITICAL ``kahadb-index-duplicate-entry`` per destination whose order index holds one message's entry
    under a sequence id more than once, one WARNING ``kahadb-index-entry-damaged`` per destination where
    entries of different messages share one (``d.indexed``: what
    :func:`amqtool.engines.kahadb.indexed.read_indexed` gave)."""
    out = []
    for key, dest in sorted((d.indexed or {}).items()):
        held: dict[int, list] = {}
        for m in dest.messages:
            held.setdefault(m.seq, []).append(m.message_id)
        shared = sorted(s for s, ids in held.items() if len(ids) > 1 and len(set(ids)) == len(ids))
        if shared:
            ids = sorted({mid for s in shared for mid in held[s]})
            out.append(Finding(
                Severity.WARNING, "kahadb-index-entry-damaged",
                f"the order index of {qualified(key)} holds entries of different messages under one sequence id "
                f"({', '.join(map(str, shared[:5]))}{' ...' if len(shared) > 5 else ''}: "
                f"{', '.join(ids[:4])}{' ...' if len(ids) > 4 else ''}): an entry's key is damaged; the broker "
                "reads each message once, but an ack of the damaged one will not find its entry, and the message "
                "comes back at the next start", str(d.directory / "db.data"), None,
                {"destination": key, "sequences": shared[:100], "messageIds": ids[:100]}))
        twice = sorted(s for s, ids in held.items() if len(ids) > len(set(ids)))
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
