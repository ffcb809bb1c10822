"""Shared pytest fixtures (data helpers live in tests/support.py)."""
from __future__ import annotations

import json

import pytest


@pytest.fixture
def run_cli(capsys):
    """Run ``amqtool`` in-process; returns (exit code, stdout, stderr)."""
    from amqtool.commands.main import main

    def run(*args: str):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def run_json(run_cli):
    """Run ``amqtool ... --format json`` and parse stdout; returns (exit code, document, stderr)."""

    def run(*args: str):
        code, out, err = run_cli(*args, "--format", "json")
        return code, json.loads(out), err

    return run
