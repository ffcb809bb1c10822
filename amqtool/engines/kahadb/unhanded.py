"""Topic messages the index holds that no durable subscription is handed.

A topic's order index keeps a message while any subscription has not acknowledged it; what the broker hands
out of it is each subscription's pending messages (``KahaDBStore.recoverSubscription``, from after its
LastAck) that its selector matches: the broker keeps a topic message for every subscription while it is
offline, and applies the selector when it recovers them (``TopicStorePrefetch.recoverMessage``:
``subscription.matches``). A message pending only for subscriptions whose selectors do not match it, or for
none, is never read at dispatch: damage to its record is latent, as for any record no consumer is handed
(shown on the real broker with tests/data/kahadb/f12-subs-kill: a subscription with the selector
color = 'purple' holds 52 pending messages and is handed none).

Selectors come from the subscriptions' journal records (``KahaSubscriptionCommand``'s ``SubscriptionInfo``);
a subscription whose record or selector amqtool does not read is taken to be handed everything pending.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.kahadb.openwire import decode_message, decode_subscription_info
from amqtool.formats.kahadb.selector import SelectorError, compile_selector, message_values

from amqtool.engines.kahadb.indexed import read_at
from amqtool.engines.kahadb.scan import mapped


def selectors(d, openwire_version: int) -> dict:
    """``{(destination key, subscription key): predicate}`` of the durable subscriptions of store directory
    ``d`` whose journal record holds a selector amqtool reads."""
    out = {}
    for key, st in (d.replay.destinations if d.replay is not None else {}).items():
        for sk, sub in st.subscriptions.items():
            try:
                sel = decode_subscription_info(sub.info, openwire_version).selector if sub.info else None
                if sel:
                    out[(key, sk)] = compile_selector(sel)
            except (FormatError, SelectorError):
                continue
    return out


def unmatched_ack(d, openwire_version: int):
    """A predicate over a journal command: a subscription's acknowledgement (KahaRemoveMessageCommand with a
    subscription key) of a message its selector does not match, which the broker never hands it: dropping
    that ack (a damaged batch the replay skips) changes nothing it delivers. The message is read where the
    journal's replay or the index places it; one found in neither is not judged (False)."""
    preds = selectors(d, openwire_version)
    if not preds:
        return lambda cmd: False
    places: dict = {}
    for key, st in d.replay.destinations.items():
        for mid, m in st.messages.items():
            places[(key, mid)] = (m.file_id, m.offset, m.length)
    for key, dest in (d.indexed or {}).items():
        for m in dest.messages:
            places.setdefault((key, m.message_id), (m.file_id, m.offset, m.size))

    def quiet(cmd) -> bool:
        sk = getattr(cmd, "subscription_key", None)
        if not sk or cmd.destination is None:
            return False
        pred = preds.get((cmd.destination.key, sk))
        where = places.get((cmd.destination.key, cmd.message_id))
        if pred is None or where is None:
            return False
        from amqtool.engines.kahadb.indexed import IndexedMessage

        return not _matches_any(d, IndexedMessage(0, cmd.message_id, *where), [pred], openwire_version)

    return quiet


def unhanded(d, openwire_version: int, acked: dict | None = None) -> set:
    """``{(destination key, message id)}`` of the index's topic messages no subscription of store directory
    ``d`` is handed (see the module docstring). ``acked``: after_acks.acked_after, the acknowledgements the
    replay after the checkpoint applies first (a subscription that acknowledged a message there is not handed
    it)."""
    out: set = set()
    replay = d.replay.destinations if d.replay is not None else {}
    for key, dest in (d.indexed or {}).items():
        if not dest.subscriptions:
            continue
        subs = replay[key].subscriptions if key in replay else {}
        preds = {}
        for sk in dest.subscriptions:
            info = subs[sk].info if sk in subs else None
            try:
                sel = decode_subscription_info(info, openwire_version).selector if info else None
                preds[sk] = compile_selector(sel) if sel else None
            except (FormatError, SelectorError):
                preds[sk] = None
        pending: dict = {}
        for sk in dest.subscriptions:
            for m in dest.pending(sk):
                pending.setdefault(m.seq, []).append(sk)
        late = (acked or {}).get(key, {})
        for m in dest.messages:
            holders = [sk for sk in pending.get(m.seq, ()) if sk not in late.get(m.message_id, ())]
            if any(preds.get(sk, None) is None for sk in holders):
                continue  # handed to a subscription without a selector (or one not read)
            if holders and _matches_any(d, m, [preds[sk] for sk in holders], openwire_version):
                continue
            out.add((key, m.message_id))
    return out


def _matches_any(d, m, preds: list, version: int) -> bool:
    """Whether one of ``preds`` matches the message the index places at ``m`` (True when it cannot be read:
    what the broker does with that is the read's finding)."""
    f = d.file(m.file_id)
    if f is None:
        return True
    try:
        with mapped(f.path) as buf:
            msg = decode_message(read_at(buf, m).message, version)
        values = message_values(msg)
    except (FormatError, OSError):
        return True
    return any(p(values) for p in preds)
