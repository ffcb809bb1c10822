"""Which log files the store must keep, and what frees them: ``LevelDBClient.gc``.

The broker counts, per log file, the index entries whose DATA record is in it (``logRefs``); every 10 s
(``DBManager.pollGc``) it first drops the topic entries every durable subscription has acknowledged
(``getTopicGCPositions``: below the lowest ack position), then deletes each log file with no references
that lies below both the file holding the last index snapshot's position and the file being appended to
(``deleteLimit``). So a file is pinned by the messages in it (a queue's until they are consumed, a topic's
until every subscription has acknowledged them, a prepared transaction's until it is decided), by the
snapshot (the replay starts there) and by being the current file.
"""
from __future__ import annotations

from amqtool.engines.leveldb.load import LevelDBState


def pins(st: LevelDBState) -> list[dict]:
    refs: dict[int, dict] = {f.position: {} for f in st.logs}

    def ref(m, holder: str, freed_by: str) -> None:
        f = st.reader.file_at(m.location)
        if f is not None:
            d = refs.setdefault(f.position, {})
            d[(holder, freed_by)] = d.get((holder, freed_by), 0) + 1

    for d in st.destinations.values():
        if d.kind == "queue":
            for m in d.messages:
                ref(m, d.qualified, "consuming them")
        else:
            low = min((s.ack_position for s in d.subscriptions), default=None)
            for m in d.messages:
                if low is None or m.seq > low:
                    waiting = [f"{s.client_id}:{s.name}" for s in d.subscriptions if m.seq > s.ack_position]
                    ref(m, d.qualified, f"acknowledgement by {', '.join(waiting)}")
    for t in st.transactions:
        for m, _dest in t.sends:
            ref(m, f"prepared transaction {t.xid}", "its commit or rollback")
    snap_file = st.reader.file_at(st.snapshot[0]) if st.snapshot else None
    limit = min(snap_file.position if snap_file else 0, st.logs[-1].position if st.logs else 0)
    out = []
    for f in st.logs:
        reasons = [{"kind": "messages", "holder": holder, "count": n,
                    "detail": f"{n} message(s) of {holder}, freed by {freed_by}"}
                   for (holder, freed_by), n in sorted(refs.get(f.position, {}).items())]
        if f is st.logs[-1]:
            reasons.append({"kind": "current", "detail": "the file the broker appends to"})
        elif f.position >= limit:
            reasons.append({"kind": "snapshot", "detail": "at or after the index snapshot's position (the replay "
                            "starts there); freed by the next snapshot (each log rotation takes one)"})
        out.append({"file": f.name, "position": f.position, "size": f.size, "pinned": bool(reasons),
                    "reasons": reasons})
    return out
