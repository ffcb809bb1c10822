"""Topic messages the index holds that no durable subscription is handed.

A topic's order index keeps a message while any subscription has not acknowledged it; what the broker hands
out of it is each subscription's pending messages (``KahaDBStore.recoverSubscription``, from after its
LastAck) that its selector matches: the broker keeps a topic message for every subscription while it is
offline, and applies the selector when it recovers them (``TopicStorePrefetch.recoverMessage``:
``subscription.matches``). A message pending only for subscriptions whose selectors do not match it, or for
none, is never read at dispatch: damage to its record is latent, as for any record no consumer is handed
(shown on the real broker with tests/data/kahadb/f12-subs-kill: a subscription with the selector
color = 'purple' holds 52 pending messages and is handed none).

Selectors come from the index's subscription records (``KahaSubscriptionCommand``'s ``SubscriptionInfo``, as
the broker with that index recovers them), else from the journal's; a subscription whose record or selector
amqtool does not read is taken to be handed everything pending.
"""
from __future__ import annotations

from amqtool.errors import FormatError
from amqtool.formats.kahadb.openwire import decode_message, decode_subscription_info
from amqtool.formats.kahadb.selector import SelectorError, compile_selector, message_values

from amqtool.engines.kahadb.indexed import read_at
from amqtool.engines.kahadb.scan import mapped


def selector_texts(d, openwire_version: int) -> dict:
    """``{(destination key, subscription key): selector}`` of the durable subscriptions of store directory ``d``
    that have one: as the index stores them (its subscriptions B-tree, what the broker with that index
    recovers) when it loads, else as the journal's subscription records hold them."""
    out = {}
    for key, st in (d.replay.destinations if d.replay is not None else {}).items():
        for sk, sub in st.subscriptions.items():
            try:
                sel = decode_subscription_info(sub.info, openwire_version).selector if sub.info else None
            except FormatError:
                continue
            if sel:
                out[(key, sk)] = sel
    if d.indexed is not None:
        indexed = index_selector_texts(d.directory, openwire_version)
        if indexed is not None:
            return indexed
    return out


def index_selector_texts(directory, openwire_version: int) -> dict | None:
    """``{(destination key, subscription key): selector}`` from ``directory/db.data``'s subscriptions B-trees,
    or None when they do not read."""
    from pathlib import Path

    from amqtool.formats.kahadb import pagefile as pf

    out = {}
    try:
        with mapped(Path(directory) / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
                if not sd.is_topic:
                    continue
                for sk, info in pf.subscription_infos(buf, ps, sd).items():
                    sel = decode_subscription_info(info, openwire_version).selector if info else None
                    if sel:
                        out[(key, sk)] = sel
    except (FormatError, OSError):
        return None
    return out


def selectors(d, openwire_version: int) -> dict:
    """:func:`selector_texts` compiled: ``{(destination key, subscription key): predicate}``, those amqtool
    reads."""
    out = {}
    for k, sel in selector_texts(d, openwire_version).items():
        try:
            out[k] = compile_selector(sel)
        except SelectorError:
            continue
    return out


def unmatched_ack(d, openwire_version: int):
    """A predicate over a journal command: a subscription's acknowledgement (KahaRemoveMessageCommand with a
    subscription key) of a message its selector does not match, which the broker never hands it: dropping
    that ack (a damaged batch the replay skips) changes nothing it delivers. An ack holding the UNMATCHED marker
    (a zero-length ack) is one, as written; else the message is read where the journal's replay or the index
    places it, and one found in neither is not judged (False)."""
    preds = selectors(d, openwire_version)
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
        if cmd.ack is not None and len(cmd.ack) == 0:
            # MessageDatabase's UNMATCHED marker: the broker wrote it because the selector did not match
            return True
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
    compiled = selectors(d, openwire_version)
    for key, dest in (d.indexed or {}).items():
        if not dest.subscriptions:
            continue
        preds = {sk: compiled.get((key, sk)) for sk in dest.subscriptions}
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
            raw = bytes(read_at(buf, m).message)
        try:
            msg = decode_message(raw, version)
        except FormatError:
            msg = decode_message(raw, 11)  # page 0's openwireVersion damaged: the message as written
        values = message_values(msg)
    except (FormatError, OSError):
        return True
    return any(p(values) for p in preds)


def selector_rejects(d, openwire_version: int):
    """A predicate ``(destination key, subscription key, OpenWire message bytes)``: the durable subscription's
    selector (:func:`selectors`) does not match the message, so the broker never hands it that message
    (``TopicStorePrefetch.recoverMessage``). False for a subscription without a selector amqtool reads, and
    for a message that does not decode."""
    preds: dict | None = None

    def rejects(key: str, sub_key, raw) -> bool:
        nonlocal preds
        if preds is None:
            preds = selectors(d, openwire_version)
        pred = preds.get((key, sub_key))
        if pred is None:
            return False
        try:
            try:
                msg = decode_message(bytes(raw), openwire_version)
            except FormatError:
                msg = decode_message(bytes(raw), 11)  # page 0's openwireVersion damaged: the message as written
            return not pred(message_values(msg))
        except FormatError:
            return False

    return rejects
