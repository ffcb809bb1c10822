"""Crash-safe write primitives and the fault-injection hook."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amqtool.errors import UsageError
from amqtool.store import atomic


@pytest.fixture(autouse=True)
def _no_fault():
    atomic.clear_fault()
    yield
    atomic.clear_fault()


def test_write_file_atomic_replaces_and_leaves_no_tmp(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    atomic.write_file_atomic(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_atomic_write_exception_keeps_old_file_and_removes_tmp(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic.atomic_write(target) as fh:
            fh.write(b"half")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_checkpoint_order_of_atomic_write(tmp_path):
    with atomic.record_checkpoints() as points:
        atomic.write_file_atomic(tmp_path / "a", b"x")
    names = [p for p, _ in points]
    assert names == ["fsync", "rename", "fsync-dir"]
    assert points[0][1] == str(tmp_path / "a.tmp")
    assert points[1][1] == str(tmp_path / "a")


def test_fault_before_rename_leaves_old_file_and_tmp(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with atomic.fault("rename", 1):
        with pytest.raises(atomic.InjectedFault) as info:
            atomic.write_file_atomic(target, b"new")
    assert info.value.point == "rename" and info.value.n == 1
    # a crash before the rename: the target is intact, the tmp holds the complete new data
    assert target.read_bytes() == b"old"
    assert (tmp_path / "f.bin.tmp").read_bytes() == b"new"


def test_fault_counts_the_nth_matching_checkpoint(tmp_path):
    atomic.set_fault("fsync", 2)
    atomic.write_file_atomic(tmp_path / "a", b"1")  # fsync #1 passes
    with pytest.raises(atomic.InjectedFault):
        atomic.write_file_atomic(tmp_path / "b", b"2")  # fsync #2 fires
    assert not (tmp_path / "b").exists()
    # fired once: later operations run normally
    atomic.write_file_atomic(tmp_path / "c", b"3")
    assert (tmp_path / "c").read_bytes() == b"3"


def test_wildcard_fault_fires_at_any_point(tmp_path):
    with atomic.fault("*", 3):
        with pytest.raises(atomic.InjectedFault) as info:
            atomic.write_file_atomic(tmp_path / "a", b"1")
    assert info.value.point == "fsync-dir"
    assert (tmp_path / "a").read_bytes() == b"1"  # rename happened before the fault


def test_injected_fault_is_not_an_exception():
    # `except Exception` clean-up code must not swallow a simulated crash
    assert not issubclass(atomic.InjectedFault, Exception)


@pytest.mark.parametrize("text", ["rename", "rename:0", "bogus:1", "rename:x", "rename:1:explode", "a:1:b:c"])
def test_bad_fault_specs_are_usage_errors(text):
    with pytest.raises(UsageError):
        atomic.FaultPlan.parse(text)


def test_env_var_kill_is_a_real_crash(tmp_path):
    code = textwrap.dedent(f"""
        from amqtool.store import atomic
        atomic.write_file_atomic({str(tmp_path / 'a')!r}, b"first")
        atomic.write_file_atomic({str(tmp_path / 'b')!r}, b"second")
        print("not reached", flush=True)
    """)
    env = dict(os.environ, AMQTOOL_FAULT="rename:2:kill")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert proc.returncode == -9
    assert b"not reached" not in proc.stdout
    assert (tmp_path / "a").read_bytes() == b"first"
    assert not (tmp_path / "b").exists()
    assert (tmp_path / "b.tmp").read_bytes() == b"second"


def test_env_var_raise_in_subprocess(tmp_path):
    code = textwrap.dedent(f"""
        from amqtool.store import atomic
        try:
            atomic.write_file_atomic({str(tmp_path / 'a')!r}, b"x")
        except atomic.InjectedFault as f:
            print(f.point, f.n)
    """)
    env = dict(os.environ, AMQTOOL_FAULT="fsync-dir:1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["fsync-dir", "1"]


def test_preallocate_writes_real_zeros_and_header(tmp_path):
    p = tmp_path / "j"
    atomic.preallocate(p, 3 * 1024 * 1024 + 5, header=b"HEAD")
    data = p.read_bytes()
    assert len(data) == 3 * 1024 * 1024 + 5
    assert data[:4] == b"HEAD" and data[4:].count(0) == len(data) - 4
    st = os.stat(p)
    # really allocated, not a sparse hole (Artemis' NIO fill writes the zeros)
    assert st.st_blocks * 512 >= st.st_size - 4096


def test_preallocate_refuses_existing_file(tmp_path):
    p = tmp_path / "j"
    p.write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        atomic.preallocate(p, 100)
    assert p.read_bytes() == b"keep"


def test_preallocate_fault_removes_partial_file(tmp_path):
    p = tmp_path / "j"
    with atomic.fault("fsync", 1):
        with pytest.raises(atomic.InjectedFault):
            atomic.preallocate(p, 1000)
    assert not p.exists()


def test_copy_owner_and_mode(tmp_path):
    ref = tmp_path / "ref"
    ref.write_bytes(b"")
    os.chmod(ref, 0o640)
    tgt = tmp_path / "tgt"
    tgt.write_bytes(b"")
    os.chmod(tgt, 0o600)
    warnings = atomic.copy_owner_and_mode(ref, tgt)
    assert warnings == []
    st, rt = os.stat(tgt), os.stat(ref)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert (st.st_uid, st.st_gid) == (rt.st_uid, rt.st_gid)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_copy_owner_as_root(tmp_path):
    ref = tmp_path / "ref"
    ref.write_bytes(b"")
    os.chown(ref, 12345, 23456)
    tgt = tmp_path / "tgt"
    tgt.write_bytes(b"")
    assert atomic.copy_owner_and_mode(ref, tgt) == []
    st = os.stat(tgt)
    assert (st.st_uid, st.st_gid) == (12345, 23456)


def test_hook_sees_checkpoints(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(atomic, "hook", lambda point, where: seen.append(point))
    atomic.unlink(tmp_path / "missing", missing_ok=True)
    assert seen == ["unlink"]


def test_fsync_tree_syncs_every_file_then_its_directory(tmp_path):
    """fsync_tree (the demo and migrate trees before their rename): each file, then the directory holding
    them, top down."""
    (tmp_path / "d" / "e").mkdir(parents=True)
    for rel in ("a", "d/b", "d/e/c"):
        (tmp_path / rel).write_bytes(b"x")
    with atomic.record_checkpoints() as points:
        atomic.fsync_tree(tmp_path)
    assert points == [("fsync", str(tmp_path / "a")), ("fsync-dir", str(tmp_path)),
                      ("fsync", str(tmp_path / "d" / "b")), ("fsync-dir", str(tmp_path / "d")),
                      ("fsync", str(tmp_path / "d" / "e" / "c")), ("fsync-dir", str(tmp_path / "d" / "e"))]


def test_aside_dir_then_switch_dir_replaces_an_empty_destination(tmp_path):
    """The write-aside pair of the tree writers (compact -o, recover -o, create --demo/--from): a fresh
    directory beside DEST (a leftover of the same name removed), then renamed over an empty DEST."""
    dest = tmp_path / "out"
    dest.mkdir()
    leftover = tmp_path / f".out.amqtool-compact-{os.getpid()}"
    leftover.mkdir()
    (leftover / "stale").write_bytes(b"old")
    tmp = atomic.aside_dir(dest, "compact")
    assert tmp == leftover and list(tmp.iterdir()) == []
    (tmp / "f").write_bytes(b"new")
    with atomic.record_checkpoints() as points:
        atomic.switch_dir(tmp, dest)
    assert [p for p, _ in points][0] == "rename"
    assert not tmp.exists() and (dest / "f").read_bytes() == b"new"


def test_switch_dir_refuses_a_destination_that_is_not_empty(tmp_path):
    dest = tmp_path / "out"
    (dest / "sub").mkdir(parents=True)
    tmp = atomic.aside_dir(dest, "tmp")
    with pytest.raises(OSError):
        atomic.switch_dir(tmp, dest)
    assert (dest / "sub").is_dir() and tmp.is_dir()


def test_tree_aside_switches_on_success_and_cleans_up_on_failure(tmp_path):
    """create --demo/--from write their tree in tree_aside: all of it appears at DEST, or nothing does."""
    dest = tmp_path / "store"
    with pytest.raises(RuntimeError):
        with atomic.tree_aside(dest) as tmp:
            (tmp / "half").write_bytes(b"x")
            raise RuntimeError("interrupted")
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    with atomic.record_checkpoints() as points:
        with atomic.tree_aside(dest) as tmp:
            (tmp / "a").write_bytes(b"x")
    assert (dest / "a").read_bytes() == b"x" and not tmp.exists()
    assert [p for p, _ in points] == ["fsync", "fsync-dir", "rename", "fsync-dir"]


def test_deferred_signals_hold_a_signal_another_thread_receives():
    """A signal sent to the process while signals are deferred is acted on when the block ends, not in it,
    even when the kernel hands it to another thread (the main thread's mask did not hold those back), and
    every handler is the old one afterwards."""
    import signal
    import threading

    got = []
    finished = False

    def handler(signum, _frame):
        got.append(signum)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGHUP, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            go = threading.Event()
            # a thread started before the block does not hold SIGHUP back: the kernel may deliver it there
            t = threading.Thread(target=lambda: (go.wait(), os.kill(os.getpid(), signal.SIGHUP)))
            t.start()
            with atomic.deferred_signals():
                go.set()
                t.join()
                for _ in range(100000):  # bytecodes enough for a pending handler to run
                    pass
                finished = got == []  # held: the step in the block finished first
        assert finished
        assert got == [signal.SIGHUP]
        assert signal.getsignal(signal.SIGHUP) is handler
        assert signal.getsignal(signal.SIGTERM) is not None
    finally:
        signal.signal(signal.SIGHUP, old)
