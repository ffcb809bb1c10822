"""What a queue's message count does to what the broker delivers: the messages its store cursor never hands out.

A queue's ``getMessageCount`` is its collection's size counter (``LevelDBStore.LevelDBMessageStore
.getMessageCount``: ``db.collectionSize(key)``), not a count of its entries: the replay moves it by one for every
ADD_ENTRY and REMOVE_ENTRY it applies (``LevelDBClient.replay_from``: ``collectionIncrementSize``,
``collectionDecrementSize``, whether or not the entry is there), so a skipped or lost entry record leaves it off.

The broker's queue cursor trusts it: ``QueueStorePrefetch.getStoreSize`` is that count, and
``AbstractStoreCursor`` starts its ``size`` from it, lowers it by one per message removed and raises it by one
per message added, and ``fillBatch`` reads the store only ``while this.size > 0`` (``setMaxBatchSize(min(
maxPageSize, size))``). A count ``k`` short of the entries the queue holds leaves the cursor at 0 with ``k``
messages still stored: the last ``k`` it holds are never handed out (after every restart again), and a count
below 0 holds back the next messages sent the same way. A count above the entries changes nothing delivered
(the cursor reads the store and finds nothing more). The real broker does so (tests/data/leveldb/tools
/Drain.java): a queue of 5 entries counted 4 hands out 4; of 11 counted 0, none.
"""
from __future__ import annotations


def stranded(st, d) -> int:
    """How many of the messages queue ``d`` (a :class:`~.load.Destination` of the loaded state ``st``) holds its
    store cursor never hands out (or, with a count below 0, of the next messages sent to it): its entries less
    those the cursor skips (``queueCursor`` warns "Could not load message seq" and goes on, without counting
    them), less its message count. 0 for a topic: a durable subscription's cursor counts from its ack position
    (``getMessageCount(clientId, subscriptionName)``), not from the topic's size."""
    if d.kind != "queue":
        return 0
    return max(0, len(st.entries.get(d.key, ())) - len(d.skipped) - d.entries)


def stranded_pending(sub) -> int:
    """How many of the pending messages of durable subscription ``sub`` (a :class:`~.load.Subscription`) its store
    cursor never hands out: the same rule as a queue's, with the subscription's count. ``TopicStorePrefetch
    .getStoreSize`` is ``getMessageCount(clientId, subscriptionName)`` (``LevelDBTopicMessageStore``: the topic's
    last sequence at load less the ack position, :attr:`~.load.Subscription.pending_count`), and
    ``AbstractStoreCursor.fillBatch`` reads only while that size is above 0. The real broker on a copy of a store
    whose replay lost a topic's last entries: pendingCount 6 -> -5 with the same 6 pending, none handed out."""
    return max(0, len(sub.pending) - sub.pending_count)
