"""Fixtures for the inspector tests (helpers live in machine_support.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine_support import RecordedMachine  # noqa: E402


@pytest.fixture
def machine(tmp_path) -> RecordedMachine:
    m = RecordedMachine(tmp_path / "machine")
    m.mount("/", 254, 0, "ext4", "/dev/vda")
    return m
