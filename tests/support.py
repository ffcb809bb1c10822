"""Shared test data: where the fixtures are, copies of them, and file hashes.

Fixtures under ``../shared/fixtures`` are read-only ground truth: a test that changes anything works on a
copy in ``tmp_path``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# AMQTOOL_FIXTURES points elsewhere (a worktree outside /work has no ../shared beside it).
FIXTURES = Path(os.environ.get("AMQTOOL_FIXTURES") or REPO.parent / "shared" / "fixtures").resolve()
ARTEMIS = FIXTURES / "artemis"
ORACLE = ARTEMIS / "oracle"
PUBLIC = ARTEMIS / "public"
KAHADB = FIXTURES / "kahadb"

ORACLE_SCENARIOS = sorted(p.name for p in ORACLE.glob("0*") if p.is_dir()) if ORACLE.is_dir() else []
PUBLIC_JOURNALS = sorted(p.parent for p in PUBLIC.glob("**/oracle-load.bindings.json")) if PUBLIC.is_dir() else []


def oracle_manifest(scenario: str) -> dict:
    return json.loads((ORACLE / scenario / "manifest.json").read_text())


def public_expected(journal_dir: Path) -> dict:
    return json.loads((journal_dir / "oracle-load.bindings.json").read_text())


def oracle_load(path: Path) -> tuple[list[dict], dict]:
    """(live records, summary) of an ``oracle-load*.jsonl`` the artemis-oracle wrote (``oracle.sh load``: one
    line per live record, then a line with maxID, prepared and failed transactions, data and free files)."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return lines[:-1], lines[-1]


def loaded_like_oracle(journal: Path):
    """``(load result, live records)`` of the journal directory ``journal`` by amqtool's loader, each record in
    the oracle's shape (id, userRecordType, isUpdate, compactCount, len, sha256), to compare with
    :func:`oracle_load`. The result's journal is closed: use its figures, not its bodies."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(journal).journals()[0]) as opened:
        result = load_journal(opened)
        return result, [{"id": r.id, "userRecordType": r.user_record_type, "isUpdate": r.is_update,
                         "compactCount": r.compact_count, "len": r.body_len, "sha256": result.body_sha256(r)}
                        for r in result.live]


def assert_loads_like_journalimpl(fixture: Path) -> None:
    """A fixture written by the real JournalImpl (``fixture/journal`` and its ``oracle-load.jsonl``) loads in
    amqtool to the records, and data files in order, that JournalImpl loaded from it."""
    records, info = oracle_load(fixture / "oracle-load.jsonl")
    result, mine = loaded_like_oracle(fixture / "journal")
    assert mine == records
    assert [f"{f.name}#{f.file_id}" for f in result.data_files] == info["dataFileNames"]


def journalimpl_store(fixture: Path, root: Path) -> Path:
    """A store at ``root``: a copy of the JournalImpl fixture's journal beside the real broker's bindings journal
    whose queue ids its writer routed to (tests/data/artemis/tools/gen.sh); skips the test when the broker-written
    fixtures are not on this machine."""
    import pytest

    bindings = MESSAGES / "02_broker_mixed_compacted" / "bindings"
    if not bindings.is_dir():
        pytest.skip("broker-written fixture absent")
    copy_tree(fixture / "journal", root / "journal")
    copy_tree(bindings, root / "bindings")
    return root


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> hex), to prove nothing was written."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@contextlib.contextmanager
def lock_held(lock: Path):
    """For the block, a child process holds ``lock`` the way a broker's FileLock does (fcntl over the whole
    file): what the writing commands must refuse."""
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl,sys,time; f=open(sys.argv[1],'r+'); fcntl.lockf(f, fcntl.LOCK_EX);"
                               "print('locked', flush=True); time.sleep(60)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def flip_byte(path: Path, offset: int, mask: int) -> None:
    """XOR the byte at ``offset`` of ``path`` with ``mask`` in place (a damaged copy's one-byte fault)."""
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([b ^ mask]))


def flipped_test_journal(tmp_path: Path, store: str, file_name: str, at: int, record: tuple[int, int],
                         offset: int, mask: int) -> Path:
    """A copy (``tmp_path/j``) of the journal of ``tests/data/artemis/<store>`` with ``data[offset] ^= mask`` in
    ``file_name``, once the record at ``at`` is asserted to be ``record`` (its type, its id: a non-transactional
    record's, at +6) -- the record the test means."""
    journal = copy_tree(REPO / "tests" / "data" / "artemis" / store / "journal", tmp_path / "j")
    path = journal / file_name
    data = path.read_bytes()
    assert (data[at], int.from_bytes(data[at + 6:at + 14], "big", signed=True)) == record
    flip_byte(path, offset, mask)
    return journal


def copy_tree(src: Path, dst: Path) -> Path:
    """A writable copy of a (read-only) fixture directory."""
    shutil.copytree(src, dst)
    for dirpath, dirs, names in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for n in names:
            os.chmod(Path(dirpath) / n, 0o644)
    return dst

# Broker data directories written (and some compacted) by a real Artemis broker, each with its manifest and the
# broker's own `artemis data print` output (print.txt, print-safe.txt). Not every checkout has them.
MESSAGES = Path(os.environ.get("AMQTOOL_TEST_BROKER_STORES", ARTEMIS / "messages"))
BROKER_STORES = sorted(p for p in MESSAGES.iterdir() if p.is_dir()) if MESSAGES.is_dir() else []


def run_without_dac(argv: list[str], timeout: float = 300) -> tuple[int, dict | None, str]:
    """Run the installed ``amqtool argv`` as a process that mode bits bind: root without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH (setpriv, util-linux), anyone else as they are. (exit code, JSON stdout or None,
    stderr); skips the test when root cannot drop those capabilities here."""
    import pytest

    cmd = [str(Path(sys.executable).with_name("amqtool")), *argv]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root reads mode-000 files; setpriv (util-linux) is needed to drop that")
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", "--bounding-set", drop, "--inh-caps", drop, "--", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def bench_module(name: str):
    """The script ``bench/<name>.py`` loaded as a module (bench/ is no package), for tests of its options."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
