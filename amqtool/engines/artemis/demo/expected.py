"""The expected load state, computed from what is written, by Artemis' load rules independently of
amqtool's loader (the manifest's ``expected`` section)."""
from __future__ import annotations

import hashlib

from amqtool.store.journal_writer import JournalWriter


# --- the expected load state, computed from what is written ------------------------------------------------

class _Expected:
    """Artemis' load rules (§3.2) applied to the records as they are appended."""

    def __init__(self):
        self.seq = 0
        self.entries: dict[int, tuple] = {}  # seq -> (id, utype, is_update, size, sha256)
        self.by_id: dict[int, list[int]] = {}
        self.deleted: set[int] = set()
        self.txs: dict[int, list] = {}  # tx -> [records, deletes, prepared, extra]
        self.max_id = -1

    def _entry(self, rid: int, utype: int, body: bytes, upd: bool) -> tuple:
        return (rid, utype, upd, len(body), hashlib.sha256(body).digest())

    def _append(self, e: tuple) -> None:
        if e[0] in self.deleted:
            return
        self.seq += 1
        self.entries[self.seq] = e
        self.by_id.setdefault(e[0], []).append(self.seq)

    def record(self, rid: int, utype: int, body: bytes, upd: bool) -> None:
        self.max_id = max(self.max_id, rid)
        self._append(self._entry(rid, utype, body, upd))

    def delete(self, rid: int) -> None:
        self.deleted.add(rid)
        for s in self.by_id.pop(rid, ()):
            del self.entries[s]

    def tx_record(self, tx: int, rid: int, utype: int, body: bytes, upd: bool) -> None:
        self.max_id = max(self.max_id, rid)
        self.txs.setdefault(tx, [[], [], False, None])[0].append(self._entry(rid, utype, body, upd))

    def tx_delete(self, tx: int, rid: int) -> None:
        self.txs.setdefault(tx, [[], [], False, None])[1].append(rid)

    def prepare(self, tx: int, extra: bytes) -> None:
        t = self.txs.setdefault(tx, [[], [], False, None])
        t[2], t[3] = True, extra

    def commit(self, tx: int) -> None:
        recs, dels, _, _ = self.txs.pop(tx)
        for e in recs:
            self._append(e)
        for rid in dels:
            self.delete(rid)

    def rollback(self, tx: int) -> None:
        self.txs.pop(tx)

    def live(self) -> list[dict]:
        return [{"id": e[0], "userRecordType": e[1], "isUpdate": e[2], "compactCount": 0, "bodySize": e[3],
                 "bodySha256": e[4].hex()} for e in self.entries.values()]

    def by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries.values():
            k = str(e[1])
            out[k] = out.get(k, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


class _Journal:
    """A JournalWriter and its expected load state, fed together."""

    def __init__(self, writer: JournalWriter):
        self.w = writer
        self.x = _Expected()

    def add(self, rid, utype, body):
        self.w.append_add(rid, utype, body)
        self.x.record(rid, utype, body, False)

    def update(self, rid, utype, body):
        self.w.append_update(rid, utype, body)
        self.x.record(rid, utype, body, True)

    def delete(self, rid):
        self.w.append_delete(rid)
        self.x.delete(rid)

    def add_tx(self, tx, rid, utype, body):
        self.w.append_add_tx(tx, rid, utype, body)
        self.x.tx_record(tx, rid, utype, body, False)

    def update_tx(self, tx, rid, utype, body):
        self.w.append_update_tx(tx, rid, utype, body)
        self.x.tx_record(tx, rid, utype, body, True)

    def prepare(self, tx, extra):
        self.w.append_prepare(tx, extra)
        self.x.prepare(tx, extra)

    def commit(self, tx):
        self.w.append_commit(tx)
        self.x.commit(tx)

    def rollback(self, tx):
        self.w.append_rollback(tx)
        self.x.rollback(tx)

    def used_bytes(self) -> int:
        """Bytes of journal files in use (full files before the current one, plus the current position)."""
        return len(self.w.data_files) * self.w.file_size + self.w.position[1]
