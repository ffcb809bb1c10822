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
    opened._fd, opened._fd_index = os.open(path, os.O_RDONLY), 0
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
    assert len(closed) == 1 and opened._fd is None
