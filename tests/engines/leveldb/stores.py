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
        for d in sorted(Path(extra).iterdir()):
            if _is_case(d):
                found.append(d)
            elif d.is_dir():  # replica nodes: each with its own store and recovered.json
                found += [n for n in sorted(d.iterdir()) if _is_case(n)]
    return found


CASES = leveldb_cases()
CASE_IDS = [c.name if c.parent.name not in ("replicas",) else f"{c.parent.name}-{c.name}" for c in CASES]


def replica_sets() -> list[Path]:
    """Directories of replica node directories with a manifest naming the latest node (``latest``,
    ``nodes.<name>.logEnd``, ``agreeUpTo``)."""
    out = []
    extra = os.environ.get("AMQTOOL_TEST_LEVELDB_STORES")
    for base in [REPO / "tests"] + ([Path(extra)] if extra and Path(extra).is_dir() else []):
        for m in sorted(base.glob("**/manifest.json")):
            try:
                import json

                doc = json.loads(m.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and "latest" in doc and isinstance(doc.get("nodes"), dict):
                out.append(m.parent)
    return out
