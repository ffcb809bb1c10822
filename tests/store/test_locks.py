"""Broker lock detection: a lock held by another process (as Java's FileChannel.tryLock holds it) is seen,
with its PID, and checking never creates or changes anything."""
from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amqtool.errors import StoreLockedError
from amqtool.store import locks
from amqtool.store.layout import MESSAGES, ArtemisStore, JournalDir

# FileChannel.tryLock() on Linux: fcntl(F_SETLK) with a write lock over the whole file (l_len = 0 means
# "to EOF and beyond" for Java's Long.MAX_VALUE range).
HOLDERS = {
    "posix": "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
    "posix-range": "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 0x7fffffffffffffff, 0)",
    "flock": "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
    "ofd": ("fcntl.fcntl(f, getattr(fcntl, 'F_OFD_SETLK', 37), "
            "struct.pack('@hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0))"),
}


class Holder:
    """A subprocess holding a lock on ``path`` until stopped."""

    def __init__(self, path: Path, how: str):
        code = textwrap.dedent(f"""
            import fcntl, struct, sys
            f = open({str(path)!r}, "r+b")
            {HOLDERS[how]}
            print("locked", flush=True)
            sys.stdin.read()
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "locked"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def holder():
    held = []

    def start(path, how="posix"):
        h = Holder(path, how)
        held.append(h)
        return h

    yield start
    for h in held:
        if h.proc.poll() is None:
            h.stop()


def _server_lock(directory: Path) -> Path:
    # server.lock: state byte, "00", 16-byte node UUID (19 bytes)
    p = directory / "server.lock"
    p.write_bytes(b"P00" + bytes(range(16)))
    return p


def _digest(p: Path) -> tuple:
    st = os.stat(p)
    return hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


@pytest.mark.parametrize("how", sorted(HOLDERS))
def test_lock_held_by_another_process_is_seen_with_pid(tmp_path, holder, how):
    p = _server_lock(tmp_path)
    before = _digest(p)
    h = holder(p, how)
    info = locks.held_lock(p)
    assert info is not None
    assert info.exclusive
    assert info.kind == {"posix": "posix", "posix-range": "posix", "flock": "flock", "ofd": "ofd"}[how]
    assert info.pid == h.pid
    assert info.command == "python" or info.command.startswith("python")
    h.stop()
    assert locks.held_lock(p) is None
    assert _digest(p) == before  # checking never changed the file


@pytest.mark.parametrize("byte", [0, 1, 2])
def test_one_byte_node_lock_of_artemis_before_2_10_is_seen(tmp_path, holder, monkeypatch, byte):
    # Before ARTEMIS-2441 (2.10) FileLockNodeManager locked one byte of server.lock per role:
    # channel.tryLock(pos, 1, false) at 0 (state), 1 (live), 2 (backup).
    p = _server_lock(tmp_path)
    monkeypatch.setitem(HOLDERS, f"byte{byte}", f"fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {byte})")
    h = holder(p, f"byte{byte}")
    info = locks.held_lock(p)
    assert info is not None and info.exclusive and info.pid == h.pid
    h.stop()
    assert locks.held_lock(p) is None


def test_missing_file_is_not_created(tmp_path):
    assert locks.held_lock(tmp_path / "server.lock") is None
    assert os.listdir(tmp_path) == []


def test_unlocked_file_is_none_and_unchanged(tmp_path):
    p = _server_lock(tmp_path)
    before = _digest(p)
    assert locks.held_lock(p) is None
    assert _digest(p) == before


def test_lock_held_by_this_process_through_another_descriptor(tmp_path):
    # OFD GETLK sees this process's own classic POSIX locks too
    p = _server_lock(tmp_path)
    with open(p, "r+b") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        info = locks.held_lock(p)
        assert info is not None and info.pid == os.getpid()
    assert locks.held_lock(p) is None


def test_read_only_file_can_be_checked(tmp_path, holder):
    p = _server_lock(tmp_path)
    h = holder(p)
    os.chmod(p, 0o444)
    try:
        assert locks.held_lock(p).pid == h.pid
    finally:
        os.chmod(p, 0o644)


def _store(tmp_path: Path) -> ArtemisStore:
    journal = tmp_path / "data" / "journal"
    journal.mkdir(parents=True)
    (tmp_path / "lock").mkdir()
    return ArtemisStore(root=tmp_path / "data", messages=JournalDir(MESSAGES, journal))


def test_running_broker_is_refused_with_file_and_pid(tmp_path, holder):
    store = _store(tmp_path)
    journal = store.messages.directory
    _server_lock(journal)
    for n in ("serverlock.1", "serverlock.2"):
        (journal / n).write_bytes(b"")
    (tmp_path / "lock" / "cli.lock").write_bytes(b"")
    files = locks.artemis_store_lock_files(store)
    data = tmp_path / "data"  # the data directory: <journal-directory>data</...> puts the node files there
    assert set(files) == {journal / "server.lock", journal / "serverlock.1", journal / "serverlock.2",
                          data / "server.lock", data / "serverlock.1", data / "serverlock.2",
                          tmp_path / "lock" / "cli.lock"}
    assert locks.ensure_not_locked(files) == []

    h = holder(journal / "serverlock.1")  # the live broker's lock (FileLockNodeManager PRIMARY_LOCK_POS)
    with pytest.raises(StoreLockedError) as info:
        locks.ensure_not_locked(files)
    err = info.value
    assert err.exit_code == 3
    assert err.path == str(journal / "serverlock.1")
    assert f"PID {h.pid}" in str(err) and "serverlock.1" in str(err)
    assert "\n" not in str(err)
    # --force: reported, not raised
    found = locks.ensure_not_locked(files, force=True)
    assert [i.pid for i in found] == [h.pid]


def test_cli_lock_of_the_instance(tmp_path, holder):
    store = _store(tmp_path)
    cli = tmp_path / "lock" / "cli.lock"
    cli.write_bytes(b"")
    h = holder(cli)
    with pytest.raises(StoreLockedError) as info:
        locks.ensure_not_locked(locks.artemis_store_lock_files(store))
    assert "cli.lock" in str(info.value) and str(h.pid) in str(info.value)


def test_kahadb_lock_file(tmp_path, holder):
    lock = tmp_path / "lock"
    lock.write_bytes(struct.pack(">q", 1700000000000))
    h = holder(lock)
    info = locks.held_lock(lock)
    assert info.pid == h.pid
    assert "KahaDB" in str(locks.locked_error([info]))


# --- amqtool's own writer lock ----------------------------------------------------------------------------

def _flock_holder(path: Path) -> subprocess.Popen:
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_writer_lock_excludes_another_writer_through_any_path(tmp_path):
    d = tmp_path / "journal"
    d.mkdir()
    (tmp_path / "alias").symlink_to(d)
    before = sorted(os.listdir(d))
    other = _flock_holder(d)
    try:
        assert locks.writer_holding([tmp_path / "alias"]) == str(tmp_path / "alias")
        with pytest.raises(StoreLockedError) as info:
            locks.WriterLock([tmp_path / "alias"])
        assert f"PID {other.pid}" in str(info.value) and "\n" not in str(info.value)
        assert info.value.exit_code == 3
    finally:
        other.stdin.close()
        other.wait()
    assert locks.writer_holding([d]) is None
    with locks.WriterLock([d, tmp_path / "alias"]) as w:  # one inode, one lock
        assert len(w.fds) == 1
        assert locks.writer_holding([d]) == str(d)
    assert locks.writer_holding([d]) is None
    assert sorted(os.listdir(d)) == before  # nothing written into the directory


def test_writer_lock_follows_a_directory_switched_into_place(tmp_path, monkeypatch):
    # KahaDB's compaction exchanges a staged directory into the store's path: a lock on the inode that was
    # there before proves nothing, so add() looks again.
    d = tmp_path / "kahadb"
    d.mkdir()
    staged = tmp_path / ".kahadb.new"
    staged.mkdir()
    real_flock = locks.fcntl.flock
    swapped = []

    def flock_then_swap(fd, op):
        real_flock(fd, op)
        if not swapped:
            swapped.append(True)
            os.rename(d, tmp_path / "old")
            os.rename(staged, d)

    monkeypatch.setattr(locks.fcntl, "flock", flock_then_swap)
    with locks.WriterLock([d]) as w:
        assert len(w.fds) == 1
        fst, st = os.fstat(w.fds[0]), os.stat(d)
        assert (fst.st_dev, fst.st_ino) == (st.st_dev, st.st_ino)


def test_directory_state_sees_a_switch(tmp_path):
    d = tmp_path / "journal"
    d.mkdir()
    (d / "activemq-data-1.amq").write_bytes(b"x" * 10)
    s1 = locks.directory_state([d])
    assert locks.directory_state([d]) == s1
    os.rename(d / "activemq-data-1.amq", d / "activemq-data-2.amq")
    assert locks.directory_state([d]) != s1
