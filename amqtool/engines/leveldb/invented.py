"""Index entries no writer made: read from a damaged table block with a sequence above the MANIFEST's last
one (which LevelDB records with every table it adds, so it is at least every table entry's sequence).

LevelDB orders a key's versions by sequence alone, so such an entry hides whatever version the index did
write (:func:`amqtool.engines.leveldb.index.read_index` keeps what it hides). When it hides a deletion, the
entry is a consumed message brought back by the damage, not a message the store held: if its DATA record is
in no log file the broker delivers nothing for it (``LevelDBClient.getMessage`` finds no log), which is no
loss. Hiding a live version, or nothing, it replaced a message the store held: that stays a loss."""
from __future__ import annotations

from amqtool.formats.leveldb import dblog
from amqtool.formats.leveldb import records as R


def hides_a_deletion(st, m) -> int | None:
    """The hidden deletion's sequence when the entry of message ``m`` in the recovered index
    is the snapshot's invented entry over a deletion (and the replay did not write the key again); else None."""
    db = st.snapshot_db
    if db is None or not db.invented:
        return None
    key = R.entry_index_key(m.collection, R._Q.pack(m.seq))
    hidden = db.invented.get(key)
    if hidden is None or hidden[1] != dblog.TYPE_DELETION or st.index.get(key) != db.data.get(key):
        return None
    return hidden[0]
