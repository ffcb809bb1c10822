"""Acknowledgements the broker replays before the send they acknowledge: journal files out of order.

The broker writes a message's ``KahaAddMessageCommand`` before any ``KahaRemoveMessageCommand`` of it: a
consumer acknowledges only what it was dispatched, and a store task ``concurrentStoreAndDispatch`` cancels
(its ack before the write) writes neither. ``MessageDatabase.recover`` (ActiveMQ 5.17) replays the records
after the index checkpoint in file id order (``Journal.getNextLocation``); a REMOVE replayed before its ADD
finds nothing (``updateIndex``: no ``messageIdIndex`` entry), and the ADD after it makes the message live
again: an acknowledged message comes back. Files swapped or renamed leave exactly that order, which no broker
writes, and nothing else in the store shows it (KahaDB files carry no id of their own).

The records counted are those of batches that check out, after ``lastUpdate`` (every record without one).
"""
from __future__ import annotations

from amqtool.formats.kahadb.commands import EntryType

from amqtool.engines.kahadb.after_acks import replayed_commands

_ADD, _REMOVE = int(EntryType.ADD_MESSAGE), int(EntryType.REMOVE_MESSAGE)


def acks_before_sends(d, last_update: tuple | None) -> list[tuple[int, int, str, str]]:
    """``(file id, offset, destination key, message id)`` of each REMOVE the replay after ``last_update``
    ((file id, offset); None: from the start) in store directory ``d`` meets before the ADD of its message."""
    removed: dict = {}  # (destination key, message id) -> (file id, offset) of its first REMOVE, no ADD yet
    added: set = set()
    out = []
    for fid, off, cmd in replayed_commands(d, last_update or (0, -1), (_ADD, _REMOVE)):
        key = (cmd.destination.key, cmd.message_id)
        if cmd.type is EntryType.ADD_MESSAGE:
            if key in removed and key not in added:
                out.append((*removed[key], *key))
            added.add(key)
        elif key not in added:
            removed.setdefault(key, (fid, off))
    return out
