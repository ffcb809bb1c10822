"""OpenedJournal.close under a signal's exception (the killed-writer trials: `export` SIGTERMed 0.06-0.1 s in
exited 3 "Bad file descriptor" instead of 143): an exception raised just after the descriptor was closed must
not make the unwinding close it again."""
from __future__ import annotations

import os

import pytest

from amqtool.store import journal_files
from amqtool.store.journal_files import OpenedJournal


class Interrupted(BaseException):
    pass


def test_an_exception_right_after_the_close_does_not_close_the_descriptor_twice(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"x")
    opened = OpenedJournal(journal=None)
    opened._fds = {0: os.open(path, os.O_RDONLY)}
    real_close = os.close
    closed = []

    def close_then_signal(fd):  # the close happens, then the signal handler raises
        real_close(fd)
        closed.append(fd)
        raise Interrupted

    monkeypatch.setattr(journal_files.os, "close", close_then_signal)
    with pytest.raises(Interrupted):
        with opened:
            opened.close()
    monkeypatch.setattr(journal_files.os, "close", real_close)
    assert len(closed) == 1 and opened._fds == {}


def test_descriptors_of_the_last_files_read_are_kept_and_all_closed(tmp_path):
    # the judges read neighbouring files by turns: each file's descriptor is kept (up to FD_CACHE, the oldest
    # closed first), and close() closes them all
    from amqtool.store.journal_files import FD_CACHE, JournalFile

    n = FD_CACHE + 3
    paths = []
    for i in range(n):
        paths.append(tmp_path / f"f{i}")
        paths[-1].write_bytes(bytes([i]) * 8)
    opened = OpenedJournal(journal=None, files=[JournalFile(p, p.name, 8, None) for p in paths])
    with opened:
        assert [opened.pread(i % 2, 0, 1) for i in range(6)] == [b"\0", b"\1"] * 3
        assert len(opened._fds) == 2  # two files read by turns: two descriptors, opened once each
        for i in range(n):
            assert opened.pread(i, 3, 1) == bytes([i])
        assert len(opened._fds) == FD_CACHE and 0 not in opened._fds and n - 1 in opened._fds
        assert opened.pread(0, 0, 1) == b"\0"  # an evicted file opens again
        kept = list(opened._fds.values())
    assert opened._fds == {}
    for fd in kept:
        with pytest.raises(OSError):
            os.fstat(fd)
