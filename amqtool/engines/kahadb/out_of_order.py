"""Acknowledgements the broker replays before the send they acknowledge: journal files out of order.

The broker writes a message's ``KahaAddMessageCommand`` before any ``KahaRemoveMessageCommand`` of it: a
consumer acknowledges only what it was dispatched, and a store task ``concurrentStoreAndDispatch`` cancels
(its ack before the write) writes neither. ``MessageDatabase.recover`` (ActiveMQ 5.17) replays the records
after the index checkpoint in file id order (``Journal.getNextLocation``); a REMOVE replayed before its ADD
finds nothing (``updateIndex``: no ``messageIdIndex`` entry), and the ADD after it makes the message live
again: an acknowledged message comes back. Files swapped or renamed leave exactly that order, which no broker
writes, and nothing else in the store shows it (KahaDB files carry no id of their own).

The REMOVE may also lie before the checkpoint, the ADD after it (a file of old sends swapped or renamed past
the checkpoint): the index applied that REMOVE before its checkpoint and no longer holds the message, so the
replay's ADD finds no ``messageIdIndex`` entry either and puts the message back in the order index
(``updateIndex(KahaAddMessageCommand)``: only an id the index still holds is a rejected duplicate; the
producer audit only records the id). Such a REMOVE counts only for a message its destination's order index
does not hold (one it holds, say for another subscription, makes the ADD that rejected duplicate).

The records counted are those of batches that check out, after ``lastUpdate`` (every record without one) for
the sends, from the start of the journal for the acks.
"""
from __future__ import annotations

from amqtool.formats.kahadb.commands import EntryType

from amqtool.engines.kahadb.after_acks import replayed_commands

_ADD, _REMOVE = int(EntryType.ADD_MESSAGE), int(EntryType.REMOVE_MESSAGE)
_START = (0, -1)  # before every record of a journal (file ids start at 1)


def acks_before_sends(d, last_update: tuple | None) -> list[tuple[int, int, str, str]]:
    """``(file id, offset, destination key, message id)`` of each REMOVE that store directory ``d``'s journal holds
    before the ADD of its message in file order, where the replay after ``last_update`` ((file id, offset); None:
    from the start) reads that ADD and the REMOVE is replayed too or took the message out of the index."""
    after = last_update or _START
    held = {(key, m.message_id) for key, dest in (d.indexed or {}).items() for m in dest.messages}
    removed: dict = {}  # (destination key, message id) -> (file id, offset) of its first REMOVE, no ADD yet
    added: set = set()
    out = []
    for fid, off, cmd in replayed_commands(d, _START, (_ADD, _REMOVE)):
        key = (cmd.destination.key, cmd.message_id)
        if cmd.type is EntryType.ADD_MESSAGE:
            at = removed.get(key)
            if (fid, off) > after and at is not None and key not in added and (at > after or key not in held):
                out.append((*at, *key))
            added.add(key)
        elif key not in added:
            removed.setdefault(key, (fid, off))
    return out
