"""amqtool.store.output: the claim, its lock and the leftovers sweep (issue 26)."""
from __future__ import annotations

import os

import pytest

from amqtool.errors import UsageError
from amqtool.store import output


def test_claim_locks_until_released(tmp_path):
    out = tmp_path / "o"
    first = output.claim(out, output.STORE)
    assert (tmp_path / ".o.amqtool-lock").read_text().strip() == str(os.getpid())
    with pytest.raises(UsageError, match="is writing this output"):
        output.claim(out, output.STORE)
    assert output.sweep_leftovers(tmp_path) == [] and (tmp_path / ".o.amqtool-lock").exists()  # held: kept
    first.release()
    first.release()  # idempotent
    assert os.listdir(tmp_path) == []
    with output.claiming(out) as again:
        assert again.path == out
    assert os.listdir(tmp_path) == []


def test_store_outputs_are_never_replaced(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(UsageError, match="not an empty directory"):
        output.check(tmp_path / "full", output.STORE, force=True)
    (tmp_path / "empty").mkdir()
    assert output.check(tmp_path / "empty", output.STORE) == tmp_path / "empty"
    # create writes into an existing directory (it refuses journal files itself), never into a file
    assert output.check(tmp_path / "full", output.JOURNAL_DIR) == tmp_path / "full"
    with pytest.raises(UsageError, match="not a directory"):
        output.check(tmp_path / "full" / "x", output.JOURNAL_DIR)


def test_missing_parents_are_made_for_stores_only(tmp_path):
    with pytest.raises(UsageError, match="output directory does not exist"):
        output.check(tmp_path / "a" / "b" / "o", output.EXPORT_DIR)
    with output.claiming(tmp_path / "a" / "b" / "o") as c:
        assert c.path.parent.is_dir()
