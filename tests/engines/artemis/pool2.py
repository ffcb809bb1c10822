"""The real JournalImpl store ``tests/data/artemis/reclaimed-pool2`` (a pool of 2: fileIDs missing between data
files, nothing lost), copied with the broker-written fixture's bindings and damaged by one bit flip, for the
tests that judge a verdict on it against the truth (tests/faults/artemis.py)."""
from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from tests.faults import artemis
from tests.support import MESSAGES, REPO

STORE = REPO / "tests" / "data" / "artemis" / "reclaimed-pool2"
BINDINGS = MESSAGES / "02_broker_mixed_compacted" / "bindings"


def flipped(tmp_path, file_name: str, offset: int, mask: int,
            check: Callable[[bytearray], None] = lambda data: None, store=STORE):
    """(the copy's root, the truth's diff of pristine and damaged) after ``data[offset] ^= mask`` in journal
    file ``file_name``; ``check`` asserts, on the pristine bytes, that the record is the one the test means.
    ``store``: another real JournalImpl store of tests/data/artemis (its ``journal``) to copy instead."""
    def flip(data: bytearray) -> bytes:
        check(data)
        data[offset] ^= mask
        return bytes(data)

    return changed(tmp_path, file_name, flip, store)


def changed(tmp_path, file_name: str, change: Callable[[bytearray], bytes] | None, store=STORE):
    """(the copy's root, the truth's diff of pristine and damaged) once journal file ``file_name`` holds
    ``change(its bytes)``, or is removed (``change`` None)."""
    if not BINDINGS.is_dir():
        pytest.skip("broker-written fixture absent")
    root = tmp_path / "store"
    shutil.copytree(store / "journal", root / "journal")
    shutil.copytree(BINDINGS, root / "bindings")
    reader = artemis.DeliveredReader(root)
    path = root / "journal" / file_name
    if change is None:
        path.unlink()
    else:
        path.write_bytes(change(bytearray(path.read_bytes())))
    return root, reader.pristine.diff(reader.damaged(root))
