"""Who pins a journal file: the broker's GC pass replayed offline (kahadb-format.md §6.1, §6.4).

``MessageDatabase.checkpointUpdate(cleanup=true)`` starts from every journal file and removes, in order:
the ``lastUpdate`` file and everything after it; the producer-audit and ack-map checkpoint files; the
in-progress transaction range; every file holding a live message of any destination and every durable
subscription's record; then, walking the rest in ascending order, every file whose ack-map entry names
an existing file that is not itself collectable (the ack chain). What is left is deleted at the next pass.

:func:`pins` reports, per file, every reason that applies (the first one is what the broker's TRACE log
would name), and :func:`drain_effect` the files a drained destination would release.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from amqtool.errors import FormatError
from amqtool.formats.kahadb.commands import DESTINATION_TYPES, decode_command
from amqtool.formats.kahadb.javaser import decode_ack_file_map
from amqtool.engines.kahadb.scan import mapped


def qualified(key: str) -> str:
    """``"0:orders"`` -> ``"queue://orders"`` (the broker's qualified destination name)."""
    t, _, name = key.partition(":")
    try:
        kind = DESTINATION_TYPES.get(int(t), f"type-{t}")
    except ValueError:
        kind = "unknown"
    return f"{kind}://{name}"


def ack_map_of(d) -> tuple[dict | None, str]:
    """The ack-file map and where it came from: the record page 0 names, else the newest one replayed."""
    view = d.index.view if d.index else None
    if view is not None and view.metadata.ack_map is not None:
        loc = view.metadata.ack_map
        f = d.file(loc.log_id)
        if f is not None:
            try:
                with mapped(f.path) as buf:
                    if 0 <= loc.offset and loc.offset + 5 <= len(buf):  # a damaged offset may be negative
                        length = struct.unpack_from(">i", buf, loc.offset)[0]
                        if 5 <= length and loc.offset + length <= len(buf):
                            cmd = decode_command(bytes(buf[loc.offset + 5:loc.offset + length]))
                            blob = getattr(cmd, "blob", None)
                            if blob is not None:
                                return decode_ack_file_map(blob), f"index checkpoint {loc}"
            except FormatError:
                pass
    if d.replay is not None and d.replay.last_ack_map_blob is not None:
        try:
            fid, off = d.replay.last_ack_map
            return decode_ack_file_map(d.replay.last_ack_map_blob), f"journal record {fid}:{off}"
        except FormatError:
            pass
    return None, "none"


def referenced_files(d, *, index: bool = True) -> dict[int, list[str]]:
    """Every journal file id something still needs, with why (the broker's missing-file check, §3.3:
    locationIndex keys, subscription records, ack-map keys and values, page 0 locations). ``index=False``:
    the broker discards db.data and rebuilds it from the journal (its order indexes do not read:
    ``MessageDatabase.open`` catches the failure of ``loadPageFile``), so what db.data names is not checked
    and only the journal's live messages need their files."""
    refs: dict[int, list[str]] = {}

    def ref(fid: int, why: str) -> None:
        refs.setdefault(fid, []).append(why)

    view = d.index.view if d.index and index else None
    if view is not None:
        for key, files in view.location_files.items():
            for fid, (count, _size, _end) in files.items():
                ref(fid, f"{count} message(s) of {qualified(key)} in the index")
        for key, subs in view.sub_locations.items():
            for sub, loc in subs.items():
                ref(loc.log_id, f"subscription record of {sub} on {qualified(key)}")
        m = view.metadata
        for name, loc in (("lastUpdate", m.last_update), ("producer audit", m.producer_audit),
                          ("ack-file map", m.ack_map), ("first in-progress transaction", m.first_in_progress_tx)):
            if loc is not None:
                ref(loc.log_id, f"index checkpoint location {name} {loc}")
    else:
        for key, st in d.replay.destinations.items():
            for m in st.messages.values():
                ref(m.file_id, f"live message(s) of {qualified(key)}")
    amap, source = ack_map_of(d)
    if not index or view is not None and not source.startswith("index checkpoint"):
        # The broker cannot load the map page 0 names: it rebuilds it by replaying the whole journal, and a
        # rebuilt map names only files that exist (MessageDatabase.recoverAckMessageFileMap); an older map
        # record in the journal is not what it checks.
        amap = None
    if amap:
        for k, vals in amap.items():
            ref(k, f"ack-file map key ({source})")
            for v in vals:
                ref(v, f"ack-file map entry of db-{k}.log ({source})")
    for fid in refs:
        refs[fid] = list(dict.fromkeys(refs[fid]))
    return refs


@dataclass
class _State:
    live: dict  # file id -> {dest key: [count, bytes]}
    subs: dict  # file id -> [(dest key, sub key, pending count)]
    owed: dict  # file id -> {dest key: {sub key: messages it still owes there}} (topics)


def _state(d, drained: set[str], drained_subs: frozenset = frozenset()) -> _State:
    """What pins files: live messages per destination, subscription records, and for a topic which durable
    subscriptions still owe each file's messages. A topic message lives while one subscription still has
    to acknowledge it (``MessageDatabase``: the ack positions of ``TopicMessageStore``), so draining a
    subscription (``drained_subs``: (destination key, subscription key)) removes it from every message's
    waiting set and frees the messages no other subscription owes."""
    live: dict = {}
    subs: dict = {}
    owed: dict = {}
    for key, st in d.replay.destinations.items():
        pending: dict = {}
        if key not in drained:
            gone = {s for k, s in drained_subs if k == key}
            for m in st.messages.values():
                waiting = m.waiting - gone if m.waiting is not None else None
                if waiting is not None and not waiting:
                    continue  # a topic message no subscription owes any more
                agg = live.setdefault(m.file_id, {}).setdefault(key, [0, 0])
                agg[0] += 1
                agg[1] += m.length
                for s in waiting or ():
                    pending[s] = pending.get(s, 0) + 1
                    per = owed.setdefault(m.file_id, {}).setdefault(key, {})
                    per[s] = per.get(s, 0) + 1
        for skey, sub in st.subscriptions.items():
            subs.setdefault(sub.file_id, []).append((key, skey, pending.get(skey, 0)))
    return _State(live, subs, owed)


def _gc(d, drained: set[str] = frozenset(), drained_subs: frozenset = frozenset()
        ) -> tuple[dict[int, list[dict]], set[int]]:
    """Reasons per file id and the set of file ids the next GC pass would delete."""
    present = sorted(d.file_ids)
    reasons: dict[int, list[dict]] = {f: [] for f in present}
    view = d.index.view if d.index else None
    meta = view.metadata if view else None
    candidates = set(present)
    if meta is not None and meta.last_update is not None:
        cut = meta.last_update.log_id
    elif d.last_record is not None:
        cut = d.last_record[0]
    else:
        cut = None
    if cut is not None:
        for f in present:
            if f >= cut:
                reasons[f].append({"reason": "not-checkpointed", "detail": f"at or after db-{cut}.log, the file of "
                                   "the index checkpoint (lastUpdate): never a GC candidate"})
                candidates.discard(f)
    audit = meta.producer_audit if meta else None
    if audit is None and d.replay.last_audit:
        audit = type("L", (), {"log_id": d.replay.last_audit[0]})
    if audit is not None and audit.log_id in reasons:
        reasons[audit.log_id].append({"reason": "producer-audit", "detail": "holds the producer audit checkpoint"})
        candidates.discard(audit.log_id)
    if meta is not None and meta.ack_map is not None and meta.ack_map.log_id in reasons:
        reasons[meta.ack_map.log_id].append({"reason": "ack-map", "detail": "holds the ack-file map checkpoint"})
        candidates.discard(meta.ack_map.log_id)
    # In-progress transactions: the range from the earliest to the latest file any of them touches.
    tx_files = []
    for tx in d.open_transactions:
        tx_files.extend(tx.files)
    if meta is not None and meta.first_in_progress_tx is not None:
        tx_files.append(meta.first_in_progress_tx.log_id)
    if tx_files:
        lo, hi = min(tx_files), max(tx_files)
        names = ", ".join(str(t.id) for t in d.open_transactions[:5])
        for f in present:
            if lo <= f <= hi:
                reasons[f].append({"reason": "transaction", "detail": f"inside the in-progress transaction range "
                                   f"db-{lo}..db-{hi}.log ({names or 'page 0 firstInProgressTransactionLocation'})"})
                candidates.discard(f)
    st = _state(d, drained, drained_subs)
    for f in present:
        for key, (count, size) in sorted(st.live.get(f, {}).items()):
            reason = {"reason": "live-messages", "destination": qualified(key), "messages": count, "bytes": size,
                      "detail": f"{qualified(key)}: {count} live message(s), {size} bytes"}
            owing = st.owed.get(f, {}).get(key)
            if owing:  # a topic: the durable subscriptions that still owe these messages free the file
                reason["subscriptions"] = dict(sorted(owing.items()))
                reason["detail"] += ", owed to " + ", ".join(f"{s} ({n})" for s, n in sorted(owing.items()))
            reasons[f].append(reason)
            candidates.discard(f)
    lowest = min(candidates) if candidates else None
    for f in present:
        for key, skey, pending in st.subs.get(f, []):
            if f == lowest and pending == 0:
                continue  # the broker re-writes the subscription record at the tail instead (§6.1 step 6)
            reasons[f].append({"reason": "subscription-record", "destination": qualified(key), "subscription": skey,
                               "detail": f"durable subscription {skey} on {qualified(key)}: its subscription "
                               "record"})
            candidates.discard(f)
    amap, _source = ack_map_of(d)
    if amap:
        existing = set(present)
        for c in sorted(candidates):
            refs = amap.get(c)
            if not refs:
                continue
            live_refs = sorted(r for r in refs if r in existing and r not in candidates)
            if live_refs:
                candidates.discard(c)
                reasons[c].append({"reason": "ack-chain", "files": live_refs,
                                   "detail": "holds acks or transaction outcomes for messages in live file(s) "
                                   + ", ".join(f"db-{r}.log" for r in live_refs)
                                   + " (deleting it would make them reappear on replay)"})
    return reasons, candidates


def pins(d) -> list[dict]:
    reasons, deletable = _gc(d)
    out = []
    for f in d.files:
        rs = reasons.get(f.id, [])
        out.append({"file": f.path.name, "id": f.id, "size": f.size, "pinned": f.id not in deletable,
                    "firstReason": rs[0]["reason"] if rs else "collectable",
                    "reasons": rs or [{"reason": "collectable", "detail": "nothing needs it: deleted (or archived) at "
                                       "the broker's next GC pass"}]})
    return out


def match_destinations(d, name: str) -> set[str]:
    """Destination keys matching ``name``: ``queue://X``, ``topic://X``, ``0:X`` or a bare ``X``."""
    keys = set(d.replay.destinations) | set(d.index.view.location_files if d.index and d.index.view else ())
    out = set()
    for key in keys:
        if name in (key, qualified(key), key.partition(":")[2]):
            out.add(key)
    return out


def match_subscriptions(d, name: str) -> set[tuple[str, str]]:
    """Durable subscriptions matching ``name``: ``clientId:subscriptionName`` (on any topic), or
    ``topic://T|clientId:subscriptionName`` for one topic's."""
    topic, sep, sub = name.rpartition("|")
    out = set()
    for key, st in d.replay.destinations.items():
        if sep and topic not in (key, qualified(key), key.partition(":")[2]):
            continue
        for skey in st.subscriptions:
            if skey == (sub if sep else name):
                out.add((key, skey))
    return out


def drain_effect(d, name: str) -> dict:
    """Which files the next GC pass would delete if ``name`` were drained: a destination (all its messages
    acknowledged) or a durable subscription (it acknowledges everything it owes, or unsubscribes; a message
    no other subscription owes then goes). The acks land in the current file, which is never a candidate."""
    keys = match_destinations(d, name)
    subs = frozenset(match_subscriptions(d, name))
    _, before = _gc(d)
    _, after = _gc(d, keys, subs)
    freed = sorted(after - before)
    return {"destination": name, "matched": sorted(qualified(k) for k in keys) + sorted(s for _, s in subs),
            "filesFreed": [f"db-{i}.log" for i in freed],
            "bytesFreed": sum(f.size for f in d.files if f.id in freed),
            "collectableNow": [f"db-{i}.log" for i in sorted(before)]}
