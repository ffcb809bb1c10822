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
