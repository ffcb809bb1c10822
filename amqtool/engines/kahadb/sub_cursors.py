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

The other way round, a LastAck whose key no recovered SubscriptionInfo gives (the info's client id or
subscription name damaged, its B-tree key intact): the broker recovers the subscription under the damaged
key, which has no LastAck, and none under the key the journal's subscription and its pending messages have.
Those messages are handed to no one: lost, as above. A SUBSCRIPTION record replayed after the checkpoint
writes the info again (``updateIndex(KahaSubscriptionCommand)``): left to the replay's findings too.

That written-back LastAck does not make the subscription one the replay sends to, though. The broker keeps
a topic's ``subscriptionCache`` of subscription keys, filled from the subscriptionAcks keys when it loads the
destination (``loadStoredDestination``) and added to only by a SUBSCRIPTION record; a send replayed after the
checkpoint goes into the ack positions of the cached keys only (``addAckLocationForNewMessage``). So the
subscription whose LastAck key is damaged is left out of every send the replay brings, and its own acks there
write its LastAck past the messages its ack positions still hold. ``recoverNextMessages`` then hands it only
what its ack positions hold (their first below LastAck): the replay's sends pending for it are lost to it
(:func:`uncached`).
"""
from __future__ import annotations

from amqtool.errors import Finding, FormatError, Severity
from amqtool.formats.kahadb.commands import EntryType
from amqtool.formats.kahadb import pagefile as pf
from amqtool.formats.kahadb.openwire import decode_subscription_info

from amqtool.engines.kahadb.indexed import IndexedMessage
from amqtool.engines.kahadb.pins import qualified
from amqtool.engines.kahadb.scan import mapped
from amqtool.engines.kahadb.unhanded import _matches_any, selectors


def recovered_keys(directory, openwire_version: int) -> dict | None:
    """``{topic destination key: {clientId:subscriptionName}}`` of the SubscriptionInfos in the index's
    subscriptions B-trees, or None when they do not read."""
    def keys(buf, ps, sd):
        infos = (decode_subscription_info(x, openwire_version)
                 for x in pf.subscription_infos(buf, ps, sd).values() if x)
        return {f"{i.client_id}:{i.subscription_name}" for i in infos}

    return _per_topic(directory, keys)


def _per_topic(directory, read) -> dict | None:
    """``{topic destination key: read(buf, page size, destination)}`` over the index's topic destinations, leaving
    out those ``read`` gives None; None when the index does not read."""
    out = {}
    try:
        with mapped(directory / "db.data") as buf:
            ps = pf.decode_header(buf).page_size
            meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
            for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
                if sd.is_topic and (value := read(buf, ps, sd)) is not None:
                    out[key] = value
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
    resubscribed = _subscribed_after(d)

    def lost(key: str, sk: str) -> list:
        # the messages the journal keeps pending for sk that its selector matches
        nonlocal preds
        st = d.replay.destinations.get(key)
        waiting = [(mid, m) for mid, m in (st.messages.items() if st else ()) if m.waiting and sk in m.waiting]
        if preds is None:
            preds = selectors(d, openwire_version)
        pred = preds.get((key, sk))
        return [mid for mid, m in waiting if pred is None or _matches_any(
            d, IndexedMessage(0, mid, m.file_id, m.offset, m.length), [pred], openwire_version)]

    def no_cursor(key: str, sk: str, ids: list, why: str) -> Finding:
        # the subscription's LastAck is not under its key in the index's subscriptionAcks; ``why`` (with its
        # leading punctuation) says how that loses ``ids``
        return Finding(Severity.CRITICAL, "kahadb-subscription-no-cursor",
                       f"durable subscription {sk} of {qualified(key)} has no LastAck under its key in the index's "
                       f"subscriptionAcks{why} ({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''})",
                       str(d.directory / "db.data"), None,
                       {"destination": key, "subscription": sk, "lost": len(ids), "messageIds": ids[:100]})

    lu = d.index.view.metadata.last_update if d.index and d.index.view else None
    positions = None
    for key, dest in sorted(d.indexed.items()):
        late = {sk for subs in acked.get(key, {}).values() for sk in subs}
        # (a SUBSCRIPTION record after the checkpoint adds its key to the subscriptionCache: not judged here)
        written_back = (recovered.get(key, set()) - set(dest.subscriptions)) & (late - resubscribed.get(key, set()))
        for sk in sorted(written_back) if lu is not None else ():
            if positions is None:
                positions = _ack_positions(d.directory)
            ids = uncached(d, key, sk, (lu.log_id, lu.offset), positions.get(key, {}).get(sk), lost(key, sk))
            if not ids:
                continue
            out.append(no_cursor(key, sk, ids, ", so the replay after the checkpoint puts none of its sends in its "
                                 "ack positions (the subscriptionCache is the subscriptionAcks keys), while its acks "
                                 "there write its LastAck past the ack positions it has: the broker hands it only "
                                 f"those, and loses the {len(ids)} message(s) sent after the checkpoint and pending "
                                 "for it"))
        for sk in sorted(recovered.get(key, set()) - set(dest.subscriptions) - late):
            ids = lost(key, sk)
            if not ids:
                continue
            out.append(no_cursor(key, sk, ids, ": the broker hands it nothing from the store (recoverNextMessages: "
                                 f"'sub deleted'), and loses the {len(ids)} message(s) the journal keeps pending for "
                                 "it"))
        if key not in recovered:
            continue
        others = sorted(recovered[key] - set(dest.subscriptions))
        for sk in sorted(set(dest.subscriptions) - recovered[key] - resubscribed.get(key, set())):
            ids = lost(key, sk)
            if not ids:
                continue
            out.append(Finding(
                Severity.CRITICAL, "kahadb-subscription-no-cursor",
                f"durable subscription {sk} of {qualified(key)} has its LastAck in the index, but no "
                "SubscriptionInfo of its subscriptions B-tree gives that key"
                + (f" (it recovers {', '.join(others[:3])})" if others else "") + ": the broker recovers no "
                f"subscription {sk} and hands its {len(ids)} pending message(s) to no one "
                f"({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''})",
                str(d.directory / "db.data"), None,
                {"destination": key, "subscription": sk, "lost": len(ids), "messageIds": ids[:100]}))
    return out


def _subscribed_after(d) -> dict:
    """``{destination key: subscription keys}`` of the SUBSCRIPTION records the replay after the index
    checkpoint reads (each writes its SubscriptionInfo again)."""
    from amqtool.engines.kahadb.after_acks import replayed_commands

    lu = d.index.view.metadata.last_update if d.index and d.index.view else None
    out: dict = {}
    for _fid, _off, cmd in replayed_commands(d, (lu.log_id, lu.offset) if lu is not None else (0, -1),
                                             (int(EntryType.SUBSCRIPTION),)):
        if cmd.destination is not None:
            out.setdefault(cmd.destination.key, set()).add(cmd.subscription_key)
    return out


def uncached(d, key: str, sk: str, last_update: tuple, positions, pending: list) -> list:
    """The messages of ``pending`` (those the journal keeps pending for subscription ``sk`` of topic ``key``
    that its selector matches) that the broker loses to ``sk`` when the index has no LastAck under its key but
    acks of ``sk`` replayed after ``last_update`` write one (see the module docstring): the ones sent after the
    checkpoint, when the replay leaves ``sk`` on its ack positions' path. That is proven only when the last ack
    of ``sk`` the replay applies names a message no earlier replayed ack names (the messageIdIndex still holds
    it, so ``updateIndex(KahaRemoveMessageCommand)`` puts its sequence as the LastAck), and the index's ack
    positions of ``sk`` (``positions``: (first, last) ranges), less the sequences of what ``sk`` acks there,
    keep one below that LastAck. Else nothing is claimed (the LastAck path hands out what follows it)."""
    from amqtool.engines.kahadb.after_acks import _COMMIT, _REMOVE, _ROLLBACK, replayed_commands

    if not positions or not pending:
        return []
    seqs = {m.message_id: m.seq for m in d.indexed[key].messages}
    applied, sent, txs = [], set(), {}  # acks of ``key`` as the replay applies them: (id, sub, id sent there)

    def apply(op) -> None:
        if op[0] == "add":
            sent.add(op[1])
        else:
            applied.append((op[1], op[2], op[1] in sent))

    kinds = (int(EntryType.ADD_MESSAGE), _REMOVE, _COMMIT, _ROLLBACK)
    for _fid, _off, cmd in replayed_commands(d, last_update, kinds):
        if cmd.type in (EntryType.COMMIT, EntryType.ROLLBACK):
            done = txs.pop(cmd.transaction.key, [])
            for op in done if cmd.type is EntryType.COMMIT else ():
                apply(op)
        elif cmd.destination is not None and cmd.destination.key == key:
            op = ("add", cmd.message_id) if cmd.type is EntryType.ADD_MESSAGE else \
                ("ack", cmd.message_id, cmd.subscription_key or None)
            if cmd.transaction is not None:
                txs.setdefault(cmd.transaction.key, []).append(op)
            else:
                apply(op)
    mine = [i for i, (_mid, sub, _s) in enumerate(applied) if sub == sk]
    if not mine:
        return []
    last_mid, _sub, replayed_send = applied[mine[-1]]
    if any(mid == last_mid for mid, _s, _r in applied[:mine[-1]]):
        return []
    if last_mid in seqs:
        last_ack = seqs[last_mid]
    elif replayed_send:
        last_ack = max(seqs.values(), default=-1) + 1  # (a send the replay indexes takes the next sequence)
    else:
        return []
    acked = {seqs[mid] for mid, sub, _r in applied if sub == sk and mid in seqs}
    left = _first_left(positions, acked)
    if left is None or left >= last_ack:
        return []
    st = d.replay.destinations.get(key)
    where = {mid: (m.file_id, m.offset) for mid, m in st.messages.items()} if st else {}
    return [mid for mid in pending if mid in where and where[mid] > last_update]


def _first_left(positions, acked: set) -> int | None:
    """The first sequence of the ranges ``positions`` that is not in ``acked`` (removeAckLocation takes each
    acked one out), None when none is left."""
    for lo, hi in sorted(positions):
        s = lo
        while s <= hi and s in acked:
            s += 1
        if s <= hi:
            return s
    return None


def _ack_positions(directory) -> dict:
    """``{topic destination key: {subscription key: [(first, last)]}}`` of the index's ackPositions lists
    (every key, whether the subscriptionAcks B-tree has it or not); empty when they do not read."""
    def positions(buf, ps, sd):
        if sd.ack_positions is None:
            return None
        return dict(pf.iter_list(buf, ps, sd.ack_positions, lambda r: r.utf(), pf.sequence_set))

    return _per_topic(directory, positions) or {}
