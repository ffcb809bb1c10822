"""Durable subscriptions a killed store's index has lost while the journal's replay keeps them.

``KahaDBStore.recoverSubscription`` hands a durable subscription its messages from the cursor the index holds
under its key (``subscriptionAcks``, ``ackPositions``). The replay at start re-creates only subscriptions whose
SUBSCRIPTION record lies after the checkpoint (``updateIndex(KahaSubscriptionCommand)``); one written at or
before it must be in the index already. When the index holds no cursor under that key (its key in db.data
damaged, say), the broker has nothing to hand the subscriber: what the journal leaves waiting for it is lost.
With nothing after the checkpoint the same difference is judged by ``verify._subscriptions_against_journal``.
"""
from __future__ import annotations


def absent_subscriptions(d, last_update: tuple) -> list[tuple]:
    """``(destination key, sub key, "absent", messages waiting)`` for each durable subscription of the journal's
    replay in store directory ``d`` whose SUBSCRIPTION record lies at or before ``last_update`` ((file id,
    offset)), with messages waiting for it, that the index (``d.indexed``) of a destination it reads holds no
    cursor for."""
    out = []
    for key, st in d.replay.destinations.items():
        dest = (d.indexed or {}).get(key)
        if dest is None or not st.subscriptions:
            continue
        waiting: dict = {}
        for m in st.messages.values():
            for sk in m.waiting or ():
                waiting[sk] = waiting.get(sk, 0) + 1
        for sk, sub in sorted(st.subscriptions.items()):
            if sk not in dest.cursors and waiting.get(sk) and (sub.file_id, sub.offset) <= last_update:
                out.append((key, sk, "absent", waiting[sk]))
    return out
