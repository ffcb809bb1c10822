"""Pristine stores for the fault campaigns: small enough that a campaign runs thousands of faults a minute,
with the structure of a real broker's (paging, large messages, transactions, a prepared XA transaction).

``demo(path, size, seed)`` is ``amqtool create --demo`` without its 4 MiB floor (the demo writer is the same:
the campaign needs a store of a few hundred records, not a realistic size), ``campaign_demo`` the campaign's; ``fixtures()`` lists the
broker-written stores of ``../shared/fixtures`` a campaign also damages.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.support import ARTEMIS


def demo(path: Path, size: int = 1 << 20, *, seed: int = 1, file_size: int = 128 * 1024) -> Path:
    from amqtool.engines.artemis.demo.broker import _Demo

    path.mkdir(parents=True)
    d = _Demo(path, size, seed, 0.3, file_size, 2, None, True, True)
    d.run()
    (path / "manifest.json").write_text(json.dumps(d.manifest()))
    return path


def campaign_demo(path: Path, seed: int = 1) -> Path:
    """The campaign's demo store ``demo-s{seed}``: 3 MiB in 64 KiB journal files (several files, paging, large
    messages and XA in a few hundred records). Regression tests of campaign faults start from the same store."""
    return demo(path, 3 << 20, seed=seed, file_size=64 * 1024)


def messages_files(store: Path) -> list[tuple]:
    """(path, tag, version) of each file of the store's message journal, in load order."""
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        return [(jf.path, jf.tag, jf.version) for jf in opened.files]


def fixtures() -> list[tuple[str, Path]]:
    """(name, store root) of the broker-written Artemis stores in the fixtures."""
    out = []
    messages = ARTEMIS / "messages"
    if messages.is_dir():
        out += [(p.name, p) for p in sorted(messages.iterdir()) if (p / "journal").is_dir()]
    return out


def first_cursor_ack(store: Path, queue: int) -> tuple:
    """(journal file, record id, body offset, page, number) of the first live ACKNOWLEDGE_CURSOR (user record
    type 39) of ``queue`` in the store's message journal, else None."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        for r in result.live:
            body = result.body(r)
            if r.user_record_type == 39 and int.from_bytes(body[:8], "big") == queue:
                return (result.files[r.file_index].path, r.id, r.body_offset, int.from_bytes(body[8:16], "big"),
                        int.from_bytes(body[16:20], "big"))
    return None
