"""Order-index entries whose sequence key is damaged, moved across a durable subscription's cursor.

The broker gives each message of a destination one sequence id and writes it in three B-trees together
(``MessageDatabase.updateIndex(KahaAddMessageCommand)``): the order index (sequence -> the message's id and
Location), the messageIdIndex (id -> sequence) and the locationIndex (Location -> sequence). An order-index
entry whose key disagrees with the other two, which agree with each other, had its key damaged (a flipped
bit in a B-tree page). A topic's durable subscription is handed the stored messages after its LastAck, or
those its ackPositions still hold (``KahaDBStore.recoverSubscription``, ``recoverNextMessages``), by the order
index's sequence: a damaged key can put a message a subscription acknowledged after its cursor again (it is
delivered twice) or take one it waits for out of its reach (lost to it). Only subscriptions whose selector
matches the message count (``TopicStorePrefetch.recoverMessage`` hands them no other), and a subscription's
ack of it replayed after the checkpoint is left to the replay's findings. A queue's entry moved only reorders its
delivery (an ack of it will miss it: ``kahadb-index-entry-damaged``, order_dups.py, when it lands on another's
sequence).
"""
from __future__ import annotations

from amqtool.errors import Finding, FormatError, Severity
from amqtool.formats.kahadb import pagefile as pf

from amqtool.engines.kahadb.indexed import _pending
from amqtool.engines.kahadb.pins import qualified
from amqtool.engines.kahadb.scan import mapped
from amqtool.engines.kahadb.unhanded import _matches_any, selectors


def moved_entries(d, openwire_version: int, acked: dict) -> list[Finding]:
    """One CRITICAL ``kahadb-index-entry-moved`` per topic of store directory ``d`` whose order index holds an
    entry under a damaged key that changes which durable subscriptions it is handed to (see the module
    docstring). ``acked``: after_acks.acked_after."""
    if not d.indexed or not any(dest.subscriptions for dest in d.indexed.values()):
        return []
    try:
        with mapped(d.directory / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            tables = {}
            for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
                if sd.is_topic and key in d.indexed and d.indexed[key].subscriptions:
                    tables[key] = (pf.sequences(buf, ps, sd, meta.version),
                                   pf.subscription_cursors(buf, ps, sd, meta.version))
    except (FormatError, OSError):
        return []
    preds = None
    out = []
    for key, ((by_id, by_location), cursors) in sorted(tables.items()):
        moved = []
        for m in d.indexed[key].messages:
            seq = by_id.get(m.message_id)
            if seq is None or seq == m.seq or by_location.get((m.file_id, m.offset)) != seq:
                continue
            if preds is None:
                preds = selectors(d, openwire_version)
            late = acked.get(key, {}).get(m.message_id, set())
            subs = sorted(sk for sk, (last, positions) in cursors.items()
                          if sk not in late
                          and bool(_pending([seq], last, positions)) != bool(_pending([m.seq], last, positions))
                          and (preds.get((key, sk)) is None
                               or _matches_any(d, m, [preds[(key, sk)]], openwire_version)))
            if subs:
                moved.append((m, seq, subs))
        if not moved:
            continue
        m, seq, subs = moved[0]
        out.append(Finding(
            Severity.CRITICAL, "kahadb-index-entry-moved",
            f"the order index of {qualified(key)} holds {len(moved)} message(s) under a damaged sequence key "
            f"({m.message_id} under {m.seq}, where its messageIdIndex and locationIndex entries say {seq}): "
            f"that moves it across the cursor of durable subscription(s) {', '.join(subs[:3])}, and the broker "
            "hands it again to one that acknowledged it, or never to one waiting for it",
            str(d.directory / "db.data"), None,
            {"destination": key, "messageIds": [x.message_id for x, _s, _u in moved[:100]],
             "subscriptions": sorted({sk for _x, _s, u in moved for sk in u})}))
    return out
