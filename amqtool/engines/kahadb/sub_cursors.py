"""Durable subscriptions the index recovers without a cursor: the broker hands them nothing from the store.

At start the broker recovers a topic's durable subscriptions from its index's subscriptions B-tree
(``KahaDBTopicMessageStore.getAllSubscriptions``: the SubscriptionInfo each entry holds), and hands each its
stored messages by the key ``clientId:subscriptionName`` of that info (``recoverNextMessages``). That starts
from the subscription's LastAck in the subscriptionAcks B-tree; with none under that key it returns nothing
("sub deleted"). The broker writes both entries together (``updateIndex(KahaSubscriptionCommand)``) and
removes both together, so a subscription without its LastAck is a damaged index (a flipped byte in the
subscriptionAcks key), and the messages the journal keeps pending for it -- those its selector matches, the
only ones it would be handed (``TopicStorePrefetch.recoverMessage``) -- are lost to it. The entry under the
damaged key is no subscription's: nothing is recovered under it.

An acknowledgement of that subscription replayed after the index checkpoint writes its LastAck back
(``updateIndex(KahaRemoveMessageCommand)``): such a subscription is left to the replay's findings.
"""
from __future__ import annotations

from amqtool.errors import Finding, FormatError, Severity
from amqtool.formats.kahadb import pagefile as pf
from amqtool.formats.kahadb.openwire import decode_subscription_info

from amqtool.engines.kahadb.indexed import IndexedMessage
from amqtool.engines.kahadb.pins import qualified
from amqtool.engines.kahadb.scan import mapped
from amqtool.engines.kahadb.unhanded import _matches_any, selectors


def recovered_keys(directory, openwire_version: int) -> dict | None:
    """``{topic destination key: {clientId:subscriptionName}}`` of the SubscriptionInfos in the index's
    subscriptions B-trees, or None when they do not read."""
    out = {}
    try:
        with mapped(directory / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
                if sd.is_topic:
                    infos = (decode_subscription_info(x, openwire_version)
                             for x in pf.subscription_infos(buf, ps, sd).values() if x)
                    out[key] = {f"{i.client_id}:{i.subscription_name}" for i in infos}
    except (FormatError, OSError):
        return None
    return out


def cursorless(d, openwire_version: int, acked: dict) -> list[Finding]:
    """One CRITICAL ``kahadb-subscription-no-cursor`` per durable subscription of store directory ``d``'s
    index without a LastAck under its key, for which the journal's replay keeps messages pending that its
    selector matches (see the module docstring). ``acked``: after_acks.acked_after."""
    if not d.indexed or d.replay is None or not any(dest.subscriptions for dest in d.indexed.values()):
        return []
    recovered = recovered_keys(d.directory, openwire_version)
    if not recovered:
        return []
    preds = None
    out = []
    for key, dest in sorted(d.indexed.items()):
        late = {sk for subs in acked.get(key, {}).values() for sk in subs}
        st = d.replay.destinations.get(key)
        for sk in sorted(recovered.get(key, set()) - set(dest.subscriptions) - late):
            waiting = [(mid, m) for mid, m in (st.messages.items() if st else ()) if m.waiting and sk in m.waiting]
            if preds is None:
                preds = selectors(d, openwire_version)
            pred = preds.get((key, sk))
            ids = [mid for mid, m in waiting if pred is None or _matches_any(
                d, IndexedMessage(0, mid, m.file_id, m.offset, m.length), [pred], openwire_version)]
            if not ids:
                continue
            out.append(Finding(
                Severity.CRITICAL, "kahadb-subscription-no-cursor",
                f"durable subscription {sk} of {qualified(key)} has no LastAck under its key in the index's "
                f"subscriptionAcks: the broker hands it nothing from the store (recoverNextMessages: 'sub "
                f"deleted'), and loses the {len(ids)} message(s) the journal keeps pending for it "
                f"({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''})",
                str(d.directory / "db.data"), None,
                {"destination": key, "subscription": sk, "lost": len(ids), "messageIds": ids[:100]}))
    return out
