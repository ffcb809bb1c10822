"""The LevelDB stores the tests run on: each a directory holding ``store/`` (written by the real
LevelDBStore) and ``recovered.json`` (what the broker recovered from it). The fixture
(``../shared/fixtures/leveldb/basic``), every such directory committed under ``tests/``, and the
sub-directories of ``AMQTOOL_TEST_LEVELDB_STORES`` (generated stores kept outside the repository)."""
from __future__ import annotations

import os
from pathlib import Path

from tests.support import FIXTURES, REPO

FIXTURE = FIXTURES / "leveldb" / "basic"


def _is_case(d: Path) -> bool:
    return (d / "recovered.json").is_file() and (d / "store").is_dir()


def leveldb_cases() -> list[Path]:
    found = []
    if _is_case(FIXTURE):
        found.append(FIXTURE)
    for rec in sorted(REPO.glob("tests/**/recovered.json")):
        if _is_case(rec.parent) and (rec.parent / "store" / "store-version.txt").is_file():
            found.append(rec.parent)
    extra = os.environ.get("AMQTOOL_TEST_LEVELDB_STORES")
    if extra and Path(extra).is_dir():
        found += [d for d in sorted(Path(extra).iterdir()) if _is_case(d)]
    return found


CASES = leveldb_cases()
CASE_IDS = [c.name for c in CASES]
