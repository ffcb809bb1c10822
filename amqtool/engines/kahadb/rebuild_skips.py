"""What a rebuild of the index loses to an ack compaction file the broker went on writing into.

The ack compaction (``MessageDatabase.forwardAllAcks``, ActiveMQ 5.17, ``enableAckCompaction``) reserves a new
journal file (``Journal.reserveDataFile``: the next file id), writes a ``KahaRewrittenDataFileCommand`` there
(``sourceDataFileId``: the file whose acks it moves, ``skipIfSourceExists``) and the forwarded acks after it.
When the broker stops with that file the newest, the next start appends to it (``Journal.start``: the newest
file is the write file), so sends and acks of later runs follow the forwarded acks in it. The running broker
indexes them as it writes them. A replay from the journal does not: ``process(KahaRewrittenDataFileCommand)``
moves the location to ``journalMaxFileLength`` while the source file is still there ("Move offset so that next
location read jumps to next file"), and everything after the marker in that file is skipped.

So when the broker has to rebuild its index from the journal (db.data absent or unreadable), what those skipped
records did is lost: their sends are not delivered, their acks do not happen (the message comes back). A real
5.17.2 broker started on such a store without db.data delivers exactly the replay with the skip (the kl45
hold-out store h1-restarts: 13 of 19 queue messages, 5 of 10, 15 of 19 pending for a durable subscription).

:func:`rebuild_skips` compares the broker's replay (the loader's, with the skip) with the replay that applies
every record (what the running broker's index held), for one store directory.
"""
from __future__ import annotations


def rebuild_skips(d) -> tuple[list, list, list]:
    """``(lost, back, files)`` of store directory ``d`` (a load_directory result): ``(destination key, message
    id)`` of the live messages a rebuild of the index loses to skipped records, and of those it brings back
    (their acks skipped), each sorted, and the ids of the files whose skipped records held the lost sends (the
    last file the replay skipped in when only acks are lost); all empty when no compaction marker made the
    replay skip anything."""
    if d.replay.skip_file is None or not d.replay.skipped_records:
        return [], [], []
    from amqtool.engines.kahadb.load import load_directory

    full = load_directory(d.directory, skip_rewritten=False).replay
    for key in [k for k in full.transactions if k not in d.replay.transactions]:
        full.commit_prepared(key)  # (an mKahaDB child: what the txStore committed in the first load)
    lost, back, files = [], [], set()
    for key in sorted(set(full.destinations) | set(d.replay.destinations)):
        a = _live(full, key)
        b = _live(d.replay, key)
        lost += sorted({(key, mid) for mid, _sub in a - b})
        back += sorted({(key, mid) for mid, _sub in b - a})
        files |= {full.destinations[key].messages[mid].file_id for mid, _sub in a - b}
    if back and not files:
        files.add(d.replay.skip_file)
    return lost, back, sorted(files)


def _live(replay, key: str) -> set:
    """``(message id, None)`` of each message live on queue ``key``; ``(message id, subscription key)`` for
    each durable subscription of topic ``key`` that still waits for it."""
    st = replay.destinations.get(key)
    if st is None:
        return set()
    return {(mid, sub) for mid, m in st.messages.items() for sub in (m.waiting if m.waiting is not None else (None,))}
