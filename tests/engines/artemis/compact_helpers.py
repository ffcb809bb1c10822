"""Helpers shared by the compaction tests: the loaded state to compare, a store builder, and an independent
re-implementation of what Artemis does at start-up to a journal directory (``checkControlFile`` +
``cleanupTmpFiles``), to apply on a copy after a simulated crash.
"""
from __future__ import annotations

import os
import random
import struct
from pathlib import Path

from amqtool.engines.artemis import compact as C
from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis.records import scan_records_py
from amqtool.store.journal_files import open_journal
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES, JournalDir, detect

CTR = "journal-rename-control.ctr"


def journal_of(directory: Path) -> JournalDir:
    """The journal in ``directory``; a message journal when no ``.amq``/``.bindings`` file is left (a
    compaction interrupted after deleting its old files leaves only ``.cmp`` files and the control file)."""
    names = os.listdir(directory)
    if any(n.endswith(".bindings") or n.endswith(".bindings.cmp") for n in names):
        return JournalDir(BINDINGS, Path(directory))
    return JournalDir(MESSAGES, Path(directory))


def compact(directory: Path, **overrides):
    """Plan and compact the journal in ``directory`` in place (``overrides`` go to ``settings_for``)."""
    jd = journal_of(directory)
    prep = C.plan_journal(jd, C.settings_for(jd, **overrides))
    try:
        return C.compact_in_place(prep)
    finally:
        prep.opened.close()


def state(directory: Path, *, bump: bool = False, with_cc: bool = True):
    """(live, prepared, failed, maxID) as load_journal reports them; ``bump`` gives the state expected after
    one compaction (compactCount + 1, saturating at 127)."""
    jd = journal_of(directory) if not isinstance(directory, JournalDir) else directory
    with open_journal(jd) as opened:
        r = load_journal(opened)

        def cc(x):
            c = x.compact_count
            return (min(c + 1, 127) if bump else c) if with_cc else None

        live = [(x.id, x.user_record_type, x.is_update, cc(x), r.body_sha256(x)) for x in r.live]

        def tx(t):
            return (t.tx_id, t.prepared, t.invalid, t.extra,
                    [(x.id, x.user_record_type, x.is_update, cc(x), r.body_sha256(x)) for x in t.records],
                    [(x.id, r.body_sha256(x)) for x in t.records_to_delete])
        return live, [tx(t) for t in r.prepared], [tx(t) for t in r.failed], r.max_id


def pending_codes(directory: Path) -> list[str]:
    with open_journal(journal_of(directory)) as opened:
        return [p.code for p in opened.pending]


def _utf(data: bytes, pos: int):
    n = struct.unpack_from(">H", data, pos)[0]
    return data[pos + 2:pos + 2 + n].decode("utf-8"), pos + 2 + n


def artemis_startup(directory: Path, ext: str) -> list[str]:
    """What ``JournalImpl.load`` does before ordering files, written independently of amqtool's engine:
    a control file with a valid ADD record (tag 0, version 2) -> delete the listed old files that exist,
    rename the listed ``X.cmp`` that exist to ``X``, apply renames whose source exists, delete the control
    file; a control file without one -> delete it; then delete every ``*.<ext>.cmp`` and ``*.<ext>.tmp``;
    journal files shorter than 16 bytes are deleted too (orderFiles)."""
    done = []
    ctl = directory / CTR
    if ctl.exists():
        data = ctl.read_bytes()
        records, _ = scan_records_py(data, 0, 2)
        adds = [r for r in records if r[0] == 11]
        if adds:
            t, off, size = adds[0][:3]
            body = data[off + 19: off + size - 4]
            pos = 0
            old, new, ren = [], [], []
            n = struct.unpack_from(">i", body, pos)[0]; pos += 4
            for _ in range(n):
                s, pos = _utf(body, pos); old.append(s)
            n = struct.unpack_from(">i", body, pos)[0]; pos += 4
            for _ in range(n):
                s, pos = _utf(body, pos); new.append(s)
            n = struct.unpack_from(">i", body, pos)[0]; pos += 4
            for _ in range(n):
                a, pos = _utf(body, pos); b, pos = _utf(body, pos); ren.append((a, b))
            for name in old:
                if (directory / name).exists():
                    os.unlink(directory / name); done.append("delete " + name)
            for name in new:
                if (directory / name).exists():
                    os.rename(directory / name, directory / name[: name.rindex(".cmp")]); done.append("rename " + name)
            for a, b in ren:
                if (directory / a).exists():
                    if (directory / b).exists():
                        os.unlink(directory / b)
                    os.rename(directory / a, directory / b)
        os.unlink(ctl)
        done.append("delete ctr")
    for name in sorted(os.listdir(directory)):
        if name.endswith("." + ext + ".cmp") or name.endswith("." + ext + ".tmp"):
            os.unlink(directory / name); done.append("cleanup " + name)
        elif name.endswith("." + ext) and (directory / name).stat().st_size < 16:
            os.unlink(directory / name); done.append("short " + name)
    return done


def build_store(directory: Path, *, seed: int = 7, n: int = 600, file_size: int = 64 * 1024,
                spec=MESSAGES, body=(50, 900)) -> Path:
    """A message journal with adds, updates (incl. replaceable types 34/36), deletes, committed,
    rolled-back, prepared and unfinished transactions, spread over many small files."""
    rnd = random.Random(seed)
    w = JournalWriter.create(directory, spec, file_size=file_size, sync="close")
    next_id = 1
    live = []
    tx = 10_000_000
    for i in range(n):
        op = rnd.random()
        if op < 0.45 or not live:
            w.add(next_id, rnd.choice((101, 102, 45)), rnd.randbytes(rnd.randint(*body)))
            live.append(next_id); next_id += 1
        elif op < 0.6:
            w.update(rnd.choice(live), rnd.choice((34, 36, 103)), rnd.randbytes(rnd.randint(8, 40)))
        elif op < 0.8:
            rid = live.pop(rnd.randrange(len(live)))
            w.delete(rid)
        elif op < 0.9:
            tx += 1
            for _ in range(rnd.randint(1, 4)):
                w.add_tx(tx, next_id, 101, rnd.randbytes(rnd.randint(*body)))
                live.append(next_id); next_id += 1
            if live and rnd.random() < 0.5:
                victim = live.pop(rnd.randrange(len(live)))
                w.delete_tx(tx, victim)
            w.commit(tx)
        else:
            tx += 1
            w.add_tx(tx, next_id, 101, rnd.randbytes(100)); next_id += 1
            w.rollback(tx)
    tx += 1
    w.add_tx(tx, next_id, 102, b"prepared-add"); next_id += 1
    if live:
        w.delete_tx(tx, live[0])
    w.prepare(tx, b"\x00\x00\x00\x01xid-bytes")
    w.add(next_id, 101, b"after-prepare"); next_id += 1
    w.close()
    return directory


def store_snapshot(directory: Path) -> dict:
    """What a compaction that failed before its commit point must leave as it was: every file's name and
    size, its header, and the bytes of every file holding data. A free file taken for an output and given
    back keeps its header and name; the bytes after its header may now be stale records of other tags,
    which the load ignores, so they are not compared (``state`` is, by the callers)."""
    jd = journal_of(directory)
    with open_journal(jd) as opened:
        data = {s.file.name for s in load_journal(opened).scans if s.has_data}
    snap = {}
    for p in sorted(Path(directory).iterdir()):
        raw = p.read_bytes()
        snap[p.name] = (len(raw), raw[:16], raw if p.name in data or not p.name.endswith("." + jd.spec.extension) else None)
    return snap
