"""What a durable subscription is handed from its LastAck on, as the broker recovers it.

The journal's replay keeps, for each stored topic message, the subscriptions whose ack positions still hold it
(``LiveMessage.waiting``: ``MessageDatabase`` ``ackPositions``). The broker does not hand a subscription
exactly that set. ``KahaDBStore.KahaDBTopicMessageStore.recoverNextMessages`` (ActiveMQ 5.17.2) starts from
the subscription's ``LastAck`` (``subscriptionAcks``):

- when its ack positions hold a sequence below the LastAck (individual acks left something behind), it walks
  the order index from the first of them and hands only what the ack positions hold: the replay's set;
- otherwise it ``setBatch``-es the order index to ``LastAck + 1`` (all three priority cursors of
  ``MessageOrderIndex``) and hands **every stored message after it**, whether or not the ack positions hold
  it; the subscription's selector then filters them (``TopicStorePrefetch.recoverMessage``).

``updateIndex(KahaRemoveMessageCommand)`` puts the sequence of every acknowledged message as the LastAck
(``subscriptionAcks.put(new LastAck(sequence, priority))``), so it is the last ack in *time*, not the highest
sequence acknowledged. With ``prioritizedMessages`` the broker dispatches by priority, so a subscription acks
high sequences before low ones; a message it already acknowledged but another subscription keeps stored lies
after that LastAck and is handed to it again. Shown on the real 5.17.2 broker with
tests/data/kahadb/k2-priority-subs-kill: subscription ``red`` (selector color = 'red'), which acknowledged
everything it was given, is handed 11 messages it had acknowledged, with and without db.data.

It does so only for a subscription it counts messages pending for: the store cursor (``AbstractStoreCursor
.fillBatch``) asks the store only while its size, ``getMessageCount`` = what the ack positions hold
(``MessageDatabase.getStoredMessageCount``: their range size less the next-message marker), is above 0. A
subscription whose ack positions hold no stored message is handed nothing, whatever follows its LastAck (shown
on the real broker with /work/kahadb-holdout2/k8-priority-topic-kill: sub ``a`` acknowledged everything, its
priority-9 message first, and is handed nothing). The first batch is taken as all of it (the cursor's batch
size is not modelled).

The UNMATCHED marker (a zero-length ack: the selector did not match) takes the message out of the ack
positions but does not move the LastAck; the selector rejects such messages again when they are handed out
from the LastAck, so here they are judged by the selector (a selector amqtool does not read, or a message that
does not decode, is taken to match: handed).
"""
from __future__ import annotations

from amqtool.engines.kahadb.indexed import IndexedMessage


def hand_from_last_ack(d, openwire_version: int) -> int:
    """Add to ``d.replay`` what the broker hands each durable subscription from its LastAck on (see the module
    docstring): its key to the ``waiting`` set of every stored message after the LastAck that the set lacks and
    its selector matches, unless its ack positions still hold a message before the LastAck. A subscription that
    has acknowledged nothing since its record (``last_ack`` None: the LastAck the record put is where its ack
    positions start) is left as it is. Returns how many (message, subscription) pairs were added."""
    from amqtool.engines.kahadb.unhanded import _matches_any, selectors

    preds = None
    added = 0
    for key, st in d.replay.destinations.items():
        subs = [s for s in st.subscriptions.values() if s.last_ack is not None]
        if not subs or not st.messages:
            continue
        order = list(st.messages.items())  # the replay's add order: the order index's sequence order
        rank = {mid: i for i, (mid, _m) in enumerate(order)}
        for sub in subs:
            fid, off, last_mid = sub.last_ack
            if not any(m.waiting and sub.key in m.waiting for _mid, m in order):
                continue  # its ack positions hold nothing: the broker counts 0 pending and never asks the store
            before, after = _split(order, rank, last_mid, (fid, off))
            if any(m.waiting and sub.key in m.waiting for _mid, m in before):
                continue  # ack positions start below the LastAck: the broker hands only what they hold
            for mid, m in after:
                if m.waiting is None or sub.key in m.waiting:
                    continue
                if preds is None:
                    preds = selectors(d, openwire_version)
                pred = preds.get((key, sub.key))
                if pred is not None and not _matches_any(d, IndexedMessage(0, mid, m.file_id, m.offset, m.length),
                                                         [pred], openwire_version):
                    continue
                m.waiting.add(sub.key)
                d.replay.handed_again.add((key, mid, sub.key))
                added += 1
    return added


def _split(order: list, rank: dict, last_mid: str, last_loc: tuple) -> tuple[list, list]:
    """The stored messages before and after the LastAck message in sequence order. While it is stored its place
    in the add order is its sequence; once every subscription acknowledged it (gone from the order index) the
    place of its ADD record stands for it (a send's sequence follows the journal, a transaction's its COMMIT:
    approximate for a transaction's send, and for a message an UPDATE_MESSAGE moved)."""
    i = rank.get(last_mid)
    if i is not None:
        return order[:i], order[i + 1:]
    return ([(mid, m) for mid, m in order if (m.file_id, m.offset) < last_loc],
            [(mid, m) for mid, m in order if (m.file_id, m.offset) > last_loc])


def last_ack_places(d, last_update: tuple) -> dict:
    """``{(destination key, subscription key): (file id, offset)}``: where the replay after ``last_update``
    applies each subscription's last acknowledgement that moves its LastAck (not the UNMATCHED marker; a
    transaction's at its COMMIT), the records of batches that check out, in replay order."""
    from amqtool.engines.kahadb.after_acks import replayed_commands
    from amqtool.formats.kahadb.commands import EntryType

    out: dict = {}
    pending: dict = {}
    kinds = (EntryType.REMOVE_MESSAGE, EntryType.COMMIT, EntryType.ROLLBACK)
    for fid, off, cmd in replayed_commands(d, last_update, kinds):
        if cmd.type is EntryType.REMOVE_MESSAGE:
            if not cmd.subscription_key or cmd.destination is None or (cmd.ack is not None and len(cmd.ack) == 0):
                continue
            k = (cmd.destination.key, cmd.subscription_key)
            if cmd.transaction is not None:
                pending.setdefault(cmd.transaction.key, []).append(k)
            else:
                out[k] = (fid, off)
        elif cmd.type is EntryType.COMMIT:
            for k in pending.pop(cmd.transaction.key, []):
                out[k] = (fid, off)
        else:
            pending.pop(cmd.transaction.key, None)
    return out


def handed_anyway(d, batch_acks: set, end: tuple, places: dict):
    """A predicate over a journal command of a damaged batch that ends at ``end`` ((file id, offset)): a durable
    subscription's ack whose loss changes nothing the broker hands, because the broker hands that message to
    it again from its LastAck anyway (the module docstring). ``batch_acks``: ``(destination key, message id,
    subscription key)`` of every ack in the batch as written; ``places``: :func:`last_ack_places`. It holds when
    (in the replay without the batch) the subscription's last ack is applied after the batch (so the LastAck is
    the same with it), and either its ack positions do not hold the message anyway (acknowledged before, or
    gone: the ack takes nothing out; a message handed from the LastAck is acknowledged again after it), or the
    message is stored after that LastAck in sequence and waits for the subscription, the subscription's own
    ack positions hold nothing below the LastAck (it is handed from it) and still hold a message the batch
    does not ack (its count stays above 0), and another subscription whose ack the batch does not hold keeps
    the message stored."""
    again = d.replay.handed_again

    def held(key: str, mid: str, m, sk: str) -> bool:
        # the subscription's ack positions hold the message (not only handed it from its LastAck)
        return bool(m.waiting) and sk in m.waiting and (key, mid, sk) not in again

    def anyway(cmd) -> bool:
        sk = getattr(cmd, "subscription_key", None)
        if not sk or cmd.transaction is not None or cmd.destination is None:
            return False
        key, mid = cmd.destination.key, cmd.message_id
        st = d.replay.destinations.get(key)
        sub = st.subscriptions.get(sk) if st is not None else None
        m = st.messages.get(mid) if st is not None else None
        if sub is None or sub.last_ack is None:
            return False
        if places.get((key, sk), (-1, -1)) <= end:
            return False  # the lost ack may have been its last: the LastAck would differ
        if m is None or not held(key, mid, m, sk):
            return True  # its ack positions do not hold the message without it either: it takes nothing out
        order = list(st.messages.items())
        before, after = _split(order, {x: i for i, (x, _m) in enumerate(order)}, sub.last_ack[2],
                               sub.last_ack[:2])
        if mid not in {x for x, _m in after} or any(held(key, x, y, sk) for x, y in before):
            return False
        if not any(held(key, x, y, sk) and (key, x, sk) not in batch_acks for x, y in order if x != mid):
            return False
        return any(held(key, mid, m, s2) and (key, mid, s2) not in batch_acks for s2 in m.waiting if s2 != sk)

    return anyway
